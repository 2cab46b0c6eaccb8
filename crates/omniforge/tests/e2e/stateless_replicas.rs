//! Three `omniforge serve --stateless` replicas on one PostgreSQL database behind HAProxy,
//! configured with `deploy/haproxy.cfg` as it is (issue 14: "2026-07-28 requests and
//! `--stateless` serving work through any replica, with plain round robin").
//!
//! One-off checks first, each addressed to chosen replicas: a cut result's kept output made
//! on replica 1 is read on 2 and 3; input-required rounds go to replicas 1, 2 and 3 in turn
//! (they share `--request-state-key-file`); a task started on replica 1 is read on 2 and 3.
//! Then the official Python SDK (2.x) in its stateless 2026-07-28 mode creates a tool through
//! the balancer and calls it over and over; the TypeScript SDK (1.x, which has no 2026-07-28
//! mode) initializes against the sessionless replicas and calls the same tool. A
//! `subscriptions/listen` stream on each replica hears of the create; raw 2026-07-28 calls
//! work sent to each replica and through the balancer; each replica's `/metrics` shows it
//! served calls of the tool. `kill -9` of replica 1: each client loses at most its one request
//! in flight there. SIGTERM of replica 2 (a rolling restart) while a slow call runs there: the
//! call is answered, the listen stream ends with its final result, the replica exits without
//! waiting out its 10-minute grace, and no client request fails.
//!
//! Everything is started here and ended here by pid: three `omniforge serve` processes on a
//! database of the shared test cluster (`crate::support::cluster`), one `haproxy`, two
//! client drivers.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{
    self, Captured, Driver, Sdk, Serve, balancer, counts_with_a_success, eventually, http_send,
    post_headers, sleeper_tool, sse_messages, start_task, two_steps_tool, until_terminal, uv,
};

/// The stateless revision.
const MODERN: &str = "2026-07-28";
/// The tool the Python client creates and both clients call.
const TOOL: &str = "replica_echo";
/// Calls of [`TOOL`] each replica must have served before the kill.
const CALLS_EACH: u64 = 3;
/// The most a replica may take to learn of a change, serve a first call, or be taken out by
/// the balancer here (the machine is shared).
const PATIENCE: Duration = Duration::from_secs(60);

/// The headers and body of a 2026-07-28 request (no session, no `initialize`: the revision,
/// client info and capabilities ride in `_meta`, the method and name in headers too).
fn modern_request(id: &Value, method: &str, mut params: Value) -> (Vec<(String, String)>, Vec<u8>) {
    let extra = params.get("_meta").cloned();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "omniforge-e2e-raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
    });
    for (key, value) in extra
        .as_ref()
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        params["_meta"][key] = value.clone();
    }
    let mut headers = post_headers(None, Some(MODERN));
    headers.push(("Mcp-Method".into(), method.into()));
    let name = ["name", "uri", "taskId"]
        .into_iter()
        .find_map(|key| params[key].as_str());
    if let Some(name) = name {
        headers.push(("Mcp-Name".into(), name.into()));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    (headers, serde_json::to_vec(&body).unwrap())
}

/// One 2026-07-28 request over raw HTTP: its HTTP status and the response message.
async fn modern(url: &str, id: u64, method: &str, params: Value) -> Result<(u16, Value), String> {
    let (headers, body) = modern_request(&json!(id), method, params);
    let reply = http_send(
        &support::http_client(),
        "POST",
        url,
        &headers,
        Some(body),
        &[json!(id)],
    )
    .await?;
    let answer = reply
        .messages
        .iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .cloned()
        .ok_or_else(|| format!("HTTP {}: no answer ({:?})", reply.status, reply.notes))?;
    Ok((reply.status, answer))
}

/// A 2026-07-28 request whose SSE answer is read as it streams: its messages.
fn streaming(url: &str, id: &str, method: &str, params: Value) -> mpsc::UnboundedReceiver<Value> {
    let (headers, body) = modern_request(&json!(id), method, params);
    let mut req = support::http_client().post(url).body(body);
    for (name, value) in headers {
        req = req.header(name, value);
    }
    sse_messages(req)
}

/// A 2026-07-28 `subscriptions/listen` stream for tool list changes, opened at `url` with the
/// request id `id`: the messages it delivers.
fn listen(url: &str, id: &str) -> mpsc::UnboundedReceiver<Value> {
    let params = json!({"notifications": {"toolsListChanged": true}});
    streaming(url, id, "subscriptions/listen", params)
}

/// The next message on `rx` for which `wanted` holds, within [`PATIENCE`].
async fn next_where(
    rx: &mut mpsc::UnboundedReceiver<Value>,
    wanted: impl Fn(&Value) -> bool,
) -> Option<Value> {
    tokio::time::timeout(PATIENCE, async {
        while let Some(m) = rx.recv().await {
            if wanted(&m) {
                return Some(m);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

/// Creates `tool` (the arguments of `omniforge_create_tool`) with a 2026-07-28 request to
/// `url`, as request `id`.
async fn create_tool(url: &str, id: u64, tool: Value) {
    let create = json!({"name": "omniforge_create_tool", "arguments": tool});
    let (status, answer) = modern(url, id, "tools/call", create).await.unwrap();
    assert!(
        status == 200 && answer["result"]["isError"] != true,
        "{answer}"
    );
}

/// A `tools/call` result's text, or why it is not a successful result.
async fn call_text(url: &str, id: u64, tool: &str) -> Result<String, String> {
    let (status, answer) = modern(
        url,
        id,
        "tools/call",
        json!({"name": tool, "arguments": {}}),
    )
    .await?;
    let result = &answer["result"];
    if status != 200 || result.is_null() || result["isError"] == true {
        return Err(format!("HTTP {status}: {answer}"));
    }
    Ok(result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned())
}

/// The successful calls of `tool` a replica counted (`omniforge_tool_calls_total`, read from
/// its `/metrics`; the replicas run without tokens, so anyone is `admin`).
async fn calls_served(replica: &Serve, tool: &str) -> u64 {
    let text = support::http_client()
        .get(format!("{}/metrics", replica.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("omniforge_tool_calls_total{{tool=\"{tool}\",");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && l.contains("outcome=\"ok\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[tokio::test]
async fn stateless_replicas_behind_haproxy_serve_any_request() {
    crate::support::needs_deps!();
    tokio::time::timeout(Duration::from_secs(300), scenario())
        .await
        .expect("the stateless replica scenario did not finish within 300 s");
}

async fn scenario() {
    let db = crate::support::cluster().database("stateless").unwrap();
    let url = db.url();
    let uv = uv();
    let dir = tempfile::tempdir().unwrap();
    let state_key = dir.path().join("request-state.key");
    std::fs::write(
        &state_key,
        "k1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &state_key,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let mut replicas = Vec::new();
    for i in 1..=3 {
        let data = dir.path().join(format!("replica{i}"));
        std::fs::create_dir(&data).unwrap();
        let args = [
            "--data-dir",
            data.to_str().unwrap(),
            "--database",
            &url,
            "--uv",
            uv.to_str().unwrap(),
            "--stateless",
            "--request-state-key-file",
            state_key.to_str().unwrap(),
            "--max-result-bytes",
            "256",
            "--shutdown-grace",
            "10m",
        ];
        replicas.push(Serve::start(&args).await);
    }
    let lb = balancer(&replicas.iter().collect::<Vec<_>>()).await;
    eprintln!("stateless: 3 replicas and haproxy up");

    // A kept output: created through the balancer, cut on replica 1, read on 2 and 3.
    let long = json!({
        "name": "long_output",
        "description": "Prints more than a result may carry",
        "code": "print('x' * 2000 + 'END')\n",
        "inputSchema": {"type": "object", "properties": {}},
    });
    create_tool(&lb.url, 200, long).await;
    let cut = until_ok(|| call_text(&replicas[0].url, 201, "long_output")).await;
    let uri = cut
        .split("[the whole output: ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no kept output in {cut:?}"))
        .to_owned();
    for r in &replicas[1..] {
        let (status, answer) = modern(&r.url, 202, "resources/read", json!({"uri": uri}))
            .await
            .unwrap();
        let text = answer["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            status == 200 && text.trim_end() == format!("{}END", "x".repeat(2000)),
            "{answer}"
        );
    }
    eprintln!("stateless: the kept output checked");

    // Input-required rounds, each on another replica (they share --request-state-key-file).
    create_tool(&lb.url, 300, two_steps_tool()).await;
    let call = json!({"name": "two_steps", "arguments": {"x": 1}});
    let mut round = until_ok(|| async {
        let (_, answer) = modern(&replicas[0].url, 301, "tools/call", call.clone()).await?;
        match answer["result"]["resultType"].as_str() {
            Some("input_required") => Ok(answer.to_string()),
            _ => Err(answer.to_string()),
        }
    })
    .await;
    for (step, field, value, replica) in
        [("step1", "name", "Alice", 1), ("step2", "color", "blue", 2)]
    {
        let round_trip: Value = serde_json::from_str(&round).unwrap();
        let mut retry = call.clone();
        retry["inputResponses"] = json!({step: {"action": "accept", "content": {field: value}}});
        retry["requestState"] = round_trip["result"]["requestState"].clone();
        let (status, answer) = modern(&replicas[replica].url, 302, "tools/call", retry)
            .await
            .unwrap();
        assert!(
            status == 200 && answer["result"].is_object(),
            "round {step} on replica {}: HTTP {status}: {answer}",
            replica + 1
        );
        round = answer.to_string();
    }
    let done: Value = serde_json::from_str(&round).unwrap();
    assert_eq!(
        done["result"]["content"][0]["text"], "Alice likes blue",
        "{done}"
    );

    // A task started on replica 1 is read through the others.
    create_tool(&lb.url, 400, sleeper_tool()).await;
    let task = start_task(&replicas[0].url, None, "sleeper", json!({"seconds": 1})).await;
    let done = until_terminal(&replicas[1].url, None, &task, PATIENCE).await;
    assert_eq!(done["status"], "completed", "{done}");
    let again = until_terminal(&replicas[2].url, None, &task, PATIENCE).await;
    assert_eq!(again, done);
    eprintln!("stateless: input-required rounds and a task across replicas checked");
    // A call that takes a while, for the shutdown below.
    let slow = json!({
        "name": "slow_call",
        "description": "Reports progress, then sleeps 3 s",
        "code": "import time, omniforge\nomniforge.progress(1, 2, 'started')\ntime.sleep(3)\nprint('OmniForge slow call done')\n",
        "inputSchema": {"type": "object", "properties": {}},
    });
    create_tool(&lb.url, 500, slow).await;

    // A subscriptions/listen stream on each replica.
    let mut streams: Vec<_> = replicas
        .iter()
        .enumerate()
        .map(|(i, r)| listen(&r.url, &format!("listen-{}", i + 1)))
        .collect();
    for (i, rx) in streams.iter_mut().enumerate() {
        let ack = next_where(rx, |m| m.get("method").is_some()).await;
        assert!(
            ack.as_ref()
                .is_some_and(|m| m["method"] == "notifications/subscriptions/acknowledged"),
            "replica {}'s listen stream: {ack:?}",
            i + 1
        );
    }

    // The Python SDK's 2026-07-28 client creates the tool through the balancer and calls it
    // from then on; the TypeScript client calls it too.
    let mut python = Driver::start_with(Sdk::Python, &["stateless", &lb.url, TOOL]);
    let created = python.expect("CREATED").await;
    python.expect("READY").await;
    let mut typescript = Driver::start_with(Sdk::TypeScript, &["stateless", &lb.url, TOOL]);
    let ready = typescript.expect("READY").await;
    assert_eq!(
        ready["id"],
        Value::Null,
        "a session from a --stateless replica: {ready}"
    );
    eprintln!("stateless: {TOOL} created ({created}); both clients calling it");
    // Whichever replica the create reached, every replica's stream hears of it.
    for (i, rx) in streams.iter_mut().enumerate() {
        let note = next_where(rx, |m| m["method"] == "notifications/tools/list_changed")
            .await
            .unwrap_or_else(|| panic!("no list_changed on replica {}'s listen stream", i + 1));
        assert_eq!(
            note["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            format!("listen-{}", i + 1),
            "{note}"
        );
    }

    // Raw 2026-07-28 requests: to each replica, and through the balancer.
    let mut id = 100;
    for (i, r) in replicas.iter().enumerate() {
        id += 1;
        let text = until_ok(|| call_text(&r.url, id, TOOL)).await;
        assert_eq!(text.trim(), "OmniForge replica tool", "replica {}", i + 1);
    }
    for _ in 0..6 {
        id += 1;
        let text = call_text(&lb.url, id, TOOL).await.unwrap();
        assert_eq!(text.trim(), "OmniForge replica tool");
    }

    eprintln!("stateless: raw 2026-07-28 calls of {TOOL} checked");

    // Every replica serves calls of the tool.
    let served = eventually(
        PATIENCE,
        &format!("{CALLS_EACH} calls of {TOOL} served per replica"),
        async || {
            let mut served = Vec::new();
            for r in &replicas {
                served.push(calls_served(r, TOOL).await);
            }
            if served.iter().all(|&n| n >= CALLS_EACH) {
                Ok(served)
            } else {
                Err(format!("served {served:?}"))
            }
        },
    )
    .await;
    let mut before = Vec::new();
    for client in [&mut python, &mut typescript] {
        let counts = counts_with_a_success(client).await;
        assert!(
            counts["ok"].as_u64() > Some(0) && counts["failed"] == 0,
            "{:?} client before the kill: {counts}\n{}",
            client.sdk,
            client.stderr_tail()
        );
        before.push(counts);
    }
    eprintln!("stateless: calls served per replica {served:?}; clients {before:?}");

    // kill -9 of replica 1: at most the one request in flight there fails per client, until
    // the health check takes the replica out.
    replicas[0].kill();
    taken_out(&lb.log, "replica1", PATIENCE).await;
    // The request in flight on replica 1 may fail late: the TypeScript SDK leaves a request
    // whose SSE answer was cut pending until its own timeout (30 s in the driver).
    let mut around = Vec::new();
    for client in [&mut python, &mut typescript] {
        client.send("report").await;
        let during = client.expect("COUNTS").await;
        // scenario: a few seconds of the client's calls on the survivors.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = counts_with_a_success(client).await;
        let failed = during["failed"].as_u64().unwrap() + after["failed"].as_u64().unwrap();
        assert!(
            failed <= 1 && after["ok"].as_u64() > Some(0),
            "{:?} client once replica 1 died: {during} then {after}\n{}",
            client.sdk,
            client.stderr_tail()
        );
        around.push((during, after));
    }
    for _ in 0..4 {
        id += 1;
        let text = call_text(&lb.url, id, TOOL).await.unwrap();
        assert_eq!(text.trim(), "OmniForge replica tool");
    }
    // SIGTERM of replica 2, as a rolling upgrade does, while a slow call runs there: its
    // listen stream ends at once with its final result, the call finishes and is answered,
    // new connections are refused meanwhile (HAProxy sends them to replica 3), and no request
    // of either client fails.
    let mut slow = streaming(
        &replicas[1].url,
        "slow",
        "tools/call",
        json!({"name": "slow_call", "arguments": {}, "_meta": {"progressToken": "slow"}}),
    );
    let progress = next_where(&mut slow, |m| m.get("method").is_some()).await;
    assert!(
        progress
            .as_ref()
            .is_some_and(|m| m["method"] == "notifications/progress"),
        "slow_call on replica 2: {progress:?}"
    );
    let started = std::time::Instant::now();
    let pid = replicas[1].pid().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(term.success(), "kill -TERM {pid}: {term}");
    let last = next_where(&mut streams[1], |m| m.get("method").is_none()).await;
    assert!(
        last.as_ref().is_some_and(|m| m["id"] == "listen-2"
            && m["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-2"),
        "replica 2's listen stream at shutdown: {last:?}"
    );
    let answer = next_where(&mut slow, |m| m["id"] == "slow").await;
    assert!(
        answer
            .as_ref()
            .is_some_and(|m| m["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.trim() == "OmniForge slow call done")),
        "slow_call on replica 2 during its shutdown: {answer:?}"
    );
    // The grace period is 10 minutes: the replica must not wait it out for an open stream.
    let exit = replicas[1].wait_exit(PATIENCE).await;
    assert!(
        exit.is_some_and(|status| status.success()),
        "replica 2 after SIGTERM: {exit:?}\n{}",
        replicas[1].output_tail()
    );
    let exited = started.elapsed();
    taken_out(
        &lb.log,
        "replica2",
        PATIENCE.saturating_sub(started.elapsed()),
    )
    .await;
    let mut draining = Vec::new();
    for client in [&mut python, &mut typescript] {
        let counts = counts_with_a_success(client).await;
        assert!(
            counts["ok"].as_u64() > Some(0) && counts["failed"] == 0,
            "{:?} client while replica 2 shut down: {counts}\n{}",
            client.sdk,
            client.stderr_tail()
        );
        draining.push(counts);
    }
    eprintln!("stateless: replica 2 exited {exited:?} after SIGTERM; clients {draining:?}");
    python.send("quit").await;
    typescript.send("quit").await;
    eprintln!("stateless: around the kill (until DOWN, then after) {around:?}");
}

/// Waits (up to `within`) until HAProxy's log says `server` is DOWN.
async fn taken_out(log: &Captured, server: &str, within: Duration) {
    let line = format!("{server} is DOWN");
    eventually(within, &format!("haproxy took {server} out"), async || {
        if log.text().contains(&line) {
            Ok(())
        } else {
            Err(log.tail(3000))
        }
    })
    .await;
}

/// Retries `f` until it gives a result, for at most [`PATIENCE`] (a replica that has not yet
/// heard of a tool created through another answers that it is unknown; each retry is logged,
/// none was needed in the runs so far); panics with the last error otherwise.
async fn until_ok<F, Fut>(mut f: F) -> String
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    eventually(PATIENCE, "a replica's answer", async || {
        let answer = f().await;
        if let Err(error) = &answer {
            eprintln!("stateless: retrying after {error}");
        }
        answer
    })
    .await
}
