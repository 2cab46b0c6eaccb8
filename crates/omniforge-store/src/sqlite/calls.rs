//! The call log on SQLite: the `call_log` table, pruned to the newest
//! [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) rows on each insert.
//! Call log writes are not changes of the feed.

use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::{checked_i64, col, db, get_u32, get_u64};
use super::tools::tool_exists;
use crate::error::StoreError;
use crate::model::CallRecord;
use crate::rules::{cut_error, decode_outcome, encode_outcome, tool_not_found, version_not_found};

/// [`ToolStore::record_call`](crate::ToolStore::record_call).
pub(super) async fn record(store: &SqliteStore, call: CallRecord) -> Result<(), StoreError> {
    let duration_ms = checked_i64("duration_ms", call.duration_ms)?;
    let bytes_out = checked_i64("bytes_out", call.bytes_out)?;
    if store.call_log_max_rows == 0 {
        return Ok(());
    }
    let (outcome, exit_code) = encode_outcome(call.outcome);
    let error = call.error.as_deref().map(cut_error);
    let mut w = store.write().await?;
    let exists = sqlx::query("SELECT 1 FROM tool_version WHERE tool = ? AND number = ?")
        .bind(&call.tool)
        .bind(i64::from(call.version))
        .fetch_optional(w.conn())
        .await
        .map_err(db)?;
    if exists.is_none() {
        return Err(version_not_found(&call.tool, call.version));
    }
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO call_log (tool, version, started_at_ms, duration_ms, outcome, exit_code, \
         bytes_out, principal, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
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
    .fetch_one(w.conn())
    .await
    .map_err(db)?;
    // Ids only grow (rows are removed from the old end, or by purge), so the last
    // `max` recorded calls are exactly the ids above `id - max`: an index range, no count.
    sqlx::query("DELETE FROM call_log WHERE id <= ?")
        .bind(id.saturating_sub(store.call_log_max_rows))
        .execute(w.conn())
        .await
        .map_err(db)?;
    w.commit().await
}

/// [`ToolStore::recent_calls`](crate::ToolStore::recent_calls).
pub(super) async fn recent(
    store: &SqliteStore,
    name: &str,
    limit: u32,
) -> Result<Vec<CallRecord>, StoreError> {
    let mut tx = store.read().await?;
    if !tool_exists(&mut tx, name).await? {
        return Err(tool_not_found(name));
    }
    let rows = sqlx::query(
        "SELECT tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out, \
         principal, error FROM call_log WHERE tool = ? ORDER BY id DESC LIMIT ?",
    )
    .bind(name)
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    rows.iter().map(call_from_row).collect()
}

pub(super) fn call_from_row(row: &SqliteRow) -> Result<CallRecord, StoreError> {
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
