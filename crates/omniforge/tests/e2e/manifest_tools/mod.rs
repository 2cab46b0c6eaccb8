//! Manifest tools end to end: the real `omniforge` binary serving the RPCs of a forge
//! manifest, proxied to a real Connect service (the Node fixture in `tests/fixtures/connect`,
//! built with the official `@connectrpc/connect-node`), driven by the official MCP clients.
//!
//! Most cases use the Python SDK 2.x over Streamable HTTP (`support/py/repl.py`, a
//! scripted client: the test writes one JSON command per line, the driver answers each with
//! one JSON line). `omniforge bridge` is driven over stdio by the TypeScript SDK
//! (`support/node/repl.mjs`, same protocol) and by raw JSON-RPC lines. Upstream failures
//! that a Connect server does not produce (an HTML 502 page, a 200 that is not JSON) come from
//! a tiny loopback HTTP server (`stub.rs`); "connection refused" is a port that was just
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
    self, BIN, Captured, Fixture, Serve, drain, eventually, fixture_manifest, kill_and_reap,
    no_proxy, node_driver, node_script, node22, py_driver, python_driver, python2, require,
    ts_modules,
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

mod auth;
mod bridge;
mod calls;
mod cancel;
mod errors;
mod listing;
mod raw;
mod reload;
mod sessions;
mod startup;
mod stub;

use raw::*;
use stub::*;

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

// ---------------------------------------------------------------------------------------
// OmniForge
// ---------------------------------------------------------------------------------------

/// `omniforge serve --listen 127.0.0.1:0 --data-dir <temp> ARGS...`, without proxy settings.
async fn serve(args: &[&str]) -> Serve {
    let mut command = Serve::command().fresh_data_dir().args(args);
    no_proxy(command.cmd());
    command.start().await
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
async fn fixture_scene(args: &[&str]) -> (Fixture, Serve, Repl) {
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let mut all = vec![
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ];
    all.extend_from_slice(args);
    let omni = serve(&all).await;
    let repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    (fixture, omni, repl)
}

/// Asserts that no server panicked and prints how long the test took.
fn finish(name: &str, started: Instant, omni: &Serve) {
    let panics = panic_lines(&omni.stderr());
    assert!(
        panics.is_empty(),
        "omniforge panicked: {panics:?}\n{}",
        omni.stderr_captured().tail(6000)
    );
    eprintln!(
        "manifest_tools::{name}: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// Polls `fixture_stats` until `field` is at least `want` (up to `within`): the stats.
async fn wait_stat(repl: &mut Repl, field: &str, want: i64, within: Duration) -> Value {
    eventually(
        within,
        &format!("fixture_stats {field} >= {want}"),
        async || {
            let result = repl.result("fixture_stats", json!({})).await;
            assert!(!is_error(&result), "fixture_stats failed: {result}");
            let stats = result["structuredContent"].clone();
            if stats[field].as_i64().unwrap_or(0) >= want {
                Ok(stats)
            } else {
                Err(stats.to_string())
            }
        },
    )
    .await
}

/// Polls `fixture_stats` over a raw session until `field` is at least `want` (up to
/// `within`): the stats. Request ids count up from `*id`.
async fn raw_wait_stat(
    raw: &RawHttp,
    id: &mut i64,
    field: &str,
    want: i64,
    within: Duration,
) -> Value {
    eventually(
        within,
        &format!("fixture_stats {field} >= {want}"),
        async || {
            *id += 1;
            let m = raw
                .request(json!({"jsonrpc":"2.0","id":*id,"method":"tools/call",
                            "params":{"name":"fixture_stats","arguments":{}}}))
                .await;
            let stats = m["result"]["structuredContent"].clone();
            if stats[field].as_i64().unwrap_or(0) >= want {
                Ok(stats)
            } else {
                Err(stats.to_string())
            }
        },
    )
    .await
}
