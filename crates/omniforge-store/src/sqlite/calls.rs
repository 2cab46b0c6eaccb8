//! The call log on SQLite: the `call_log` table, pruned to the newest
//! [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) rows on each insert.
//! Call log writes are not changes of the feed.

use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::{checked_i64, col, corrupt, db, get_u32, get_u64};
use super::tools::{tool_exists, tool_not_found, version_not_found};
use crate::error::StoreError;
use crate::model::{CallOutcome, CallRecord, MAX_CALL_ERROR_BYTES};

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

/// `error` cut to at most [`MAX_CALL_ERROR_BYTES`], at a character boundary.
fn cut_error(error: &str) -> &str {
    if error.len() <= MAX_CALL_ERROR_BYTES {
        return error;
    }
    let mut end = MAX_CALL_ERROR_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

fn encode_outcome(outcome: CallOutcome) -> (&'static str, Option<i64>) {
    match outcome {
        CallOutcome::Ok => ("ok", None),
        CallOutcome::Error => ("error", None),
        CallOutcome::Exit(code) => ("exit", Some(i64::from(code))),
        CallOutcome::Timeout => ("timeout", None),
        CallOutcome::Cancelled => ("cancelled", None),
    }
}

fn call_from_row(row: &SqliteRow) -> Result<CallRecord, StoreError> {
    let outcome: String = col(row, "outcome")?;
    let exit_code: Option<i64> = col(row, "exit_code")?;
    let outcome = match (outcome.as_str(), exit_code) {
        ("ok", None) => CallOutcome::Ok,
        ("error", None) => CallOutcome::Error,
        ("timeout", None) => CallOutcome::Timeout,
        ("cancelled", None) => CallOutcome::Cancelled,
        ("exit", Some(code)) => CallOutcome::Exit(
            i32::try_from(code).map_err(|_| corrupt(format!("exit code {code} is not an i32")))?,
        ),
        (o, c) => {
            return Err(corrupt(format!(
                "unknown call outcome {o:?} (exit code {c:?})"
            )));
        }
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_errors_are_cut_at_a_character_boundary() {
        assert_eq!(cut_error("short"), "short");
        let long = "é".repeat(MAX_CALL_ERROR_BYTES);
        let cut = cut_error(&long);
        assert!(cut.len() <= MAX_CALL_ERROR_BYTES && cut.len() >= MAX_CALL_ERROR_BYTES - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
