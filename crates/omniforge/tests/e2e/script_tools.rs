//! Script tools end to end: agents forge Python tools through the authoring built-ins of the
//! real `omniforge` binary, and the official MCP clients list and call them.
//!
//! Everything is real: the binary (`CARGO_BIN_EXE_omniforge`), uv (`.deps/bin/uv`, passed with
//! `--uv` so nothing downloads uv), PyPI (python-dateutil is really resolved and installed),
//! bubblewrap (the default `--sandbox standard`), and the clients: the Python SDK 2.x
//! (`support/py/repl.py`) and the TypeScript SDK (`support/node/repl.mjs`), scripted
//! drivers that answer one JSON command line with one JSON line. The kill -9 burst speaks raw
//! JSON-RPC over HTTP, so that several creations are in flight at the moment of the kill.
//!
//! Needs `.deps/` (made by `scripts/bootstrap`): a missing piece fails the test with a message.
//! Every server listens on 127.0.0.1 with its own temporary data directory and is killed by
//! its own pid when its fixture is dropped; stdio servers (started by a driver) are found by
//! their data directory in /proc and killed by pid if they outlive their driver.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::support::{
    Captured, HttpClient, MarkedGuard, Serve, StdioGuard, data_home, drain, eventually,
    kill_and_reap, kill_leftover_servers, line_channel, marked, no_proxy, node_driver, node_script,
    node22, panic_lines, py_driver, python_driver, python2, repo_root, require, spawn_piped,
    stdio_argv, text_of, ts_modules, unique, uv,
};

/// How long one driver command may take unless it says otherwise (tool creation installs
/// from PyPI; the drivers' own request timeout is 60 s).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

/// The exact text of `add_vat {"net": 10}`: Python's `json.dumps` with default separators,
/// as the prototype's README shows it.
const ADD_VAT_10: &str = r#"{"net": "10", "rate": "20", "vat": "2.00", "gross": "12.00"}"#;

/// `parse_date` version 1: a date text -> ISO 8601 date-time, with python-dateutil.
const DATE_V1: &str = r#"import json, sys
from dateutil import parser

args = json.load(sys.stdin)
print(parser.parse(args["text"]).isoformat())
"#;

/// `parse_date` version 2: the date only.
const DATE_V2: &str = r#"import json, sys
from dateutil import parser

args = json.load(sys.stdin)
print(parser.parse(args["text"]).date().isoformat())
"#;

const DATE_TEXT: &str = "5 March 2024 10:30";
const DATE_V1_OUT: &str = "2024-03-05T10:30:00";
const DATE_V2_OUT: &str = "2024-03-05";

// ---------------------------------------------------------------------------------------
// The client drivers
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
pub(crate) enum Sdk {
    /// PyPI `mcp` 2.x, `.deps/py-mcp2`.
    Py2,
    /// npm `@modelcontextprotocol/sdk`, run by `.deps/bin/node22`.
    Ts,
}

/// A running `repl.py` / `repl.mjs`: one JSON command in, one JSON line out.
struct Repl {
    sdk: Sdk,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Captured,
    _dir: TempDir,
}

impl Repl {
    /// Starts the driver against `target` (an `http` URL or a `stdio` argv as JSON) and waits
    /// for its `ready` line (initialize done).
    async fn start(sdk: Sdk, kind: &str, target: &str) -> Repl {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = match sdk {
            Sdk::Py2 => {
                require(&[python2(), uv()]);
                python_driver(&python2(), &py_driver("repl.py"))
            }
            Sdk::Ts => {
                require(&[
                    node22(),
                    uv(),
                    ts_modules().join("@modelcontextprotocol/sdk/package.json"),
                ]);
                node_driver(dir.path(), &node_script("repl.mjs"))
            }
        };
        cmd.arg(kind)
            .arg(target)
            .current_dir(dir.path())
            .env("NO_COLOR", "1");
        // Over HTTP the driver talks to 127.0.0.1 only; over stdio its child (the server) may
        // need PyPI, so keep the environment's proxy settings there.
        if kind == "http" {
            no_proxy(&mut cmd);
        }
        let mut child = spawn_piped(&mut cmd)
            .unwrap_or_else(|e| panic!("cannot start the {sdk:?} driver: {e}"));
        let stdin = child.stdin.take();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let lines = line_channel(child.stdout.take().unwrap());
        let mut repl = Repl {
            sdk,
            child,
            stdin,
            lines,
            stderr,
            _dir: dir,
        };
        match repl.read(Duration::from_secs(40)).await {
            Ok(v) if v["event"] == "ready" => {}
            other => panic!(
                "the {sdk:?} client did not connect and initialize over {kind} ({other:?}); \
                 driver stderr:\n{}",
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
        let mut line = command.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().expect("driver stdin closed");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        match self.read(COMMAND_TIMEOUT).await {
            Ok(v) => v,
            Err(e) => panic!(
                "{:?} driver command {} got no answer: {e}; driver stderr:\n{}",
                self.sdk,
                short(&command.to_string(), 300),
                self.stderr.tail(8000)
            ),
        }
    }

    /// `tools/list`: the tools, as the SDK parsed them.
    async fn list(&mut self) -> Vec<Value> {
        let reply = self.cmd(json!({"op": "list"})).await;
        assert_eq!(
            reply["ok"],
            true,
            "tools/list failed: {reply}\ndriver stderr:\n{}",
            self.stderr.tail(4000)
        );
        reply["tools"].as_array().cloned().unwrap_or_default()
    }

    async fn names(&mut self) -> Vec<String> {
        self.list()
            .await
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// `tools/call` that must reach a CallToolResult: the driver's whole answer (`result`,
    /// `elapsed`, `progress`).
    async fn call_full(&mut self, name: &str, args: Value, progress: bool) -> Value {
        let reply = self
            .cmd(json!({"op": "call", "name": name, "args": args, "progress": progress}))
            .await;
        assert_eq!(
            reply["ok"],
            true,
            "tools/call {name} {} did not return a CallToolResult: {reply}\ndriver stderr:\n{}",
            short(&args.to_string(), 300),
            self.stderr.tail(4000)
        );
        reply
    }

    /// `tools/call` that must reach a CallToolResult: the result.
    async fn result(&mut self, name: &str, args: Value) -> Value {
        self.call_full(name, args, false).await["result"].clone()
    }

    /// A call that must succeed (`isError` false): its result.
    async fn ok(&mut self, name: &str, args: Value) -> Value {
        let result = self.result(name, args.clone()).await;
        assert!(
            !is_error(&result),
            "tools/call {name} {} answered isError: {}",
            short(&args.to_string(), 300),
            short(&text_of(&result), 3000)
        );
        result
    }

    /// The number of `notifications/tools/list_changed` received so far.
    async fn changes(&mut self) -> u64 {
        let reply = self.cmd(json!({"op": "changes"})).await;
        reply["count"].as_u64().unwrap()
    }

    /// Waits up to `timeout` for `count` list_changed in all; the count reached.
    async fn wait_changes(&mut self, count: u64, timeout: Duration) -> u64 {
        let reply = self
            .cmd(json!({"op": "wait_changes", "count": count, "timeout": timeout.as_secs_f64()}))
            .await;
        reply["count"].as_u64().unwrap_or(0)
    }

    /// Asks the driver to quit (closing its session, and for stdio its server) and waits.
    async fn quit(mut self) {
        let _ = self
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"{\"op\":\"quit\"}\n")
            .await;
        let _ = self.read(Duration::from_secs(10)).await;
        self.stdin = None;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

impl Drop for Repl {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

// ---------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

fn short(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &text[..end], text.len() - end)
}

fn names_of(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// The prototype's `add_vat` (net -> net, rate, VAT and gross as decimal strings, UK VAT 20%):
/// the `omniforge_create_tool` arguments in `examples/tools/add_vat.json`.
fn add_vat_args() -> Value {
    let path = repo_root().join("examples/tools/add_vat.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let args: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(args["name"], "add_vat", "{}", path.display());
    assert_eq!(args["inputSchema"]["type"], "object");
    assert_eq!(args["inputSchema"]["properties"]["net"]["type"], "number");
    assert_eq!(args["inputSchema"]["required"], json!(["net"]));
    args
}

fn add_vat_code() -> String {
    add_vat_args()["code"].as_str().unwrap().to_owned()
}

fn parse_date_args(code: &str, description: &str) -> Value {
    json!({
        "name": "parse_date",
        "description": description,
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "dependencies": ["python-dateutil>=2.8"],
        "code": code,
    })
}

/// Creates a tool with the given fields that must succeed; returns the result text.
async fn create_ok(repl: &mut Repl, args: Value) -> String {
    let name = args["name"].as_str().unwrap_or("?").to_owned();
    let result = repl.result("omniforge_create_tool", args).await;
    assert!(
        !is_error(&result),
        "omniforge_create_tool {name} failed: {}",
        text_of(&result)
    );
    text_of(&result)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The environment directory whose `requirements.txt` is `lock` (as omniforge_get_tool
/// shows it).
fn env_for_lock(data: &Path, lock: &str) -> PathBuf {
    let envs = data.join("envs");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&envs)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", envs.display()))
        .flatten()
    {
        let req =
            std::fs::read_to_string(entry.path().join("requirements.txt")).unwrap_or_default();
        if req.trim() == lock.trim() {
            return entry.path();
        }
        seen.push(entry.file_name());
    }
    panic!(
        "no environment in {} has the lock {lock:?} (envs: {seen:?})",
        envs.display()
    )
}

/// Median wall time of `n` runs of `<env>/bin/python -I script.py < args.json`, and the
/// stdout of the last run.
fn direct_runs(env: &Path, code: &str, args: &Value, n: usize) -> (f64, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.py");
    let args_file = dir.path().join("args.json");
    std::fs::write(&script, code).unwrap();
    std::fs::write(&args_file, args.to_string()).unwrap();
    let mut times = Vec::new();
    let mut last = String::new();
    for _ in 0..n {
        let started = Instant::now();
        let out = std::process::Command::new(env.join("bin/python"))
            .arg("-I")
            .arg(&script)
            .stdin(std::fs::File::open(&args_file).unwrap())
            .output()
            .unwrap();
        times.push(started.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "the direct run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        last = String::from_utf8_lossy(&out.stdout).trim_end().to_owned();
    }
    (median(times), last)
}

/// 20 calls through the SDK (median) next to 20 direct runs with the environment's python.
async fn measure(repl: &mut Repl, data: &Path, tool: &str, code: &str, args: Value, want: &str) {
    let reply = repl
        .cmd(json!({"op": "bench", "name": tool, "args": args, "n": 20}))
        .await;
    assert_eq!(reply["ok"], true, "bench {tool}: {reply}");
    for result in reply["results"].as_array().unwrap() {
        assert_eq!(text_of(result), want, "bench {tool}: {result}");
    }
    let via_mcp: Vec<f64> = reply["elapsed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let get = repl.ok("omniforge_get_tool", json!({"name": tool})).await;
    let lock = get["structuredContent"]["lock"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let env = env_for_lock(data, &lock);
    let (direct, out) = direct_runs(&env, code, &args, 20);
    assert_eq!(out, want, "the direct run of {tool} printed something else");
    eprintln!(
        "TIMING {tool}: median of 20 calls through the Python SDK over HTTP {:.1} ms \
         (min {:.1}, max {:.1}); the same script run directly with {}/bin/python -I: median {:.1} ms",
        median(via_mcp.clone()) * 1000.0,
        via_mcp.iter().copied().fold(f64::INFINITY, f64::min) * 1000.0,
        via_mcp.iter().copied().fold(0.0, f64::max) * 1000.0,
        env.display(),
        direct * 1000.0,
    );
}

/// Prints how long the test took (shown with `--no-capture` or for failures).
fn took(name: &str, started: Instant) {
    eprintln!(
        "script_tools::{name}: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// A server over HTTP on a fresh data dir, with the Python SDK 2.x client connected.
async fn http_scene(args: &[&str]) -> (TempDir, PathBuf, Serve, Repl) {
    let (dir, data) = data_home();
    let omni = Serve::on_data(&data, args).await;
    let repl = Repl::start(Sdk::Py2, "http", &omni.url).await;
    (dir, data, omni, repl)
}

// ---------------------------------------------------------------------------------------
// 1. add_vat end to end
// ---------------------------------------------------------------------------------------

/// Checks the listed `add_vat` and its call; shared by the Python and TypeScript flows.
async fn check_add_vat(repl: &mut Repl, changes_before: u64) {
    let reached = repl
        .wait_changes(changes_before + 1, Duration::from_secs(10))
        .await;
    assert!(
        reached > changes_before,
        "no notifications/tools/list_changed reached the {:?} client within 10 s of creating \
         add_vat (count stayed {changes_before})",
        repl.sdk
    );
    let tools = repl.list().await;
    let tool = tools
        .iter()
        .find(|t| t["name"] == "add_vat")
        .unwrap_or_else(|| panic!("tools/list lacks add_vat: {:?}", names_of(&tools)));
    assert_eq!(
        tool["inputSchema"],
        add_vat_args()["inputSchema"],
        "the listed add_vat inputSchema differs from the one it was created with"
    );
    let result = repl.result("add_vat", json!({"net": 10})).await;
    assert_eq!(
        result["isError"], false,
        "add_vat {{\"net\": 10}} must answer isError false: {result}"
    );
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": ADD_VAT_10}]),
        "add_vat {{\"net\": 10}}: want exactly one text item {ADD_VAT_10:?}"
    );
}

#[tokio::test]
async fn add_vat_python_sdk_http() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data, omni, mut repl) = http_scene(&[]).await;
    let before = repl.changes().await;
    let text = create_ok(&mut repl, add_vat_args()).await;
    assert!(
        text.contains("add_vat") && text.contains("version 1"),
        "create answered {text:?}"
    );
    check_add_vat(&mut repl, before).await;
    measure(
        &mut repl,
        &data,
        "add_vat",
        &add_vat_code(),
        json!({"net": 10}),
        ADD_VAT_10,
    )
    .await;
    repl.quit().await;
    omni.assert_no_panic();
    took("add_vat_python_sdk_http", started);
}

#[tokio::test]
async fn add_vat_typescript_sdk_stdio() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let mut repl = Repl::start(Sdk::Ts, "stdio", &stdio_argv(&data, &[])).await;
    let before = repl.changes().await;
    let text = create_ok(&mut repl, add_vat_args()).await;
    assert!(text.contains("add_vat"), "create answered {text:?}");
    check_add_vat(&mut repl, before).await;
    let stderr = repl.stderr.text();
    repl.quit().await;
    let leftovers = kill_leftover_servers(&data);
    let panics = panic_lines(&stderr);
    assert!(
        panics.is_empty(),
        "the server (or driver) panicked: {panics:?}"
    );
    assert_eq!(
        leftovers, 0,
        "the stdio server outlived its client; killed it"
    );
    took("add_vat_typescript_sdk_stdio", started);
}

// ---------------------------------------------------------------------------------------
// 2. A real PyPI dependency, versions, rollback, delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn dependency_versions_rollback_and_delete() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data, omni, mut repl) = http_scene(&[]).await;

    // Create with a progress token: the install reports progress.
    let reply = repl
        .call_full(
            "omniforge_create_tool",
            parse_date_args(DATE_V1, "Parse a date text; ISO 8601 date-time."),
            true,
        )
        .await;
    let result = &reply["result"];
    assert!(!is_error(result), "create parse_date: {}", text_of(result));
    let progress = reply["progress"].as_array().cloned().unwrap_or_default();
    eprintln!(
        "  create parse_date: {:.2} s, {} progress notifications: {:?}",
        reply["elapsed"].as_f64().unwrap_or(0.0),
        progress.len(),
        progress
            .iter()
            .map(|p| p["message"].as_str().unwrap_or(""))
            .collect::<Vec<_>>()
    );
    assert!(
        !progress.is_empty(),
        "omniforge_create_tool with a progressToken and a PyPI dependency sent no \
         notifications/progress"
    );
    let values: Vec<f64> = progress
        .iter()
        .filter_map(|p| p["progress"].as_f64())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress must increase with each notification: {values:?}"
    );

    let v1 = repl.ok("parse_date", json!({"text": DATE_TEXT})).await;
    assert_eq!(text_of(&v1), DATE_V1_OUT, "version 1");

    // Version 2 (the dependencies are given again: update keeps only schemas and title).
    let result = repl
        .result(
            "omniforge_update_tool",
            parse_date_args(DATE_V2, "Parse a date text; ISO 8601 date."),
        )
        .await;
    assert!(
        !is_error(&result),
        "update parse_date: {}",
        text_of(&result)
    );
    assert!(
        text_of(&result).contains("version 2"),
        "update answered {:?}",
        text_of(&result)
    );
    let v2 = repl.ok("parse_date", json!({"text": DATE_TEXT})).await;
    assert_eq!(text_of(&v2), DATE_V2_OUT, "version 2");

    // Roll back to version 1.
    let result = repl
        .result(
            "omniforge_rollback_tool",
            json!({"name": "parse_date", "version": 1}),
        )
        .await;
    assert!(!is_error(&result), "rollback to 1: {}", text_of(&result));
    let back = repl.ok("parse_date", json!({"text": DATE_TEXT})).await;
    assert_eq!(text_of(&back), DATE_V1_OUT, "after rollback to version 1");

    let get = repl
        .ok("omniforge_get_tool", json!({"name": "parse_date"}))
        .await;
    let view = &get["structuredContent"];
    let versions: Vec<i64> = view["versions"]
        .as_array()
        .map(|v| v.iter().filter_map(|x| x["number"].as_i64()).collect())
        .unwrap_or_default();
    let mut sorted = versions.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [1, 2], "omniforge_get_tool versions: {view}");
    assert_eq!(
        view["currentVersion"], 1,
        "current version after rollback: {view}"
    );
    assert_eq!(view["code"], DATE_V1, "current code after rollback");
    assert!(
        view["lock"]
            .as_str()
            .is_some_and(|l| l.contains("python-dateutil==")),
        "the lock pins python-dateutil: {}",
        view["lock"]
    );

    // Per-call timing (20 calls, median) next to the script run directly.
    measure(
        &mut repl,
        &data,
        "parse_date",
        DATE_V1,
        json!({"text": DATE_TEXT}),
        DATE_V1_OUT,
    )
    .await;

    // Delete (disable): the tool is gone from tools/list and calls are refused.
    let result = repl
        .result("omniforge_delete_tool", json!({"name": "parse_date"}))
        .await;
    assert!(!is_error(&result), "delete: {}", text_of(&result));
    let names = repl.names().await;
    assert!(
        !names.iter().any(|n| n == "parse_date"),
        "a disabled tool is still listed: {names:?}"
    );
    let gone = repl.result("parse_date", json!({"text": DATE_TEXT})).await;
    assert!(
        is_error(&gone) && text_of(&gone).contains("Unknown or inactive tool"),
        "calling a disabled tool: want isError \"Unknown or inactive tool\", got {gone}"
    );

    // Rollback re-enables it (and switches to version 2).
    let result = repl
        .result(
            "omniforge_rollback_tool",
            json!({"name": "parse_date", "version": 2}),
        )
        .await;
    assert!(!is_error(&result), "rollback to 2: {}", text_of(&result));
    let names = repl.names().await;
    assert!(
        names.iter().any(|n| n == "parse_date"),
        "rollback did not list the tool again: {names:?}"
    );
    let again = repl.ok("parse_date", json!({"text": DATE_TEXT})).await;
    assert_eq!(text_of(&again), DATE_V2_OUT, "after rollback to version 2");

    repl.quit().await;
    omni.assert_no_panic();
    took("dependency_versions_rollback_and_delete", started);
}

/// Issue 30: a version added to a disabled tool does not claim the tool is live, and a create
/// with a disabled tool's name says it is disabled and how to enable it.
#[tokio::test]
async fn a_disabled_tool_says_so_on_update_and_create() {
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    let tool = |code: &str| json!({"name": "shy", "description": "Prints a word.", "code": code});
    create_ok(&mut repl, tool("print('one')\n")).await;
    let result = repl
        .result("omniforge_delete_tool", json!({"name": "shy"}))
        .await;
    assert!(!is_error(&result), "delete: {}", text_of(&result));

    let result = repl
        .result("omniforge_update_tool", tool("print('two')\n"))
        .await;
    let text = text_of(&result);
    assert!(!is_error(&result), "update: {text}");
    assert!(
        !text.contains("listed in tools/list now") && text.contains("disabled"),
        "an update of a disabled tool claims it is live: {text}"
    );
    assert!(
        text.contains(r#"omniforge_rollback_tool {"name": "shy", "version": 2}"#),
        "{text}"
    );
    let gone = repl.result("shy", json!({})).await;
    assert!(is_error(&gone), "the disabled tool answered: {gone}");

    let result = repl
        .result("omniforge_create_tool", tool("print('three')\n"))
        .await;
    let text = text_of(&result);
    assert!(
        is_error(&result)
            && text.contains("is disabled")
            && text.contains("omniforge_rollback_tool"),
        "create with a disabled tool's name: {text}"
    );

    // What the answer says to do works: version 2 runs.
    let result = repl
        .result(
            "omniforge_rollback_tool",
            json!({"name": "shy", "version": 2}),
        )
        .await;
    assert!(!is_error(&result), "rollback: {}", text_of(&result));
    assert_eq!(text_of(&repl.ok("shy", json!({})).await), "two");

    repl.quit().await;
    omni.assert_no_panic();
    took("a_disabled_tool_says_so_on_update_and_create", started);
}

// ---------------------------------------------------------------------------------------
// 3. Validation errors
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn validation_errors_name_the_problem_and_save_nothing() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    let before = repl.list().await;
    let trivial = "print('hi')\n";
    let missing_dist = "omniforge-e2e-no-such-distribution-7f3a9c";

    // (case, arguments, what the text must mention (all, case-insensitive))
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "bad name",
            json!({"name": "a b", "description": "d", "code": trivial}),
            vec!["name"],
        ),
        (
            "name of a built-in",
            json!({"name": "omniforge_instructions", "description": "d", "code": trivial}),
            vec!["name", "built-in"],
        ),
        (
            "inputSchema root not an object (WIRE-23)",
            json!({"name": "bad_root", "description": "d", "code": trivial,
                   "inputSchema": {"anyOf": [{"type": "object"}, {"type": "string"}]}}),
            vec!["inputSchema", "root", "\"type\": \"object\""],
        ),
        (
            "unresolvable $ref (WIRE-22)",
            json!({"name": "bad_ref", "description": "d", "code": trivial,
                   "inputSchema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}}),
            vec!["inputSchema", "/$defs/Missing"],
        ),
        (
            "syntax error",
            json!({"name": "bad_syntax", "description": "d",
                   "code": "import json\nx = 1\ndef broken(:\n    pass\n"}),
            vec!["code", "line 3"],
        ),
        (
            "dependency not on PyPI",
            json!({"name": "bad_dep", "description": "d", "code": trivial,
                   "dependencies": [missing_dist]}),
            vec!["dependencies", missing_dist],
        ),
    ];
    let mut problems = Vec::new();
    for (case, args, wants) in &cases {
        let result = repl.result("omniforge_create_tool", args.clone()).await;
        let text = text_of(&result);
        eprintln!(
            "  {case}: isError={} text={:?}",
            result["isError"],
            short(&text, 600)
        );
        if !is_error(&result) {
            problems.push(format!("{case}: want isError true, got {result}"));
            continue;
        }
        let lower = text.to_lowercase();
        for want in wants {
            if !lower.contains(&want.to_lowercase()) {
                problems.push(format!(
                    "{case}: the error text does not mention {want:?}: {:?}",
                    short(&text, 600)
                ));
            }
        }
        if let Some(name) = args["name"].as_str()
            && name != "omniforge_instructions"
        {
            let get = repl
                .result("omniforge_get_tool", json!({"name": name}))
                .await;
            if !is_error(&get) {
                problems.push(format!(
                    "{case}: a tool {name:?} was saved: {}",
                    text_of(&get)
                ));
            }
        }
    }
    let after = repl.list().await;
    if after != before {
        problems.push(format!(
            "tools/list changed after refused creations: before {:?}, after {:?}",
            names_of(&before),
            names_of(&after)
        ));
    }
    repl.quit().await;
    omni.assert_no_panic();
    took(
        "validation_errors_name_the_problem_and_save_nothing",
        started,
    );
    assert!(problems.is_empty(), "\n  - {}", problems.join("\n  - "));
}

// ---------------------------------------------------------------------------------------
// 4. outputSchema
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn output_schema_gives_structured_content_or_a_clear_error() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    let code = r#"import json, sys
args = json.load(sys.stdin)
mode = args["mode"]
if mode == "ok":
    print(json.dumps({"sum": args["a"] + args["b"], "label": "total"}))
elif mode == "mismatch":
    print(json.dumps({"sum": "not a number", "label": "total"}))
else:
    print("just some text")
"#;
    let output_schema = json!({
        "type": "object",
        "properties": {"sum": {"type": "integer"}, "label": {"type": "string"}},
        "required": ["sum", "label"]
    });
    create_ok(
        &mut repl,
        json!({
            "name": "shaped",
            "description": "Adds two integers; structured result.",
            "inputSchema": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["ok", "mismatch", "text"]},
                "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["mode"]},
            "outputSchema": output_schema,
            "code": code,
        }),
    )
    .await;
    let tools = repl.list().await;
    let listed = tools
        .iter()
        .find(|t| t["name"] == "shaped")
        .unwrap_or_else(|| panic!("shaped is not listed: {:?}", names_of(&tools)));
    assert_eq!(listed["outputSchema"], output_schema, "listed outputSchema");

    let ok = repl
        .ok("shaped", json!({"mode": "ok", "a": 2, "b": 3}))
        .await;
    let want = json!({"sum": 5, "label": "total"});
    assert_eq!(ok["structuredContent"], want, "structuredContent: {ok}");
    let text = text_of(&ok);
    let parsed: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the text of a structured result is not JSON ({e}): {text:?}"));
    assert_eq!(parsed, want, "the text must carry the same JSON");

    let mut problems = Vec::new();
    for (mode, must_mention) in [("mismatch", "outputSchema"), ("text", "JSON")] {
        let result = repl
            .result("shaped", json!({"mode": mode, "a": 1, "b": 1}))
            .await;
        let text = text_of(&result);
        eprintln!("  mode {mode}: isError={} text={text:?}", result["isError"]);
        if !is_error(&result) {
            problems.push(format!("mode {mode}: want isError true, got {result}"));
        }
        if result.get("structuredContent").is_some() {
            problems.push(format!(
                "mode {mode}: an error result carries structuredContent: {result}"
            ));
        }
        if !text.contains(must_mention) {
            problems.push(format!(
                "mode {mode}: the reason does not mention {must_mention:?}: {text:?}"
            ));
        }
    }
    repl.quit().await;
    omni.assert_no_panic();
    took(
        "output_schema_gives_structured_content_or_a_clear_error",
        started,
    );
    assert!(problems.is_empty(), "\n  - {}", problems.join("\n  - "));
}

// ---------------------------------------------------------------------------------------
// 5. Limits
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn limits_timeout_output_cut_exit_code_and_stderr() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    create_ok(
        &mut repl,
        json!({"name": "sleepy", "description": "Sleeps past its timeout.", "timeout_s": 1,
               "code": "import time\nprint('going to sleep', flush=True)\ntime.sleep(20)\nprint('woke up')\n"}),
    )
    .await;
    create_ok(
        &mut repl,
        json!({"name": "chatty", "description": "Prints 1 MB.",
               "code": "import sys\nsys.stdout.write('x' * 1000000)\n"}),
    )
    .await;
    create_ok(
        &mut repl,
        json!({"name": "failing", "description": "Exits 3 with stderr.",
               "code": "import sys\nprint('partial output')\nsys.stderr.write('something broke\\n')\nsys.exit(3)\n"}),
    )
    .await;

    let mut problems = Vec::new();

    // Timeout.
    let reply = repl.call_full("sleepy", json!({}), false).await;
    let result = &reply["result"];
    let elapsed = reply["elapsed"].as_f64().unwrap_or(0.0);
    let text = text_of(result);
    eprintln!(
        "  sleepy: {elapsed:.2} s isError={} text={text:?}",
        result["isError"]
    );
    if !is_error(result) || !text.contains("[timeout]") {
        problems.push(format!(
            "timeout_s 1, sleep 20: want isError with [timeout], got {result}"
        ));
    }
    if text.contains("woke up") {
        problems.push(format!("the script outlived its timeout: {text:?}"));
    }
    if elapsed > 8.0 {
        problems.push(format!("timeout_s 1 took {elapsed:.1} s to answer"));
    }

    // 1 MB of output: cut at 64 KiB with a marker of the bytes left out.
    let result = repl.result("chatty", json!({})).await;
    let text = text_of(&result);
    let xs = text.bytes().take_while(|&b| b == b'x').count();
    let rest = &text[xs..];
    eprintln!(
        "  chatty: isError={} {} bytes of text, {xs} x's, then {:?}",
        result["isError"],
        text.len(),
        short(rest, 200)
    );
    if is_error(&result) {
        problems.push(format!(
            "1 MB of output is not an error, got isError: {}",
            short(rest, 300)
        ));
    }
    if xs != 64 * 1024 {
        problems.push(format!(
            "1 MB of output: want the text cut after exactly 65536 bytes, got {xs} bytes of output \
             (text is {} bytes)",
            text.len()
        ));
    }
    let left_out = (1_000_000 - 64 * 1024).to_string();
    if !rest.contains(&left_out) || rest.len() > 200 {
        problems.push(format!(
            "1 MB of output: want a short marker saying {left_out} bytes were left out after \
             the cut, got {:?}",
            short(rest, 300)
        ));
    }

    // Exit 3 with stderr.
    let result = repl.result("failing", json!({})).await;
    let text = text_of(&result);
    eprintln!("  failing: isError={} text={text:?}", result["isError"]);
    if !is_error(&result)
        || !text.contains("partial output")
        || !text.contains("[stderr] something broke")
        || !text.contains("[exit 3]")
    {
        problems.push(format!(
            "exit 3 with stderr: want isError and a text with the stdout, \
             `[stderr] something broke` and `[exit 3]`, got {result}"
        ));
    }

    repl.quit().await;
    omni.assert_no_panic();
    took("limits_timeout_output_cut_exit_code_and_stderr", started);
    assert!(problems.is_empty(), "\n  - {}", problems.join("\n  - "));
}

/// Network is denied by default: a connection to a port this test listens on fails inside
/// the script, and nothing reaches the listener. With `network: true` (the control) the same
/// script connects.
#[tokio::test]
async fn network_is_denied_by_default() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = r#"import json, socket, sys
args = json.load(sys.stdin)
try:
    with socket.create_connection(("127.0.0.1", args["port"]), timeout=3) as s:
        s.sendall(b"hello from the sandbox")
    print("CONNECTED")
except OSError as e:
    print(f"blocked: {e}")
"#;
    let schema = json!({"type": "object", "properties": {"port": {"type": "integer"}}, "required": ["port"]});
    create_ok(
        &mut repl,
        json!({"name": "dial", "description": "Connects to 127.0.0.1:port.", "inputSchema": schema, "code": code}),
    )
    .await;
    create_ok(
        &mut repl,
        json!({"name": "dial_allowed", "description": "Connects to 127.0.0.1:port (network allowed).",
               "inputSchema": schema, "code": code, "network": true}),
    )
    .await;

    let accepted = |listener: &TcpListener| -> usize {
        let mut n = 0;
        while let Ok((mut stream, _)) = listener.accept() {
            let mut buf = Vec::new();
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = stream.read_to_end(&mut buf);
            let _ = stream.write_all(b"");
            n += 1;
        }
        n
    };

    let denied = repl.ok("dial", json!({"port": port})).await;
    let text = text_of(&denied);
    eprintln!("  network default: {text:?}");
    let reached = accepted(&listener);
    assert!(
        text.starts_with("blocked:") && reached == 0,
        "a script without `network: true` reached 127.0.0.1:{port}: script said {text:?}, \
         the listener accepted {reached} connection(s)"
    );

    let allowed = repl.ok("dial_allowed", json!({"port": port})).await;
    let text = text_of(&allowed);
    let reached = if text == "CONNECTED" {
        eventually(
            Duration::from_secs(5),
            "the allowed script's connection accepted",
            async || {
                let n = accepted(&listener);
                (n > 0).then_some(n)
            },
        )
        .await
    } else {
        accepted(&listener)
    };
    eprintln!("  network: true: {text:?}, accepted {reached}");
    assert!(
        text == "CONNECTED" && reached == 1,
        "control: with `network: true` the same script should connect: script said {text:?}, \
         the listener accepted {reached} connection(s)"
    );

    repl.quit().await;
    omni.assert_no_panic();
    took("network_is_denied_by_default", started);
}

// ---------------------------------------------------------------------------------------
// 6. Cancellation
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn cancelled_call_leaves_no_process_and_server_answers_next_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, _data, omni, mut repl) = http_scene(&[]).await;
    // The run re-executes itself with the marker in argv and starts a child that carries it
    // too: every process of the run can be found in /proc.
    let code = r#"import json, os, subprocess, sys
marker = json.load(sys.stdin)["marker"]
sleeper = [sys.executable, "-c", "import time; time.sleep(30)", marker]
subprocess.Popen(sleeper)
os.execv(sys.executable, sleeper)
"#;
    create_ok(
        &mut repl,
        json!({"name": "slow", "description": "Sleeps 30 s.", "code": code,
               "inputSchema": {"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]}}),
    )
    .await;
    create_ok(
        &mut repl,
        json!({"name": "quick", "description": "Answers at once.", "code": "print('still here')\n"}),
    )
    .await;

    let marker = unique("omniforge-e2e-cancel-");
    // Clean up after a failure: the processes this test caused.
    let _leftovers = MarkedGuard(marker.clone());
    let reply = repl
        .cmd(json!({"op": "start", "tag": "slow", "name": "slow", "args": {"marker": marker}}))
        .await;
    assert_eq!(reply["ok"], true, "start: {reply}");
    let call_started = Instant::now();
    // Wait until both processes of the run are up.
    let during = eventually(
        Duration::from_secs(15),
        "both processes of the slow run",
        async || {
            let during = marked(&marker);
            if during.len() >= 2 {
                Ok(during)
            } else {
                Err(format!(
                    "found {during:?}; server stderr:\n{}",
                    omni.output_tail()
                ))
            }
        },
    )
    .await;
    // scenario: cancel about 1 s into the call.
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(call_started.elapsed())).await;
    let cancel_at = Instant::now();
    let reply = repl.cmd(json!({"op": "cancel", "tag": "slow"})).await;
    eprintln!("  cancel: {reply}");
    assert_eq!(
        reply["cancelled"], true,
        "the client could not cancel the call: {reply}"
    );

    eventually(
        Duration::from_secs(5),
        &format!(
            "processes of the cancelled run (pids were {during:?}) gone after \
             notifications/cancelled"
        ),
        async || {
            let stray: Vec<String> = marked(&marker)
                .iter()
                .map(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmdline).replace('\0', " ")
                    )
                })
                .collect();
            if stray.is_empty() {
                Ok(())
            } else {
                Err(format!("still alive: {stray:?}"))
            }
        },
    )
    .await;
    let gone_after = cancel_at.elapsed();
    eprintln!(
        "  the run's processes were gone {:.0} ms after the cancel",
        gone_after.as_secs_f64() * 1000.0
    );

    let next = repl.ok("quick", json!({})).await;
    assert_eq!(text_of(&next), "still here", "the call after a cancel");
    repl.quit().await;
    omni.assert_no_panic();
    took(
        "cancelled_call_leaves_no_process_and_server_answers_next_call",
        started,
    );
}

// ---------------------------------------------------------------------------------------
// 7. omniforge_call_tool and --no-authoring
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn call_tool_by_name_and_no_authoring_hides_authoring_tools() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data, omni, mut repl) = http_scene(&[]).await;
    create_ok(&mut repl, add_vat_args()).await;
    let result = repl
        .ok(
            "omniforge_call_tool",
            json!({"name": "add_vat", "arguments": {"net": 10}}),
        )
        .await;
    assert_eq!(
        result["content"],
        json!([{"type": "text", "text": ADD_VAT_10}]),
        "omniforge_call_tool add_vat {{\"net\": 10}}"
    );
    repl.quit().await;
    omni.assert_no_panic();
    drop(omni);

    // The same data dir with --no-authoring.
    let omni = Serve::on_data(&data, &["--no-authoring"]).await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url).await;
    let names = repl.names().await;
    let builtins: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("omniforge_"))
        .collect();
    assert_eq!(
        builtins,
        [
            "omniforge_instructions",
            "omniforge_search_tools",
            "omniforge_get_tool_schemas",
            "omniforge_call_tool"
        ],
        "with --no-authoring the built-ins must be only omniforge_instructions, the discovery \
         built-ins and omniforge_call_tool; tools/list: {names:?}"
    );
    assert!(
        names.iter().any(|n| n == "add_vat"),
        "stored tools stay listed with --no-authoring: {names:?}"
    );
    let result = repl
        .ok(
            "omniforge_call_tool",
            json!({"name": "add_vat", "arguments": {"net": 10}}),
        )
        .await;
    assert_eq!(
        text_of(&result),
        ADD_VAT_10,
        "omniforge_call_tool with --no-authoring"
    );
    let refused = repl
        .cmd(json!({"op": "call", "name": "omniforge_create_tool",
                    "args": {"name": "sneaky", "description": "d", "code": "print(1)"}}))
        .await;
    eprintln!("  create with --no-authoring: {refused}");
    assert!(
        refused["ok"] == false || is_error(&refused["result"]),
        "omniforge_create_tool must not work with --no-authoring: {refused}"
    );
    let names = repl.names().await;
    assert!(
        !names.iter().any(|n| n == "sneaky"),
        "a tool was created with --no-authoring: {names:?}"
    );
    repl.quit().await;
    omni.assert_no_panic();
    took(
        "call_tool_by_name_and_no_authoring_hides_authoring_tools",
        started,
    );
}

// ---------------------------------------------------------------------------------------
// 8. kill -9 during a burst of creations
// ---------------------------------------------------------------------------------------

/// `tools/call` in `mcp`'s session: the result, or why there is none.
async fn call_result(mcp: &mut HttpClient, name: &str, arguments: Value) -> Result<Value, String> {
    let m = mcp
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await?;
    m.get("result")
        .cloned()
        .ok_or_else(|| format!("no result: {m}"))
}

/// A 2025-11-25 session at `url`, for the burst.
async fn burst_session(url: &str) -> Result<HttpClient, String> {
    HttpClient::open_as(url, None, "2025-11-25").await
}

#[tokio::test]
async fn kill9_during_creation_burst_keeps_every_acknowledged_tool() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data) = data_home();
    let mut omni = Serve::on_data(&data, &[]).await;
    // Build the shared environment first, so that the burst is store writes, not installs.
    {
        let mut raw = burst_session(&omni.url).await.expect("open a session");
        let result = call_result(
            &mut raw,
            "omniforge_create_tool",
            json!({"name": "warmup", "description": "d", "code": "print('warm')"}),
        )
        .await
        .expect("create warmup");
        assert_ne!(result["isError"], true, "create warmup: {result}");
    }

    const WORKERS: usize = 4;
    const KILL_AFTER: usize = 12;
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let sent: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let url = omni.url.clone();
        let acked = acked.clone();
        let sent = sent.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut raw) = burst_session(&url).await else { return };
            for i in 0..200 {
                let name = format!("burst_{w}_{i}");
                sent.lock().unwrap().push(name.clone());
                let args = json!({"name": name, "description": "burst", "code": format!("print('{name}')")});
                match call_result(&mut raw, "omniforge_create_tool", args).await {
                    Ok(result) if result["isError"] != true => acked.lock().unwrap().push(name),
                    _ => return,
                }
            }
        }));
    }
    let at_kill = eventually(
        Duration::from_secs(30),
        &format!("{KILL_AFTER} creations acknowledged"),
        async || {
            let n = acked.lock().unwrap().len();
            if n >= KILL_AFTER {
                Ok(n)
            } else {
                Err(format!("only {n}; server stderr:\n{}", omni.output_tail()))
            }
        },
    )
    .await;
    omni.kill();
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(15), t).await;
    }
    let acked = acked.lock().unwrap().clone();
    let sent = sent.lock().unwrap().clone();
    let in_flight: Vec<&String> = sent.iter().filter(|n| !acked.contains(n)).collect();
    eprintln!(
        "  killed -9 after {} acknowledged creations ({} acknowledged in all, {} in flight: {in_flight:?})",
        at_kill,
        acked.len(),
        in_flight.len()
    );
    omni.assert_no_panic();
    drop(omni);

    // Restart on the same data dir.
    let omni = Serve::on_data(&data, &[]).await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url).await;
    let names = repl.names().await;
    let missing: Vec<&String> = acked.iter().filter(|n| !names.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "acknowledged tools missing after kill -9 and restart: {missing:?}; listed: {names:?}"
    );
    // Every burst tool that is listed (acknowledged, or in flight and committed) works.
    let mut broken = Vec::new();
    for name in names
        .iter()
        .filter(|n| n.starts_with("burst_") || *n == "warmup")
    {
        let result = repl.result(name, json!({})).await;
        let want = if name == "warmup" {
            "warm"
        } else {
            name.as_str()
        };
        if is_error(&result) || text_of(&result) != want {
            broken.push(format!("{name}: {result}"));
        }
    }
    assert!(
        broken.is_empty(),
        "listed tools that do not work after restart: {broken:?}"
    );
    repl.quit().await;
    omni.assert_no_panic();
    took(
        "kill9_during_creation_burst_keeps_every_acknowledged_tool",
        started,
    );
}

// ---------------------------------------------------------------------------------------
// 9. Two processes on one database
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn change_by_another_process_shows_up_with_list_changed() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_dir, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let argv = stdio_argv(&data, &[]);
    let mut a = Repl::start(Sdk::Py2, "stdio", &argv).await;
    let mut b = Repl::start(Sdk::Py2, "stdio", &argv).await;
    let before = b.changes().await;
    assert!(
        !b.names().await.iter().any(|n| n == "add_vat"),
        "add_vat listed before it was created"
    );

    create_ok(&mut a, add_vat_args()).await;
    let created_at = Instant::now();
    let reached = b.wait_changes(before + 1, Duration::from_secs(5)).await;
    let seen_after = created_at.elapsed();
    let names = b.names().await;
    let stderr_a = a.stderr.text();
    let stderr_b = b.stderr.text();
    eprintln!(
        "  the other server: list_changed count {before} -> {reached} ({:.2} s after the create)",
        seen_after.as_secs_f64()
    );
    let listed = names.iter().any(|n| n == "add_vat");
    let call = if listed {
        Some(b.result("add_vat", json!({"net": 10})).await)
    } else {
        None
    };
    a.quit().await;
    b.quit().await;
    let leftovers = kill_leftover_servers(&data);
    assert!(
        reached > before,
        "the second server (same --data-dir) sent no notifications/tools/list_changed within \
         5 s of a tool created through the first"
    );
    assert!(
        listed,
        "the second server does not list add_vat created through the first: {names:?}"
    );
    let call = call.unwrap();
    assert_eq!(
        text_of(&call),
        ADD_VAT_10,
        "add_vat through the second server: {call}"
    );
    for (who, stderr) in [("first", &stderr_a), ("second", &stderr_b)] {
        let panics = panic_lines(stderr);
        assert!(panics.is_empty(), "the {who} server panicked: {panics:?}");
    }
    assert_eq!(
        leftovers, 0,
        "a stdio server outlived its client; killed it"
    );
    took(
        "change_by_another_process_shows_up_with_list_changed",
        started,
    );
}
