//! The cost of the two writes a busy replica makes most, on one store (issue 14): a tool
//! create (`ToolStore::create_tool`: the tool, its version, the change-feed row, the audit
//! record, in one transaction) and a call-log write (`CallLog::record_call`: the row and its
//! hour). Run once against SQLite and once against PostgreSQL, side by side.
//!
//!     store-cost sqlite:PATH|postgres://... N [PREFIX=cost]
//!
//! Tools `PREFIX_0..N` are created (none may exist yet). Prints one JSON object: for each
//! write, the latency summary in µs (p50, p90, p99, mean) over N sequential writes.

use std::time::{Duration, Instant};

use omniforge_store::{
    Actor, Annotations, CallOutcome, CallRecord, CallSource, DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CALL_STATS_MAX_AGE, DEFAULT_CHANGE_LOG_MAX_ROWS, DEFAULT_MAX_READERS, Limits,
    NewStatus, NewVersion, PgEnv, Runtime, StoreConfig,
};
use serde_json::{Value, json};

/// Unix milliseconds now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn summary(mut times: Vec<Duration>) -> Value {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let at = |q: f64| times.get(((times.len() as f64 - 1.0) * q).round() as usize).map_or(0.0, |d| us(*d));
    let mean = times.iter().map(|d| us(*d)).sum::<f64>() / times.len().max(1) as f64;
    json!({"count": times.len(), "p50_us": at(0.5), "p90_us": at(0.9), "p99_us": at(0.99), "mean_us": mean})
}

fn spec(i: usize) -> NewVersion {
    NewVersion {
        title: None,
        description: format!("Store cost tool {i}: prints its name."),
        input_schema: json!({"type": "object", "properties": {"x": {"type": "integer"}}})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        output_schema: None,
        annotations: Annotations::default(),
        runtime: Runtime::Python,
        code: format!("print('cost_{i}')\n"),
        dependencies: Vec::new(),
        limits: Limits {
            timeout_ms: 30_000,
            memory_bytes: 2 << 30,
            network: false,
        },
        lock: String::new(),
        env_id: "bench-cost-no-env".to_owned(),
        secrets: Vec::new(),
        author: "bench".to_owned(),
        examples: Vec::new(),
        execution: Default::default(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: store-cost URL N")?;
    let n: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let prefix = args.next().unwrap_or_else(|| "cost".to_owned());
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: 10_000,
        max_readers: DEFAULT_MAX_READERS,
        change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
        keyring: None,
    };
    let store = omniforge_store::open(&url, &PgEnv::from_vars(std::env::vars()), &config).await?;
    let actor = Actor::new("bench");
    let mut creates = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        store
            .create_tool(&actor, &format!("{prefix}_{i}"), spec(i), NewStatus::Live)
            .await?;
        creates.push(t0.elapsed());
    }
    let mut logs = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        store
            .record_call(CallRecord {
                tool: format!("{prefix}_{i}"),
                source: CallSource::Stored,
                version: Some(1),
                started_at_ms: now_ms(),
                duration_ms: 1,
                outcome: CallOutcome::Ok,
                bytes_out: 10,
                principal: Some("bench".into()),
                error: None,
                arguments: None,
                arguments_text: None,
                result_text: None,
            })
            .await?;
        logs.push(t0.elapsed());
    }
    store.close().await;
    println!(
        "{}",
        json!({"backend": url.split(':').next(), "create": summary(creates), "call_log": summary(logs)})
    );
    Ok(())
}
