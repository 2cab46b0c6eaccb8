//! The official MCP client SDKs against the real binary: Python SDK 1.x and 2.x and the
//! TypeScript SDK, each over stdio and Streamable HTTP.
//!
//! Each test runs a driver script from `drivers/` (installed SDKs come from `.deps/`, made by
//! `scripts/bootstrap`). The driver initializes, lists tools, calls `omniforge_instructions`,
//! prints `READY` and waits for `notifications/tools/list_changed`. On `READY` the test
//! rewrites the forge manifest the server was started with (`--manifest`), atomically as a
//! code generator would (temp file + rename), adding the tool `echo_ping`; the driver then
//! lists tools again (`TOOLS2`) and exits 0.
//!
//! The drivers' stdout protocol: `INIT {..}`, `TOOLS [..]`, `CALL {..}`, `READY`, `CHANGED`,
//! `TOOLS2 [..]`, `DONE`, one per line; everything else goes to their stderr (for stdio
//! that includes the server's own stderr).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::support::{self, BIN, Captured, Serve, deps, node_script, py_driver};

/// How long one driver run may take in all (its own waits are 15 s a request, 20 s for the
/// notification).
const DRIVER_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sdk {
    /// PyPI `mcp` 1.x in `.deps/py-mcp1`.
    Py1,
    /// PyPI `mcp` 2.x in `.deps/py-mcp2`.
    Py2,
    /// npm `@modelcontextprotocol/sdk` in `.deps/node/node_modules`, run by `.deps/bin/node22`.
    Ts,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Stdio,
    Http,
}

/// The interpreter and the files a client needs from `.deps/`; a missing one fails the test.
fn require_deps(sdk: Sdk) -> (PathBuf, PathBuf) {
    let deps = deps();
    let (program, needed): (PathBuf, Vec<PathBuf>) = match sdk {
        Sdk::Py1 => (deps.join("py-mcp1/bin/python"), vec![]),
        Sdk::Py2 => (deps.join("py-mcp2/bin/python"), vec![]),
        Sdk::Ts => (
            deps.join("bin/node22"),
            vec![deps.join("node/node_modules/@modelcontextprotocol/sdk/package.json")],
        ),
    };
    for path in std::iter::once(&program).chain(&needed) {
        assert!(
            path.exists(),
            "{} is missing: the official MCP clients are not installed. Run `scripts/bootstrap` \
             (from the repository root) to install them into .deps/, then rerun the tests.",
            path.display()
        );
    }
    (program, deps.join("node/node_modules"))
}

/// A forge manifest (`gen/mcp/manifest.json` shape) with the given tools.
fn manifest(with_echo_ping: bool) -> Value {
    let mut tools = vec![json!({
        "name": "greet",
        "description": "Say hello",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        "service": "demo.v1.GreetService",
        "method": "Greet",
        "procedure": "/demo.v1.GreetService/Greet"
    })];
    if with_echo_ping {
        tools.push(json!({
            "name": "echo_ping",
            "description": "Answer a ping with its message",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
            "service": "demo.v1.EchoService",
            "method": "Ping",
            "procedure": "/demo.v1.EchoService/Ping"
        }));
    }
    json!({"_generated": "x", "schema_version": "1", "project": "demo", "tools": tools})
}

/// Replaces `path` atomically: a temp file in the same directory, renamed over it.
fn write_atomically(path: &Path, value: &Value) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One parsed driver run.
#[derive(Debug)]
struct Run {
    /// Every stdout line, in order.
    lines: Vec<String>,
    /// When the test rewrote the manifest, measured from the start of the driver.
    rewritten_at: Option<Duration>,
    /// When `CHANGED` was printed, measured from the start of the driver.
    changed_at: Option<Duration>,
    /// Exit status, or why there is none.
    status: Result<std::process::ExitStatus, String>,
}

impl Run {
    /// The payload of the first line `TAG ...`.
    fn payload(&self, tag: &str) -> Option<&str> {
        let prefix = format!("{tag} ");
        self.lines.iter().find_map(|l| l.strip_prefix(&prefix))
    }

    fn has(&self, tag: &str) -> bool {
        self.lines.iter().any(|l| l == tag)
    }

    /// A `TOOLS`-style line as tool names.
    fn names(&self, tag: &str) -> Result<Vec<String>, String> {
        let text = self
            .payload(tag)
            .ok_or_else(|| format!("the driver printed no {tag} line"))?;
        serde_json::from_str(text)
            .map_err(|e| format!("{tag} is not a JSON list of names ({e}): {text}"))
    }
}

async fn run_client(sdk: Sdk, transport: Transport) {
    let started = Instant::now();
    let (program, node_modules) = require_deps(sdk);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let manifest_path = dir.path().join("manifest.json");
    write_atomically(&manifest_path, &manifest(false));

    let server = match transport {
        Transport::Http => Some(
            Serve::start(&[
                "--data-dir".as_ref(),
                data.as_os_str(),
                "--manifest".as_ref(),
                manifest_path.as_os_str(),
            ])
            .await,
        ),
        Transport::Stdio => None,
    };
    let (kind, target) = match &server {
        Some(server) => ("http", server.url.clone()),
        None => (
            "stdio",
            json!([
                BIN,
                "stdio",
                "--data-dir",
                data,
                "--manifest",
                manifest_path
            ])
            .to_string(),
        ),
    };

    let mut cmd = match sdk {
        Sdk::Py1 | Sdk::Py2 => {
            let mut cmd = Command::new(&program);
            cmd.arg(py_driver("client.py"));
            cmd.env("PYTHONUNBUFFERED", "1")
                .env("PYTHONDONTWRITEBYTECODE", "1");
            cmd
        }
        Sdk::Ts => {
            // ESM resolves `@modelcontextprotocol/sdk` next to the script: give it a home
            // whose node_modules is the bootstrapped one.
            let home = dir.path().join("ts");
            std::fs::create_dir(&home).unwrap();
            std::fs::copy(node_script("client.mjs"), home.join("client.mjs")).unwrap();
            std::os::unix::fs::symlink(&node_modules, home.join("node_modules")).unwrap();
            let mut cmd = Command::new(&program);
            cmd.arg(home.join("client.mjs"));
            cmd
        }
    };
    let mut child = cmd
        .arg(kind)
        .arg(&target)
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let driver_err = Captured::default();
    let stderr_done = support::drain(child.stderr.take().unwrap(), driver_err.clone());
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();

    let mut run = Run {
        lines: Vec::new(),
        rewritten_at: None,
        changed_at: None,
        status: Err("not finished".into()),
    };
    let deadline = tokio::time::Instant::now() + DRIVER_TIMEOUT;
    let mut timed_out = false;
    loop {
        match tokio::time::timeout_at(deadline, stdout.next_line()).await {
            Err(_) => {
                timed_out = true;
                break;
            }
            Ok(Ok(Some(line))) => {
                if line == "READY" {
                    write_atomically(&manifest_path, &manifest(true));
                    run.rewritten_at = Some(started.elapsed());
                }
                if line == "CHANGED" {
                    run.changed_at = Some(started.elapsed());
                }
                run.lines.push(line);
            }
            Ok(Ok(None) | Err(_)) => break,
        }
    }
    run.status = if timed_out {
        support::kill_and_reap(&mut child);
        Err(format!(
            "the driver did not finish within {DRIVER_TIMEOUT:?}; killed"
        ))
    } else {
        match tokio::time::timeout(Duration::from_secs(15), child.wait()).await {
            Ok(Ok(status)) => Ok(status),
            Ok(Err(e)) => Err(format!("waiting for the driver: {e}")),
            Err(_) => {
                support::kill_and_reap(&mut child);
                Err("the driver closed stdout but did not exit within 15 s; killed".into())
            }
        }
    };
    // The stderr capture is complete at its EOF (a stdio server the driver left behind may
    // hold the pipe: not for long).
    let _ = tokio::time::timeout(Duration::from_secs(2), stderr_done).await;

    let mut problems = check(&run);
    if let Some(server) = &server {
        let stderr = server.stderr();
        let panics = support::panic_lines(&stderr);
        if !panics.is_empty() {
            problems.push(format!("the server panicked: {panics:?}"));
        }
    } else {
        // For stdio the server's stderr is part of the driver's.
        let stderr = driver_err.text();
        let panics = support::panic_lines(&stderr);
        if !panics.is_empty() {
            problems.push(format!("the server (or driver) panicked: {panics:?}"));
        }
    }
    let took = started.elapsed();
    eprintln!(
        "client {sdk:?} over {transport:?}: {:.1} s in all; manifest rewritten at {:?}, \
         CHANGED at {:?}",
        took.as_secs_f64(),
        run.rewritten_at,
        run.changed_at
    );
    if !problems.is_empty() {
        panic!(
            "{sdk:?} client over {transport:?} failed:\n  - {}\n\n--- driver stdout ---\n{}\n\n\
             --- driver stderr ---\n{}\n\n--- server stderr (HTTP only) ---\n{}",
            problems.join("\n  - "),
            run.lines.join("\n"),
            driver_err.tail(12000),
            server.as_ref().map(Serve::output_tail).unwrap_or_default(),
        );
    }
}

/// Everything wrong with one run, as sentences.
fn check(run: &Run) -> Vec<String> {
    let mut problems = Vec::new();
    match &run.status {
        Ok(status) if status.success() => {}
        Ok(status) => problems.push(format!(
            "the driver exited with {status} (2 = a check failed, 3 = no list_changed in 20 s, \
             4 = an exception; see its stderr)"
        )),
        Err(e) => problems.push(e.clone()),
    }

    match run.names("TOOLS") {
        Ok(names) => {
            for want in ["omniforge_instructions", "greet"] {
                if !names.iter().any(|n| n == want) {
                    problems.push(format!(
                        "the first tools/list lacks `{want}` (greet comes from the --manifest file): {names:?}"
                    ));
                }
            }
            if names.iter().any(|n| n == "echo_ping") {
                problems.push(format!(
                    "the first tools/list already has `echo_ping`, before the manifest was rewritten: {names:?}"
                ));
            }
        }
        Err(e) => problems.push(e),
    }

    match run.payload("CALL") {
        None => problems.push("the driver printed no CALL line".into()),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Err(e) => problems.push(format!("CALL is not JSON ({e}): {text}")),
            Ok(call) => {
                if call.get("isError").is_some_and(|v| v != &json!(false)) {
                    problems.push(format!("omniforge_instructions answered isError: {call}"));
                }
                let mentions = call["content"].as_array().is_some_and(|items| {
                    items.iter().any(|c| {
                        c["type"] == "text"
                            && c["text"].as_str().is_some_and(|t| t.contains("OmniForge"))
                    })
                });
                if !mentions {
                    problems.push(format!(
                        "omniforge_instructions has no text content mentioning OmniForge: {call}"
                    ));
                }
            }
        },
    }

    if !run.has("READY") {
        problems.push("the driver never printed READY".into());
    } else if !run.has("CHANGED") {
        problems.push(
            "no notifications/tools/list_changed reached the client within 20 s of the manifest \
             rewrite (temp file + rename adding `echo_ping`)"
                .into(),
        );
    } else {
        match run.names("TOOLS2") {
            Ok(names) => {
                for want in ["omniforge_instructions", "greet", "echo_ping"] {
                    if !names.iter().any(|n| n == want) {
                        problems.push(format!(
                            "tools/list after list_changed lacks `{want}`: {names:?}"
                        ));
                    }
                }
            }
            Err(e) => problems.push(e),
        }
    }
    problems
}

#[tokio::test]
async fn client_py1_stdio() {
    crate::support::needs_deps!();
    run_client(Sdk::Py1, Transport::Stdio).await;
}

#[tokio::test]
async fn client_py1_http() {
    crate::support::needs_deps!();
    run_client(Sdk::Py1, Transport::Http).await;
}

#[tokio::test]
async fn client_py2_stdio() {
    crate::support::needs_deps!();
    run_client(Sdk::Py2, Transport::Stdio).await;
}

#[tokio::test]
async fn client_py2_http() {
    crate::support::needs_deps!();
    run_client(Sdk::Py2, Transport::Http).await;
}

#[tokio::test]
async fn client_ts_stdio() {
    crate::support::needs_deps!();
    run_client(Sdk::Ts, Transport::Stdio).await;
}

#[tokio::test]
async fn client_ts_http() {
    crate::support::needs_deps!();
    run_client(Sdk::Ts, Transport::Http).await;
}
