//! Graceful shutdown: SIGTERM to `serve` and `stdio`, EOF on stdin.

use super::*;

/// Initializes a 2025-11-25 session at `url` (with `notifications/initialized`); its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let reply = post(
        client,
        url,
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    answer(&reply, V2025, "initialize", 1);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let reply = post(
        client,
        url,
        &post_headers(Some(&session), Some(V2025)),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(reply.status, 202);
    session
}

/// SIGTERM to `serve` with a session's GET stream open: exit status 0 within the grace
/// period (2 s) plus 5 s.
#[tokio::test]
async fn sigterm_serve_with_open_get_stream_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve_in(&dir, "127.0.0.1:0", &["--shutdown-grace", "2s"]).await;
    let client = http_client();
    let session = open_session(&client, &server.url).await;
    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::GET,
        &server.url,
        &get_headers(&session, V2025),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let _stream = stream.unwrap_or_else(|body| panic!("GET is not an SSE stream: {body}"));
    // The server is up and answering before the signal.
    let health = http_send(
        &client,
        "GET",
        &format!("{}/healthz", server.base),
        &[],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(health.status, 200);

    let sent = Instant::now();
    server.sigterm();
    let limit = Duration::from_secs(2 + 5);
    let status = server.wait_exit(limit).await.unwrap_or_else(|| {
        panic!(
            "still running {limit:?} after SIGTERM; stderr:\n{}",
            server.stderr()
        )
    });
    eprintln!(
        "serve exited {:?} after SIGTERM with {status}",
        sent.elapsed()
    );
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        server.stderr()
    );
}

/// SIGTERM to `serve` while a tool call runs: the call finishes inside the grace period and
/// its answer still reaches the client on the POST's stream before the server exits.
#[tokio::test]
async fn sigterm_serve_delivers_a_call_that_finishes_within_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = serve_in(&dir, "127.0.0.1:0", &["--shutdown-grace", "30s"]).await;
    let client = http_client();
    let session = open_session(&client, &server.url).await;
    let headers = post_headers(Some(&session), Some(V2025));
    let code = "import time, omniforge\nomniforge.progress(1, 2, 'asleep')\ntime.sleep(3)\nprint('awake')\n";
    // The environment build may take a while on a loaded machine: read the stream, not a body.
    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        &server.url,
        &headers,
        Some(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "omniforge_create_tool",
            "arguments": {"name": "nap", "description": "Sleeps 3 s.", "code": code}}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let (created, _) = stream
        .unwrap_or_else(|body| panic!("create is not an SSE stream: {body}"))
        .wait_for(Duration::from_secs(300), |m| m["id"] == json!(2))
        .await
        .unwrap_or_else(|e| panic!("no answer to create: {e}"));
    assert_ne!(created["result"]["isError"], json!(true), "{created}");

    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        &server.url,
        &headers,
        Some(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "nap", "arguments": {}, "_meta": {"progressToken": "nap"}}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let mut stream = stream.unwrap_or_else(|body| panic!("the call is not an SSE stream: {body}"));
    // The script is running once its progress arrives: only then the signal.
    stream
        .wait_for(Duration::from_secs(60), |m| {
            m["method"] == json!("notifications/progress")
        })
        .await
        .unwrap_or_else(|e| panic!("no progress from the call: {e}"));
    let sent = Instant::now();
    server.sigterm();
    let (done, _) = stream
        .wait_for(Duration::from_secs(30), |m| m["id"] == json!(3))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the call's answer was lost after SIGTERM: {e}; stderr:\n{}",
                server.stderr()
            )
        });
    assert_ne!(done["result"]["isError"], json!(true), "{done}");
    assert!(done["result"].to_string().contains("awake"), "{done}");
    let status = server
        .wait_exit(Duration::from_secs(30))
        .await
        .expect("serve still running after the call was answered");
    eprintln!("answered and exited {:?} after SIGTERM", sent.elapsed());
    assert!(status.success(), "exit status {status}");
}

/// stdin closed while a tool call runs: the call finishes, its answer is written to stdout,
/// then the server exits 0 (EOF is how a stdio client says "no more requests", not "drop the
/// calls I am waiting for").
#[tokio::test]
async fn stdio_eof_answers_the_calls_in_flight_before_exiting() {
    let mut server = StdioServer::start(&[]);
    init_stdio(&mut server, V2025).await.expect("initialize");
    let code = "import time, omniforge\nomniforge.progress(1, 2, 'asleep')\ntime.sleep(3)\nprint('awake')\n";
    let create = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "omniforge_create_tool",
        "arguments": {"name": "nap", "description": "Sleeps 3 s.", "code": code}}});
    server.send_line(&create.to_string()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let created = loop {
        let m = server
            .read_message(deadline.saturating_duration_since(Instant::now()))
            .await
            .unwrap_or_else(|e| panic!("no answer to create: {e}"));
        if m["id"] == json!(2) {
            break m;
        }
    };
    assert_ne!(created["result"]["isError"], json!(true), "{created}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "nap", "arguments": {}, "_meta": {"progressToken": "nap"}}});
    server.send_line(&call.to_string()).await.unwrap();
    loop {
        let m = server
            .read_message(Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("no progress from the call: {e}"));
        if m["method"] == json!("notifications/progress") {
            break;
        }
    }
    let status = server
        .close(Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("still running after EOF: {}", server.stderr_text()));
    let out = String::from_utf8_lossy(&server.stdout_bytes()).into_owned();
    let answer = out
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|m| m["id"] == json!(3))
        .unwrap_or_else(|| {
            panic!(
                "the call's answer was lost at EOF; stdout:\n{out}\nstderr:\n{}",
                server.stderr_text()
            )
        });
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    assert!(answer["result"].to_string().contains("awake"), "{answer}");
    assert!(status.success(), "exit status {status}");
}

/// SIGTERM to `stdio` (stdin still open, session initialized): exits promptly with status 0.
#[tokio::test]
async fn sigterm_stdio_exits_promptly() {
    let mut server = StdioServer::start(&[]);
    server
        .send_line(&initialize_request(0, V2025).to_string())
        .await
        .unwrap();
    let answer = server
        .read_message(REPLY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("no initialize answer: {e}"));
    assert_valid(V2025, Some("initialize"), std::slice::from_ref(&answer));
    server
        .send_line("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}")
        .await
        .unwrap();

    let sent = Instant::now();
    server.sigterm();
    let limit = Duration::from_secs(5);
    let status = server.wait_exit(limit).await.unwrap_or_else(|| {
        panic!(
            "stdio still running {limit:?} after SIGTERM (stdin open); stderr:\n{}",
            server.stderr_all()
        )
    });
    eprintln!(
        "stdio exited {:?} after SIGTERM with {status}",
        sent.elapsed()
    );
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        server.stderr_all()
    );
}
