//! The call log off the answers' path (issue 24): calls queue their rows and one writer
//! commits them in batches. Every call is still logged, on SQLite and PostgreSQL (N calls, then
//! N rows and N counted in their hour within a second); a graceful shutdown writes the open
//! batch (SIGTERM on HTTP, EOF on stdio); a full queue drops rows, never calls, and
//! `omniforge_call_log_dropped_total` counts them.
//!
//! The real binary, real stores (a SQLite file; a database of the run's PostgreSQL cluster),
//! read back through `omniforge-store`. The shutdown and queue tests make the batch wait an hour
//! (`--call-log-batch-wait 1h`), so nothing is written before the shutdown's flush: what the
//! tests see then is decided by the code, not by timing.

use std::path::Path;
use std::time::{Duration, Instant};

use omniforge_store::{
    Backend, CallFilter, DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_LOG_MAX_ROWS,
    DEFAULT_CALL_STATS_MAX_AGE, DEFAULT_CHANGE_LOG_MAX_ROWS, DEFAULT_MAX_READERS, PgEnv,
    StoreConfig,
};
use serde_json::json;

use crate::support::{
    self, HttpClient, Serve, StdioServer, cluster, eventually, http_client, init_stdio,
};

/// The built-in every test calls: cheap, and logged like any tool.
const TOOL: &str = "omniforge_instructions";

/// Opens the store at `url` (`sqlite:PATH` or `postgres://…`), as the CLI would.
async fn open(url: &str) -> std::sync::Arc<dyn Backend> {
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: DEFAULT_CALL_LOG_MAX_ROWS,
        max_readers: DEFAULT_MAX_READERS,
        change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
        keyring: None,
    };
    omniforge_store::open(url, &PgEnv::from_vars([]), &config)
        .await
        .unwrap()
}

/// The calls of [`TOOL`] in the log, and the calls its hours count.
async fn logged(url: &str) -> (usize, u64) {
    let store = open(url).await;
    let filter = CallFilter {
        tool: Some(TOOL.into()),
        limit: 10_000,
        ..CallFilter::default()
    };
    let rows = store.calls(&filter).await.unwrap().len();
    let counted = store
        .call_activity(0)
        .await
        .unwrap()
        .iter()
        .filter(|a| a.tool == TOOL)
        .map(|a| a.calls)
        .sum();
    store.close().await;
    (rows, counted)
}

/// `sessions` sessions of `server` calling [`TOOL`] `each` times, concurrently; every answer
/// must be a result without `isError`.
async fn call_concurrently(url: &str, sessions: usize, each: usize) {
    let mut running = Vec::new();
    for _ in 0..sessions {
        let url = url.to_owned();
        running.push(tokio::spawn(async move {
            let mut mcp = HttpClient::open(&url).await.unwrap();
            for _ in 0..each {
                let result = mcp
                    .result("tools/call", json!({"name": TOOL, "arguments": {}}))
                    .await;
                assert_ne!(result["isError"], json!(true), "{result}");
            }
        }));
    }
    for task in running {
        task.await.unwrap();
    }
}

/// `omniforge serve` on `database` (a fresh data directory in `dir`) with `args`.
async fn serve(dir: &Path, database: &str, args: &[&str]) -> Serve {
    let data = dir.join("data");
    Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--database", database])
        .args(args)
        .start()
        .await
}

/// SIGTERM, then the exit status (which must be success).
async fn sigterm(server: &mut Serve) {
    let pid = server.pid().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = server.wait_exit(Duration::from_secs(30)).await;
    assert!(
        exit.is_some_and(|s| s.success()),
        "{exit:?}: {}",
        server.output_tail()
    );
}

/// N calls from 4 sessions, then N rows in the log and N calls in their hour within a second
/// of the last answer (polled; the writer commits a batch 20 ms after its first row).
async fn every_call_is_logged_within_a_second(database: &str, dir: &Path) {
    const SESSIONS: usize = 4;
    const EACH: usize = 50;
    let server = serve(dir, database, &[]).await;
    call_concurrently(&server.url, SESSIONS, EACH).await;
    let answered = Instant::now();
    let n = SESSIONS * EACH;
    let within = Duration::from_secs(1).saturating_sub(answered.elapsed());
    let what = format!("{n} rows, {n} counted in the hour, a second after the last answer");
    eventually(within, &what, async || {
        let seen = logged(database).await;
        if seen == (n, n as u64) {
            Ok(())
        } else {
            Err(format!("(rows, counted in the hour) {seen:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn every_call_is_logged_within_a_second_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("calls.db").display());
    every_call_is_logged_within_a_second(&url, dir.path()).await;
}

#[tokio::test]
async fn every_call_is_logged_within_a_second_postgres() {
    let db = cluster().database("calllog_all").unwrap();
    let dir = tempfile::tempdir().unwrap();
    every_call_is_logged_within_a_second(&db.url(), dir.path()).await;
}

/// With an hour's batch wait, N calls leave the log empty while the server runs (the batch is
/// open); SIGTERM writes all N before the process exits.
async fn sigterm_writes_the_open_batch(database: &str, dir: &Path) {
    let mut server = serve(dir, database, &["--call-log-batch-wait", "1h"]).await;
    call_concurrently(&server.url, 2, 15).await;
    assert_eq!(logged(database).await, (0, 0), "the batch is still open");
    sigterm(&mut server).await;
    assert_eq!(logged(database).await, (30, 30), "{}", server.output_tail());
}

#[tokio::test]
async fn sigterm_writes_the_open_batch_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("calls.db").display());
    sigterm_writes_the_open_batch(&url, dir.path()).await;
}

#[tokio::test]
async fn sigterm_writes_the_open_batch_postgres() {
    let db = cluster().database("calllog_sigterm").unwrap();
    let dir = tempfile::tempdir().unwrap();
    sigterm_writes_the_open_batch(&db.url(), dir.path()).await;
}

/// On stdio, EOF on stdin answers the calls, then writes the open batch before the exit.
#[tokio::test]
async fn the_end_of_stdin_writes_the_open_batch() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("calls.db").display());
    let mut server = StdioServer::start(&["--database", &url, "--call-log-batch-wait", "1h"]);
    init_stdio(&mut server, "2025-06-18").await.unwrap();
    const N: u64 = 25;
    for id in 1..=N {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": TOOL, "arguments": {}}});
        server.send_line(&call.to_string()).await.unwrap();
    }
    let mut answered = 0;
    while answered < N {
        let m = server
            .read_message(Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{e}: {}", server.stderr_all()));
        if m.get("id").is_some() {
            assert!(m["result"].is_object(), "{m}");
            answered += 1;
        }
    }
    assert_eq!(logged(&url).await, (0, 0), "the batch is still open");
    let exit = server.close(Duration::from_secs(30)).await;
    assert!(exit.is_some_and(|s| s.success()), "{exit:?}");
    assert_eq!(
        logged(&url).await,
        (N as usize, N),
        "{}",
        server.stderr_all()
    );
}

/// The value of the sample `line_start` (a metric name and its labels) in an OpenMetrics text.
fn sample(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
}

/// A queue of one row, under load from 4 sessions: every call is answered (no error), the
/// rows that found the queue full are dropped and counted in `/metrics`, with one warning (the
/// warning is rate-limited); the rest reach the log at shutdown, so rows + drops = calls.
#[tokio::test]
async fn a_full_queue_drops_rows_not_calls_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("calls.db").display());
    let mut server = serve(
        dir.path(),
        &url,
        &[
            "--metrics-listen",
            "127.0.0.1:0",
            "--call-log-queue",
            "1",
            "--call-log-batch-wait",
            "1h",
        ],
    )
    .await;
    let metrics_url = server.metrics_url().await;
    const N: usize = 4 * 10;
    call_concurrently(&server.url, 4, 10).await;

    let metrics = http_client().get(&metrics_url).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    let text = metrics.text().await.unwrap();
    let dropped = sample(
        &text,
        r#"omniforge_call_log_dropped_total{reason="queue_full"} "#,
    )
    .unwrap_or_else(|| panic!("no queue_full sample in\n{text}")) as usize;
    assert_eq!(
        sample(
            &text,
            r#"omniforge_call_log_dropped_total{reason="write_failed"} "#
        ),
        Some(0.0),
        "{text}"
    );
    // The writer holds the batch's first row; the queue holds one more: the rest are dropped.
    assert!((N - 2..=N).contains(&dropped), "{dropped} of {N} dropped");
    let tool_calls: f64 = text
        .lines()
        .filter(|l| l.starts_with(&format!(r#"omniforge_tool_calls_total{{tool="{TOOL}""#)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(tool_calls as usize, N, "every call was made and counted");

    sigterm(&mut server).await;
    let (rows, counted) = logged(&url).await;
    assert_eq!(rows + dropped, N, "rows {rows}, dropped {dropped}");
    assert_eq!(counted, rows as u64);
    let warnings = server.stderr().matches("call log rows dropped").count();
    assert_eq!(
        warnings,
        1,
        "one warning per 10 s: {}",
        server.output_tail()
    );
}

/// A queue of 0 rows is refused at start.
#[tokio::test]
async fn a_queue_of_no_rows_is_refused() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) =
        support::omniforge_cli(dir.path(), &["stdio", "--call-log-queue", "0"], Some("")).await;
    assert!(
        !ok && err.contains("--call-log-queue must be at least 1"),
        "{err}"
    );
}
