//! The call log on PostgreSQL: the `call_log` table, pruned to the newest
//! [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) rows on each insert.
//! Call log writes are not changes of the feed.

use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::{checked_i64, col, db, get_u32, get_u64};
use super::tools::tool_exists;
use crate::error::StoreError;
use crate::model::CallRecord;
use crate::rules::{cut_error, decode_outcome, encode_outcome, tool_not_found, version_not_found};

/// [`ToolStore::record_call`](crate::ToolStore::record_call).
pub(super) async fn record(store: &PgStore, call: CallRecord) -> Result<(), StoreError> {
    let duration_ms = checked_i64("duration_ms", call.duration_ms)?;
    let bytes_out = checked_i64("bytes_out", call.bytes_out)?;
    if store.call_log_max_rows == 0 {
        return Ok(());
    }
    let (outcome, exit_code) = encode_outcome(call.outcome);
    let error = call.error.as_deref().map(cut_error);
    // Not a change, so no counter lock: replicas log calls side by side. The version is
    // checked in the insert itself; a purge committing in between fails its foreign key.
    let mut tx = store.pool.begin().await.map_err(db)?;
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO call_log (tool, version, started_at_ms, duration_ms, outcome, exit_code, \
         bytes_out, principal, error) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 \
         WHERE EXISTS (SELECT 1 FROM tool_version WHERE tool = $1 AND number = $2) RETURNING id",
    )
    .bind(&call.tool)
    .bind(i64::from(call.version))
    .bind(call.started_at_ms)
    .bind(duration_ms)
    .bind(outcome)
    .bind(exit_code)
    .bind(bytes_out)
    .bind(call.principal.as_deref())
    .bind(error)
    .fetch_optional(&mut *tx)
    .await
    .map_err(|e| match &e {
        sqlx::Error::Database(d) if d.is_foreign_key_violation() => {
            version_not_found(&call.tool, call.version)
        }
        _ => db(e),
    })?;
    let Some(id) = id else {
        return Err(version_not_found(&call.tool, call.version));
    };
    // Ids only grow, so the last `max` recorded calls are the ids above `id - max`: an index
    // range, no count. (Ids of concurrent replicas commit out of order, so the bound is
    // approximate by the few calls in flight.)
    sqlx::query("DELETE FROM call_log WHERE id <= $1")
        .bind(id.saturating_sub(store.call_log_max_rows))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    tx.commit().await.map_err(db)
}

/// [`ToolStore::recent_calls`](crate::ToolStore::recent_calls).
pub(super) async fn recent(
    store: &PgStore,
    name: &str,
    limit: u32,
) -> Result<Vec<CallRecord>, StoreError> {
    let mut tx = store.read().await?;
    if !tool_exists(&mut tx, name).await? {
        return Err(tool_not_found(name));
    }
    let rows = sqlx::query(
        "SELECT tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out, \
         principal, error FROM call_log WHERE tool = $1 ORDER BY id DESC LIMIT $2",
    )
    .bind(name)
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    rows.iter().map(call_from_row).collect()
}

pub(super) fn call_from_row(row: &PgRow) -> Result<CallRecord, StoreError> {
    let outcome: String = col(row, "outcome")?;
    let outcome = decode_outcome(&outcome, col(row, "exit_code")?)?;
    Ok(CallRecord {
        tool: col(row, "tool")?,
        version: get_u32(row, "version")?,
        started_at_ms: col(row, "started_at_ms")?,
        duration_ms: get_u64(row, "duration_ms")?,
        outcome,
        bytes_out: get_u64(row, "bytes_out")?,
        principal: col(row, "principal")?,
        error: col(row, "error")?,
    })
}
