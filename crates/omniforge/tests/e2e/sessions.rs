//! HTTP session lifetime and limits against the real binary (issue 11, finding 4): expired
//! sessions are freed, memory goes back to the system, and `--max-sessions` refuses new
//! sessions with 503 while existing ones go on. (Calls longer than the idle timeout and
//! same-id POSTs need work in flight: they are in `manifest_tools.rs`, on the Connect fixture.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    self, Serve, eventually, http_client, http_send, initialize_request, post_headers,
};

/// `omniforge serve --insecure-no-auth --data-dir <temp> ARGS...`.
async fn serve(args: &[&str]) -> (Serve, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut command = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--insecure-no-auth"])
        .args(args);
    support::no_proxy(command.cmd());
    (command.start().await, dir)
}

/// The server's resident set, in KiB (`VmRSS` of `/proc/PID/status`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// `initialize` then `notifications/initialized`; the session id, or the HTTP status and
/// body of a refused `initialize`.
async fn open(client: &reqwest::Client, url: &str) -> Result<String, (u16, Value)> {
    let body = serde_json::to_vec(&initialize_request(1, "2025-11-25")).unwrap();
    let reply = http_send(
        client,
        "POST",
        url,
        &post_headers(None, None),
        Some(body),
        &[json!(1)],
    )
    .await
    .unwrap();
    if reply.status != 200 {
        let body = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        return Err((reply.status, body));
    }
    let id = reply.header("mcp-session-id").unwrap().to_owned();
    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
    let headers = post_headers(Some(&id), Some("2025-11-25"));
    let reply = http_send(client, "POST", url, &headers, Some(note), &[])
        .await
        .unwrap();
    assert_eq!(reply.status, 202, "notifications/initialized: {reply:?}");
    Ok(id)
}

async fn live_sessions(client: &reqwest::Client, base: &str) -> u64 {
    let health: Value = client
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    health["sessions"].as_u64().unwrap()
}

/// 5,000 sessions opened (32 at a time) and left idle expire: `/healthz` counts 0 afterwards
/// and the server's RSS comes back within 20 MB of where it started.
#[tokio::test]
async fn expired_sessions_are_freed_and_memory_returns() {
    const SESSIONS: usize = 5000;
    const WORKERS: usize = 32;
    let started = Instant::now();
    // Long enough that the sessions are live together (opening them takes 10-40 s here).
    let (server, _dir) = serve(&["--session-idle-timeout", "30s", "--max-sessions", "10000"]).await;
    let client = http_client();
    // Warm up (allocator arenas, thread pool) before the baseline.
    for _ in 0..WORKERS {
        open(&client, &server.url).await.unwrap();
    }
    let before = rss_kib(server.pid());
    let url = Arc::new(server.url.clone());
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move {
                for _ in 0..SESSIONS / WORKERS {
                    open(&client, &url).await.unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let peak = rss_kib(server.pid());
    let live_at_peak = live_sessions(&client, &server.base).await;
    assert!(
        live_at_peak as usize >= SESSIONS / 2,
        "only {live_at_peak} sessions were live together: opening {SESSIONS} took longer than \
         the idle timeout, so this run does not show their memory is freed"
    );
    eventually(
        Duration::from_secs(60),
        "/healthz counting 0 live sessions once all expired",
        async || match live_sessions(&client, &server.base).await {
            0 => Ok(()),
            live => Err(format!("{live} live\n{}", server.output_tail())),
        },
    )
    .await;
    // The expiry pass trims the heap right after closing.
    let after = eventually(
        Duration::from_secs(5),
        "RSS back within 20 MB of the start",
        async || {
            let after = rss_kib(server.pid());
            if after <= before + 20 * 1024 {
                Ok(after)
            } else {
                Err(format!(
                    "{before} KiB before, {peak} KiB at the peak, {after} KiB after expiry"
                ))
            }
        },
    )
    .await;
    eprintln!(
        "sessions: {live_at_peak} live after opening; RSS {before} KiB before, {peak} KiB at the \
         peak, {after} KiB after expiry ({:+} KiB)",
        after as i64 - before as i64
    );
    eprintln!(
        "sessions::expired_sessions_are_freed_and_memory_returns: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// Past `--max-sessions` a new session gets 503 with a JSON-RPC error body; the sessions that
/// exist keep working, and once one is deleted a new one opens.
#[tokio::test]
async fn max_sessions_refuses_new_sessions_and_keeps_existing_ones() {
    let (server, _dir) = serve(&["--max-sessions", "2"]).await;
    let client = http_client();
    let first = open(&client, &server.url).await.unwrap();
    let _second = open(&client, &server.url).await.unwrap();
    let (status, body) = open(&client, &server.url).await.unwrap_err();
    assert_eq!(status, 503, "a third session past --max-sessions 2: {body}");
    assert!(
        body["jsonrpc"] == "2.0" && body["error"]["code"].is_i64() && body["id"] == 1,
        "the 503 must carry a JSON-RPC error body for the initialize: {body}"
    );
    let headers = post_headers(Some(&first), Some("2025-11-25"));
    let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#.to_vec();
    let reply = http_send(
        &client,
        "POST",
        &server.url,
        &headers,
        Some(ping),
        &[json!(7)],
    )
    .await
    .unwrap();
    assert!(
        support::answered(&reply.messages, &json!(7)),
        "an existing session must go on past the cap: {reply:?}"
    );
    let reply = http_send(&client, "DELETE", &server.url, &headers, None, &[])
        .await
        .unwrap();
    assert!(reply.status < 300, "DELETE: {reply:?}");
    open(&client, &server.url)
        .await
        .expect("a session opens again once one is deleted");
}
