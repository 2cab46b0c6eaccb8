//! The change feed: the `changes` and `change_floor` tables and the counter
//! `meta.data_version`.
//!
//! Every change increments the counter and appends one `changes` row with the new value as its
//! `seq`, in the writer's transaction. Writers hold the feed's write lock ([`Lock::Feed`]) to
//! commit, so numbers are given out in commit order and a reader that saw `seq` N can never
//! later find a change numbered N or lower: polling by `seq` misses nothing.
//!
//! Only the newest [`StoreConfig::change_log_max_rows`](crate::StoreConfig::change_log_max_rows)
//! rows are kept, pruned in the same transaction as each append. `change_floor` keeps, per kind,
//! the highest `seq` pruned: a reader behind a kind's floor may have missed one of its changes
//! and reloads that kind whole.
//!
//! [`Lock::Feed`]: super::Lock::Feed

use std::collections::HashSet;

use super::exec::{Conn, Row, q};
use super::rows::{corrupt, get_u64, now_ms};
use super::{Engine, Write};
use crate::error::StoreError;
use crate::model::{Change, ChangeKind, ChangeSet};

/// Numbers one change of `kind`/`key` and appends it to the feed, pruning rows beyond the newest
/// `keep_rows`; returns its `seq`. Part of the caller's write transaction.
async fn record(
    conn: &mut dyn Conn,
    kind: ChangeKind,
    key: &str,
    keep_rows: i64,
) -> Result<i64, StoreError> {
    let seq: i64 =
        q("UPDATE meta SET value = value + 1 WHERE key = 'data_version' RETURNING value")
            .scalar(conn)
            .await?;
    q("INSERT INTO changes (seq, kind, key, at_ms) VALUES ($1, $2, $3, $4)")
        .bind(seq)
        .bind(kind.as_str())
        .bind(key)
        .bind(now_ms())
        .execute(conn)
        .await?;
    let cutoff = seq.saturating_sub(keep_rows);
    if cutoff > 0 {
        // Raise the floors of the kinds about to lose rows, then drop the rows: an index range.
        q("INSERT INTO change_floor (kind, seq) \
           SELECT kind, max(seq) FROM changes WHERE seq <= $1 GROUP BY kind \
           ON CONFLICT (kind) DO UPDATE SET seq = CASE WHEN excluded.seq > change_floor.seq \
           THEN excluded.seq ELSE change_floor.seq END")
        .bind(cutoff)
        .execute(conn)
        .await?;
        q("DELETE FROM changes WHERE seq <= $1")
            .bind(cutoff)
            .execute(conn)
            .await?;
    }
    Ok(seq)
}

/// The counter as stored, on `conn`.
pub(super) async fn counter(conn: &mut dyn Conn) -> Result<i64, StoreError> {
    q("SELECT value FROM meta WHERE key = 'data_version'")
        .scalar(conn)
        .await
}

/// [`ToolStore::current_seq`](crate::ToolStore::current_seq).
pub(crate) async fn current_seq(core: &Engine) -> Result<u64, StoreError> {
    let value = counter(&mut *core.db.read().await?).await?;
    u64::try_from(value).map_err(|_| corrupt(format!("negative change counter {value}")))
}

/// [`ToolStore::changes_since`](crate::ToolStore::changes_since): one read transaction, so the
/// counter, the floors and the rows are of one moment.
pub(crate) async fn since(core: &Engine, seen: u64) -> Result<ChangeSet, StoreError> {
    let mut tx = core.db.snapshot().await?;
    let current = counter(&mut *tx).await?;
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
        // database): nothing it remembers can be trusted.
        return Ok(ChangeSet {
            seq: current,
            reload: ChangeKind::ALL.to_vec(),
            changes: Vec::new(),
        });
    }
    // `seen < current <= i64::MAX`, so it fits.
    let seen_i64 = i64::try_from(seen).map_err(|_| corrupt("change counter out of range"))?;
    let floors = q("SELECT kind, seq FROM change_floor")
        .fetch_all(&mut *tx)
        .await?;
    let mut reload = Vec::new();
    for mut row in floors {
        if seen < get_u64(&mut row, "seq")? {
            reload.push(kind_of(&mut row)?);
        }
    }
    reload.sort();
    let rows = q("SELECT seq, kind, key, at_ms FROM changes WHERE seq > $1 ORDER BY seq")
        .bind(seen_i64)
        .fetch_all(&mut *tx)
        .await?;
    // Newest first, keeping the first (newest) change of each key; then back to oldest first.
    let mut keys = HashSet::new();
    let mut changes = Vec::new();
    for mut row in rows.into_iter().rev() {
        let kind = kind_of(&mut row)?;
        if reload.contains(&kind) {
            continue;
        }
        let key: String = row.get("key")?;
        if keys.insert((kind, key.clone())) {
            changes.push(Change {
                seq: get_u64(&mut row, "seq")?,
                kind,
                key,
                at_ms: row.get("at_ms")?,
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

/// The `kind` column of a `changes` or `change_floor` row.
pub(super) fn kind_of(row: &mut Row) -> Result<ChangeKind, StoreError> {
    let kind: String = row.get("kind")?;
    ChangeKind::parse(&kind).ok_or_else(|| corrupt(format!("unknown change kind {kind:?}")))
}

impl Write<'_> {
    /// Records one change of `kind`/`key` in this transaction (see [`record`]); returns its
    /// `seq`, which the changed row stores as its `updated_seq`.
    pub(crate) async fn change(&mut self, kind: ChangeKind, key: &str) -> Result<i64, StoreError> {
        let keep = self.core.change_log_max_rows;
        let seq = record(self.conn(), kind, key, keep).await?;
        self.last_seq = u64::try_from(seq).ok();
        Ok(seq)
    }
}
