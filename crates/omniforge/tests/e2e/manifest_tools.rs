//! Manifest tools end to end: the real `omniforge` binary serving the RPCs of a forge
//! manifest, proxied to a real Connect service (the Node fixture in `tests/fixtures/connect`,
//! built with the official `@connectrpc/connect-node`), driven by the official MCP clients.
//!
//! Most cases use the Python SDK 2.x over Streamable HTTP (`support/py/repl.py`, a
//! scripted client: the test writes one JSON command per line, the driver answers each with
//! one JSON line). `omniforge bridge` is driven over stdio by the TypeScript SDK
//! (`support/node/repl.mjs`, same protocol) and by raw JSON-RPC lines. Upstream failures
//! that a Connect server does not produce (an HTML 502 page, a 200 that is not JSON) come from
//! a tiny loopback HTTP server in this file; "connection refused" is a port that was just
//! closed. Nothing is mocked: every MCP exchange goes through the real binary.
//!
//! Needs `.deps/` (made by `scripts/bootstrap`): a missing piece fails the test with a message.
//! Everything binds 127.0.0.1; every process started here is killed by its own pid when its
//! fixture is dropped (`kill_on_drop` as the backstop).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use crate::support::{
    self, BIN, Captured, Fixture, Serve, drain, fixture_manifest, kill_and_reap, no_proxy,
    node_driver, node_script, node22, py_driver, python_driver, python2, require, ts_modules,
};

/// The fixture tools that are unary RPCs, i.e. MCP tools.
const UNARY_TOOLS: [&str; 5] = [
    "fixture_echo",
    "fixture_lookup",
    "fixture_whoami",
    "fixture_slow",
    "fixture_stats",
];

/// Keys a `Tool` may carry on the wire (MCP 2025-11-25 `Tool`).
const MCP_TOOL_KEYS: [&str; 9] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "execution",
    "_meta",
];

/// forge routing fields of a manifest entry, which must never reach an MCP client.
const FORGE_KEYS: [&str; 6] = [
    "service",
    "method",
    "procedure",
    "auth_required",
    "idempotency_key",
    "streaming",
];

/// How long one driver command may take unless it says otherwise.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------------------
// Paths and dependencies
// ---------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------
// Output capture
// ---------------------------------------------------------------------------------------

/// Reads `pipe` line by line into a channel (and into `sink`), until EOF.
fn line_reader(
    pipe: impl AsyncRead + Unpin + Send + 'static,
    sink: Captured,
) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe);
        let mut line = Vec::new();
        loop {
            line.clear();
            match lines.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            sink.push(&line);
            let text = String::from_utf8_lossy(&line).trim_end().to_owned();
            if tx.send(text).is_err() {
                break;
            }
        }
    });
    rx
}

// A loopback HTTP server that answers every request with one fixed response
// ---------------------------------------------------------------------------------------

/// One request the stub received: the request line and headers, and the body.
#[derive(Debug, Clone)]
struct StubRequest {
    head: String,
    body: String,
}

/// `std::net::TcpListener` on 127.0.0.1:0 answering every request with `response` (raw
/// bytes, `Connection: close`). Stops accepting when dropped.
struct StubHttp {
    url: String,
    requests: Arc<Mutex<Vec<StubRequest>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StubHttp {
    fn start(response: Vec<u8>) -> StubHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests: Arc<Mutex<Vec<StubRequest>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let mut stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    Err(_) => break,
                };
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                if let Some(request) = read_request(&mut stream) {
                    seen.lock().unwrap().push(request);
                }
                let _ = stream.write_all(&response);
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        StubHttp {
            url,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    fn requests(&self) -> Vec<StubRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for StubHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one HTTP/1.1 request (head and a Content-Length body).
fn read_request(stream: &mut std::net::TcpStream) -> Option<StubRequest> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..]).into_owned();
    Some(StubRequest { head, body })
}

fn http_response(status_line: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "{status_line}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A port on 127.0.0.1 that nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

// ---------------------------------------------------------------------------------------
// OmniForge
// ---------------------------------------------------------------------------------------

/// `omniforge serve --listen 127.0.0.1:0 --data-dir <temp> ARGS...` with full output capture.
struct Omni {
    _server: Serve,
    /// `http://127.0.0.1:PORT/mcp`.
    url: String,
    stderr: crate::support::Captured,
    _dir: TempDir,
}

impl Omni {
    async fn serve(args: &[&str]) -> Omni {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mut command = Serve::command()
            .args(&["--data-dir".as_ref(), data.as_os_str()])
            .args(args);
        no_proxy(command.cmd());
        let server = command.start().await;
        Omni {
            url: server.url.clone(),
            stderr: server.stderr_captured().clone(),
            _server: server,
            _dir: dir,
        }
    }

    fn panics(&self) -> Vec<String> {
        panic_lines(&self.stderr.text())
    }
}

fn panic_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("panicked"))
        .map(str::to_owned)
        .collect()
}

// ---------------------------------------------------------------------------------------
// The scripted SDK clients
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// PyPI `mcp` 2.x, `.deps/py-mcp2`.
    Py2,
    /// npm `@modelcontextprotocol/sdk`, run by `.deps/bin/node22`.
    Ts,
}

/// A running `repl.py` / `repl.mjs`: one JSON command in, one JSON line out.
struct Repl {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Captured,
    /// The `ready` line's `init` object.
    init: Value,
    _dir: TempDir,
}

impl Repl {
    /// Starts the driver against `target` (`http` URL or `stdio` argv) and waits for `ready`.
    async fn start(sdk: Sdk, kind: &str, target: &str, extra: &[&str]) -> Repl {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = match sdk {
            Sdk::Py2 => {
                require(&[python2()]);
                python_driver(&python2(), &py_driver("repl.py"))
            }
            Sdk::Ts => {
                require(&[
                    node22(),
                    ts_modules().join("@modelcontextprotocol/sdk/package.json"),
                ]);
                node_driver(dir.path(), &node_script("repl.mjs"))
            }
        };
        cmd.arg(kind)
            .arg(target)
            .args(extra)
            .current_dir(dir.path())
            .env("HOME", dir.path())
            // One request's limit in the driver (its default is 60 s).
            .env("REPL_TIMEOUT_S", "20")
            .env("NO_COLOR", "1");
        let mut child = no_proxy(&mut cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the {sdk:?} driver: {e}"));
        let stdin = child.stdin.take();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let lines = line_reader(child.stdout.take().unwrap(), Captured::default());
        let mut repl = Repl {
            child,
            stdin,
            lines,
            stderr,
            init: Value::Null,
            _dir: dir,
        };
        let ready = repl.read(Duration::from_secs(40)).await;
        match ready {
            Ok(v) if v["event"] == "ready" => repl.init = v["init"].clone(),
            other => panic!(
                "the {sdk:?} client did not connect and initialize ({other:?}); driver stderr:\n{}",
                repl.stderr.tail(8000)
            ),
        }
        repl
    }

    async fn read(&mut self, timeout: Duration) -> Result<Value, String> {
        loop {
            match tokio::time::timeout(timeout, self.lines.recv()).await {
                Err(_) => return Err(format!("no answer from the driver within {timeout:?}")),
                Ok(None) => return Err("the driver closed its stdout (exited)".into()),
                Ok(Some(line)) if line.trim().is_empty() => continue,
                Ok(Some(line)) => {
                    return serde_json::from_str(&line)
                        .map_err(|e| format!("driver line is not JSON ({e}): {line}"));
                }
            }
        }
    }

    /// Sends one command and returns its answer line; panics (with the driver's stderr) when
    /// none comes.
    async fn cmd(&mut self, command: Value) -> Value {
        self.cmd_within(command, COMMAND_TIMEOUT).await
    }

    async fn cmd_within(&mut self, command: Value, timeout: Duration) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("driver stdin closed");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        match self.read(timeout).await {
            Ok(v) => v,
            Err(e) => panic!(
                "driver command {command} got no answer: {e}; driver stderr:\n{}",
                self.stderr.tail(8000)
            ),
        }
    }

    /// `tools/list`: the tools, as the SDK parsed them.
    async fn list(&mut self) -> Vec<Value> {
        let reply = self.cmd(json!({"op": "list"})).await;
        assert_eq!(reply["ok"], true, "tools/list failed: {reply}");
        reply["tools"].as_array().cloned().unwrap_or_default()
    }

    async fn names(&mut self) -> Vec<String> {
        self.list()
            .await
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// `tools/call`: the driver's answer (`ok`, `result`, `elapsed`).
    async fn call(&mut self, name: &str, args: Value) -> Value {
        self.cmd(json!({"op": "call", "name": name, "args": args}))
            .await
    }

    /// `tools/call` that must reach a CallToolResult: the result.
    async fn result(&mut self, name: &str, args: Value) -> Value {
        let reply = self.call(name, args.clone()).await;
        assert_eq!(
            reply["ok"],
            true,
            "tools/call {name} {args} did not return a CallToolResult: {reply}\ndriver stderr:\n{}",
            self.stderr.tail(4000)
        );
        reply["result"].clone()
    }

    async fn quit(mut self) {
        let _ = self
            .cmd_within(json!({"op": "quit"}), Duration::from_secs(10))
            .await;
        self.stdin = None;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

impl Drop for Repl {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// The concatenated text items of a CallToolResult.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|c| c["type"] == "text")
                .filter_map(|c| c["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

/// Logs a result's text (shown by nextest for failing tests, or with `--no-capture`).
fn show(what: &str, result: &Value) {
    eprintln!(
        "  {what}: isError={} text={:?}",
        result["isError"],
        text_of(result)
    );
}

/// Starts the fixture, OmniForge (`serve`) with the fixture manifest and `args`, and the
/// Python 2.x client over Streamable HTTP.
async fn fixture_scene(args: &[&str]) -> (Fixture, Omni, Repl) {
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let mut all = vec![
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ];
    all.extend_from_slice(args);
    let omni = Omni::serve(&all).await;
    let repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    (fixture, omni, repl)
}

/// Asserts that no server panicked and prints how long the test took.
fn finish(name: &str, started: Instant, omni: &Omni) {
    let panics = omni.panics();
    assert!(
        panics.is_empty(),
        "omniforge panicked: {panics:?}\n{}",
        omni.stderr.tail(6000)
    );
    eprintln!(
        "manifest_tools::{name}: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// Polls `fixture_stats` until `field` is at least `want` (up to `within`); the last stats.
async fn wait_stat(repl: &mut Repl, field: &str, want: i64, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let result = repl.result("fixture_stats", json!({})).await;
        assert!(!is_error(&result), "fixture_stats failed: {result}");
        let stats = result["structuredContent"].clone();
        if stats[field].as_i64().unwrap_or(0) >= want || Instant::now() >= deadline {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------
// Raw MCP exchanges (no SDK), to see the JSON as sent
// ---------------------------------------------------------------------------------------

/// A raw Streamable HTTP session: initialize and notifications/initialized done.
struct RawHttp {
    client: reqwest::Client,
    url: String,
    /// Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version (and Authorization).
    headers: Vec<(String, String)>,
}

impl RawHttp {
    async fn open(url: &str, token: Option<&str>) -> RawHttp {
        let client = support::http_client();
        let auth: Vec<(String, String)> = token
            .map(|t| vec![("Authorization".to_owned(), format!("Bearer {t}"))])
            .unwrap_or_default();
        let body = serde_json::to_vec(&support::initialize_request(1, "2025-11-25")).unwrap();
        let mut headers = support::post_headers(None, None);
        headers.extend(auth.clone());
        let reply = support::http_send(&client, "POST", url, &headers, Some(body), &[json!(1)])
            .await
            .expect("raw initialize");
        assert_eq!(reply.status, 200, "raw initialize: {reply:?}");
        let session = reply
            .header("mcp-session-id")
            .expect("raw initialize: no Mcp-Session-Id")
            .to_owned();
        let mut headers = support::post_headers(Some(&session), Some("2025-11-25"));
        headers.extend(auth);
        let raw = RawHttp {
            client,
            url: url.to_owned(),
            headers,
        };
        let reply = raw
            .post(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        assert_eq!(
            reply.status, 202,
            "raw notifications/initialized: {reply:?}"
        );
        raw
    }

    /// POSTs one message; for a request, reads until its response.
    async fn post(&self, message: Value) -> support::HttpReply {
        let wait: Vec<Value> = message.get("id").cloned().into_iter().collect();
        support::http_send(
            &self.client,
            "POST",
            &self.url,
            &self.headers,
            Some(serde_json::to_vec(&message).unwrap()),
            &wait,
        )
        .await
        .unwrap_or_else(|e| panic!("raw POST {message}: {e}"))
    }

    /// The response to request `message`.
    async fn request(&self, message: Value) -> Value {
        let id = message["id"].clone();
        let reply = self.post(message.clone()).await;
        reply
            .messages
            .iter()
            .find(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
            .cloned()
            .unwrap_or_else(|| panic!("raw POST {message}: no response in {reply:?}"))
    }
}

/// initialize, notifications/initialized and tools/list over raw Streamable HTTP; the
/// `result.tools` array exactly as the server sent it.
async fn raw_http_tools(url: &str, token: Option<&str>) -> Vec<Value> {
    let raw = RawHttp::open(url, token).await;
    let response = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    response["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("raw tools/list: no result.tools in {response}"))
        .clone()
}

/// Problems with the listed tools' shape: forge keys, non-MCP keys, schemas that differ
/// from the manifest's, the streaming RPC listed, a unary RPC missing.
fn listing_problems(tools: &[Value], expect_builtins: bool) -> Vec<String> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(fixture_manifest()).unwrap()).unwrap();
    let mut problems = Vec::new();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in UNARY_TOOLS {
        if !names.contains(&want) {
            problems.push(format!("{want} is not listed: {names:?}"));
        }
    }
    if names.contains(&"fixture_watch") {
        problems.push("fixture_watch (a server-streaming RPC) is listed".into());
    }
    let has_builtin = names.contains(&"omniforge_instructions");
    if has_builtin != expect_builtins {
        problems.push(format!(
            "omniforge_instructions listed: {has_builtin}, expected {expect_builtins}: {names:?}"
        ));
    }
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or("?");
        let Some(object) = tool.as_object() else {
            problems.push(format!("a tool is not an object: {tool}"));
            continue;
        };
        for key in object.keys() {
            if FORGE_KEYS.contains(&key.as_str()) {
                problems.push(format!(
                    "{name} carries the forge routing key `{key}`: {tool}"
                ));
            } else if !MCP_TOOL_KEYS.contains(&key.as_str()) {
                problems.push(format!("{name} carries the non-MCP key `{key}`: {tool}"));
            }
        }
        let Some(entry) = manifest["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
        else {
            continue;
        };
        for key in ["inputSchema", "outputSchema", "description"] {
            if tool[key] != entry[key] {
                problems.push(format!(
                    "{name}.{key} differs from the manifest's: listed {}, manifest {}",
                    tool[key], entry[key]
                ));
            }
        }
    }
    problems
}

/// `omniforge bridge` spoken to with raw newline-delimited JSON-RPC.
struct RawBridge {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Captured,
    _dir: TempDir,
}

impl RawBridge {
    async fn start(args: &[&str]) -> RawBridge {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["bridge", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .env("NO_COLOR", "1");
        let mut child = no_proxy(&mut cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN} bridge: {e}"));
        let stdin = child.stdin.take();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let lines = line_reader(child.stdout.take().unwrap(), Captured::default());
        RawBridge {
            child,
            stdin,
            lines,
            stderr,
            _dir: dir,
        }
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next message from the server, or `None` within `timeout`.
    async fn next(&mut self, timeout: Duration) -> Option<Value> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(Some(line)) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("bridge stdout line is not JSON ({e}): {line:?}")),
            ),
            _ => None,
        }
    }

    /// Waits for the response to `id`; every other message read meanwhile is returned too.
    async fn response(&mut self, id: i64, timeout: Duration) -> (Value, Vec<Value>) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut others = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(m)
                    if m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()) =>
                {
                    return (m, others);
                }
                Some(m) => others.push(m),
                None => panic!(
                    "bridge: no response to id {id} within {timeout:?} (other messages: {others:?}); \
                     stderr:\n{}",
                    self.stderr.tail(6000)
                ),
            }
        }
    }

    async fn initialize(&mut self) {
        self.send(support::initialize_request(0, "2025-11-25"))
            .await;
        let (m, _) = self.response(0, Duration::from_secs(20)).await;
        assert!(m.get("result").is_some(), "bridge initialize: {m}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
    }
}

impl Drop for RawBridge {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// Copies the fixture manifest into a fresh temp dir; the dir and the copy's path.
fn manifest_copy() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    std::fs::copy(fixture_manifest(), &path).unwrap();
    (dir, path)
}

/// Replaces `path` as a generator would: a temp file in the same directory, renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ---------------------------------------------------------------------------------------
// 1. tools/list
// ---------------------------------------------------------------------------------------

/// The unary fixture RPCs are listed with the manifest's schemas and only MCP fields; the
/// server-streaming `fixture_watch` is not. Checked on what the Python SDK parsed and on the
/// raw JSON of a tools/list over plain HTTP.
#[tokio::test]
async fn list_shows_unary_rpcs_with_mcp_fields_only() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    let sdk_tools = repl.list().await;
    let problems = listing_problems(&sdk_tools, true);
    assert!(
        problems.is_empty(),
        "tools/list through the Python SDK:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(sdk_tools)
    );

    let raw = raw_http_tools(&omni.url, None).await;
    let problems = listing_problems(&raw, true);
    assert!(
        problems.is_empty(),
        "raw tools/list JSON (POST {}):\n  - {}\nlisted: {}",
        omni.url,
        problems.join("\n  - "),
        Value::Array(raw)
    );
    repl.quit().await;
    finish("list_shows_unary_rpcs_with_mcp_fields_only", started, &omni);
}

// ---------------------------------------------------------------------------------------
// 2. A successful call
// ---------------------------------------------------------------------------------------

/// fixture_echo answers with structuredContent equal to the text item's JSON; an empty text
/// (which proto3 JSON sends as `{}`) comes back with the zero values filled in.
#[tokio::test]
async fn echo_succeeds_and_zero_values_are_filled() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    let args = json!({"text": "hello world", "shout": true});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(result["isError"], false, "fixture_echo {args}: {result}");
    let text = text_of(&result);
    let parsed: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture_echo's text item is not JSON ({e}): {result}"));
    assert_eq!(
        result["structuredContent"], parsed,
        "structuredContent must equal the JSON in the text item: {result}"
    );
    assert_eq!(
        parsed,
        json!({"text": "HELLO WORLD", "length": 11, "shouted": true, "words": ["HELLO", "WORLD"]}),
        "fixture_echo {args}: {result}"
    );

    let args = json!({"text": ""});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(result["isError"], false, "fixture_echo {args}: {result}");
    let zero = json!({"text": "", "length": 0, "shouted": false, "words": []});
    assert_eq!(
        result["structuredContent"], zero,
        "fixture_echo {args}: the upstream answers {{}}; every required output field must be \
         filled with its zero value: {result}"
    );
    let parsed: Value = serde_json::from_str(&text_of(&result)).unwrap_or(Value::Null);
    assert_eq!(
        parsed, zero,
        "the text item must carry the same JSON: {result}"
    );

    repl.quit().await;
    finish("echo_succeeds_and_zero_values_are_filled", started, &omni);
}

// ---------------------------------------------------------------------------------------
// 3. Error mappings
// ---------------------------------------------------------------------------------------

/// A Connect error (not_found with a detail), a bad argument caught by the inputSchema check,
/// and the streaming RPC called by name: each an isError result, the server still serving.
#[tokio::test]
async fn connect_error_bad_arguments_and_streaming_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    // Connect error envelope: code, message, then the details array as JSON.
    let result = repl.result("fixture_lookup", json!({"id": "nope"})).await;
    show("fixture_lookup nope", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result),
        "fixture_lookup nope must be isError: {result}"
    );
    assert!(
        text.starts_with("not_found: no item with id nope"),
        "fixture_lookup {{\"id\":\"nope\"}}: want text starting `not_found: no item with id nope`, got {text:?}"
    );
    let details_text = text
        .strip_prefix("not_found: no item with id nope")
        .unwrap_or("")
        .trim();
    let details: Value = serde_json::from_str(details_text).unwrap_or_else(|e| {
        panic!("the text after the message must be the details JSON ({e}): {text:?}")
    });
    let detail = details
        .as_array()
        .and_then(|d| d.first())
        .unwrap_or_else(|| panic!("details must be a non-empty array: {details}"));
    assert_eq!(
        detail["type"], "fixture.v1.LookupErrorDetail",
        "details: {details}"
    );
    assert!(
        result.get("structuredContent").is_none(),
        "an error result must not carry structuredContent (it would have to match the \
         outputSchema): {result}"
    );

    // The same tool succeeds for the one id that exists.
    let result = repl.result("fixture_lookup", json!({"id": "known"})).await;
    assert_eq!(result["isError"], false, "fixture_lookup known: {result}");
    assert_eq!(
        result["structuredContent"],
        json!({"id": "known", "name": "Known item"}),
        "{result}"
    );

    // A wrong argument type never reaches the upstream.
    let result = repl.result("fixture_lookup", json!({"id": 5})).await;
    show("fixture_lookup id=5", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("Arguments do not match inputSchema"),
        "fixture_lookup {{\"id\":5}}: want isError `Arguments do not match inputSchema...`, got {result}"
    );

    // An argument the schema forbids (additionalProperties: false).
    let result = repl
        .result("fixture_echo", json!({"text": "x", "bogus": 1}))
        .await;
    assert!(
        is_error(&result) && text_of(&result).starts_with("Arguments do not match inputSchema"),
        "fixture_echo with an unknown argument: want isError `Arguments do not match \
         inputSchema...`, got {result}"
    );

    // The server-streaming RPC is not a tool, even when called by name.
    let result = repl.result("fixture_watch", json!({"count": 2})).await;
    show("fixture_watch", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("streaming RPCs are not supported"),
        "fixture_watch by name: want isError saying streaming RPCs are not supported, got {result}"
    );

    // Still serving.
    let result = repl
        .result("fixture_echo", json!({"text": "still here"}))
        .await;
    assert_eq!(result["isError"], false, "{result}");
    repl.quit().await;
    finish(
        "connect_error_bad_arguments_and_streaming_call",
        started,
        &omni,
    );
}

/// An upstream port with nothing listening: isError saying it cannot connect, without the
/// configured upstream credential.
#[tokio::test]
async fn connection_refused_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let manifest = fixture_manifest();
    let upstream = format!("http://127.0.0.1:{}", closed_port());
    let omni = Omni::serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &upstream,
        "--upstream-auth",
        "Bearer e2e-upstream-secret",
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("cannot connect"),
        "fixture_echo with --upstream {upstream} (closed port): want isError mentioning \
         `cannot connect`, got {result}"
    );
    assert!(
        !text.contains("e2e-upstream-secret"),
        "the error text leaks the upstream credential: {text}"
    );
    assert!(result.get("structuredContent").is_none(), "{result}");
    repl.quit().await;
    finish("connection_refused_is_an_error_result", started, &omni);
}

/// An upstream that answers 502 with an HTML page (as a proxy in front of a dead service
/// does): isError with the status and a short excerpt of the page.
#[tokio::test]
async fn http_502_html_page_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let page = format!(
        "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad \
         Gateway</h1></center>\n<!-- {} -->\n</body>\n</html>\n",
        "padding ".repeat(600)
    );
    let stub = StubHttp::start(http_response(
        "HTTP/1.1 502 Bad Gateway",
        "text/html",
        &page,
    ));
    let manifest = fixture_manifest();
    let omni = Omni::serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("502") && text.contains("Bad Gateway"),
        "fixture_echo against an HTTP 502 HTML page: want isError with the status and an \
         excerpt, got {result}"
    );
    assert!(
        text.len() < 600,
        "the excerpt of a {}-byte page must be short; the text is {} bytes: {text:?}",
        page.len(),
        text.len()
    );
    assert!(result.get("structuredContent").is_none(), "{result}");

    // What OmniForge sent: a Connect unary call with JSON.
    let requests = stub.requests();
    let request = requests
        .first()
        .unwrap_or_else(|| panic!("the stub upstream received no request"));
    let head = request.head.to_ascii_lowercase();
    assert!(
        head.starts_with("post /fixture.v1.fixtureservice/echo http/1.1"),
        "request line: {}",
        request.head
    );
    for header in [
        "content-type: application/json",
        "connect-protocol-version: 1",
    ] {
        assert!(
            head.contains(header),
            "the request lacks `{header}`: {}",
            request.head
        );
    }
    assert!(
        !head.contains("\nauthorization:"),
        "no Authorization may be sent without --upstream-auth: {}",
        request.head
    );
    assert_eq!(
        serde_json::from_str::<Value>(&request.body).ok(),
        Some(json!({"text": "hi"})),
        "request body: {:?}",
        request.body
    );
    repl.quit().await;
    finish("http_502_html_page_is_an_error_result", started, &omni);
}

/// An upstream that answers 200 with a body that is not JSON: isError with the status and
/// the body.
#[tokio::test]
async fn invalid_json_reply_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let stub = StubHttp::start(http_response(
        "HTTP/1.1 200 OK",
        "application/json",
        "not json",
    ));
    let manifest = fixture_manifest();
    let omni = Omni::serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("200") && text.contains("not json"),
        "fixture_echo against a 200 `not json` reply: want isError with the status and the \
         body excerpt, got {result}"
    );
    assert!(result.get("structuredContent").is_none(), "{result}");
    repl.quit().await;
    finish("invalid_json_reply_is_an_error_result", started, &omni);
}

/// A manifest without `--upstream`: the tools are listed, and each call is an isError
/// result with a clear configuration message.
#[tokio::test]
async fn missing_upstream_is_a_configuration_error() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let manifest = fixture_manifest();
    let omni = Omni::serve(&["--manifest", manifest.to_str().unwrap()]).await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let names = repl.names().await;
    assert!(
        names.iter().any(|n| n == "fixture_echo"),
        "the manifest's tools are listed even without an upstream: {names:?}"
    );
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result)
            && text.contains("no upstream address is configured")
            && text.contains("--upstream"),
        "fixture_echo without --upstream: want isError naming the missing upstream and the \
         --upstream flag, got {result}"
    );
    repl.quit().await;
    finish("missing_upstream_is_a_configuration_error", started, &omni);
}

// ---------------------------------------------------------------------------------------
// 4. Auth
// ---------------------------------------------------------------------------------------

/// Without --upstream-auth, the auth-required RPC is refused upstream.
#[tokio::test]
async fn whoami_without_upstream_auth_is_unauthenticated() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;
    let result = repl.result("fixture_whoami", json!({})).await;
    show("fixture_whoami", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("unauthenticated: missing token"),
        "fixture_whoami without --upstream-auth: want isError `unauthenticated: missing token`, \
         got {result}"
    );
    repl.quit().await;
    finish(
        "whoami_without_upstream_auth_is_unauthenticated",
        started,
        &omni,
    );
}

/// With --upstream-auth the header goes upstream verbatim; each call carries a fresh UUID
/// Idempotency-Key (the manifest sets `idempotency_key: true`).
#[tokio::test]
async fn whoami_with_upstream_auth_and_fresh_idempotency_keys() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) =
        fixture_scene(&["--upstream-auth", "Bearer fixture-token"]).await;
    let uuid = Regex::new(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    )
    .unwrap();
    let mut keys = Vec::new();
    for _ in 0..2 {
        let result = repl.result("fixture_whoami", json!({})).await;
        assert_eq!(
            result["isError"], false,
            "fixture_whoami with --upstream-auth \"Bearer fixture-token\": {result}"
        );
        let content = &result["structuredContent"];
        assert_eq!(content["subject"], "fixture-user", "{result}");
        let key = content["idempotencyKey"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            uuid.is_match(&key),
            "idempotencyKey must be a UUID, got {key:?}: {result}"
        );
        keys.push(key);
    }
    assert_ne!(keys[0], keys[1], "each call needs its own Idempotency-Key");
    repl.quit().await;
    finish(
        "whoami_with_upstream_auth_and_fresh_idempotency_keys",
        started,
        &omni,
    );
}

/// The MCP client's own bearer token (which happens to be the upstream's valid token) passes
/// OmniForge's auth but is never forwarded upstream.
#[tokio::test]
async fn client_token_is_not_forwarded_upstream() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let token_file = tokens.path().join("tokens.txt");
    std::fs::write(&token_file, "client fixture-token admin\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let manifest = fixture_manifest();
    let omni = Omni::serve(&[
        "--token-file",
        token_file.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ])
    .await;

    // The token file is in force: no token, no MCP.
    let client = support::http_client();
    let body = serde_json::to_vec(&support::initialize_request(1, "2025-11-25")).unwrap();
    let reply = support::http_send(
        &client,
        "POST",
        &omni.url,
        &support::post_headers(None, None),
        Some(body),
        &[json!(1)],
    )
    .await
    .unwrap();
    assert_eq!(
        reply.status, 401,
        "initialize without a token must be refused when --token-file is set: {reply:?}"
    );

    let mut repl = Repl::start(
        Sdk::Py2,
        "http",
        &omni.url,
        &["Authorization=Bearer fixture-token"],
    )
    .await;
    let result = repl.result("fixture_whoami", json!({})).await;
    show("fixture_whoami", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("unauthenticated: missing token"),
        "the MCP client authenticated with `Bearer fixture-token` and OmniForge has no \
         --upstream-auth: fixture_whoami must be `unauthenticated: missing token` (the client's \
         token must not be forwarded), got {result}"
    );
    repl.quit().await;
    drop(fixture);
    finish("client_token_is_not_forwarded_upstream", started, &omni);
}

// ---------------------------------------------------------------------------------------
// 5. Timeout, 6. Cancellation
// ---------------------------------------------------------------------------------------

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
        omni.stderr.tail(3000)
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
    let omni = Omni::serve(&[
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
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !held.is_finished(),
        "the tools/call POST stream for a 20 s Slow call ended within 500 ms, before any cancel: \
         {:?}",
        held.await.unwrap()
    );
    let reply = raw
        .post(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":"slow-1","reason":"e2e cancel"}}))
        .await;
    assert_eq!(reply.status, 202, "POST notifications/cancelled: {reply:?}");

    let deadline = Instant::now() + Duration::from_secs(5);
    let mut stats;
    let mut id = 10;
    loop {
        id += 1;
        let m = raw
            .request(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                            "params":{"name":"fixture_stats","arguments":{}}}))
            .await;
        stats = m["result"]["structuredContent"].clone();
        if stats["slowAborted"].as_i64().unwrap_or(0) >= 1 || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let still_open = !held.is_finished();
    let _ = stop_tx.send(());
    let (status, body) = held.await.unwrap();
    assert!(
        stats["slowStarted"] == 1 && stats["slowAborted"] == 1,
        "fixture_stats within 5 s of POSTing notifications/cancelled for `slow-1` (its POST \
         stream was open when the cancel was sent): the Slow call must have been aborted upstream: \
         {stats}\nthe call's POST: HTTP {status:?} {:?}\nserver stderr:\n{}\nfixture stderr:\n{}",
        String::from_utf8_lossy(&body),
        omni.stderr.tail(3000),
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
    tokio::time::sleep(Duration::from_millis(500)).await;
    bridge
        .send(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":7,"reason":"e2e cancel"}}))
        .await;
    let mut id = 100;
    let mut stats = Value::Null;
    let mut late = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        id += 1;
        bridge
            .send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                         "params":{"name":"fixture_stats","arguments":{}}}))
            .await;
        let (m, others) = bridge.response(id, Duration::from_secs(10)).await;
        late.extend(others);
        stats = m["result"]["structuredContent"].clone();
        if stats["slowAborted"].as_i64().unwrap_or(0) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

// ---------------------------------------------------------------------------------------
// 7. Hot reload
// ---------------------------------------------------------------------------------------

/// Removing a tool from the manifest (temp file + rename) announces list_changed and the
/// new list lacks it; an invalid rewrite keeps the previous tools and announces nothing.
#[tokio::test]
async fn hot_reload_removes_a_tool_and_ignores_invalid_json() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let (_dir, manifest) = manifest_copy();
    let omni = Omni::serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;

    let before = repl.names().await;
    assert!(before.iter().any(|n| n == "fixture_lookup"), "{before:?}");
    let baseline = repl.cmd(json!({"op": "changes"})).await["count"]
        .as_i64()
        .unwrap();

    let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    doc["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "fixture_lookup");
    let rewritten = Instant::now();
    write_atomically(&manifest, &serde_json::to_vec_pretty(&doc).unwrap());
    let reply = repl
        .cmd(json!({"op": "wait_changes", "count": baseline + 1, "timeout": 10}))
        .await;
    assert_eq!(
        reply["ok"],
        true,
        "no notifications/tools/list_changed within 10 s of removing fixture_lookup from the \
         manifest (temp file + rename): {reply}\nserver stderr:\n{}",
        omni.stderr.tail(4000)
    );
    let notified_after = rewritten.elapsed();
    let after = repl.names().await;
    assert!(
        !after.iter().any(|n| n == "fixture_lookup"),
        "tools/list after list_changed still has fixture_lookup: {after:?}"
    );
    for want in ["omniforge_instructions", "fixture_echo", "fixture_stats"] {
        assert!(
            after.iter().any(|n| n == want),
            "{want} missing after reload: {after:?}"
        );
    }
    let result = repl.result("fixture_lookup", json!({"id": "known"})).await;
    assert!(
        is_error(&result),
        "calling the removed fixture_lookup must be an error: {result}"
    );
    let count = repl.cmd(json!({"op": "changes"})).await["count"]
        .as_i64()
        .unwrap();

    // A broken rewrite: the previous manifest stays, nothing is announced.
    write_atomically(&manifest, b"{\"tools\": [ this is not json");
    let reply = repl
        .cmd(json!({"op": "wait_changes", "count": count + 1, "timeout": 2}))
        .await;
    assert_eq!(
        reply["ok"], false,
        "an invalid manifest rewrite must not announce list_changed: {reply}"
    );
    let still = repl.names().await;
    assert_eq!(
        still, after,
        "tools/list changed after an invalid manifest rewrite"
    );
    let result = repl.result("fixture_echo", json!({"text": "still"})).await;
    assert_eq!(result["isError"], false, "{result}");
    repl.quit().await;
    eprintln!("  list_changed arrived {notified_after:?} after the rewrite");
    finish(
        "hot_reload_removes_a_tool_and_ignores_invalid_json",
        started,
        &omni,
    );
}

// ---------------------------------------------------------------------------------------
// 8. omniforge bridge
// ---------------------------------------------------------------------------------------

/// `omniforge bridge` over stdio with the TypeScript SDK: only the manifest's unary tools
/// (no built-ins), and a working fixture_echo call (the SDK checks structuredContent against
/// the outputSchema).
#[tokio::test]
async fn bridge_stdio_typescript_client() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let data = tempfile::tempdir().unwrap();
    let argv = json!([
        BIN,
        "bridge",
        "--data-dir",
        data.path(),
        "--manifest",
        fixture_manifest(),
        "--addr",
        fixture.url
    ])
    .to_string();
    let mut repl = Repl::start(Sdk::Ts, "stdio", &argv, &[]).await;
    let tools = repl.list().await;
    let problems = listing_problems(&tools, false);
    assert!(
        problems.is_empty(),
        "omniforge bridge tools/list through the TypeScript SDK:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(tools.clone())
    );
    assert_eq!(
        tools.len(),
        UNARY_TOOLS.len(),
        "bridge lists exactly the unary fixture RPCs: {}",
        Value::Array(tools)
    );
    let args = json!({"text": "hello world", "shout": true});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(
        result["isError"], false,
        "bridge fixture_echo {args}: {result}"
    );
    assert_eq!(
        result["structuredContent"],
        json!({"text": "HELLO WORLD", "length": 11, "shouted": true, "words": ["HELLO", "WORLD"]}),
        "{result}"
    );
    let stderr = repl.stderr.text();
    repl.quit().await;
    let panics = panic_lines(&stderr);
    assert!(
        panics.is_empty(),
        "the bridge (or driver) panicked: {panics:?}"
    );
    eprintln!(
        "manifest_tools::bridge_stdio_typescript_client: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// The bridge's raw tools/list JSON over stdio: the unary fixture RPCs, MCP fields only,
/// no built-in tools.
#[tokio::test]
async fn bridge_raw_stdio_listing() {
    let started = Instant::now();
    let manifest = fixture_manifest();
    let mut bridge = RawBridge::start(&["--manifest", manifest.to_str().unwrap()]).await;
    bridge.initialize().await;
    bridge
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .await;
    let (m, _) = bridge.response(1, Duration::from_secs(10)).await;
    let tools = m["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("bridge tools/list: {m}"))
        .clone();
    let problems = listing_problems(&tools, false);
    assert!(
        problems.is_empty(),
        "omniforge bridge raw tools/list JSON:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(tools)
    );
    eprintln!(
        "manifest_tools::bridge_raw_stdio_listing: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------
// Malformed manifest at start-up
// ---------------------------------------------------------------------------------------

/// A tool whose inputSchema is not an object schema: `serve` and `bridge` refuse to start,
/// and stderr names the file, the tool and the field.
#[tokio::test]
async fn malformed_manifest_fails_start_up() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken-manifest.json");
    let mut doc: Value =
        serde_json::from_slice(&std::fs::read(fixture_manifest()).unwrap()).unwrap();
    doc["tools"][2]["inputSchema"] = json!({"type": "array"});
    let tool = doc["tools"][2]["name"].as_str().unwrap().to_owned();
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();

    for sub in ["serve", "bridge"] {
        let mut cmd = Command::new(BIN);
        cmd.arg(sub);
        if sub == "serve" {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = cmd
            .arg("--data-dir")
            .arg(&data)
            .arg("--manifest")
            .arg(&path)
            .args(["--upstream", "http://127.0.0.1:9"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let stdout = Captured::default();
        drain(child.stdout.take().unwrap(), stdout.clone());
        let status = match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
            Ok(Ok(status)) => status,
            _ => {
                kill_and_reap(&mut child);
                panic!(
                    "omniforge {sub} with a malformed manifest did not exit within 20 s; \
                     stderr:\n{}",
                    stderr.tail(4000)
                )
            }
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let err = stderr.text();
        assert!(
            !status.success(),
            "omniforge {sub} with a malformed manifest must exit non-zero, got {status}; \
             stderr:\n{err}"
        );
        for (what, needle) in [
            ("the file", path.to_str().unwrap()),
            ("the tool", tool.as_str()),
            ("the field", "inputSchema"),
        ] {
            assert!(
                err.contains(needle),
                "omniforge {sub}: stderr must name {what} ({needle:?}); stderr:\n{err}"
            );
        }
        assert!(
            panic_lines(&err).is_empty(),
            "omniforge {sub} panicked: {err}"
        );
        assert!(
            stdout.text().is_empty() || sub == "serve",
            "omniforge {sub} wrote to stdout: {}",
            stdout.text()
        );
    }
    eprintln!(
        "manifest_tools::malformed_manifest_fails_start_up: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------
// Sessions and request ids (issue 11, findings 3 and 5): Slow calls make the work in flight
// ---------------------------------------------------------------------------------------

/// `omniforge serve` with the fixture's manifest plus `args`.
async fn fixture_omni(fixture: &Fixture, args: &[&str]) -> Omni {
    let manifest = fixture_manifest();
    let mut all = vec![
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ];
    all.extend_from_slice(args);
    Omni::serve(&all).await
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
        omni.stderr.tail(3000)
    );
    assert_eq!(m["result"]["structuredContent"]["sleptMillis"], 3000, "{m}");
    let ping = raw
        .request(json!({"jsonrpc":"2.0","id":3,"method":"ping"}))
        .await;
    assert!(
        ping.get("result").is_some(),
        "the session after the call: {ping}"
    );

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
    tokio::time::sleep(Duration::from_millis(700)).await;
    let reply = raw
        .post(json!({"jsonrpc":"2.0","method":"notifications/cancelled",
                     "params":{"requestId":"same","reason":"e2e cancel"}}))
        .await;
    assert_eq!(reply.status, 202, "POST notifications/cancelled: {reply:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut id = 10;
    let stats = loop {
        id += 1;
        let m = raw
            .request(json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                            "params":{"name":"fixture_stats","arguments":{}}}))
            .await;
        let stats = m["result"]["structuredContent"].clone();
        if stats["slowAborted"].as_i64().unwrap_or(0) >= 3 || Instant::now() >= deadline {
            break stats;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for task in held {
        task.abort();
    }
    assert_eq!(
        stats["slowAborted"],
        3,
        "one notifications/cancelled naming an id three calls share must cancel all three: \
         {stats}\n{}",
        omni.stderr.tail(3000)
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
    let omni = Omni::serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
        "--upstream-max-response-bytes",
        "1048576",
    ])
    .await;
    let raw = RawHttp::open(&omni.url, None).await;
    let before = rss_kib(omni._server.pid());
    let m = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                        "params":{"name":"fixture_echo","arguments":{"text":"hi"}}}))
        .await;
    let after = rss_kib(omni._server.pid());
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
    let omni = Omni::serve(&[
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
