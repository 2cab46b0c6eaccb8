//! The change feed on PostgreSQL: the `changes` and `change_floor` tables (migration 0003).
//!
//! Every change increments `meta.data_version` and appends one `changes` row with the new value
//! as its `seq`, in the writer's transaction. Writers hold SQLite's write lock from `BEGIN
//! IMMEDIATE` to commit, so numbers are given out in commit order and a reader that saw `seq` N
//! can never later find a change numbered N or lower: polling by `seq` misses nothing.
//!
//! Only the newest [`StoreConfig::change_log_max_rows`](crate::StoreConfig::change_log_max_rows)
//! rows are kept, pruned in the same transaction as each append. `change_floor` keeps, per kind,
//! the highest `seq` pruned: a reader behind a kind's floor may have missed one of its changes
//! and reloads that kind whole.

use std::collections::HashSet;

use sqlx::postgres::{PgConnection, PgRow};

use super::rows::{col, corrupt, db, get_u64, now_ms};
use super::{PgStore, Write};
use crate::error::StoreError;
use crate::model::{Change, ChangeKind, ChangeSet};

/// Numbers one change of `kind`/`key` and appends it to the feed, pruning rows beyond the newest
/// `keep_rows`; returns its `seq`. Part of the caller's write transaction.
pub(super) async fn record(
    conn: &mut PgConnection,
    kind: ChangeKind,
    key: &str,
    keep_rows: i64,
) -> Result<i64, StoreError> {
    let seq: i64 = sqlx::query_scalar(
        "UPDATE meta SET value = value + 1 WHERE key = 'data_version' RETURNING value",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    sqlx::query("INSERT INTO changes (seq, kind, key, at_ms) VALUES ($1, $2, $3, $4)")
        .bind(seq)
        .bind(kind.as_str())
        .bind(key)
        .bind(now_ms())
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let cutoff = seq.saturating_sub(keep_rows);
    if cutoff > 0 {
        // Raise the floors of the kinds about to lose rows, then drop the rows: an index range.
        sqlx::query(
            "INSERT INTO change_floor (kind, seq) \
             SELECT kind, max(seq) FROM changes WHERE seq <= $1 GROUP BY kind \
             ON CONFLICT (kind) DO UPDATE SET seq = GREATEST(change_floor.seq, excluded.seq)",
        )
        .bind(cutoff)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        sqlx::query("DELETE FROM changes WHERE seq <= $1")
            .bind(cutoff)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    Ok(seq)
}

/// [`ToolStore::changes_since`](crate::ToolStore::changes_since): one read transaction, so the
/// counter, the floors and the rows are of one moment.
pub(super) async fn since(store: &PgStore, seen: u64) -> Result<ChangeSet, StoreError> {
    let mut tx = store.read().await?;
    let current: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'data_version'")
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
    let current = u64::try_from(current)
        .map_err(|_| corrupt(format!("negative change counter {current}")))?;
    if seen == current {
        return Ok(ChangeSet {
            seq: current,
            ..ChangeSet::default()
        });
    }
    if seen > current {
        // The database is older than what the reader saw (restored from a backup, or another
        // file): nothing it remembers can be trusted.
        return Ok(ChangeSet {
            seq: current,
            reload: ChangeKind::ALL.to_vec(),
            changes: Vec::new(),
        });
    }
    // `seen < current <= i64::MAX`, so it fits.
    let seen_i64 = i64::try_from(seen).map_err(|_| corrupt("change counter out of range"))?;
    let floors = sqlx::query("SELECT kind, seq FROM change_floor")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let mut reload = Vec::new();
    for row in &floors {
        if seen < get_u64(row, "seq")? {
            reload.push(kind_of(row)?);
        }
    }
    reload.sort();
    let rows = sqlx::query("SELECT seq, kind, key, at_ms FROM changes WHERE seq > $1 ORDER BY seq")
        .bind(seen_i64)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    // Newest first, keeping the first (newest) change of each key; then back to oldest first.
    let mut keys = HashSet::new();
    let mut changes = Vec::new();
    for row in rows.iter().rev() {
        let kind = kind_of(row)?;
        if reload.contains(&kind) {
            continue;
        }
        let key: String = col(row, "key")?;
        if keys.insert((kind, key.clone())) {
            changes.push(Change {
                seq: get_u64(row, "seq")?,
                kind,
                key,
                at_ms: col(row, "at_ms")?,
            });
        }
    }
    changes.reverse();
    Ok(ChangeSet {
        seq: current,
        reload,
        changes,
    })
}

pub(super) fn kind_of(row: &PgRow) -> Result<ChangeKind, StoreError> {
    let kind: String = col(row, "kind")?;
    ChangeKind::parse(&kind).ok_or_else(|| corrupt(format!("unknown change kind {kind:?}")))
}

impl Write<'_> {
    /// Records one change of `kind`/`key` in this transaction (see [`record`]); returns its
    /// `seq`, which the changed row stores as its `updated_seq`.
    pub(super) async fn change(&mut self, kind: ChangeKind, key: &str) -> Result<i64, StoreError> {
        let keep = self.store.change_log_max_rows;
        let seq = record(self.conn(), kind, key, keep).await?;
        self.last_seq = u64::try_from(seq).ok();
        Ok(seq)
    }
}
