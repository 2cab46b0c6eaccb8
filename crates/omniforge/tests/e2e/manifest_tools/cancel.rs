//! 5. Timeout, 6. Cancellation: over the SDK, raw HTTP and the raw bridge; the upstream sees the abort.

use super::*;

/// --upstream-timeout 500ms: a 3 s Slow call fails fast, and the upstream sees the abort.
#[tokio::test]
async fn upstream_timeout_aborts_the_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (fixture, omni, mut repl) = fixture_scene(&["--upstream-timeout", "500ms"]).await;
    let reply = repl.call("fixture_slow", json!({"millis": 3000})).await;
    assert_eq!(reply["ok"], true, "fixture_slow: {reply}");
    let result = &reply["result"];
    show("fixture_slow 3000 with a 500 ms timeout", result);
    let elapsed = reply["elapsed"].as_f64().unwrap_or(f64::MAX);
    let text = text_of(result).to_lowercase();
    assert!(
        is_error(result)
            && (text.contains("deadline_exceeded")
                || text.contains("timeout")
                || text.contains("timed out")
                || text.contains("did not answer within")),
        "fixture_slow {{\"millis\":3000}} with --upstream-timeout 500ms: want isError mentioning \
         the timeout or deadline_exceeded, got {result}"
    );
    assert!(
        elapsed < 2.5,
        "the call must end soon after the 500 ms timeout, not after the 3 s sleep: took {elapsed:.2} s"
    );
    let stats = wait_stat(&mut repl, "slowAborted", 1, Duration::from_secs(5)).await;
    assert_eq!(
        stats["slowAborted"],
        1,
        "fixture_stats after the timed-out call: the upstream must have aborted the Slow call: \
         {stats}\nfixture stderr:\n{}",
        fixture.stderr.tail(3000)
    );
    assert_eq!(
        stats["slowCompleted"].as_i64().unwrap_or(0),
        0,
        "no Slow call may complete (absent = 0): {stats}"
    );
    repl.quit().await;
    eprintln!("  timed-out call took {elapsed:.3} s; stats {stats}");
    finish("upstream_timeout_aborts_the_call", started, &omni);
}

/// The Python SDK cancels a 20 s Slow call after 500 ms (notifications/cancelled): the
/// upstream request is aborted and the server keeps answering.
#[tokio::test]
async fn client_cancellation_aborts_the_upstream_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (fixture, omni, mut repl) = fixture_scene(&["--upstream-timeout", "60s"]).await;
    let reply = repl
        .cmd(json!({"op": "call_cancel", "name": "fixture_slow",
                     "args": {"millis": 20000}, "after": 0.5}))
        .await;
    assert!(
        reply["ok"] == true && reply["cancelled"] == true,
        "the client-side cancel of fixture_slow did not happen as planned: {reply}"
    );
    let stats = wait_stat(&mut repl, "slowAborted", 1, Duration::from_secs(5)).await;
    assert!(
        stats["slowStarted"] == 1 && stats["slowAborted"] == 1,
        "fixture_stats within 5 s of cancelling: the Slow call must have started and been \
         aborted upstream: {stats}\nfixture stderr:\n{}\nserver stderr:\n{}",
        fixture.stderr.tail(3000),
        omni.stderr_captured().tail(3000)
    );
    let result = repl.result("fixture_echo", json!({"text": "after"})).await;
    assert_eq!(
        result["isError"], false,
        "the next call after a cancel: {result}"
    );
    repl.quit().await;
    eprintln!("  stats after cancel: {stats}");
    finish(
        "client_cancellation_aborts_the_upstream_call",
        started,
        &omni,
    );
}

/// Over raw Streamable HTTP: notifications/cancelled (POSTed in the same session) aborts an
/// in-flight Slow call upstream while the call's own POST stream stays open, so it is the
/// notification, not a disconnect, that cancels.
#[tokio::test]
async fn raw_http_notifications_cancelled_aborts_the_upstream_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
        "--upstream-timeout",
        "60s",
    ])
    .await;
    let raw = RawHttp::open(&omni.url, None).await;

    // The call, on its own POST whose response stream we keep reading.
    let mut call = raw.client.post(&raw.url);
    for (name, value) in &raw.headers {
        call = call.header(name.as_str(), value.as_str());
    }
    let call = call.body(
        json!({"jsonrpc":"2.0","id":"slow-1","method":"tools/call",
               "params":{"name":"fixture_slow","arguments":{"millis":20000}}})
        .to_string(),
    );
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let held = tokio::spawn(async move {
        let mut body = Vec::new();
        let mut resp = match call.send().await {
            Ok(resp) => resp,
            Err(e) => return (None, format!("send failed: {e}").into_bytes()),
        };
        let status = resp.status().as_u16();
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                chunk = resp.chunk() => match chunk {
                    Ok(Some(c)) => body.extend_from_slice(&c),
                    _ => break,
                },
            }
        }
        (Some(status), body)
    });
    // The Slow call is in flight upstream.
    let mut id = 10;
    raw_wait_stat(&raw, &mut id, "slowStarted", 1, Duration::from_secs(10)).await;
    assert!(
        !held.is_finished(),
        "the tools/call POST stream for a 20 s Slow call ended before any cancel: {:?}",
        held.await.unwrap()
    );
    let reply = raw
        .post(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":"slow-1","reason":"e2e cancel"}}))
        .await;
    assert_eq!(reply.status, 202, "POST notifications/cancelled: {reply:?}");

    let stats = raw_wait_stat(&raw, &mut id, "slowAborted", 1, Duration::from_secs(5)).await;
    let still_open = !held.is_finished();
    let _ = stop_tx.send(());
    let (status, body) = held.await.unwrap();
    assert!(
        stats["slowStarted"] == 1 && stats["slowAborted"] == 1,
        "fixture_stats within 5 s of POSTing notifications/cancelled for `slow-1` (its POST \
         stream was open when the cancel was sent): the Slow call must have been aborted upstream: \
         {stats}\nthe call's POST: HTTP {status:?} {:?}\nserver stderr:\n{}\nfixture stderr:\n{}",
        String::from_utf8_lossy(&body),
        omni.stderr_captured().tail(3000),
        fixture.stderr.tail(3000)
    );
    let m = raw
        .request(json!({"jsonrpc":"2.0","id":99,"method":"tools/call",
                        "params":{"name":"fixture_echo","arguments":{"text":"after"}}}))
        .await;
    assert_eq!(
        m["result"]["isError"], false,
        "the next call after a cancel: {m}"
    );
    eprintln!(
        "  stats {stats}; the call's POST stream still open after the abort: {still_open}; \
         it carried HTTP {status:?} {:?}",
        String::from_utf8_lossy(&body)
    );
    finish(
        "raw_http_notifications_cancelled_aborts_the_upstream_call",
        started,
        &omni,
    );
}

/// Over raw stdio to `omniforge bridge`: notifications/cancelled for an in-flight Slow call
/// aborts it upstream, and the bridge answers the next call.
#[tokio::test]
async fn bridge_raw_stdio_cancellation() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let mut bridge = RawBridge::start(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--addr",
        &fixture.url,
        "--upstream-timeout",
        "60s",
    ])
    .await;
    bridge.initialize().await;
    bridge
        .send(json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                     "params":{"name":"fixture_slow","arguments":{"millis":20000}}}))
        .await;
    let mut id = 100;
    let mut late = Vec::new();
    // The Slow call is in flight upstream; then it is cancelled.
    bridge
        .wait_stat(&mut id, &mut late, "slowStarted", Duration::from_secs(10))
        .await;
    bridge
        .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":7,"reason":"e2e cancel"}}))
        .await;
    let stats = bridge
        .wait_stat(&mut id, &mut late, "slowAborted", Duration::from_secs(5))
        .await;
    assert!(
        stats["slowStarted"] == 1 && stats["slowAborted"] == 1,
        "bridge: fixture_stats within 5 s of notifications/cancelled for id 7: the Slow call \
         must have been aborted upstream: {stats}; bridge stderr:\n{}\nfixture stderr:\n{}",
        bridge.stderr.tail(4000),
        fixture.stderr.tail(3000)
    );
    bridge
        .send(json!({"jsonrpc":"2.0","id":200,"method":"tools/call",
                     "params":{"name":"fixture_echo","arguments":{"text":"after"}}}))
        .await;
    let (m, others) = bridge.response(200, Duration::from_secs(10)).await;
    late.extend(others);
    assert_eq!(
        m["result"]["isError"], false,
        "the next call after a cancel: {m}"
    );
    eprintln!("  bridge after cancel: stats {stats}; messages for other ids meanwhile: {late:?}");
    let panics = panic_lines(&bridge.stderr.text());
    assert!(panics.is_empty(), "the bridge panicked: {panics:?}");
    eprintln!(
        "manifest_tools::bridge_raw_stdio_cancellation: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
