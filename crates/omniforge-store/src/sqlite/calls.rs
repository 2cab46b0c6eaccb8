//! The call log on SQLite: the `call_log` table (migration 0006), calls of every source, pruned
//! to the newest [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) rows
//! on each insert, whose transaction also adds the call to its hour (`hours.rs`). Call log
//! writes are neither changes of the feed nor audit records.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;

use super::rows::{col, corrupt, db, get_u64, sat_i64};
use super::tools::{tool_exists, tool_not_found, version_not_found};
use super::{SqliteStore, hours};
use crate::error::StoreError;
use crate::model::{
    ArgumentsDigest, CallFilter, CallOutcome, CallRecord, CallSource, CapturedText, HourStats,
    LoggedCall, ToolActivity,
};
use crate::store::CallLog;
use crate::validate::{check_call, checked_i64};

/// The columns [`call_from_row`] reads; a macro so that queries stay `&'static str` literals.
macro_rules! call_columns {
    () => {
        "id, source, tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out, \
         principal, error, arguments_sha256, arguments_bytes, arguments_text, \
         arguments_total_bytes, result_text, result_total_bytes"
    };
}

async fn record(store: &SqliteStore, call: CallRecord) -> Result<(), StoreError> {
    let call = check_call(call)?;
    let (outcome, exit_code) = encode_outcome(call.outcome);
    let mut w = store.write().await?;
    if let (CallSource::Stored, Some(version)) = (call.source, call.version) {
        let exists = sqlx::query("SELECT 1 FROM tool_version WHERE tool = ? AND number = ?")
            .bind(&call.tool)
            .bind(i64::from(version))
            .fetch_optional(w.conn())
            .await
            .map_err(db)?;
        if exists.is_none() {
            return Err(version_not_found(&call.tool, version));
        }
    }
    if store.call_log_max_rows > 0 {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO call_log (source, tool, version, started_at_ms, duration_ms, outcome, \
             exit_code, bytes_out, principal, error, arguments_sha256, arguments_bytes, \
             arguments_text, arguments_total_bytes, result_text, result_total_bytes) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(call.source.as_str())
        .bind(&call.tool)
        .bind(call.version.map(i64::from))
        .bind(call.started_at_ms)
        .bind(sat_i64(call.duration_ms))
        .bind(outcome)
        .bind(exit_code)
        .bind(sat_i64(call.bytes_out))
        .bind(call.principal.as_deref())
        .bind(call.error.as_deref())
        .bind(call.arguments.as_ref().map(|a| a.sha256.as_str()))
        .bind(call.arguments.as_ref().map(|a| sat_i64(a.bytes)))
        .bind(call.arguments_text.as_ref().map(|t| t.text.as_str()))
        .bind(call.arguments_text.as_ref().map(|t| sat_i64(t.total_bytes)))
        .bind(call.result_text.as_ref().map(|t| t.text.as_str()))
        .bind(call.result_text.as_ref().map(|t| sat_i64(t.total_bytes)))
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
    }
    hours::add(&mut w, &call, store.call_stats_max_age_ms).await?;
    w.commit().await
}

async fn recent(
    store: &SqliteStore,
    name: &str,
    limit: u32,
) -> Result<Vec<CallRecord>, StoreError> {
    let mut tx = store.read().await?;
    if !tool_exists(&mut tx, name).await? {
        return Err(tool_not_found(name));
    }
    let rows = sqlx::query(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_log WHERE tool = ? AND source = 'stored' ORDER BY id DESC LIMIT ?"
    ))
    .bind(name)
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|row| call_from_row(row).map(|c| c.call))
        .collect()
}

async fn calls(store: &SqliteStore, filter: &CallFilter) -> Result<Vec<LoggedCall>, StoreError> {
    if filter.limit == 0 {
        return Ok(Vec::new());
    }
    let before_id = filter
        .before_id
        .map(|id| checked_i64("before_id", id))
        .transpose()?;
    // One statement for every combination: an absent condition is a NULL parameter.
    let rows = sqlx::query(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_log WHERE (?1 IS NULL OR tool = ?1) AND (?2 IS NULL OR source = ?2) \
         AND (?3 IS NULL OR principal = ?3) AND (?4 IS NULL OR id < ?4) \
         ORDER BY id DESC LIMIT ?5"
    ))
    .bind(filter.tool.as_deref())
    .bind(filter.source.map(CallSource::as_str))
    .bind(filter.principal.as_deref())
    .bind(before_id)
    .bind(i64::from(filter.limit))
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    rows.iter().map(call_from_row).collect()
}

async fn call(store: &SqliteStore, id: u64) -> Result<Option<LoggedCall>, StoreError> {
    let Ok(id) = i64::try_from(id) else {
        return Ok(None);
    };
    let row = sqlx::query(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_log WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(&store.reader)
    .await
    .map_err(db)?;
    row.as_ref().map(call_from_row).transpose()
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

/// A text column and its `*_total_bytes` column.
fn captured(row: &SqliteRow, text: &str, total: &str) -> Result<Option<CapturedText>, StoreError> {
    let t: Option<String> = col(row, text)?;
    let n: Option<i64> = col(row, total)?;
    match (t, n) {
        (Some(text), Some(n)) => Ok(Some(CapturedText {
            text,
            total_bytes: u64::try_from(n).map_err(|_| corrupt(format!("{total} {n}")))?,
        })),
        (None, None) => Ok(None),
        _ => Err(corrupt(format!("{text} without {total}"))),
    }
}

fn call_from_row(row: &SqliteRow) -> Result<LoggedCall, StoreError> {
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
    let source: String = col(row, "source")?;
    let version: Option<i64> = col(row, "version")?;
    let sha256: Option<String> = col(row, "arguments_sha256")?;
    let arguments = match sha256 {
        Some(sha256) => Some(ArgumentsDigest {
            sha256,
            bytes: get_u64(row, "arguments_bytes")?,
        }),
        None => None,
    };
    let call = CallRecord {
        tool: col(row, "tool")?,
        source: CallSource::parse(&source)
            .ok_or_else(|| corrupt(format!("unknown call source {source:?}")))?,
        version: version
            .map(|v| u32::try_from(v).map_err(|_| corrupt(format!("call version {v}"))))
            .transpose()?,
        started_at_ms: col(row, "started_at_ms")?,
        duration_ms: get_u64(row, "duration_ms")?,
        outcome,
        bytes_out: get_u64(row, "bytes_out")?,
        principal: col(row, "principal")?,
        error: col(row, "error")?,
        arguments,
        arguments_text: captured(row, "arguments_text", "arguments_total_bytes")?,
        result_text: captured(row, "result_text", "result_total_bytes")?,
    };
    Ok(LoggedCall {
        id: get_u64(row, "id")?,
        call,
    })
}

/// Each method is in this file or in `hours.rs`.
#[async_trait]
impl CallLog for SqliteStore {
    async fn record_call(&self, call: CallRecord) -> Result<(), StoreError> {
        record(self, call).await
    }

    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError> {
        recent(self, name, limit).await
    }

    async fn calls(&self, filter: &CallFilter) -> Result<Vec<LoggedCall>, StoreError> {
        calls(self, filter).await
    }

    async fn call(&self, id: u64) -> Result<Option<LoggedCall>, StoreError> {
        call(self, id).await
    }

    async fn call_hours(
        &self,
        tool: Option<(CallSource, &str)>,
        since_ms: i64,
    ) -> Result<Vec<HourStats>, StoreError> {
        hours::hours(self, tool, since_ms).await
    }

    async fn call_activity(&self, since_ms: i64) -> Result<Vec<ToolActivity>, StoreError> {
        hours::activity(self, since_ms).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_encode_as_the_schema_says() {
        assert_eq!(encode_outcome(CallOutcome::Exit(-9)), ("exit", Some(-9)));
        assert_eq!(encode_outcome(CallOutcome::Ok), ("ok", None));
    }
}
