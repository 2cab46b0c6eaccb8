//! `GET /metrics` (issue 16): who may read it, `--metrics-listen`, and counters that move with
//! real calls, parsed by the official Prometheus Python client (`support/py/metrics.py`, which
//! picks `prometheus_client.openmetrics.parser` for the OpenMetrics text the server sends).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    Fixture, Serve, add_tools, bearer_post as post, bearer_session as open_session,
    call_message as call, data_home, deps, eventually, fixture_manifest, http_client,
    initialize_request, param, py_driver, python_driver, require, sleeper_tool, start_task,
    text_of, until_terminal, uv,
};

const TOKENS: &str = "alice s3cret-call-7f2 tools:call\nroot s3cret-admin-9c4 admin\n\
                      writer s3cret-write-2b8 tools:write\n";
const ADMIN: &str = "s3cret-admin-9c4";
const WRITER: &str = "s3cret-write-2b8";

/// `support/py/metrics.py URL [--bearer TOKEN]`: status, content type and parsed families.
async fn scrape(url: &str, bearer: Option<&str>) -> Value {
    let python = deps().join("py-obs/bin/python");
    require(std::slice::from_ref(&python));
    let mut cmd = python_driver(&python, &py_driver("metrics.py"));
    cmd.arg(url);
    if let Some(token) = bearer {
        cmd.args(["--bearer", token]);
    }
    let output = cmd.output().await.unwrap();
    assert!(
        output.status.success(),
        "metrics driver failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The sum of the samples called `name` whose labels include `labels` (0 when none).
fn value(report: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    let families = report["families"].as_object().expect("parsed families");
    families
        .values()
        .flat_map(|f| f["samples"].as_array().into_iter().flatten())
        .filter(|s| s["name"] == name)
        .filter(|s| labels.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap_or(0.0))
        .sum()
}

/// Every `tool` label value of `omniforge_tool_calls_total`.
fn tool_labels(report: &Value) -> Vec<String> {
    report["families"]["omniforge_tool_calls"]["samples"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["labels"]["tool"].as_str().map(str::to_owned))
        .collect()
}

/// `omniforge serve` with the two tokens, `--metrics-listen 127.0.0.1:0` and `extra`; the
/// unauthenticated metrics URL from its log.
async fn serve(data: &std::path::Path, extra: &[&str]) -> (Serve, String) {
    let tokens = data.join("tokens");
    std::fs::write(&tokens, TOKENS).unwrap();
    let server = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--uv".as_ref(), uv().as_os_str()])
        .args(&["--token-file".as_ref(), tokens.as_os_str()])
        .args(&["--metrics-listen", "127.0.0.1:0"])
        .args(extra)
        .start()
        .await;
    let url = server.metrics_url().await;
    (server, url)
}

#[tokio::test]
async fn metrics_need_admin_on_the_mcp_listener_and_metrics_listen_serves_without_auth() {
    crate::support::needs_deps!();
    let (_dir, data) = data_home();
    let (server, listen_url) = serve(&data, &[]).await;
    let on_mcp = format!("{}/metrics", server.base);

    let anonymous = scrape(&on_mcp, None).await;
    assert_eq!(anonymous["status"], 401, "{anonymous}");
    let caller = scrape(&on_mcp, Some("s3cret-call-7f2")).await;
    assert_eq!(caller["status"], 403, "{caller}");
    let challenge = caller["www_authenticate"].as_str().unwrap_or_default();
    assert_eq!(
        param(challenge, "error"),
        Some("insufficient_scope"),
        "{challenge}"
    );

    let admin = scrape(&on_mcp, Some(ADMIN)).await;
    assert_eq!(admin["status"], 200, "{admin}");
    assert_eq!(admin["format"], "openmetrics", "{admin}");
    assert_eq!(value(&admin, "omniforge_build_info", &[]), 1.0);
    assert!(
        value(
            &admin,
            "omniforge_catalog_entries",
            &[("kind", "tool"), ("source", "builtin")]
        ) > 0.0,
        "{admin}"
    );

    let open = scrape(&listen_url, None).await;
    assert_eq!(open["status"], 200, "{open}");
    assert_eq!(value(&open, "omniforge_build_info", &[]), 1.0, "{open}");

    // No token value reaches the metrics (the refused scrapes above presented two).
    let text = http_client()
        .get(&listen_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for token in ["s3cret-call-7f2", ADMIN] {
        assert!(!text.contains(token), "a token in the metrics:\n{text}");
    }
}

/// Calls, a tool-level error, a JSON-RPC error, an environment build and a script killed at
/// its timeout, each seen in the counters; with `--metrics-max-tools 3`, tools past the first
/// three labels count as `other`, and a name that is no tool never becomes a label; under
/// `--require-approval` a writer's pending tool, called by its author while a label is still
/// free, never becomes one.
#[tokio::test]
async fn counters_move_with_calls_errors_and_a_kill() {
    crate::support::needs_deps!();
    let (_dir, data) = data_home();
    let (server, url) = serve(&data, &["--metrics-max-tools", "3", "--require-approval"]).await;
    let session = open_session(&server.url, ADMIN).await;
    let before = scrape(&url, None).await;
    let send = async |message: Value| {
        let reply = post(&server.url, Some(ADMIN), Some(&session), message).await;
        assert_eq!(reply.status, 200, "{:?}", reply.messages);
        reply.messages[0].clone()
    };

    let answer = send(call(2, "omniforge_instructions", json!({}))).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let create = json!({"name": "sleepy", "description": "Sleeps past its timeout.", "timeout_s": 1,
                        "code": "import time\ntime.sleep(30)\n"});
    let answer = send(call(3, "omniforge_create_tool", create)).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    // A writer's tool waits for approval; its author may call it.
    let writer = open_session(&server.url, WRITER).await;
    let pending = json!({"name": "waiting_tool", "description": "Pending approval.",
                         "code": "print('pending')\n"});
    for (id, message) in [
        (7, call(7, "omniforge_create_tool", pending)),
        (8, call(8, "waiting_tool", json!({}))),
    ] {
        let reply = post(&server.url, Some(WRITER), Some(&writer), message).await;
        assert_eq!(reply.status, 200, "{id}: {:?}", reply.messages);
        assert_ne!(
            reply.messages[0]["result"]["isError"], true,
            "{id}: {:?}",
            reply.messages
        );
    }
    // The third label goes to a built-in (the pending tool did not take it); sleepy, past
    // the cap, counts as other.
    let answer = send(call(9, "omniforge_get_tool", json!({"name": "sleepy"}))).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let answer = send(call(4, "sleepy", json!({}))).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(text_of(&answer["result"]).contains("timeout"), "{answer}");
    let answer = send(call(5, "no_such_tool_4711", json!({}))).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let read = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read",
                      "params": {"uri": "omniforge://nothing/here"}});
    let answer = send(read).await;
    assert!(answer["error"].is_object(), "{answer}");

    let after = scrape(&url, None).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    let calls = "omniforge_tool_calls_total";
    let checks = [
        (
            delta(
                calls,
                &[
                    ("tool", "omniforge_get_tool"),
                    ("source", "builtin"),
                    ("outcome", "ok"),
                ],
            ),
            1.0,
            "get_tool took the third label",
        ),
        (
            delta(
                calls,
                &[
                    ("tool", "omniforge_instructions"),
                    ("source", "builtin"),
                    ("outcome", "ok"),
                ],
            ),
            1.0,
            "instructions ok",
        ),
        (
            delta(
                calls,
                &[
                    ("tool", "omniforge_create_tool"),
                    ("source", "builtin"),
                    ("outcome", "ok"),
                ],
            ),
            2.0,
            "create_tool ok (the admin's and the writer's)",
        ),
        (
            delta(
                calls,
                &[
                    ("tool", "other"),
                    ("source", "stored"),
                    ("outcome", "tool_error"),
                ],
            ),
            2.0,
            "sleepy (past the cap) and the unknown name, as other",
        ),
        (
            delta(
                calls,
                &[("tool", "other"), ("source", "stored"), ("outcome", "ok")],
            ),
            1.0,
            "the pending tool called by its author, as other",
        ),
        (
            delta("omniforge_sandbox_kills_total", &[("cause", "timeout")]),
            1.0,
            "the timeout kill",
        ),
        (
            delta(
                "omniforge_requests_total",
                &[("method", "tools/call"), ("outcome", "ok")],
            ),
            5.0,
            "tools/call ok requests",
        ),
        (
            delta(
                "omniforge_requests_total",
                &[("method", "tools/call"), ("outcome", "error")],
            ),
            2.0,
            "tools/call error requests (isError)",
        ),
        (
            delta(
                "omniforge_requests_total",
                &[("method", "resources/read"), ("outcome", "error")],
            ),
            1.0,
            "resources/read error",
        ),
        (
            delta(
                "mcp_server_operation_duration_seconds_count",
                &[
                    ("mcp_method_name", "tools/call"),
                    ("error_type", "tool_error"),
                ],
            ),
            2.0,
            "operation duration of isError calls",
        ),
        (
            delta(
                "omniforge_tool_call_duration_seconds_count",
                &[("source", "builtin")],
            ),
            4.0,
            "built-in call latencies",
        ),
        (
            delta(
                "omniforge_environment_build_duration_seconds_count",
                &[("outcome", "ok")],
            ),
            2.0,
            "the environment builds (sleepy's, the pending tool's)",
        ),
        (
            value(
                &after,
                "omniforge_catalog_entries",
                &[("kind", "tool"), ("source", "stored")],
            ),
            1.0,
            "stored tools in the catalog",
        ),
        (
            value(&after, "omniforge_sessions", &[]),
            2.0,
            "live sessions",
        ),
        (
            value(&after, "omniforge_run_queue_depth", &[]),
            0.0,
            "run queue",
        ),
    ];
    let wrong: Vec<String> = checks
        .iter()
        .filter(|(got, want, _)| got != want)
        .map(|(got, want, what)| format!("{what}: got {got}, want {want}"))
        .collect();
    assert!(wrong.is_empty(), "\n  - {}\n{after}", wrong.join("\n  - "));
    let labels = tool_labels(&after);
    assert!(
        !labels
            .iter()
            .any(|l| l == "sleepy" || l == "no_such_tool_4711" || l == "waiting_tool"),
        "labels past the cap, of no tool, or of a pending tool: {labels:?}"
    );
}

/// A script whose processes together pass the call's memory limit (each under it, so only
/// the run's memory cgroup stops them) moves `omniforge_sandbox_kills_total{cause="memory"}`,
/// and one that forks until `pids.max` refuses one moves `cause="pids"`; each result
/// says which limit it hit.
#[tokio::test]
async fn kills_by_memory_and_pids_are_counted() {
    crate::support::needs_deps!();
    let (_dir, data) = data_home();
    let (server, url) = serve(&data, &["--memory-limit-bytes", "268435456"]).await;
    let session = open_session(&server.url, ADMIN).await;
    let send = async |message: Value| {
        let reply = post(&server.url, Some(ADMIN), Some(&session), message).await;
        assert_eq!(reply.status, 200, "{:?}", reply.messages);
        reply.messages[0].clone()
    };
    let hog = "import os, time\nchildren = []\nfor _ in range(4):\n    pid = os.fork()\n    \
               if pid == 0:\n        block = b'x' * (100 << 20)\n        time.sleep(2)\n        \
               os._exit(0)\n    children.append(pid)\ncodes = [os.waitpid(p, 0)[1] for p in children]\n\
               print('killed', sum(1 for c in codes if os.WIFSIGNALED(c)))\n";
    // Forks until `pids.max` refuses one; the children are killed with the run's cgroup.
    let forks = "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            \
                 time.sleep(30)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n\
                 print('forks', n)\n";
    for (id, name, code) in [(2, "hog", hog), (3, "forks", forks)] {
        let create = json!({"name": name, "description": "Passes a limit.", "code": code});
        let answer = send(call(id, "omniforge_create_tool", create)).await;
        assert_ne!(answer["result"]["isError"], true, "{answer}");
    }
    let before = scrape(&url, None).await;
    let answer = send(call(4, "hog", json!({}))).await;
    let text = text_of(&answer["result"]);
    assert!(
        text.contains("[memory limit: a process was killed]"),
        "{answer}"
    );
    assert!(!text.starts_with("killed 0"), "{answer}");
    let answer = send(call(5, "forks", json!({}))).await;
    let text = text_of(&answer["result"]);
    assert!(
        text.contains("[process limit: a fork was refused]"),
        "{answer}"
    );
    let after = scrape(&url, None).await;
    let kills = |report: &Value, cause: &str| {
        value(report, "omniforge_sandbox_kills_total", &[("cause", cause)])
    };
    for (cause, want) in [("memory", 1.0), ("pids", 1.0), ("timeout", 0.0)] {
        assert_eq!(
            kills(&after, cause) - kills(&before, cause),
            want,
            "{cause} kills:\n{after}"
        );
    }
}

/// Requests the HTTP front refuses before any handler sees them count in
/// `omniforge_requests_total{method="unknown"}` by outcome: no token (401), another token's
/// session (403), an unknown session (404), a body over `--max-body-bytes` (413), a body that
/// is no JSON (400), a new session past `--max-sessions` (503, busy). A manifest tool's
/// upstream call is timed under its service's `upstream` label.
#[tokio::test]
async fn front_refusals_and_upstream_calls_are_counted() {
    crate::support::needs_deps!();
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let (_dir, data) = data_home();
    let (server, url) = serve(
        &data,
        &[
            "--max-body-bytes",
            "4096",
            "--max-sessions",
            "1",
            "--manifest",
            manifest.to_str().unwrap(),
            "--upstream",
            &fixture.url,
        ],
    )
    .await;
    let session = open_session(&server.url, ADMIN).await;
    let before = scrape(&url, None).await;
    let answer = post(
        &server.url,
        Some(ADMIN),
        Some(&session),
        call(2, "fixture_echo", json!({"text": "hi"})),
    )
    .await;
    assert_ne!(
        answer.messages[0]["result"]["isError"], true,
        "{:?}",
        answer.messages
    );

    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string();
    let big = json!({"jsonrpc": "2.0", "id": 4, "method": "ping",
                     "params": {"pad": "x".repeat(8192)}})
    .to_string();
    let init = initialize_request(5, "2025-11-25").to_string();
    let cases: [(Option<&str>, Option<&str>, String, u16); 6] = [
        (None, Some(session.as_str()), ping.clone(), 401),
        (Some(WRITER), Some(session.as_str()), ping.clone(), 403),
        (Some(ADMIN), Some("no-such-session-4711"), ping.clone(), 404),
        (Some(ADMIN), Some(session.as_str()), big, 413),
        (
            Some(ADMIN),
            Some(session.as_str()),
            "{not json".to_owned(),
            400,
        ),
        (Some(ADMIN), None, init, 503),
    ];
    for (token, session, body, want) in cases {
        let mut request = http_client()
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        let status = request.send().await.unwrap().status().as_u16();
        assert_eq!(status, want, "{token:?} {session:?}");
    }

    let after = scrape(&url, None).await;
    let delta = |name: &str, labels: &[(&str, &str)]| {
        value(&after, name, labels) - value(&before, name, labels)
    };
    let mut wrong = Vec::new();
    for outcome in [
        "unauthorized",
        "forbidden",
        "unknown_session",
        "too_large",
        "bad_request",
        "busy",
    ] {
        let got = delta(
            "omniforge_requests_total",
            &[("method", "unknown"), ("outcome", outcome)],
        );
        if got != 1.0 {
            wrong.push(format!("{outcome}: got {got}, want 1"));
        }
    }
    let upstream = delta(
        "omniforge_upstream_request_duration_seconds_count",
        &[("upstream", "fixture.v1.FixtureService"), ("outcome", "ok")],
    );
    if upstream != 1.0 {
        wrong.push(format!(
            "upstream fixture.v1.FixtureService ok: got {upstream}, want 1"
        ));
    }
    assert!(wrong.is_empty(), "\n  - {}\n{after}", wrong.join("\n  - "));
}

/// A task started through `tools/call` with the Tasks extension moves the task gauges, read
/// from the store at each scrape: `working` while its script runs, `completed` after.
#[tokio::test]
async fn the_task_gauges_follow_a_task_from_working_to_completed() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_dir, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let (server, url) = serve(&data, &[]).await;
    let before = scrape(&url, None).await;
    for status in [
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
    ] {
        assert_eq!(
            value(&before, "omniforge_tasks", &[("status", status)]),
            0.0,
            "{status} before any task: {before}"
        );
    }
    let task_id = start_task(&server.url, Some(ADMIN), "sleeper", json!({"seconds": 3})).await;
    let running = scrape(&url, None).await;
    assert_eq!(
        value(&running, "omniforge_tasks", &[("status", "working")]),
        1.0,
        "{running}"
    );
    let done = until_terminal(&server.url, Some(ADMIN), &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let after = scrape(&url, None).await;
    for (status, want) in [("working", 0.0), ("completed", 1.0)] {
        assert_eq!(
            value(&after, "omniforge_tasks", &[("status", status)]),
            want,
            "{status} after the task: {after}"
        );
    }
}

/// The value of `omniforge_open_streams{kind}` in a fresh scrape.
async fn open_streams(url: &str, kind: &str) -> f64 {
    value(
        &scrape(url, None).await,
        "omniforge_open_streams",
        &[("kind", kind)],
    )
}

/// A session's GET stream counts in `omniforge_open_streams{kind="get"}` while it is open and
/// stops counting when the client closes it.
#[tokio::test]
async fn an_open_get_stream_is_counted_until_the_client_closes_it() {
    crate::support::needs_deps!();
    let (_dir, data) = data_home();
    let (server, url) = serve(&data, &[]).await;
    let session = open_session(&server.url, ADMIN).await;
    assert_eq!(open_streams(&url, "get").await, 0.0);
    let stream = http_client()
        .get(&server.url)
        .bearer_auth(ADMIN)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert!(stream.status().is_success(), "{}", stream.status());
    assert_eq!(open_streams(&url, "get").await, 1.0, "the open GET stream");
    drop(stream);
    // The server notices the closed connection at its next write or poll of the body.
    eventually(
        Duration::from_secs(5),
        "the closed GET stream no longer counted",
        async || match open_streams(&url, "get").await {
            0.0 => Ok(()),
            open => Err(format!("omniforge_open_streams{{kind=\"get\"}} = {open}")),
        },
    )
    .await;
}
