//! Hourly call statistics on SQLite: the `call_hour` table (migration 0006), one row per
//! (hour, source, tool) with counts and a duration histogram ([`stats`](crate::stats)),
//! updated in the transaction of every call-log write and kept for
//! [`StoreConfig::call_stats_max_age`](crate::StoreConfig::call_stats_max_age), whatever the
//! log's row limit.

use std::collections::BTreeMap;

use super::rows::{col, corrupt, db, get_u64, now_ms, sat_i64, to_json};
use super::{SqliteStore, Write};
use crate::clock::{HOUR_MS, hour_start_ms};
use crate::error::StoreError;
use crate::model::{CallRecord, CallSource, HourStats, ToolActivity};
use crate::stats::Histogram;

/// Adds `call` to its hour, after deleting the hours older than `max_age_ms` (a call that
/// started before them is not counted).
pub(super) async fn add(
    w: &mut Write<'_>,
    call: &CallRecord,
    max_age_ms: i64,
) -> Result<(), StoreError> {
    // Hours that ended at least `max_age_ms` ago go.
    let keep_from = now_ms().saturating_sub(max_age_ms).saturating_sub(HOUR_MS);
    sqlx::query("DELETE FROM call_hour WHERE hour_start_ms <= ?")
        .bind(keep_from)
        .execute(w.conn())
        .await
        .map_err(db)?;
    let hour = hour_start_ms(call.started_at_ms);
    if hour <= keep_from {
        return Ok(());
    }
    let source = call.source.as_str();
    let row = sqlx::query(
        "SELECT calls, errors, max_ms, last_call_ms, buckets FROM call_hour \
         WHERE hour_start_ms = ? AND source = ? AND tool = ?",
    )
    .bind(hour)
    .bind(source)
    .bind(&call.tool)
    .fetch_optional(w.conn())
    .await
    .map_err(db)?;
    let (mut calls, mut errors, mut histogram, mut last) = match &row {
        Some(row) => (
            get_u64(row, "calls")?,
            get_u64(row, "errors")?,
            histogram(row)?,
            col::<i64>(row, "last_call_ms")?,
        ),
        None => (0, 0, Histogram::default(), call.started_at_ms),
    };
    calls += 1;
    errors += u64::from(call.outcome.is_error());
    histogram.record(call.duration_ms);
    last = last.max(call.started_at_ms);
    sqlx::query(
        "INSERT INTO call_hour (hour_start_ms, source, tool, calls, errors, max_ms, last_call_ms, \
         buckets) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (hour_start_ms, source, tool) DO UPDATE SET calls = excluded.calls, \
         errors = excluded.errors, max_ms = excluded.max_ms, \
         last_call_ms = excluded.last_call_ms, buckets = excluded.buckets",
    )
    .bind(hour)
    .bind(source)
    .bind(&call.tool)
    .bind(sat_i64(calls))
    .bind(sat_i64(errors))
    .bind(sat_i64(histogram.max_ms()))
    .bind(last)
    .bind(to_json("buckets", &histogram.counts())?)
    .execute(w.conn())
    .await
    .map_err(db)?;
    Ok(())
}

/// The histogram of a `call_hour` row (its `buckets` and `max_ms` columns).
fn histogram(row: &sqlx::sqlite::SqliteRow) -> Result<Histogram, StoreError> {
    let counts: Vec<u64> = super::rows::get_json(row, "buckets")?;
    Histogram::from_counts(&counts, get_u64(row, "max_ms")?)
        .ok_or_else(|| corrupt(format!("call_hour with {} buckets", counts.len())))
}

/// [`CallLog::call_hours`](crate::CallLog::call_hours).
pub(super) async fn hours(
    store: &SqliteStore,
    tool: Option<(CallSource, &str)>,
    since_ms: i64,
) -> Result<Vec<HourStats>, StoreError> {
    let (source, name) = match tool {
        Some((source, name)) => (Some(source.as_str()), Some(name)),
        None => (None, None),
    };
    let rows = sqlx::query(
        "SELECT hour_start_ms, calls, errors, max_ms, buckets FROM call_hour \
         WHERE hour_start_ms >= ?1 AND (?2 IS NULL OR (source = ?2 AND tool = ?3)) \
         ORDER BY hour_start_ms",
    )
    .bind(hour_start_ms(since_ms))
    .bind(source)
    .bind(name)
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    // Several tools' rows of one hour add up bucket by bucket.
    let mut by_hour: BTreeMap<i64, (u64, u64, Histogram)> = BTreeMap::new();
    for row in &rows {
        let hour: i64 = col(row, "hour_start_ms")?;
        let entry = by_hour
            .entry(hour)
            .or_insert_with(|| (0, 0, Histogram::default()));
        entry.0 += get_u64(row, "calls")?;
        entry.1 += get_u64(row, "errors")?;
        entry.2.merge(&histogram(row)?);
    }
    Ok(by_hour
        .into_iter()
        .map(|(hour_start_ms, (calls, errors, h))| HourStats {
            hour_start_ms,
            calls,
            errors,
            p50_ms: h.quantile_ms(0.5),
            p99_ms: h.quantile_ms(0.99),
            max_ms: h.max_ms(),
        })
        .collect())
}

/// [`CallLog::call_activity`](crate::CallLog::call_activity).
pub(super) async fn activity(
    store: &SqliteStore,
    since_ms: i64,
) -> Result<Vec<ToolActivity>, StoreError> {
    let rows = sqlx::query(
        "SELECT source, tool, sum(calls) AS calls, sum(errors) AS errors, \
         max(last_call_ms) AS last_call_ms FROM call_hour WHERE hour_start_ms >= ? \
         GROUP BY source, tool ORDER BY source, tool",
    )
    .bind(hour_start_ms(since_ms))
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|row| {
            let source: String = col(row, "source")?;
            Ok(ToolActivity {
                source: CallSource::parse(&source)
                    .ok_or_else(|| corrupt(format!("unknown call source {source:?}")))?,
                tool: col(row, "tool")?,
                calls: get_u64(row, "calls")?,
                errors: get_u64(row, "errors")?,
                last_call_ms: col(row, "last_call_ms")?,
            })
        })
        .collect()
}
