//! Hourly call statistics: the `call_hour` table, one row per (hour, source, tool) with counts
//! and a duration histogram ([`stats`](crate::stats)), updated in the transaction of every
//! call-log batch and kept for
//! [`StoreConfig::call_stats_max_age`](crate::StoreConfig::call_stats_max_age), whatever the
//! log's row limit.

use std::collections::BTreeMap;

use super::exec::{Conn, Row, q};
use super::rows::{corrupt, get_json, get_u64, now_ms, sat_i64, to_json};
use super::{Engine, Write};
use crate::clock::{HOUR_MS, hour_start_ms};
use crate::error::StoreError;
use crate::model::{CallRecord, CallSource, HourStats, ToolActivity};
use crate::stats::Histogram;

/// One `call_hour` row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HourRow {
    /// The hour's start, unix milliseconds.
    pub(crate) hour_start_ms: i64,
    /// The calls' source.
    pub(crate) source: CallSource,
    /// The tool's name.
    pub(crate) tool: String,
    /// How many calls.
    pub(crate) calls: u64,
    /// How many of them failed.
    pub(crate) errors: u64,
    /// The latest call's start.
    pub(crate) last_call_ms: i64,
    /// Their durations.
    pub(crate) histogram: Histogram,
}

/// The columns [`hour_from_row`] reads.
macro_rules! hour_columns {
    () => {
        "hour_start_ms, source, tool, calls, errors, max_ms, last_call_ms, buckets"
    };
}
pub(super) use hour_columns;

/// A `call_hour` row read with [`hour_columns!`].
pub(super) fn hour_from_row(row: &mut Row) -> Result<HourRow, StoreError> {
    let source: String = row.get("source")?;
    let counts: Vec<u64> = get_json(row, "buckets")?;
    let histogram = Histogram::from_counts(&counts, get_u64(row, "max_ms")?)
        .ok_or_else(|| corrupt(format!("call_hour with {} buckets", counts.len())))?;
    Ok(HourRow {
        hour_start_ms: row.get("hour_start_ms")?,
        source: CallSource::parse(&source)
            .ok_or_else(|| corrupt(format!("unknown call source {source:?}")))?,
        tool: row.get("tool")?,
        calls: get_u64(row, "calls")?,
        errors: get_u64(row, "errors")?,
        last_call_ms: row.get("last_call_ms")?,
        histogram,
    })
}

/// Writes (inserts or replaces) an hour row.
pub(super) async fn upsert_hour(conn: &mut dyn Conn, h: &HourRow) -> Result<(), StoreError> {
    q(
        "INSERT INTO call_hour (hour_start_ms, source, tool, calls, errors, max_ms, \
       last_call_ms, buckets) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
       ON CONFLICT (hour_start_ms, source, tool) DO UPDATE SET calls = excluded.calls, \
       errors = excluded.errors, max_ms = excluded.max_ms, \
       last_call_ms = excluded.last_call_ms, buckets = excluded.buckets",
    )
    .bind(h.hour_start_ms)
    .bind(h.source.as_str())
    .bind(&h.tool)
    .bind(sat_i64(h.calls))
    .bind(sat_i64(h.errors))
    .bind(sat_i64(h.histogram.max_ms()))
    .bind(h.last_call_ms)
    .bind(to_json("buckets", &h.histogram.counts())?)
    .execute(conn)
    .await?;
    Ok(())
}

/// Adds `calls` to their hours, after deleting the hours older than `max_age_ms` (a call
/// that started before them is not counted): the calls of one (hour, source, tool) are summed
/// first, so that each hour row is read and written once per batch.
pub(super) async fn add(
    w: &mut Write<'_>,
    calls: &[CallRecord],
    max_age_ms: i64,
) -> Result<(), StoreError> {
    // Hours that ended at least `max_age_ms` ago go.
    let keep_from = now_ms().saturating_sub(max_age_ms).saturating_sub(HOUR_MS);
    q("DELETE FROM call_hour WHERE hour_start_ms <= $1")
        .bind(keep_from)
        .execute(w.conn())
        .await?;
    let mut sums: BTreeMap<(i64, CallSource, &str), HourRow> = BTreeMap::new();
    for call in calls {
        let hour = hour_start_ms(call.started_at_ms);
        if hour <= keep_from {
            continue;
        }
        let h = sums
            .entry((hour, call.source, call.tool.as_str()))
            .or_insert_with(|| HourRow {
                hour_start_ms: hour,
                source: call.source,
                tool: call.tool.clone(),
                calls: 0,
                errors: 0,
                last_call_ms: call.started_at_ms,
                histogram: Histogram::default(),
            });
        h.calls += 1;
        h.errors += u64::from(call.outcome.is_error());
        h.histogram.record(call.duration_ms);
        h.last_call_ms = h.last_call_ms.max(call.started_at_ms);
    }
    for (_, mut h) in sums {
        let row = q(concat!(
            "SELECT ",
            hour_columns!(),
            " FROM call_hour WHERE hour_start_ms = $1 AND source = $2 AND tool = $3"
        ))
        .bind(h.hour_start_ms)
        .bind(h.source.as_str())
        .bind(&h.tool)
        .fetch_optional(w.conn())
        .await?;
        if let Some(mut row) = row {
            let old = hour_from_row(&mut row)?;
            h.calls += old.calls;
            h.errors += old.errors;
            h.histogram.merge(&old.histogram);
            h.last_call_ms = h.last_call_ms.max(old.last_call_ms);
        }
        upsert_hour(w.conn(), &h).await?;
    }
    Ok(())
}

/// [`CallLog::call_hours`](crate::CallLog::call_hours).
pub(crate) async fn hours(
    core: &Engine,
    tool: Option<(CallSource, &str)>,
    since_ms: i64,
) -> Result<Vec<HourStats>, StoreError> {
    let (source, name) = match tool {
        Some((source, name)) => (Some(source.as_str()), Some(name)),
        None => (None, None),
    };
    let rows = q(concat!(
        "SELECT ",
        hour_columns!(),
        " FROM call_hour WHERE hour_start_ms >= $1 AND ($2 IS NULL OR (source = $2 AND tool = $3)) \
         ORDER BY hour_start_ms"
    ))
    .bind(hour_start_ms(since_ms))
    .bind(source)
    .bind(name)
    .fetch_all(&mut *core.db.read().await?)
    .await?;
    // Several tools' rows of one hour add up bucket by bucket.
    let mut by_hour: BTreeMap<i64, (u64, u64, Histogram)> = BTreeMap::new();
    for mut row in rows {
        let h = hour_from_row(&mut row)?;
        let entry = by_hour
            .entry(h.hour_start_ms)
            .or_insert_with(|| (0, 0, Histogram::default()));
        entry.0 += h.calls;
        entry.1 += h.errors;
        entry.2.merge(&h.histogram);
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
pub(crate) async fn activity(
    core: &Engine,
    since_ms: i64,
) -> Result<Vec<ToolActivity>, StoreError> {
    let rows = q("SELECT source, tool, CAST(sum(calls) AS BIGINT) AS calls, \
         CAST(sum(errors) AS BIGINT) AS errors, max(last_call_ms) AS last_call_ms \
         FROM call_hour WHERE hour_start_ms >= $1 GROUP BY source, tool ORDER BY source, tool")
    .bind(hour_start_ms(since_ms))
    .fetch_all(&mut *core.db.read().await?)
    .await?;
    rows.into_iter()
        .map(|mut row| {
            let source: String = row.get("source")?;
            Ok(ToolActivity {
                source: CallSource::parse(&source)
                    .ok_or_else(|| corrupt(format!("unknown call source {source:?}")))?,
                tool: row.get("tool")?,
                calls: get_u64(&mut row, "calls")?,
                errors: get_u64(&mut row, "errors")?,
                last_call_ms: row.get("last_call_ms")?,
            })
        })
        .collect()
}
