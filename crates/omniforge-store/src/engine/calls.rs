//! The call log: the `call_log` table, calls of every source, written in batches (one
//! transaction each: the server's call-log writer commits a group at a time), pruned to the
//! newest [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) rows at
//! each batch, whose transaction also adds the calls to their hours (`hours.rs`). Call log
//! writes are neither changes of the feed nor audit records.

use std::collections::HashMap;

use async_trait::async_trait;

use super::exec::{Conn, Q, Row, q};
use super::rows::{corrupt, get_u64, opt_u32, sat_i64, tool_not_found, version_not_found};
use super::tool_rows::tool_exists;
use super::{Engine, Lock, hours};
use crate::error::StoreError;
use crate::model::{
    ArgumentsDigest, CallFilter, CallOutcome, CallRecord, CallSource, CapturedText, LoggedCall,
};
use crate::model::{HourStats, ToolActivity};
use crate::store::CallLog;
use crate::validate::{check_call, checked_i64};

/// The columns [`call_from_row`] reads.
macro_rules! call_columns {
    () => {
        "id, source, tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out, \
         principal, error, arguments_sha256, arguments_bytes, arguments_text, \
         arguments_total_bytes, result_text, result_total_bytes"
    };
}
pub(super) use call_columns;

/// Inserts a call row with the next id; returns its id.
pub(super) async fn insert_call(conn: &mut dyn Conn, call: &CallRecord) -> Result<i64, StoreError> {
    let sql = "INSERT INTO call_log (source, tool, version, started_at_ms, duration_ms, outcome, \
         exit_code, bytes_out, principal, error, arguments_sha256, arguments_bytes, \
         arguments_text, arguments_total_bytes, result_text, result_total_bytes) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
         RETURNING id";
    bind_call(q(sql), call).scalar(conn).await
}

/// Inserts a copied call row with its id.
pub(super) async fn insert_call_with_id(
    conn: &mut dyn Conn,
    id: i64,
    call: &CallRecord,
) -> Result<(), StoreError> {
    let sql = "INSERT INTO call_log (source, tool, version, started_at_ms, duration_ms, outcome, \
         exit_code, bytes_out, principal, error, arguments_sha256, arguments_bytes, \
         arguments_text, arguments_total_bytes, result_text, result_total_bytes, id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)";
    bind_call(q(sql), call).bind(id).execute(conn).await?;
    Ok(())
}

/// Binds a call's columns as `$1`..`$16` (the column order of the inserts above).
fn bind_call<'a>(query: Q<'a>, call: &'a CallRecord) -> Q<'a> {
    let (outcome, exit_code) = encode_outcome(call.outcome);
    let args = call.arguments.as_ref();
    let arguments_text = call.arguments_text.as_ref();
    let result_text = call.result_text.as_ref();
    query
        .bind(call.source.as_str())
        .bind(&call.tool)
        .bind(call.version)
        .bind(call.started_at_ms)
        .bind(sat_i64(call.duration_ms))
        .bind(outcome)
        .bind(exit_code)
        .bind(sat_i64(call.bytes_out))
        .bind(call.principal.as_deref())
        .bind(call.error.as_deref())
        .bind(args.map(|a| a.sha256.as_str()))
        .bind(args.map(|a| sat_i64(a.bytes)))
        .bind(arguments_text.map(|t| t.text.as_str()))
        .bind(arguments_text.map(|t| sat_i64(t.total_bytes)))
        .bind(result_text.map(|t| t.text.as_str()))
        .bind(result_text.map(|t| sat_i64(t.total_bytes)))
}

/// [`CallLog::record_calls`](crate::CallLog::record_calls): every call that passes its checks
/// is inserted, the log pruned once and the hours added once per (hour, source, tool), all in
/// one transaction; the refusals come back in the calls' order.
pub(crate) async fn record_batch(
    core: &Engine,
    calls: Vec<CallRecord>,
) -> Result<Vec<StoreError>, StoreError> {
    let mut refused = Vec::new();
    let mut valid = Vec::with_capacity(calls.len());
    for call in calls {
        match check_call(call) {
            Ok(call) => valid.push(call),
            Err(error) => refused.push(error),
        }
    }
    if valid.is_empty() {
        return Ok(refused);
    }
    let mut w = core.write_with(Lock::Side).await?;
    // A stored call names a version that must exist: each distinct one is looked up once.
    let mut versions: HashMap<(String, u32), bool> = HashMap::new();
    let mut calls = Vec::with_capacity(valid.len());
    for call in valid {
        if let (CallSource::Stored, Some(version)) = (call.source, call.version) {
            let key = (call.tool.clone(), version);
            let exists = match versions.get(&key) {
                Some(&exists) => exists,
                None => {
                    let exists =
                        q("SELECT number FROM tool_version WHERE tool = $1 AND number = $2")
                            .bind(&call.tool)
                            .bind(version)
                            .fetch_optional(w.conn())
                            .await?
                            .is_some();
                    versions.insert(key, exists);
                    exists
                }
            };
            if !exists {
                refused.push(version_not_found(&call.tool, version));
                continue;
            }
        }
        calls.push(call);
    }
    if calls.is_empty() {
        return Ok(refused);
    }
    if core.call_log_max_rows > 0 {
        let mut last = 0;
        for call in &calls {
            last = insert_call(w.conn(), call).await?;
        }
        // Ids only grow (rows are removed from the old end, or by purge), so the last
        // `max` recorded calls are exactly the ids above `last - max`: an index range, no count.
        q("DELETE FROM call_log WHERE id <= $1")
            .bind(last.saturating_sub(core.call_log_max_rows))
            .execute(w.conn())
            .await?;
    }
    hours::add(&mut w, &calls, core.call_stats_max_age_ms).await?;
    w.commit().await?;
    Ok(refused)
}

/// The `outcome` and `exit_code` columns of an outcome.
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
fn captured(row: &mut Row, text: &str, total: &str) -> Result<Option<CapturedText>, StoreError> {
    let t: Option<String> = row.get(text)?;
    let n: Option<i64> = row.get(total)?;
    match (t, n) {
        (Some(text), Some(n)) => Ok(Some(CapturedText {
            text,
            total_bytes: u64::try_from(n).map_err(|_| corrupt(format!("{total} {n}")))?,
        })),
        (None, None) => Ok(None),
        _ => Err(corrupt(format!("{text} without {total}"))),
    }
}

/// A `call_log` row read with [`call_columns!`].
pub(super) fn call_from_row(row: &mut Row) -> Result<LoggedCall, StoreError> {
    let outcome: String = row.get("outcome")?;
    let exit_code: Option<i64> = row.get("exit_code")?;
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
    let source: String = row.get("source")?;
    let sha256: Option<String> = row.get("arguments_sha256")?;
    let arguments = match sha256 {
        Some(sha256) => Some(ArgumentsDigest {
            sha256,
            bytes: get_u64(row, "arguments_bytes")?,
        }),
        None => None,
    };
    let call = CallRecord {
        tool: row.get("tool")?,
        source: CallSource::parse(&source)
            .ok_or_else(|| corrupt(format!("unknown call source {source:?}")))?,
        version: opt_u32(row, "version")?,
        started_at_ms: row.get("started_at_ms")?,
        duration_ms: get_u64(row, "duration_ms")?,
        outcome,
        bytes_out: get_u64(row, "bytes_out")?,
        principal: row.get("principal")?,
        error: row.get("error")?,
        arguments,
        arguments_text: captured(row, "arguments_text", "arguments_total_bytes")?,
        result_text: captured(row, "result_text", "result_total_bytes")?,
    };
    Ok(LoggedCall {
        id: get_u64(row, "id")?,
        call,
    })
}

#[async_trait]
impl CallLog for Engine {
    async fn record_calls(&self, calls: Vec<CallRecord>) -> Result<Vec<StoreError>, StoreError> {
        record_batch(self, calls).await
    }

    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError> {
        let core = self;
        let mut tx = core.db.snapshot().await?;
        if !tool_exists(&mut *tx, name).await? {
            return Err(tool_not_found(name));
        }
        let rows = q(concat!(
            "SELECT ",
            call_columns!(),
            " FROM call_log WHERE tool = $1 AND source = 'stored' ORDER BY id DESC LIMIT $2"
        ))
        .bind(name)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
        rows.into_iter()
            .map(|mut row| call_from_row(&mut row).map(|c| c.call))
            .collect()
    }

    async fn calls(&self, filter: &CallFilter) -> Result<Vec<LoggedCall>, StoreError> {
        let core = self;
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let before_id = filter
            .before_id
            .map(|id| checked_i64("before_id", id))
            .transpose()?;
        // One statement for every combination: an absent condition is a NULL parameter.
        let rows = q(concat!(
            "SELECT ",
            call_columns!(),
            " FROM call_log WHERE ($1 IS NULL OR tool = $1) AND ($2 IS NULL OR source = $2) \
             AND ($3 IS NULL OR principal = $3) AND ($4 IS NULL OR id < $4) \
             ORDER BY id DESC LIMIT $5"
        ))
        .bind(filter.tool.as_deref())
        .bind(filter.source.map(CallSource::as_str))
        .bind(filter.principal.as_deref())
        .bind(before_id)
        .bind(i64::from(filter.limit))
        .fetch_all(&mut *core.db.read().await?)
        .await?;
        rows.into_iter()
            .map(|mut row| call_from_row(&mut row))
            .collect()
    }

    async fn call(&self, id: u64) -> Result<Option<LoggedCall>, StoreError> {
        let core = self;
        let Ok(id) = i64::try_from(id) else {
            return Ok(None);
        };
        let row = q(concat!(
            "SELECT ",
            call_columns!(),
            " FROM call_log WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&mut *core.db.read().await?)
        .await?;
        row.map(|mut row| call_from_row(&mut row)).transpose()
    }

    async fn call_hours(
        &self,
        tool: Option<(CallSource, &str)>,
        since_ms: i64,
    ) -> Result<Vec<HourStats>, StoreError> {
        super::hours::hours(self, tool, since_ms).await
    }

    async fn call_activity(&self, since_ms: i64) -> Result<Vec<ToolActivity>, StoreError> {
        super::hours::activity(self, since_ms).await
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
