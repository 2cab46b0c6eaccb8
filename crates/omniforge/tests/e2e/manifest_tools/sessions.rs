//! Sessions and request ids: calls longer than the idle timeout, one id on concurrent POSTs, the upstream's size cap and redirects.

use super::*;

/// `omniforge serve` with the fixture's manifest plus `args`.
async fn fixture_omni(fixture: &Fixture, args: &[&str]) -> Serve {
    let manifest = fixture_manifest();
    let mut all = vec![
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ];
    all.extend_from_slice(args);
    serve(&all).await
}

/// A Slow call of 3 s on a session whose idle timeout is 1 s, with no other traffic, ends
/// with its result; the session lives on after it; once idle for the timeout it is gone and
/// its id gets 404 with a JSON-RPC body (never 500).
#[tokio::test]
async fn a_call_longer_than_the_idle_timeout_keeps_its_session() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let omni = fixture_omni(&fixture, &["--session-idle-timeout", "1s"]).await;
    let raw = RawHttp::open(&omni.url, None).await;
    let m = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                        "params":{"name":"fixture_slow","arguments":{"millis":3000}}}))
        .await;
    assert_eq!(
        m["result"]["isError"],
        false,
        "a 3 s call on a session with a 1 s idle timeout must end with its result: {m}\n{}",
        omni.stderr_captured().tail(3000)
    );
    assert_eq!(m["result"]["structuredContent"]["sleptMillis"], 3000, "{m}");
    let ping = raw
        .request(json!({"jsonrpc":"2.0","id":3,"method":"ping"}))
        .await;
    assert!(
        ping.get("result").is_some(),
        "the session after the call: {ping}"
    );

    // scenario: the session stays untouched past its 1 s idle timeout (a poll would touch it).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let reply = raw
        .post(json!({"jsonrpc":"2.0","id":4,"method":"ping"}))
        .await;
    assert_eq!(
        reply.status, 404,
        "an expired session's id must get 404: {reply:?}"
    );
    let body: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    assert!(
        body["jsonrpc"] == "2.0" && body["error"]["code"].is_i64(),
        "the 404 must carry a JSON-RPC error body: {}",
        String::from_utf8_lossy(&reply.body)
    );
    finish(
        "a_call_longer_than_the_idle_timeout_keeps_its_session",
        started,
        &omni,
    );
}

/// Four concurrent POSTs on one session, all with id 1 (as some clients send), each get
/// their own answer; a `notifications/cancelled` naming an id that three requests in flight
/// share cancels all three.
#[tokio::test]
async fn concurrent_posts_with_one_id_each_get_their_own_answer() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let omni = fixture_omni(&fixture, &["--upstream-timeout", "60s"]).await;
    let raw = RawHttp::open(&omni.url, None).await;
    let slow = |millis: u64| {
        raw.post(json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
                        "params":{"name":"fixture_slow","arguments":{"millis":millis}}}))
    };
    let (a, b, c, d) = tokio::join!(slow(700), slow(800), slow(900), slow(1000));
    let replies = [a, b, c, d];
    for (reply, millis) in replies.iter().zip([700, 800, 900, 1000]) {
        let answer = reply
            .messages
            .iter()
            .find(|m| m["id"] == 1 && m.get("result").is_some())
            .unwrap_or_else(|| panic!("the POST of Slow {millis} got no answer: {reply:?}"));
        assert_eq!(
            answer["result"]["structuredContent"]["sleptMillis"], millis,
            "each POST must get its own answer: {answer}"
        );
    }

    // Three calls in flight under one id, then one cancellation naming it.
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut call = raw.client.post(&raw.url);
        for (name, value) in &raw.headers {
            call = call.header(name.as_str(), value.as_str());
        }
        let call = call.body(
            json!({"jsonrpc":"2.0","id":"same","method":"tools/call",
                   "params":{"name":"fixture_slow","arguments":{"millis":20000}}})
            .to_string(),
        );
        held.push(tokio::spawn(async move {
            let mut resp = call.send().await.ok()?;
            while let Ok(Some(_)) = resp.chunk().await {}
            Some(())
        }));
    }
    // The three Slow calls are in flight upstream.
    let mut id = 10;
    raw_wait_stat(&raw, &mut id, "slowStarted", 3, Duration::from_secs(10)).await;
    let reply = raw
        .post(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":"same","reason":"e2e cancel"}}))
        .await;
    assert_eq!(reply.status, 202, "POST notifications/cancelled: {reply:?}");
    let stats = raw_wait_stat(&raw, &mut id, "slowAborted", 3, Duration::from_secs(5)).await;
    for task in held {
        task.abort();
    }
    assert_eq!(
        stats["slowAborted"],
        3,
        "one notifications/cancelled naming an id three calls share must cancel all three: \
         {stats}\n{}",
        omni.stderr_captured().tail(3000)
    );
    finish(
        "concurrent_posts_with_one_id_each_get_their_own_answer",
        started,
        &omni,
    );
}

/// The server's resident set, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Issue 11, finding 7: `--upstream-max-response-bytes` caps what a manifest call reads. A
/// 64 MiB body (no Content-Length) against a 1 MiB cap is an `isError` result that names the
/// cap, and the server's RSS stays small; a 302 is an `isError` result naming the status and
/// the Location, not followed.
#[tokio::test]
async fn upstream_cap_and_redirect_are_error_results() {
    let started = Instant::now();
    let big = format!("{{\"text\":\"{}\"}}", "a".repeat(64 << 20));
    let mut response =
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n".to_vec();
    response.extend_from_slice(big.as_bytes());
    drop(big);
    let stub = StubHttp::start(response);
    let manifest = fixture_manifest();
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
        "--upstream-max-response-bytes",
        "1048576",
    ])
    .await;
    let raw = RawHttp::open(&omni.url, None).await;
    let before = rss_kib(omni.pid());
    let m = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                        "params":{"name":"fixture_echo","arguments":{"text":"hi"}}}))
        .await;
    let after = rss_kib(omni.pid());
    let result = &m["result"];
    let text = text_of(result);
    assert!(
        is_error(result) && text.contains("max_response_bytes") && text.contains("1 MiB"),
        "a 64 MiB body over a 1 MiB cap: want isError naming the cap, got {result}"
    );
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB reading a capped 64 MiB response"
    );
    eprintln!("  capped 64 MiB body: RSS {before} KiB -> {after} KiB; {text}");
    drop(raw);
    drop(omni);

    let stub = StubHttp::start(
        b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .to_vec(),
    );
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
    ])
    .await;
    let raw = RawHttp::open(&omni.url, None).await;
    let m = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                        "params":{"name":"fixture_echo","arguments":{"text":"hi"}}}))
        .await;
    let result = &m["result"];
    let text = text_of(result);
    assert!(
        is_error(result) && text.contains("302") && text.contains("http://127.0.0.1:9/elsewhere"),
        "a 302: want isError naming the status and the Location, got {result}"
    );
    assert_eq!(
        stub.requests().len(),
        1,
        "the redirect must not be followed"
    );
    finish(
        "upstream_cap_and_redirect_are_error_results",
        started,
        &omni,
    );
}
