//! Escape suite: script tools that try to break out of the sandbox, one attack per function,
//! each run twice (issue 11): `ATTACK::with_namespaces` and `ATTACK::without_namespaces`.
//!
//! Each test starts the real `omniforge serve` (127.0.0.1, port 0, `--uv .deps/bin/uv`, a data
//! directory under `CARGO_TARGET_TMPDIR`, i.e. outside `/tmp` like a production
//! `/var/lib/omniforge`; a marker secret `OMNIFORGE_E2E_SECRET` in its environment and no other
//! inherited `OMNIFORGE_*` variable) in one of two [`Mode`]s:
//! - with namespaces: `--sandbox strict`, the default layers but no start without bubblewrap,
//!   so an attack never runs unsandboxed;
//! - without namespaces: `--sandbox standard --sandbox-disable-layer namespaces`, what a
//!   machine without bubblewrap gives scripts (the flag is hidden and test-only: `sandbox.rs`
//!   finds `/usr/bin/bwrap` itself, so hiding it from `PATH` would not do). `standard` refuses
//!   to start when scripts would run privileged, so these attacks too never run as root.
//!
//! speaks raw JSON-RPC over Streamable HTTP, creates a tool whose code attempts the attack with
//! `omniforge_create_tool`, calls it, and checks four things:
//!
//! 1. the attack is contained, judged from the host side wherever possible (the file on the
//!    host is unchanged, the listener accepted nothing, the secret is not in the output, no
//!    process carrying the test's marker is left) and within a time bound;
//! 2. the answer is a CallToolResult (normal or `isError`), never a JSON-RPC error;
//! 3. the server is healthy afterwards: a trivial script tool answers, `GET /healthz` is 200,
//!    the process is alive and logged no panic;
//! 4. the layer that stopped the attack is named from what the script itself observed
//!    (`ENOENT` vs `EACCES` vs `EROFS` vs `ENETUNREACH`, `MemoryError`, `BlockingIOError` on
//!    fork, `[timeout]` ...). Every script prints one JSON line per probe.
//!
//! Each test prints an `ESCAPE-SUMMARY | attack | contained | layer | time` row (shown with
//! `--no-capture`); a failure message names the attack, what the script saw and what leaked.
//!
//! Also here: WIRE-24 (an inputSchema without `properties` is listed with `properties: {}`)
//! and WIRE-33 (heartbeat progress for a silent long call with a progressToken, none without;
//! the run length comes from `OMNIFORGE_E2E_LONG_RUN_S`, default 18 s: the heartbeat comes
//! after 15 s of silence).
//!
//! Needs `.deps/bin/uv` (`scripts/bootstrap`) and bubblewrap; PyPI for one test (`six`).

use std::collections::BTreeSet;
use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{self, Captured, Serve, panic_lines, uv};

/// The protocol revision the raw sessions negotiate (WIRE-33's setup).
const VERSION: &str = "2025-06-18";

/// The run's private `/tmp` and largest file (`RunSpec::max_file_bytes` default): 64 MiB.
const TMP_CAP: u64 = 64 << 20;

// ---------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------

/// A fresh directory outside `/tmp` (the sandbox has its own `/tmp`, so a data directory
/// under the host's `/tmp` would make "write outside /tmp" meaningless).
fn fresh_home() -> TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    tempfile::Builder::new()
        .prefix("escape-")
        .tempdir_in(base)
        .unwrap()
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}

// ---------------------------------------------------------------------------------------
// The server
// ---------------------------------------------------------------------------------------

/// Which sandbox the server under attack has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every layer, bubblewrap's namespaces included (`--sandbox strict`).
    Namespaces,
    /// Without the namespace layer, as on a machine without bubblewrap.
    NoNamespaces,
    /// Every layer, and the attack tool's calls run on its warm template (`--warm-pool 8`;
    /// the two modes above run cold, `--warm-pool 0`). `/healthz` must show the template
    /// that ran the call, or the pool's reason for running the code cold.
    Warm,
}

impl Mode {
    fn args(self) -> &'static [&'static str] {
        match self {
            Mode::Namespaces => &["--sandbox", "strict", "--warm-pool", "0"],
            Mode::NoNamespaces => &[
                "--sandbox",
                "standard",
                "--sandbox-disable-layer",
                "namespaces",
                "--warm-pool",
                "0",
            ],
            Mode::Warm => &["--sandbox", "strict", "--warm-pool", "8"],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Namespaces => "with namespaces",
            Mode::NoNamespaces => "without namespaces",
            Mode::Warm => "warm",
        }
    }

    /// The layer that makes a path not exist for the script.
    fn hides(self) -> &'static str {
        match self {
            Mode::Namespaces | Mode::Warm => "namespaces (mount or PID ns: not in the sandbox)",
            Mode::NoNamespaces => {
                "unprivileged-uid (the run's mount ns: hidden by a tmpfs, or hidepid /proc)"
            }
        }
    }
}

/// Runs each attack three times: cold with and without the namespace layer
/// (`NAME::with_namespaces`, `NAME::without_namespaces`) and on the warm path (`NAME::warm`)
/// (CI runs all three: they are ordinary tests).
macro_rules! thrice {
    ($($attack:ident),* $(,)?) => {
        $(
            mod $attack {
                #[tokio::test]
                async fn with_namespaces() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::Namespaces).await
                }

                #[tokio::test]
                async fn without_namespaces() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::NoNamespaces).await
                }

                #[tokio::test]
                async fn warm() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::Warm).await
                }
            }
        )*
    };
}

/// `OMNIFORGE_E2E_SECRET=<secret> omniforge serve --listen 127.0.0.1:0 --data-dir DATA --uv UV`.
struct Omni {
    server: Serve,
    pid: u32,
    url: String,
    base: String,
    data: PathBuf,
    secret: String,
    stderr: Captured,
    _home: TempDir,
}

impl Omni {
    /// A server with every layer (the WIRE cases, which attack nothing).
    async fn start(args: &[&str]) -> Omni {
        Omni::start_in(Mode::Namespaces, args).await
    }

    async fn start_in(mode: Mode, args: &[&str]) -> Omni {
        assert!(
            uv().exists(),
            "{} is missing: the escape tests need uv from .deps/. Run `scripts/bootstrap` (from \
             the repository root), then rerun.",
            uv().display()
        );
        let home = fresh_home();
        let data = home.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let secret = unique("escape-secret-");
        let mut command = Serve::command()
            .args(&["--data-dir".as_ref(), data.as_os_str()])
            .args(&["--uv".as_ref(), uv().as_os_str()])
            .args(mode.args())
            .args(args);
        // Hermetic and safe: no inherited OMNIFORGE_* setting (e.g. OMNIFORGE_SANDBOX=off in a
        // developer's shell) may weaken the server; `strict` (the same layers as the default
        // `standard` when bubblewrap works) refuses to start rather than run these attacks
        // unsandboxed on the host, and `standard` refuses to run scripts privileged.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("OMNIFORGE_") {
                command.cmd().env_remove(key);
            }
        }
        command.cmd().env("OMNIFORGE_E2E_SECRET", &secret);
        let server = command.start().await;
        Omni {
            pid: server.pid(),
            url: server.url.clone(),
            base: server.base.clone(),
            stderr: server.stderr_captured().clone(),
            server,
            data,
            secret,
            _home: home,
        }
    }

    fn db(&self) -> PathBuf {
        self.data.join("omniforge.db")
    }

    /// The environment directory whose `requirements.txt` contains `needle` (`""`: the
    /// environment without dependencies).
    fn env_with(&self, needle: &str) -> PathBuf {
        let envs = self.data.join("envs");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&envs)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", envs.display()))
            .flatten()
        {
            if !entry.path().join("bin/python").exists() {
                continue;
            }
            let req =
                std::fs::read_to_string(entry.path().join("requirements.txt")).unwrap_or_default();
            if (needle.is_empty() && req.trim().is_empty())
                || (!needle.is_empty() && req.contains(needle))
            {
                return entry.path();
            }
            seen.push(entry.file_name());
        }
        panic!(
            "no environment in {} matches {needle:?} (envs: {seen:?})",
            envs.display()
        )
    }

    fn rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------
// Raw JSON-RPC over Streamable HTTP, with arrival times
// ---------------------------------------------------------------------------------------

/// One POST and what came back, each message with its arrival time.
#[derive(Debug, Default)]
struct Exchange {
    status: u16,
    content_type: Option<String>,
    /// The `Mcp-Session-Id` response header.
    session: Option<String>,
    /// (seconds since the request was sent, message).
    messages: Vec<(f64, Value)>,
    notes: Vec<String>,
}

impl Exchange {
    fn response(&self, id: &Value) -> Option<&Value> {
        self.messages
            .iter()
            .map(|(_, m)| m)
            .find(|m| support::is_response(m) && m.get("id") == Some(id))
    }

    fn progress(&self) -> Vec<(f64, Value)> {
        self.messages
            .iter()
            .filter(|(_, m)| m["method"] == "notifications/progress")
            .cloned()
            .collect()
    }
}

/// Complete SSE events at the front of `pending` (everything up to the last blank line),
/// parsed; the incomplete rest stays in `pending`.
fn take_events(pending: &mut Vec<u8>) -> Vec<Value> {
    let Some(end) = pending.windows(2).rposition(|w| w == b"\n\n") else {
        return Vec::new();
    };
    let complete: Vec<u8> = pending.drain(..end + 2).collect();
    support::parse_sse(&complete, true).0
}

/// POSTs `body` and reads the reply until the response to `want` arrives (or the stream
/// ends, or `budget` passes).
async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: &Value,
    want: Option<&Value>,
    budget: Duration,
) -> Result<Exchange, String> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + budget;
    let mut req = client.post(url).body(serde_json::to_vec(body).unwrap());
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let mut resp = match tokio::time::timeout_at(deadline, req.send()).await {
        Err(_) => return Err(format!("no response headers within {budget:?}")),
        Ok(Err(e)) => return Err(format!("request failed: {e:?}")),
        Ok(Ok(r)) => r,
    };
    let mut ex = Exchange {
        status: resp.status().as_u16(),
        content_type: resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|s| {
                s.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            }),
        session: resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        ..Exchange::default()
    };
    let sse = ex.content_type.as_deref() == Some("text/event-stream");
    let mut pending = Vec::new();
    loop {
        if sse && want.is_some_and(|id| ex.response(id).is_some()) {
            break;
        }
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => {
                ex.notes.push(format!(
                    "reply not finished after {budget:?}; stopped reading"
                ));
                break;
            }
            Ok(Err(e)) => {
                ex.notes.push(format!("body read failed: {e}"));
                break;
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => {
                pending.extend_from_slice(&chunk);
                if sse {
                    let at = started.elapsed().as_secs_f64();
                    ex.messages
                        .extend(take_events(&mut pending).into_iter().map(|m| (at, m)));
                }
            }
        }
    }
    let at = started.elapsed().as_secs_f64();
    if sse {
        pending.extend_from_slice(b"\n\n");
        ex.messages
            .extend(take_events(&mut pending).into_iter().map(|m| (at, m)));
    } else if !pending.is_empty() {
        match serde_json::from_slice::<Value>(&pending) {
            Ok(Value::Array(items)) => ex.messages.extend(items.into_iter().map(|m| (at, m))),
            Ok(v) => ex.messages.push((at, v)),
            Err(e) => ex.notes.push(format!(
                "body is not JSON ({e}): {}",
                short(&String::from_utf8_lossy(&pending), 300)
            )),
        }
    }
    Ok(ex)
}

/// What a `tools/call` returned.
#[derive(Debug)]
struct Call {
    /// The CallToolResult.
    result: Value,
    elapsed: Duration,
    exchange: Exchange,
}

impl Call {
    fn text(&self) -> String {
        text_of(&self.result)
    }

    fn is_error(&self) -> bool {
        self.result["isError"] == true
    }
}

/// A raw Streamable HTTP session.
struct Session {
    client: reqwest::Client,
    url: String,
    id: String,
    version: String,
    next_id: u64,
}

impl Session {
    async fn open(url: &str) -> Session {
        let client = support::http_client();
        let body = support::initialize_request(1, VERSION);
        let ex = post(
            &client,
            url,
            &support::post_headers(None, None),
            &body,
            Some(&json!(1)),
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("initialize: {e}"));
        assert_eq!(ex.status, 200, "initialize: {ex:?}");
        let session = ex
            .session
            .clone()
            .unwrap_or_else(|| panic!("initialize: no Mcp-Session-Id header: {ex:?}"));
        let version = ex
            .messages
            .iter()
            .find_map(|(_, m)| m.pointer("/result/protocolVersion").and_then(Value::as_str))
            .unwrap_or_else(|| panic!("initialize: no result.protocolVersion: {ex:?}"))
            .to_owned();
        let s = Session {
            client,
            url: url.to_owned(),
            id: session,
            version,
            next_id: 2,
        };
        let ex = post(
            &s.client,
            &s.url,
            &s.headers(),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("notifications/initialized: {e}"));
        assert_eq!(ex.status, 202, "notifications/initialized: {ex:?}");
        s
    }

    fn headers(&self) -> Vec<(String, String)> {
        support::post_headers(Some(&self.id), Some(&self.version))
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A request; the whole exchange and the response message. A JSON-RPC error or no
    /// response is an `Err` naming it.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
        budget: Duration,
    ) -> Result<(Value, Exchange), String> {
        let id = json!(self.take_id());
        self.request_with_id(id, method, params, budget).await
    }

    async fn request_with_id(
        &self,
        id: Value,
        method: &str,
        params: Value,
        budget: Duration,
    ) -> Result<(Value, Exchange), String> {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let ex = post(
            &self.client,
            &self.url,
            &self.headers(),
            &body,
            Some(&id),
            budget,
        )
        .await?;
        let Some(response) = ex.response(&id).cloned() else {
            return Err(format!(
                "no JSON-RPC response to {method} within {budget:?} (HTTP {}, notes {:?}, {} messages)",
                ex.status,
                ex.notes,
                ex.messages.len()
            ));
        };
        if let Some(error) = response.get("error") {
            return Err(format!(
                "{method} answered a JSON-RPC (protocol) error: {error}"
            ));
        }
        Ok((response, ex))
    }

    /// `tools/call`: must reach a CallToolResult (normal or isError), never a protocol error.
    async fn call(
        &mut self,
        name: &str,
        arguments: Value,
        budget: Duration,
    ) -> Result<Call, String> {
        let id = json!(self.take_id());
        self.call_with(id, name, arguments, None, budget).await
    }

    async fn call_with(
        &self,
        id: Value,
        name: &str,
        arguments: Value,
        meta: Option<Value>,
        budget: Duration,
    ) -> Result<Call, String> {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        let started = Instant::now();
        let (response, exchange) = self
            .request_with_id(id, "tools/call", params, budget)
            .await?;
        let elapsed = started.elapsed();
        let result = response["result"].clone();
        if !result["content"].is_array() {
            return Err(format!(
                "tools/call {name}: the result is not a CallToolResult: {response}"
            ));
        }
        Ok(Call {
            result,
            elapsed,
            exchange,
        })
    }

    /// `omniforge_create_tool` that must succeed.
    async fn create(&mut self, args: Value) {
        let name = args["name"].as_str().unwrap_or("?").to_owned();
        let call = self
            .call("omniforge_create_tool", args, Duration::from_secs(120))
            .await
            .unwrap_or_else(|e| panic!("omniforge_create_tool {name}: {e}"));
        assert!(
            !call.is_error(),
            "omniforge_create_tool {name} failed: {}",
            call.text()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Results and observations
// ---------------------------------------------------------------------------------------

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

/// One probe the script reported: `{"probe", "ok", "exc", "errno", "detail"}`.
#[derive(Debug, Clone)]
struct Obs {
    probe: String,
    ok: bool,
    exc: String,
    errno: String,
    detail: String,
}

impl Obs {
    fn what(&self) -> String {
        if self.ok {
            format!("{}: OK {}", self.probe, short(&self.detail, 160))
        } else {
            format!(
                "{}: {} {} ({})",
                self.probe,
                self.exc,
                self.errno,
                short(&self.detail, 160)
            )
        }
    }
}

fn observations(text: &str) -> Vec<Obs> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v["probe"].is_string())
        .map(|v| Obs {
            probe: v["probe"].as_str().unwrap_or("").to_owned(),
            ok: v["ok"] == true,
            exc: v["exc"].as_str().unwrap_or("").to_owned(),
            errno: v["errno"].as_str().unwrap_or("").to_owned(),
            detail: v["detail"].as_str().unwrap_or("").to_owned(),
        })
        .collect()
}

fn find<'a>(obs: &'a [Obs], probe: &str) -> Option<&'a Obs> {
    obs.iter().find(|o| o.probe == probe)
}

/// The layer an error the script saw points to.
fn layer_of(o: &Obs, mode: Mode) -> &'static str {
    match (o.exc.as_str(), o.errno.as_str()) {
        (_, "ENOENT") => mode.hides(),
        (_, "EACCES") => "unprivileged-uid or landlock (uid 65534; paths outside the ruleset)",
        (_, "EPERM") => "seccomp (denied system call or socket family) or unprivileged-uid",
        (_, "EROFS") => "read-only-root (read-only bind)",
        (_, "ENETUNREACH") => "no-network (empty net ns: no route)",
        (_, "ECONNREFUSED") => "no-network (empty net ns: its 127.0.0.1 is its own)",
        ("gaierror", _) => "no-network (no resolver reachable)",
        (_, "EAGAIN") => "cgroup-pids (pids.max)",
        ("MemoryError", _) => "rlimits (RLIMIT_AS)",
        (_, "EFBIG") => "rlimits (RLIMIT_FSIZE)",
        (_, "ENOSPC") => "size-capped tmpfs",
        _ => "unknown",
    }
}

/// Prints one `ESCAPE-SUMMARY` row (collected from `--no-capture` output).
fn summary_row(attack: &str, status: &str, layer: &str, started: Instant) {
    eprintln!(
        "ESCAPE-SUMMARY | {attack:<34} | {status:<13} | {layer} | {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// The verdict of one attack: collected while the attack runs, and only worth anything once
/// [`Verdict::finish`] (through [`Scene::finish`]) has judged it.
#[must_use = "a verdict judges nothing until it is finished (Scene::finish)"]
struct Verdict {
    attack: &'static str,
    mode: Mode,
    /// What leaked or escaped (empty: contained).
    leaks: Vec<String>,
    /// The layers that stopped it, from the script's observations.
    layers: BTreeSet<String>,
    /// What the script (and the test) observed, for the report.
    observed: Vec<String>,
    /// Problems that are not leaks (protocol, health, bounds).
    problems: Vec<String>,
}

impl Verdict {
    fn new(attack: &'static str, mode: Mode) -> Verdict {
        Verdict {
            attack,
            mode,
            leaks: Vec::new(),
            layers: BTreeSet::new(),
            observed: Vec::new(),
            problems: Vec::new(),
        }
    }

    fn layer(&mut self, layer: impl Into<String>) {
        self.layers.insert(layer.into());
    }

    fn leak(&mut self, what: impl Into<String>) {
        self.leaks.push(what.into());
    }

    fn problem(&mut self, what: impl Into<String>) {
        self.problems.push(what.into());
    }

    fn saw(&mut self, what: impl Into<String>) {
        self.observed.push(what.into());
    }

    fn layer_text(&self) -> String {
        if self.layers.is_empty() {
            "(none identified)".to_owned()
        } else {
            self.layers.iter().cloned().collect::<Vec<_>>().join(" + ")
        }
    }

    /// Prints the summary row and fails with a precise message if anything is wrong.
    fn finish(self, started: Instant) {
        let contained = self.leaks.is_empty();
        eprintln!("  observed ({}, {}):", self.attack, self.mode.label());
        for o in &self.observed {
            eprintln!("    {}", short(o, 400));
        }
        let status = match (contained, self.problems.len()) {
            (false, _) => "NOT CONTAINED".to_owned(),
            (true, 0) => "contained".to_owned(),
            (true, n) => format!("contained, {n} problem(s)"),
        };
        let attack = format!("{} ({})", self.attack, self.mode.label());
        summary_row(&attack, &status, &self.layer_text(), started);
        if contained && self.problems.is_empty() {
            return;
        }
        let mut msg = format!("attack `{attack}`: ");
        if contained {
            msg.push_str(&format!("contained by {}, but:", self.layer_text()));
        } else {
            msg.push_str(&format!(
                "NOT CONTAINED (layers that did act: {}). Leaked/escaped:",
                self.layer_text()
            ));
            for l in &self.leaks {
                msg.push_str(&format!("\n  - LEAK: {l}"));
            }
        }
        for p in &self.problems {
            msg.push_str(&format!("\n  - {p}"));
        }
        msg.push_str("\nwhat the script saw:");
        for o in &self.observed {
            msg.push_str(&format!("\n    {}", short(o, 600)));
        }
        panic!("{msg}");
    }
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

/// Live, non-zombie processes whose argv contains `marker`: (pid, cmdline).
fn marked(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        found.push((pid, cmdline));
    }
    found
}

/// Watches /proc for `marker` processes from a thread until dropped: the most seen at once.
struct Watch {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(marker: &str) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn({
            let (stop, max, marker) = (stop.clone(), max.clone(), marker.to_owned());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    max.fetch_max(marked(&marker).len(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(15));
                }
            }
        });
        Watch {
            stop,
            max,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Waits up to `grace` for every `marker` process to be gone; kills (by pid) and returns the
/// ones still alive then. They carry this test's unique marker, so they are this test's.
async fn leftovers(marker: &str, grace: Duration) -> Vec<String> {
    let deadline = Instant::now() + grace;
    let mut left = marked(marker);
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
        left = marked(marker);
    }
    for (pid, _) in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    left.into_iter()
        .map(|(pid, cmd)| format!("pid {pid}: {cmd}"))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The scene every attack runs in
// ---------------------------------------------------------------------------------------

/// The Python every attack script starts with: the arguments, and `probe(name, fn)` that
/// prints one JSON line with what happened.
const PRELUDE: &str = r#"import errno, json, os, sys
ARGS = json.load(sys.stdin)
def note(probe, ok, value=None, exc=None, limit=400):
    rec = {"probe": probe, "ok": ok}
    if exc is not None:
        code = getattr(exc, "errno", None)
        rec["exc"] = type(exc).__name__
        rec["errno"] = errno.errorcode.get(code, str(code)) if isinstance(code, int) else ""
        rec["detail"] = str(exc)[:limit]
    else:
        text = value if isinstance(value, str) else repr(value)
        rec["detail"] = text if limit is None else text[:limit]
    print(json.dumps(rec), flush=True)
def probe(name, fn, limit=400):
    try:
        value = fn()
    except BaseException as e:
        note(name, False, exc=e, limit=limit)
        return None
    note(name, True, value, limit=limit)
    return value
"#;

fn script(body: &str) -> String {
    format!("{PRELUDE}{body}")
}

/// A server, a session, and `ping` (a trivial script tool for the health check).
struct Scene {
    mode: Mode,
    omni: Omni,
    s: Session,
    marker: String,
    started: Instant,
    /// The attack tools created (for the warm mode's check).
    tools: Vec<String>,
}

impl Scene {
    async fn new(mode: Mode, args: &[&str]) -> Scene {
        let started = Instant::now();
        let omni = Omni::start_in(mode, args).await;
        let mut s = Session::open(&omni.url).await;
        s.create(
            json!({"name": "ping", "description": "Answers pong.", "code": "print('pong')\n"}),
        )
        .await;
        Scene {
            mode,
            omni,
            s,
            marker: unique("escape-marker-"),
            started,
            tools: Vec::new(),
        }
    }

    /// Creates the attack tool `name` from `body` (after the prelude), taking any arguments.
    async fn tool(&mut self, name: &str, body: &str, extra: Value) {
        let mut args = json!({"name": name, "description": format!("Escape attempt: {name}."),
                              "code": script(body),
                              "inputSchema": {"type": "object", "properties": {}, "additionalProperties": true}});
        if let (Some(args), Value::Object(extra)) = (args.as_object_mut(), extra) {
            args.extend(extra);
        }
        self.s.create(args).await;
        self.tools.push(name.to_owned());
    }

    /// Warm mode: each attack tool's current version has a template that ran its calls, or
    /// the pool says why its code runs cold (`/healthz` `warm`).
    async fn check_warm(&self, v: &mut Verdict) {
        let health: Value = match self
            .s
            .client
            .get(format!("{}/healthz", self.omni.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => {
                v.problem(format!("warm: GET /healthz failed: {e}"));
                return;
            }
        };
        let warm = &health["warm"];
        if warm["on"] != true {
            v.problem(format!("warm: the pool is not on: {warm}"));
            return;
        }
        for tool in &self.tools {
            let templates: Vec<&Value> = warm["templates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| {
                    t["version"]
                        .as_str()
                        .is_some_and(|k| k.starts_with(&format!("{tool}@")))
                })
                .collect();
            let warm_calls: u64 = templates.iter().filter_map(|t| t["calls"].as_u64()).sum();
            let cold: Vec<&str> = templates
                .iter()
                .filter_map(|t| t["cold_reason"].as_str())
                .collect();
            if warm_calls > 0 {
                v.saw(format!(
                    "warm: {tool} ran {warm_calls} call(s) on its template"
                ));
            } else if !cold.is_empty() {
                v.saw(format!(
                    "warm: {tool} runs cold by the pool's decision: {}",
                    cold.join("; ")
                ));
            } else {
                v.problem(format!(
                    "warm: no template of {tool} ran a call and none is marked cold: {templates:?}"
                ));
            }
        }
    }

    /// Calls the attack tool; a protocol error or no answer is recorded as a problem.
    async fn attack(
        &mut self,
        v: &mut Verdict,
        name: &str,
        args: Value,
        bound: Duration,
    ) -> Option<Call> {
        match self
            .s
            .call(name, args, bound + Duration::from_secs(10))
            .await
        {
            Ok(call) => {
                v.saw(format!(
                    "call {name}: {:.2} s, isError {}, {} bytes of text",
                    call.elapsed.as_secs_f64(),
                    call.is_error(),
                    call.text().len()
                ));
                if call.elapsed > bound {
                    v.problem(format!(
                        "the call of {name} took {:.1} s, over its bound of {:.0} s",
                        call.elapsed.as_secs_f64(),
                        bound.as_secs_f64()
                    ));
                }
                if call.text().contains(&self.omni.secret) {
                    v.leak(format!(
                        "the server's OMNIFORGE_E2E_SECRET value appears in the output of {name}"
                    ));
                }
                Some(call)
            }
            Err(e) => {
                v.problem(format!(
                    "the call of {name} did not give a CallToolResult: {e}"
                ));
                None
            }
        }
    }

    /// Health after the attack, leftover marker processes, then the verdict.
    async fn finish(mut self, mut v: Verdict) {
        if self.mode == Mode::Warm {
            self.check_warm(&mut v).await;
        }
        let left = leftovers(&self.marker, Duration::from_secs(3)).await;
        if !left.is_empty() {
            v.leak(format!(
                "processes carrying the marker outlived the call by 3 s (killed now): {left:?}"
            ));
        }
        match self
            .s
            .call("ping", json!({}), Duration::from_secs(20))
            .await
        {
            Ok(call) if !call.is_error() && call.text() == "pong" => {}
            Ok(call) => v.problem(format!(
                "health: the trivial tool `ping` answered {:?} (isError {}) after the attack",
                call.text(),
                call.is_error()
            )),
            Err(e) => v.problem(format!(
                "health: the trivial tool `ping` failed after the attack: {e}"
            )),
        }
        let health = self
            .s
            .client
            .get(format!("{}/healthz", self.omni.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match health {
            Ok(r) if r.status().as_u16() == 200 => {}
            Ok(r) => v.problem(format!("health: GET /healthz answered {}", r.status())),
            Err(e) => v.problem(format!("health: GET /healthz failed: {e}")),
        }
        if !self.omni.server.is_alive() {
            v.problem("health: the server process exited".to_owned());
        }
        let stderr = self.omni.stderr.text();
        let panics = panic_lines(&stderr);
        if !panics.is_empty() {
            v.problem(format!("the server panicked: {panics:?}"));
        }
        if stderr.contains(&self.omni.secret) {
            v.problem("the server logged its OMNIFORGE_E2E_SECRET value".to_owned());
        }
        let started = self.started;
        drop(self);
        v.finish(started);
    }
}

/// Records what the script reported, for the summary and the failure message.
fn absorb(v: &mut Verdict, obs: &[Obs]) {
    for o in obs {
        v.saw(o.what());
    }
}

// ---------------------------------------------------------------------------------------
// 1. The database
// ---------------------------------------------------------------------------------------

async fn escape_read_database(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("read the database", mode);
    // A canary only the database holds: the description of a stored tool.
    let canary = unique("escape-canary-");
    sc.s.create(
        json!({"name": "holder", "description": format!("holds {canary}"), "code": "print(1)\n"}),
    )
    .await;
    let db = sc.omni.db();
    let on_host: Vec<u8> = ["", "-wal"]
        .iter()
        .flat_map(|s| std::fs::read(format!("{}{s}", db.display())).unwrap_or_default())
        .collect();
    assert!(
        on_host
            .windows(canary.len())
            .any(|w| w == canary.as_bytes()),
        "control: the canary is not in {} (or its -wal) on the host; the test cannot judge a read",
        db.display()
    );
    let body = r#"
d, db = ARGS["data_dir"], ARGS["db"]
probe("listdir data dir", lambda: sorted(os.listdir(d)))
for suffix in ["", "-wal", "-shm"]:
    def read(p=db + suffix):
        with open(p, "rb") as f:
            data = f.read()
        i = data.find(b"escape-canary-")
        return f"READ {len(data)} bytes header={data[:16]!r} canary={data[i:i+80]!r}" if i >= 0 else f"READ {len(data)} bytes header={data[:16]!r}"
    probe("read db" + suffix, read)
def dump():
    import sqlite3
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = []
    for (t,) in c.execute("select name from sqlite_master where type = 'table'").fetchall():
        out.append((t, c.execute(f"select * from {t}").fetchall()))
    return repr(out)
probe("sqlite3 dump", dump, limit=None)
def fds():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError as e:
            out.append((fd, str(e)))
    return out
probe("inherited fds", fds, limit=None)
"#;
    sc.tool("read_db", body, json!({})).await;
    let args =
        json!({"data_dir": sc.omni.data.display().to_string(), "db": db.display().to_string()});
    if let Some(call) = sc
        .attack(&mut v, "read_db", args, Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        if call.text().contains(&canary) {
            v.leak(format!("the database canary {canary} is in the output"));
        }
        for p in ["read db", "read db-wal", "read db-shm", "sqlite3 dump"] {
            match find(&obs, p) {
                None => v.problem(format!(
                    "the script did not report probe {p:?}: {}",
                    short(&call.text(), 2000)
                )),
                Some(o) if o.ok => v.leak(format!("{p} succeeded: {}", short(&o.detail, 300))),
                // sqlite3 says only "unable to open database file" (no errno): the reads
                // above name the layer.
                Some(o) if o.errno.is_empty() => {}
                Some(o) => v.layer(layer_of(o, mode)),
            }
        }
        if let Some(o) = find(&obs, "inherited fds")
            && o.detail.contains("omniforge.db")
        {
            v.leak(format!(
                "the script inherited a descriptor of the database: {}",
                o.detail
            ));
        }
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 2. Another tool's files
// ---------------------------------------------------------------------------------------

async fn escape_read_other_tools_env(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("read another tool's env", mode);
    // Another tool with its own environment (a real PyPI dependency).
    sc.s.create(
        json!({"name": "other", "description": "Another tool.", "dependencies": ["six"],
                        "code": "import six\nprint(six.__version__)\n"}),
    )
    .await;
    let other = sc.omni.env_with("six==");
    let own = sc.omni.env_with("");
    assert_ne!(other, own);
    let requirements = std::fs::read_to_string(other.join("requirements.txt")).unwrap();
    let pin = requirements
        .lines()
        .find(|l| l.starts_with("six=="))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let six_py = walk(&other)
        .into_iter()
        .find(|p| p.ends_with("site-packages/six.py"))
        .expect("six.py in the other environment");
    let six_src = std::fs::read_to_string(&six_py).unwrap();
    let six_line = six_src
        .lines()
        .find(|l| l.starts_with("__author__"))
        .unwrap_or("__author__")
        .to_owned();
    let body = r#"
envs, other, run = ARGS["envs"], ARGS["other"], ARGS["run"]
probe("listdir envs", lambda: sorted(os.listdir(envs)))
probe("listdir other env", lambda: sorted(os.listdir(other)))
probe("read other requirements.txt", lambda: open(other + "/requirements.txt").read(), limit=None)
probe("read other six.py", lambda: open(ARGS["six"]).read()[:3000], limit=None)
probe("listdir run scratch", lambda: sorted(os.listdir(run)))
probe("listdir uv-cache", lambda: sorted(os.listdir(ARGS["cache"])))
"#;
    sc.tool("read_other", body, json!({})).await;
    let args = json!({
        "envs": sc.omni.data.join("envs").display().to_string(),
        "other": other.display().to_string(),
        "six": six_py.display().to_string(),
        "run": sc.omni.data.join("run").display().to_string(),
        "cache": sc.omni.data.join("uv-cache").display().to_string(),
    });
    if let Some(call) = sc
        .attack(&mut v, "read_other", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        for leaked in [pin.as_str(), six_line.as_str()] {
            if text.contains(leaked) {
                v.leak(format!(
                    "content of the other environment is in the output: {leaked:?}"
                ));
            }
        }
        let other_id = other.file_name().unwrap().to_string_lossy().into_owned();
        match find(&obs, "listdir envs") {
            Some(o) if o.ok && o.detail.contains(&other_id) => {
                v.leak(format!("the other environment is listed: {}", o.detail))
            }
            Some(o) if o.ok => v.layer(match mode {
                Mode::Namespaces | Mode::Warm => "namespaces (mount ns: only its own env is bound)",
                Mode::NoNamespaces => {
                    "unprivileged-uid (the run's mount ns: only its own env is bound back)"
                }
            }),
            Some(o) => v.layer(layer_of(o, mode)),
            None => v.problem("no probe `listdir envs`"),
        }
        for p in [
            "listdir other env",
            "read other requirements.txt",
            "read other six.py",
            "listdir run scratch",
            "listdir uv-cache",
        ] {
            match find(&obs, p) {
                None => v.problem(format!(
                    "the script did not report probe {p:?}: {}",
                    short(&text, 2000)
                )),
                Some(o) if o.ok => v.leak(format!("{p} succeeded: {}", short(&o.detail, 300))),
                Some(o) => v.layer(layer_of(o, mode)),
            }
        }
    }
    sc.finish(v).await;
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// 3. The server's environment
// ---------------------------------------------------------------------------------------

async fn escape_read_server_environment(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("read the server's environment", mode);
    // Control: the secret really is in the server's environment.
    let environ = std::fs::read(format!("/proc/{}/environ", sc.omni.pid)).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ).contains(&sc.omni.secret),
        "control: OMNIFORGE_E2E_SECRET is not in /proc/{}/environ on the host",
        sc.omni.pid
    );
    let body = r#"
NAME = "OMNIFORGE_E2E_SECRET"
probe("os.environ", lambda: dict(os.environ), limit=None)
probe("os.environ has the name", lambda: NAME in os.environ)
for label, p in [("self", "/proc/self/environ"), ("pid 1", "/proc/1/environ"),
                 ("parent", f"/proc/{os.getppid()}/environ"),
                 ("server", f"/proc/{ARGS['server_pid']}/environ"),
                 ("server cmdline", f"/proc/{ARGS['server_pid']}/cmdline")]:
    probe(f"read {label} ({p})", lambda p=p: open(p, "rb").read().decode(errors="replace"), limit=None)
def every():
    seen, found = [], []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError as e:
            seen.append(f"{pid}:{errno.errorcode.get(e.errno)}")
            continue
        seen.append(pid)
        if NAME.encode() in env:
            found.append(env.decode(errors="replace"))
    return {"pids": seen, "with the name": found}
probe("every /proc/*/environ", every, limit=None)
"#;
    sc.tool("dump_env", body, json!({})).await;
    let args = json!({"server_pid": sc.omni.pid});
    if let Some(call) = sc
        .attack(&mut v, "dump_env", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        if text.contains("more bytes not shown") {
            v.problem("the output was cut: the secret check would be incomplete");
        }
        match find(&obs, "os.environ has the name") {
            Some(o) if o.ok && o.detail == "False" => {
                v.layer("cleared environment (env_clear at spawn)")
            }
            Some(o) => v.leak(format!(
                "os.environ carries OMNIFORGE_E2E_SECRET: {}",
                o.detail
            )),
            None => v.problem("no probe `os.environ has the name`"),
        }
        let server = format!("read server (/proc/{}/environ)", sc.omni.pid);
        match find(&obs, &server) {
            Some(o) if !o.ok => v.layer(match o.errno.as_str() {
                "ENOENT" => match mode {
                    Mode::Namespaces | Mode::Warm => {
                        "namespaces (PID ns: the server is not visible)"
                    }
                    Mode::NoNamespaces => {
                        "unprivileged-uid (hidepid /proc: the server is not visible)"
                    }
                },
                _ => layer_of(o, mode),
            }),
            Some(o) => v.leak(format!(
                "the server's /proc/PID/environ was readable: {}",
                short(&o.detail, 200)
            )),
            None => v.problem("no probe for the server's environ"),
        }
        match find(&obs, "every /proc/*/environ") {
            Some(o) if o.ok && o.detail.contains("'with the name': []") => {}
            Some(o) => v.leak(format!(
                "an environ with OMNIFORGE_E2E_SECRET was found: {}",
                short(&o.detail, 400)
            )),
            None => v.problem("no probe `every /proc/*/environ`"),
        }
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 4. Writes outside /tmp
// ---------------------------------------------------------------------------------------

async fn escape_write_outside_tmp(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("write outside /tmp", mode);
    let m = sc.marker.clone();
    let data = sc.omni.data.clone();
    let own = sc.omni.env_with("");
    let db = sc.omni.db();
    let prefix = {
        let python = std::fs::canonicalize(own.join("bin/python")).unwrap();
        python.parent().unwrap().parent().unwrap().to_owned()
    };
    // (label, path, mode): new files ("w") must not appear on the host; appended files
    // ("a", "r+b") must be unchanged.
    let targets: Vec<(&str, PathBuf, &str)> = vec![
        ("own env dir", own.join(format!("pwned-{m}")), "w"),
        ("own env pyvenv.cfg", own.join("pyvenv.cfg"), "a"),
        (
            "own env site-packages",
            walk_dirs(&own, "site-packages").join(format!("pwned-{m}.pth")),
            "w",
        ),
        ("/usr", PathBuf::from(format!("/usr/pwned-{m}")), "w"),
        ("interpreter prefix", prefix.join(format!("pwned-{m}")), "w"),
        ("data dir", data.join(format!("pwned-{m}")), "w"),
        (
            "envs dir",
            data.join("envs").join(format!("pwned-{m}")),
            "w",
        ),
        ("database", db.clone(), "r+b"),
        ("/etc", PathBuf::from(format!("/etc/pwned-{m}")), "w"),
        ("/etc/hosts", PathBuf::from("/etc/hosts"), "a"),
        ("/ (root)", PathBuf::from(format!("/pwned-{m}")), "w"),
    ];
    let before: Vec<Option<Vec<u8>>> = targets
        .iter()
        .map(|(_, p, _)| std::fs::read(p).ok())
        .collect();
    let body = r#"
payload = ("PWNED-" + ARGS["marker"]).encode()
for label, path, mode in ARGS["targets"]:
    def write(path=path, mode=mode):
        with open(path, mode + ("" if "b" in mode else "b")) as f:
            f.write(payload)
        return "WROTE " + path
    probe(label, write)
probe("/tmp (allowed)", lambda: open("/tmp/ok", "wb").write(payload))
"#;
    sc.tool("write_out", body, json!({})).await;
    let args = json!({
        "marker": m,
        "targets": targets.iter().map(|(l, p, mode)| json!([l, p.display().to_string(), mode])).collect::<Vec<_>>(),
    });
    if let Some(call) = sc
        .attack(&mut v, "write_out", args, Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let payload = format!("PWNED-{m}");
        for ((label, path, _), before) in targets.iter().zip(&before) {
            let after = std::fs::read(path).ok();
            let changed = match (before, &after) {
                (None, None) => false,
                (Some(b), Some(a)) => a != b,
                _ => true,
            };
            let payload_in_db = *label == "database"
                && ["", "-wal", "-shm"].iter().any(|s| {
                    std::fs::read(format!("{}{s}", db.display()))
                        .unwrap_or_default()
                        .windows(payload.len())
                        .any(|w| w == payload.as_bytes())
                });
            let Some(o) = find(&obs, label) else {
                v.problem(format!("the script did not report target {label:?}"));
                continue;
            };
            if (changed && *label != "database") || payload_in_db {
                v.leak(format!(
                    "{label}: {} was written on the host (script: {})",
                    path.display(),
                    o.what()
                ));
            } else if o.ok {
                // The write "worked" inside the sandbox but nothing reached the host: it
                // landed on the sandbox's own root tmpfs.
                v.layer(match mode {
                    Mode::Namespaces | Mode::Warm => {
                        "namespaces (mount ns: the write landed on the sandbox's throwaway root)"
                    }
                    Mode::NoNamespaces => {
                        "unprivileged-uid (the run's mount ns: the write landed on a private tmpfs)"
                    }
                });
            } else {
                v.layer(layer_of(o, mode));
            }
        }
        if !find(&obs, "/tmp (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: the script could not write its own /tmp");
        }
    }
    // Clean up after a failure: new files carry this test's marker; changed files get their
    // old content back (the database is left to the server).
    for ((label, path, mode), before) in targets.iter().zip(&before) {
        match (*mode, before) {
            ("w", _) => {
                let _ = std::fs::remove_file(path);
            }
            (_, Some(before))
                if *label != "database" && std::fs::read(path).is_ok_and(|now| &now != before) =>
            {
                let _ = std::fs::write(path, before);
            }
            _ => {}
        }
    }
    sc.finish(v).await;
}

fn walk_dirs(dir: &Path, name: &str) -> PathBuf {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name() == name {
                    return e.path();
                }
                stack.push(e.path());
            }
        }
    }
    panic!("no {name} under {}", dir.display())
}

/// The sandbox's root outside `/tmp`: is what a script can write there bounded like `/tmp`
/// (64 MiB), or read-only? The attack writes 32 MiB files (each under `RLIMIT_FSIZE`) until
/// a write fails or 256 MiB are written; the files live in memory (tmpfs) for the run.
async fn escape_fill_disk_outside_tmp(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("fill the sandbox root outside /tmp", mode);
    let body = r#"
def fill(where, count, label):
    total = 0
    chunk = b"y" * (32 << 20)
    for i in range(count):
        try:
            with open(f"{where}/fill-{i}", "wb") as f:
                f.write(chunk)
        except OSError as e:
            note(label, False, exc=e)
            return total
        total += len(chunk)
    return total
def statfs(where):
    s = os.statvfs(where)
    return f"{s.f_blocks * s.f_frsize >> 20} MiB"
probe("size of /", lambda: statfs("/"))
probe("size of /tmp", lambda: statfs("/tmp"))
t = fill("/tmp", 8, "fill /tmp")
note("bytes written to /tmp", True, t)
for i in range(8):
    try: os.unlink(f"/tmp/fill-{i}")
    except OSError: pass
t = fill("", 8, "fill /")
note("bytes written to /", True, t)
"#;
    sc.tool("fill_root", body, json!({})).await;
    if let Some(call) = sc
        .attack(&mut v, "fill_root", json!({}), Duration::from_secs(20))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let bytes = |p: &str| find(&obs, p).and_then(|o| o.detail.parse::<u64>().ok());
        match bytes("bytes written to /tmp") {
            Some(n) if n <= TMP_CAP => {}
            other => v.problem(format!(
                "control: /tmp took {other:?} bytes, over its 64 MiB cap"
            )),
        }
        match bytes("bytes written to /") {
            Some(n) if n <= TMP_CAP => {}
            Some(n) => v.leak(format!(
                "{} MiB written outside /tmp, to the sandbox root `/`, and nothing stopped it \
                 (the attack stopped itself at 256 MiB). `/` is bubblewrap's root tmpfs, mounted \
                 read-write and without a size cap (statvfs: {}; half the host's RAM), so \
                 `read-only-root` does not hold for `/` itself and the 64 MiB /tmp cap is \
                 bypassed: each file is limited by RLIMIT_FSIZE, their number is not, and they \
                 sit in host memory (no memory cgroup) until the run ends",
                n >> 20,
                find(&obs, "size of /")
                    .map(|o| o.detail.clone())
                    .unwrap_or_default()
            )),
            None => v.problem(format!(
                "the script did not report the bytes written: {}",
                short(&call.text(), 2000)
            )),
        }
        if let Some(o) = find(&obs, "fill /")
            && !o.ok
        {
            v.layer(layer_of(o, mode));
        }
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 5. Network
// ---------------------------------------------------------------------------------------

async fn escape_tcp_connection_while_network_off(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("TCP/UDP with network off", mode);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let uport = udp.local_addr().unwrap().port();
    let body = r#"
import socket
def tcp(host, port):
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(b"hello from the sandbox")
    return "CONNECTED"
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"hello from the sandbox", ("127.0.0.1", ARGS["uport"]))
    return "SENT (no error)"
probe("tcp 127.0.0.1", lambda: tcp("127.0.0.1", ARGS["port"]))
probe("udp 127.0.0.1", udp)
probe("tcp 192.0.2.1:80", lambda: tcp("192.0.2.1", 80))
probe("dns pypi.org", lambda: socket.getaddrinfo("pypi.org", 443))
probe("interfaces", lambda: socket.if_nameindex())
"#;
    sc.tool("dial", body, json!({})).await;
    sc.tool("dial_allowed", body, json!({"network": true}))
        .await;
    let args = json!({"port": port, "uport": uport});
    let call = sc
        .attack(&mut v, "dial", args.clone(), Duration::from_secs(10))
        .await;
    let accepted = |listener: &TcpListener| {
        let mut n = 0;
        while let Ok((mut stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = Vec::new();
            let _ = stream.read_to_end(&mut buf);
            n += 1;
        }
        n
    };
    let datagrams = |udp: &UdpSocket| {
        let mut n = 0;
        let mut buf = [0u8; 256];
        while udp.recv_from(&mut buf).is_ok() {
            n += 1;
        }
        n
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (tcp_n, udp_n) = (accepted(&listener), datagrams(&udp));
    v.saw(format!(
        "the test's 127.0.0.1:{port} listener accepted {tcp_n}, its UDP socket got {udp_n}"
    ));
    if tcp_n > 0 {
        v.leak(format!(
            "the listener on 127.0.0.1:{port} accepted {tcp_n} connection(s)"
        ));
    }
    if udp_n > 0 {
        v.leak(format!(
            "the UDP socket on 127.0.0.1:{uport} received {udp_n} datagram(s)"
        ));
    }
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        for p in ["tcp 127.0.0.1", "tcp 192.0.2.1:80", "dns pypi.org"] {
            match find(&obs, p) {
                Some(o) if o.ok => v.leak(format!("{p}: {}", o.detail)),
                Some(o) => v.layer(layer_of(o, mode)),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
    }
    // Control: with `network: true` the same script reaches the listener, so a leak would
    // have been seen.
    match sc
        .s
        .call("dial_allowed", args, Duration::from_secs(20))
        .await
    {
        Ok(control) => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let n = accepted(&listener);
            let said = find(&observations(&control.text()), "tcp 127.0.0.1").map(Obs::what);
            v.saw(format!(
                "control with network: true: {said:?}, accepted {n}"
            ));
            if n != 1 {
                v.problem(format!(
                    "control: with network: true the listener accepted {n}, want 1 ({said:?})"
                ));
            }
        }
        Err(e) => v.problem(format!("control call failed: {e}")),
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 6. Resource bombs
// ---------------------------------------------------------------------------------------

async fn escape_fork_bomb(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("fork bomb", mode);
    // Every process forks until fork fails; the lingerers then become `sleep` with the
    // marker as argv[0], so the host can count and find them.
    let body = r#"
import time
marker = ARGS["marker"]
root = os.getpid()
forks, err = 0, None
end = time.time() + 5
while time.time() < end:
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        if os.getpid() == root:
            break
        os.execv("/usr/bin/sleep", [marker, "60"])
    if pid and os.getpid() == root:
        forks += 1
if os.getpid() != root:
    os.execv("/usr/bin/sleep", [marker, "60"])
note("forks by the first process", True, forks)
if err is not None:
    note("fork", False, exc=err)
else:
    note("fork", True, "never failed in 5 s")
time.sleep(0.5)
"#;
    sc.tool("fork_bomb", body, json!({})).await;
    let watch = Watch::start(&sc.marker);
    let call = sc
        .attack(
            &mut v,
            "fork_bomb",
            json!({"marker": sc.marker}),
            Duration::from_secs(15),
        )
        .await;
    let most = watch.finish();
    v.saw(format!(
        "at most {most} marked processes alive at once on the host"
    ));
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        match find(&obs, "fork") {
            Some(o) if !o.ok => v.layer(layer_of(o, mode)),
            Some(o) => v.leak(format!("fork never failed: {}", o.detail)),
            None => v.problem(format!("no probe `fork`: {}", short(&call.text(), 2000))),
        }
    }
    if most > 128 {
        v.leak(format!("{most} processes at once, over pids.max 128"));
    }
    sc.finish(v).await;
}

async fn escape_memory_bomb(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("memory bomb", mode);
    let body = r#"
chunks = []
try:
    while True:
        chunks.append(b"\x01" * (64 << 20))
        if len(chunks) > 1024:
            break
except MemoryError as e:
    n = len(chunks)
    chunks = None
    note("allocate", False, exc=e)
    note("MiB allocated before", True, n * 64)
else:
    note("allocate", True, f"{len(chunks) * 64} MiB and no MemoryError")
"#;
    sc.tool("memory_bomb", body, json!({})).await;
    if let Some(call) = sc
        .attack(&mut v, "memory_bomb", json!({}), Duration::from_secs(20))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        match find(&obs, "allocate") {
            Some(o) if !o.ok => v.layer(layer_of(o, mode)),
            Some(o) => v.leak(format!("no MemoryError: {}", o.detail)),
            None => {
                // Killed before it could say anything: a signal ends the run.
                if call.is_error() {
                    v.layer(format!("killed: {}", short(&call.text(), 80)));
                } else {
                    v.problem(format!(
                        "no probe `allocate`: {}",
                        short(&call.text(), 2000)
                    ));
                }
            }
        }
        if let Some(n) =
            find(&obs, "MiB allocated before").and_then(|o| o.detail.parse::<u64>().ok())
            && n > 2048
        {
            v.leak(format!("{n} MiB allocated, over the 2 GiB RLIMIT_AS"));
        }
    }
    sc.finish(v).await;
}

async fn escape_infinite_loop(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("infinite loop (timeout_s 1)", mode);
    let body = "print('looping', flush=True)\nwhile True:\n    pass\n";
    sc.tool("spin", body, json!({"timeout_s": 1})).await;
    if let Some(call) = sc
        .attack(&mut v, "spin", json!({}), Duration::from_secs(6))
        .await
    {
        let text = call.text();
        v.saw(format!("result: {:?}", short(&text, 300)));
        timeout_layer(&mut v, &call);
    }
    sc.finish(v).await;
}

/// Names the layer that ended a run that had to be stopped.
fn timeout_layer(v: &mut Verdict, call: &Call) {
    let text = call.text();
    if !call.is_error() {
        v.leak(format!(
            "the run was not stopped: isError false, {:?}",
            short(&text, 300)
        ));
    } else if text.contains("[timeout]") {
        v.layer("timeout+process-group (killpg, PID ns teardown)");
    } else if text.contains("[exit 152]") || text.contains("SIGXCPU") {
        v.layer("rlimits (RLIMIT_CPU)");
    } else {
        v.problem(format!("stopped, but by what? {:?}", short(&text, 300)));
    }
}

async fn escape_output_flood(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("100 MB of output", mode);
    let body = r#"
import threading
chunk = b"x" * (1 << 20)
def flood(stream):
    for _ in range(100):
        stream.write(chunk)
    stream.flush()
t = threading.Thread(target=flood, args=(sys.stderr.buffer,))
t.start()
flood(sys.stdout.buffer)
t.join()
"#;
    sc.tool("flood", body, json!({})).await;
    let rss_before = sc.omni.rss_kib();
    if let Some(call) = sc
        .attack(&mut v, "flood", json!({}), Duration::from_secs(30))
        .await
    {
        let rss_after = sc.omni.rss_kib();
        let text = call.text();
        let xs = text.bytes().filter(|&b| b == b'x').count();
        let cut = Regex::new(r"\[(\d+) more bytes not shown\]").unwrap();
        let marker = cut.captures(&text).map(|c| c[1].to_owned());
        v.saw(format!(
            "{} bytes of text ({xs} x), cut marker: {marker:?}, tail {:?}; server RSS {} -> {} MiB",
            text.len(),
            short(&text[text.len().saturating_sub(200)..], 200),
            rss_before >> 10,
            rss_after >> 10
        ));
        if text.len() > 70_000 {
            v.leak(format!("{} bytes of text reached the client", text.len()));
        }
        if marker.is_none() {
            v.problem("the cut result does not say how many bytes were left out");
        }
        if rss_after > rss_before + (64 << 10) {
            v.leak(format!(
                "the server's RSS grew by {} MiB",
                (rss_after - rss_before) >> 10
            ));
        }
        v.layer("capture cap (1 MiB kept per stream, rest drained) + result cut (64 KiB)");
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 7. Processes that try to outlive the call
// ---------------------------------------------------------------------------------------

async fn escape_setsid_grandchild(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("setsid grandchild", mode);
    // setsid(1) puts python in a new session; python becomes `sleep` with the marker as argv[0].
    // It keeps the script's stdout open.
    let body = r#"
import subprocess, time
m = ARGS["marker"]
p = subprocess.Popen(["setsid", sys.executable, "-c",
                      "import os, sys; os.execv('/usr/bin/sleep', [sys.argv[1], '60'])", m])
time.sleep(0.6)
def info(pid=p.pid):
    return {"pid": pid, "sid": os.getsid(pid), "pgid": os.getpgid(pid), "my sid": os.getsid(0),
            "my pgid": os.getpgid(0), "cmdline": open(f"/proc/{pid}/cmdline").read().replace("\0", " ")}
probe("escapee", info)
"#;
    sc.tool("setsid_child", body, json!({})).await;
    escapee_test(&mut sc, &mut v, "setsid_child").await;
    sc.finish(v).await;
}

async fn escape_double_fork_daemon(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("double fork + setsid daemon", mode);
    let body = r#"
import time
m = ARGS["marker"]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    gpid = os.fork()
    if gpid == 0:
        os.chdir("/")
        os.umask(0)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        os.execv("/usr/bin/sleep", [m, "60"])
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
daemon = int(os.read(r, 32))
time.sleep(0.6)
def info(pid=daemon):
    return {"pid": pid, "sid": os.getsid(pid), "pgid": os.getpgid(pid), "my sid": os.getsid(0),
            "my pgid": os.getpgid(0), "ppid": open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1],
            "cmdline": open(f"/proc/{pid}/cmdline").read().replace("\0", " ")}
probe("escapee", info)
"#;
    sc.tool("daemon", body, json!({})).await;
    escapee_test(&mut sc, &mut v, "daemon").await;
    sc.finish(v).await;
}

/// Calls a tool that leaves a marked process in its own session; it must be gone after.
async fn escapee_test(sc: &mut Scene, v: &mut Verdict, tool: &str) {
    let watch = Watch::start(&sc.marker);
    let call = sc
        .attack(
            v,
            tool,
            json!({"marker": sc.marker}),
            Duration::from_secs(10),
        )
        .await;
    let ended = Instant::now();
    let most = watch.finish();
    v.saw(format!(
        "marked processes seen on the host during the call: {most}"
    ));
    let mut layer = None;
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(v, &obs);
        match find(&obs, "escapee") {
            Some(o) if o.ok && o.detail.contains(&sc.marker) => {
                // It ran in its own session and process group: killpg of the run's group
                // cannot reach it, so what kills it (if anything) is the PID namespace teardown.
                let own_group = Regex::new(r"'pgid': (\d+), 'my sid': \d+, 'my pgid': (\d+)")
                    .unwrap()
                    .captures(&o.detail)
                    .is_some_and(|c| c[1] == c[2]);
                layer = Some(match (own_group, sc.mode) {
                    (true, _) => "timeout+process-group (killpg)",
                    (false, Mode::Namespaces) => {
                        "namespaces (PID ns: killing bwrap's init kills the escapee)"
                    }
                    (false, Mode::NoNamespaces) => {
                        "cgroup-kill (cgroup.kill takes what left the process group)"
                    }
                    (false, Mode::Warm) => {
                        "cgroup-kill (the call's own cgroup, killed when the call ends)"
                    }
                });
            }
            Some(o) => v.problem(format!(
                "the escapee did not start as planned: {}",
                o.what()
            )),
            None => v.problem(format!("no probe `escapee`: {}", short(&call.text(), 2000))),
        }
    }
    if most == 0 {
        v.problem("the host never saw the marked escapee: the attack did not run");
    }
    let left = leftovers(&sc.marker, Duration::from_secs(3)).await;
    if left.is_empty() {
        v.saw(format!(
            "no marked process left {:.0} ms after the call",
            ended.elapsed().as_secs_f64() * 1000.0
        ));
        if let Some(layer) = layer {
            v.layer(layer);
        }
    } else {
        v.leak(format!(
            "the escapee outlived the call by 3 s (killed now): {left:?}"
        ));
    }
}

async fn escape_closed_stdin_sleeps(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("close stdin and sleep", mode);
    sc.tool(
        "no_stdin",
        "import time\nos.close(0)\nprint('stdin closed', flush=True)\ntime.sleep(60)\n",
        json!({"timeout_s": 1}),
    )
    .await;
    // Also closes stdout and stderr: the server sees EOF on every pipe at once.
    sc.tool(
        "no_fds",
        "import time\nfor fd in (0, 1, 2):\n    os.close(fd)\ntime.sleep(60)\n",
        json!({"timeout_s": 1}),
    )
    .await;
    let bound = Duration::from_secs(6);
    let mut calls = Vec::new();
    for tool in ["no_stdin", "no_fds"] {
        if let Some(call) = sc.attack(&mut v, tool, json!({}), bound).await {
            v.saw(format!("{tool}: {:?}", short(&call.text(), 200)));
            calls.push(call);
        }
    }
    for call in &calls {
        timeout_layer(&mut v, call);
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 8. Defence in depth: what seccomp and Landlock stop that bubblewrap alone does not
// ---------------------------------------------------------------------------------------

/// The layers `/healthz` reports, by name: (active, detail).
async fn healthz_layers(sc: &Scene) -> std::collections::BTreeMap<String, (bool, String)> {
    let body: Value =
        sc.s.client
            .get(format!("{}/healthz", sc.omni.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    body["sandbox_layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            (
                l["name"].as_str().unwrap_or("").to_owned(),
                (
                    l["active"] == true,
                    l["detail"].as_str().unwrap_or("").to_owned(),
                ),
            )
        })
        .collect()
}

/// Kernel surface a script never needs. Inside bubblewrap's empty network namespace
/// `socket(AF_INET)` succeeds (only a connect fails) and `unshare(0)` is a harmless no-op
/// that succeeds: `EPERM` for them is the seccomp filter's answer, no other layer's.
async fn escape_kernel_surface_stopped_by_seccomp(mode: Mode) {
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("socket families and syscalls", mode);
    let layers = healthz_layers(&sc).await;
    let wanted: &[&str] = match mode {
        Mode::Namespaces | Mode::Warm => &["seccomp", "namespaces", "no-network"],
        Mode::NoNamespaces => &["seccomp"],
    };
    for &name in wanted {
        match layers.get(name) {
            Some((true, _)) => {}
            other => v.problem(format!("/healthz: layer {name} is not active: {other:?}")),
        }
    }
    let body = r#"
import ctypes, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == "x86_64"
def sys(nr, *args):
    def go():
        ctypes.set_errno(0)
        r = libc.syscall(nr, *args)
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return f"returned {r}"
    return go
def sock(family, kind=socket.SOCK_DGRAM):
    def go():
        socket.socket(family, kind).close()
        return "OPENED"
    return go
probe("socket AF_INET", sock(socket.AF_INET))
probe("socket AF_INET6", sock(socket.AF_INET6))
probe("socket AF_NETLINK", sock(socket.AF_NETLINK))
probe("socket AF_PACKET", sock(socket.AF_PACKET, socket.SOCK_RAW))
probe("unshare(0)", sys(272 if x86 else 97, 0))
probe("io_uring_setup", sys(425, 1, None))
probe("ptrace(PTRACE_TRACEME)", sys(101 if x86 else 117, 0, 0, 0, 0))
probe("keyctl", sys(250 if x86 else 219, 0, 0, 0, 0))
if x86:
    probe("x32 unshare(0)", sys(0x40000000 | 272, 0))
probe("socket AF_UNIX", sock(socket.AF_UNIX, socket.SOCK_STREAM))
probe("socket AF_UNIX datagram", sock(socket.AF_UNIX, socket.SOCK_DGRAM))
probe("socketpair (allowed)", lambda: socket.socketpair() and "PAIR")
"#;
    sc.tool("kernel", body, json!({})).await;
    sc.tool("kernel_net", body, json!({"network": true})).await;
    let mut probes = vec![
        "socket AF_INET",
        "socket AF_INET6",
        "socket AF_NETLINK",
        "socket AF_PACKET",
        "socket AF_UNIX",
        "socket AF_UNIX datagram",
        "unshare(0)",
        "io_uring_setup",
        "ptrace(PTRACE_TRACEME)",
        "keyctl",
    ];
    if std::env::consts::ARCH == "x86_64" {
        probes.push("x32 unshare(0)");
    }
    if let Some(call) = sc
        .attack(&mut v, "kernel", json!({}), Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        for p in &probes {
            match find(&obs, p) {
                Some(o) if o.errno == "EPERM" => v.layer("seccomp (EPERM filter)"),
                Some(o) => v.leak(format!("{p}: not refused by seccomp: {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
        if !find(&obs, "socketpair (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: socket pairs (asyncio, multiprocessing) must stay allowed");
        }
    }
    // With network allowed, the Internet families open; the system calls stay denied.
    if let Some(call) = sc
        .attack(&mut v, "kernel_net", json!({}), Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        for o in &obs {
            v.saw(format!("network: true: {}", o.what()));
        }
        for p in ["socket AF_INET", "socket AF_INET6"] {
            if !find(&obs, p).is_some_and(|o| o.ok) {
                v.problem(format!("control: with network: true, {p} must open"));
            }
        }
        for p in [
            "socket AF_PACKET",
            "socket AF_UNIX",
            "unshare(0)",
            "io_uring_setup",
        ] {
            if find(&obs, p).is_none_or(|o| o.errno != "EPERM") {
                v.leak(format!("with network: true, {p} was not refused"));
            }
        }
    }
    sc.finish(v).await;
}

/// What bubblewrap's namespaces leave open and Landlock closes: writes to the script's own
/// `/proc/self` files, reading the sandbox's init process, and (when a run shares the
/// host's network namespace) the host's abstract Unix sockets.
async fn escape_landlock_closes_what_namespaces_leave_open(mode: Mode) {
    use std::os::linux::net::SocketAddrExt;
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("proc writes, abstract sockets", mode);
    match healthz_layers(&sc).await.get("landlock") {
        Some((true, _)) => {}
        other => v.problem(format!("/healthz: layer landlock is not active: {other:?}")),
    }
    let name = unique("omniforge-escape-");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let body = r#"
import socket
def write(path, data):
    def go():
        with open(path, "w") as f:
            f.write(data)
        return "WROTE " + path
    return go
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect("\0" + ARGS["name"])
    return "CONNECTED to the host's abstract socket"
probe("write /proc/self/comm", write("/proc/self/comm", "pwned"))
probe("write /proc/self/oom_score_adj", write("/proc/self/oom_score_adj", "500"))
probe("read /proc/1/environ", lambda: open("/proc/1/environ").read()[:40])
probe("connect host abstract socket", connect)
probe("write /dev", write("/dev/pwned", "x"))
probe("write /dev/shm (allowed)", write("/dev/shm/ok", "x"))
"#;
    sc.tool("landlocked", body, json!({"network": true})).await;
    if let Some(call) = sc
        .attack(
            &mut v,
            "landlocked",
            json!({"name": name}),
            Duration::from_secs(10),
        )
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let init_environ = match mode {
            // The sandbox's own init (bubblewrap), outside the script's Landlock domain.
            Mode::Namespaces | Mode::Warm => ("EACCES", "landlock"),
            // The host's init, root's: another user's process is not in the run's /proc.
            Mode::NoNamespaces => ("ENOENT", mode.hides()),
        };
        for (p, errno, layer) in [
            ("write /proc/self/comm", "EACCES", "landlock"),
            ("write /proc/self/oom_score_adj", "EACCES", "landlock"),
            ("read /proc/1/environ", init_environ.0, init_environ.1),
            // seccomp refuses the AF_UNIX socket itself; Landlock's scope would refuse the
            // connect (`layers::landlock_scopes_abstract_unix_sockets_when_network_is_allowed`
            // shows it with seccomp off).
            (
                "connect host abstract socket",
                "EPERM",
                "seccomp (no AF_UNIX socket) + landlock (abstract sockets scoped to the run)",
            ),
        ] {
            match find(&obs, p) {
                Some(o) if o.errno == errno => v.layer(layer),
                Some(o) => v.leak(format!("{p}: {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
        match find(&obs, "write /dev") {
            Some(o) if o.errno == "EROFS" => v.layer("read-only-root (/dev remounted read-only)"),
            Some(o) if o.errno == "EACCES" => v.layer("landlock"),
            Some(o) => v.leak(format!("write /dev: {}", o.what())),
            None => v.problem("no probe \"write /dev\""),
        }
        if !find(&obs, "write /dev/shm (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: /dev/shm must be writable");
        }
    }
    if listener.accept().is_ok() {
        v.leak("the host's abstract socket accepted a connection");
    }
    sc.finish(v).await;
}

// ---------------------------------------------------------------------------------------
// 9. Privilege (issue 11, finding 2)
// ---------------------------------------------------------------------------------------

/// Issue 11, finding 2: a script never runs privileged, whatever is installed. The server is
/// root; without the namespace layer it switches each run to a uid of its own, with it
/// bubblewrap runs the script as 65534 in a user namespace. Either way the script reports a
/// uid that is not 0 and no capability, and every probe of the finding fails: the server's
/// and a concurrent script's `environ`, `cmdline` and `mem`, a host Unix socket (pathname,
/// in a directory anyone may enter, and abstract), SCHED_FIFO, nice -20, mknod, chroot,
/// setuid and setgid.
async fn escape_a_script_never_runs_privileged(mode: Mode) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert!(
        // /proc/self belongs to the process's effective uid.
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0),
        "finding 2 is about a root server: run the escape suite as root"
    );
    let mut sc = Scene::new(mode, &[]).await;
    let mut v = Verdict::new("privilege: uid, capabilities, /proc, sockets", mode);
    match healthz_layers(&sc).await.get("unprivileged-uid") {
        Some((true, detail)) => v.saw(format!("/healthz unprivileged-uid: {detail}")),
        other => v.problem(format!(
            "/healthz: layer unprivileged-uid is not active: {other:?}"
        )),
    }

    // A concurrent script holding a secret in its environment, found from the host by the
    // marker on its command line.
    let secret = unique("holder-secret-");
    sc.tool(
        "holder",
        r#"
import sys
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(6)", ARGS["marker"]],
          {"HOLDER_SECRET": ARGS["secret"]})
"#,
        json!({"timeout_s": 20}),
    )
    .await;
    let mut other = Session::open(&sc.omni.url).await;
    let holder_args = json!({"marker": sc.marker, "secret": secret});
    let holder = tokio::spawn(async move {
        other
            .call("holder", holder_args, Duration::from_secs(30))
            .await
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let concurrent = loop {
        if let Some((pid, _)) = marked(&sc.marker).into_iter().next() {
            break pid;
        }
        assert!(Instant::now() < deadline, "the holder script never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let environ = std::fs::read(format!("/proc/{concurrent}/environ")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ).contains(&secret),
        "control: the holder's secret is not in /proc/{concurrent}/environ on the host"
    );

    // Host Unix sockets.
    let dir = fresh_home();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = unique("omniforge-escape-priv-");
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();

    let body = r#"
import socket, stat
def status(field):
    return [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith(field + ":")][0]
note("uid", True, os.getuid())
note("ids", True, [os.getresuid(), os.getresgid(), os.getgroups()])
for f in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", "NoNewPrivs"]:
    note(f, True, status(f))
def read(p):
    def go():
        with open(p, "rb") as f:
            return f.read(4096).decode(errors="replace")
    return go
for who, pid in [("server", ARGS["server"]), ("concurrent", ARGS["concurrent"])]:
    for entry in ["environ", "cmdline", "mem"]:
        probe(f"{who} {entry}", read(f"/proc/{pid}/{entry}"), limit=None)
def unix(addr):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"hello from the sandbox")
        return "CONNECTED"
    return go
probe("host pathname socket", unix(ARGS["socket"]))
probe("host abstract socket", unix("\0" + ARGS["abstract"]))
probe("SCHED_FIFO", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
probe("nice -20", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
probe("mknod", lambda: os.mknod("/tmp/mem2", 0o600 | stat.S_IFCHR, os.makedev(1, 1)))
probe("chroot", lambda: os.chroot("/tmp"))
probe("setuid(0)", lambda: os.setuid(0))
probe("setgid(0)", lambda: os.setgid(0))
"#;
    sc.tool("privileges", body, json!({})).await;
    let args = json!({
        "server": sc.omni.pid,
        "concurrent": concurrent,
        "socket": path.display().to_string(),
        "abstract": abstract_name,
    });
    if let Some(call) = sc
        .attack(&mut v, "privileges", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        if text.contains(&secret) {
            v.leak("the concurrent script's secret is in the output");
        }
        match find(&obs, "uid") {
            Some(o) if o.ok && o.detail != "0" => {
                v.layer(format!("unprivileged-uid (uid {})", o.detail))
            }
            Some(o) => v.leak(format!("the script runs as uid {}", o.detail)),
            None => v.problem(format!("no probe `uid`: {}", short(&text, 2000))),
        }
        for cap in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
            match find(&obs, cap) {
                Some(o) if o.detail == "0000000000000000" => {}
                Some(o) => v.leak(format!("{cap} {}", o.detail)),
                None => v.problem(format!("no probe {cap:?}")),
            }
        }
        if mode == Mode::NoNamespaces {
            // Without bubblewrap the child empties the bounding set itself.
            match find(&obs, "CapBnd") {
                Some(o) if o.detail == "0000000000000000" => {}
                other => v.leak(format!("CapBnd: {:?}", other.map(Obs::what))),
            }
        }
        for p in [
            "server environ",
            "server cmdline",
            "server mem",
            "concurrent environ",
            "concurrent cmdline",
            "concurrent mem",
            "host pathname socket",
            "host abstract socket",
            "SCHED_FIFO",
            "nice -20",
            "mknod",
            "chroot",
            "setuid(0)",
            "setgid(0)",
        ] {
            match find(&obs, p) {
                Some(o) if o.ok => v.leak(format!("{p}: {}", short(&o.detail, 300))),
                Some(o) if o.errno == "ENOENT" => v.layer(mode.hides()),
                Some(o) if o.errno == "EINVAL" && p.starts_with("set") => {
                    v.layer("namespaces (uid and gid 0 are not mapped in the user namespace)")
                }
                Some(o) if o.errno == "EPERM" || o.errno == "EACCES" => v.layer(match p {
                    "host pathname socket" | "host abstract socket" => {
                        "seccomp (no AF_UNIX socket)"
                    }
                    _ => "unprivileged-uid (no capability, rlimits NICE/RTPRIO 0)",
                }),
                Some(o) => v.leak(format!("{p}: unexpected {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&text, 2000))),
            }
        }
    }
    if listener.accept().is_ok() || abstract_listener.accept().is_ok() {
        v.leak("a host Unix socket accepted a connection");
    }
    match holder.await {
        Ok(Ok(call)) if !call.is_error() => {}
        Ok(Ok(call)) => v.problem(format!("the holder failed: {}", short(&call.text(), 400))),
        Ok(Err(e)) => v.problem(format!("the holder's call: {e}")),
        Err(e) => v.problem(format!("the holder's task: {e}")),
    }
    sc.finish(v).await;
}

thrice!(
    escape_read_database,
    escape_read_other_tools_env,
    escape_read_server_environment,
    escape_write_outside_tmp,
    escape_fill_disk_outside_tmp,
    escape_tcp_connection_while_network_off,
    escape_fork_bomb,
    escape_memory_bomb,
    escape_infinite_loop,
    escape_output_flood,
    escape_setsid_grandchild,
    escape_double_fork_daemon,
    escape_closed_stdin_sleeps,
    escape_kernel_surface_stopped_by_seccomp,
    escape_landlock_closes_what_namespaces_leave_open,
    escape_a_script_never_runs_privileged,
);

// ---------------------------------------------------------------------------------------
// WIRE-24 and WIRE-33
// ---------------------------------------------------------------------------------------

/// WIRE-24: an inputSchema without `properties` is listed with `"properties": {}` added and
/// stored exactly as authored.
#[tokio::test]
async fn escape_suite_wire24_object_schema_without_properties_gets_empty_properties() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let omni = Omni::start(&[]).await;
    let mut s = Session::open(&omni.url).await;
    let schemas = [
        ("bare", json!({"type": "object"})),
        (
            "closed",
            json!({"type": "object", "additionalProperties": false, "description": "No arguments."}),
        ),
    ];
    for (name, schema) in &schemas {
        s.create(json!({"name": name, "description": "No arguments.", "inputSchema": schema, "code": "print('ok')\n"}))
            .await;
    }
    let (list, _) = s
        .request("tools/list", json!({}), Duration::from_secs(10))
        .await
        .unwrap_or_else(|e| panic!("tools/list: {e}"));
    let tools = list["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    for t in &tools {
        if !t["inputSchema"]["properties"].is_object() {
            problems.push(format!(
                "tools/list: {} has no object `properties` in its inputSchema: {}",
                t["name"], t["inputSchema"]
            ));
        }
    }
    for (name, schema) in &schemas {
        let listed = tools
            .iter()
            .find(|t| t["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is not listed"));
        let mut want = schema.clone();
        want["properties"] = json!({});
        if listed["inputSchema"] != want {
            problems.push(format!(
                "{name}: listed inputSchema {} != stored schema plus properties: {{}} ({want})",
                listed["inputSchema"]
            ));
        }
        let get = s
            .call(
                "omniforge_get_tool",
                json!({"name": name}),
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|e| panic!("omniforge_get_tool {name}: {e}"));
        let stored = &get.result["structuredContent"]["inputSchema"];
        if stored != schema {
            problems.push(format!(
                "{name}: stored inputSchema {stored} != authored {schema}"
            ));
        }
        let call = s.call(name, json!({}), Duration::from_secs(20)).await;
        match call {
            Ok(c) if !c.is_error() && c.text() == "ok" => {}
            Ok(c) => problems.push(format!("{name} {{}}: {}", c.result)),
            Err(e) => problems.push(format!("{name} {{}}: {e}")),
        }
    }
    summary_row(
        "WIRE-24 properties: {} added",
        if problems.is_empty() { "ok" } else { "FAILED" },
        "listing adds properties: {}, store keeps the authored schema",
        started,
    );
    assert!(
        problems.is_empty(),
        "WIRE-24:\n  - {}",
        problems.join("\n  - ")
    );
}

/// WIRE-33: a tool silent for S seconds (S > 15, the heartbeat interval), called with a
/// progressToken, gets at least one `notifications/progress` "still running" (same token,
/// increasing values) before its result, with no gap over 20 s; without a progressToken no
/// progress is sent (neither on the POST stream nor on the session's GET stream).
#[tokio::test]
async fn escape_suite_wire33_heartbeat_progress_only_with_token() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let s_secs: f64 = std::env::var("OMNIFORGE_E2E_LONG_RUN_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18.0);
    assert!(
        s_secs > 15.5,
        "OMNIFORGE_E2E_LONG_RUN_S={s_secs}: must be over 15 s (the heartbeat comes after 15 s of silence)"
    );
    let omni = Omni::start(&[]).await;
    let mut with = Session::open(&omni.url).await;
    let without = Session::open(&omni.url).await;
    with.create(json!({
        "name": "deep_research", "description": "Sleeps S seconds silently.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}, "s": {"type": "number"}}},
        "timeout_s": s_secs + 20.0,
        "code": "import json, sys, time\nargs = json.load(sys.stdin)\ntime.sleep(args['s'])\nprint('done')\n",
    }))
    .await;

    // The session without a token also listens on its GET stream.
    let get_msgs: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let get_status: Arc<std::sync::Mutex<Option<u16>>> = Arc::default();
    let get_task = tokio::spawn({
        let (client, url, headers) = (
            without.client.clone(),
            without.url.clone(),
            without.headers(),
        );
        let (msgs, status) = (get_msgs.clone(), get_status.clone());
        async move {
            let mut req = client.get(&url).header("Accept", "text/event-stream");
            for (k, v) in headers
                .iter()
                .filter(|(k, _)| k != "Content-Type" && k != "Accept")
            {
                req = req.header(k.as_str(), v.as_str());
            }
            let Ok(mut resp) = req.send().await else {
                return;
            };
            *status.lock().unwrap() = Some(resp.status().as_u16());
            let mut pending = Vec::new();
            while let Ok(Some(chunk)) = resp.chunk().await {
                pending.extend_from_slice(&chunk);
                msgs.lock().unwrap().extend(take_events(&mut pending));
            }
        }
    });

    let budget = Duration::from_secs_f64(s_secs + 15.0);
    let args = json!({"q": "x", "s": s_secs});
    let (a, b) = tokio::join!(
        with.call_with(
            json!(11),
            "deep_research",
            args.clone(),
            Some(json!({"progressToken": 11})),
            budget
        ),
        without.call_with(json!(12), "deep_research", args, None, budget),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    get_task.abort();
    let mut problems = Vec::new();
    match &a {
        Err(e) => problems.push(format!("with a token: {e}")),
        Ok(call) => {
            let ex = &call.exchange;
            if ex.content_type.as_deref() != Some("text/event-stream") {
                problems.push(format!(
                    "with a token: content type {:?}, want text/event-stream",
                    ex.content_type
                ));
            }
            if call.is_error() || call.text() != "done" {
                problems.push(format!("with a token: result {}", call.result));
            }
            let progress = ex.progress();
            eprintln!(
                "  with progressToken 11: {:.1} s, progress {:?}",
                call.elapsed.as_secs_f64(),
                progress
                    .iter()
                    .map(|(t, m)| format!(
                        "{t:.1}s {} {:?}",
                        m["params"]["progress"], m["params"]["message"]
                    ))
                    .collect::<Vec<_>>()
            );
            if !progress
                .iter()
                .any(|(_, m)| m["params"]["message"] == "still running")
            {
                problems.push(format!(
                    "with a token: no notifications/progress \"still running\" in {:.1} s of silence: {:?}",
                    call.elapsed.as_secs_f64(),
                    ex.messages
                ));
            }
            if let Some((_, bad)) = progress
                .iter()
                .find(|(_, m)| m["params"]["progressToken"] != 11)
            {
                problems.push(format!("with a token: progress with another token: {bad}"));
            }
            let values: Vec<f64> = progress
                .iter()
                .filter_map(|(_, m)| m["params"]["progress"].as_f64())
                .collect();
            if values.len() != progress.len() || !values.windows(2).all(|w| w[0] < w[1]) {
                problems.push(format!(
                    "with a token: progress values must increase: {values:?}"
                ));
            }
            let last = ex.messages.last().map(|(_, m)| m);
            if !last.is_some_and(|m| support::is_response(m) && m["id"] == 11) {
                problems.push(format!(
                    "with a token: the last message is not the response to 11: {last:?}"
                ));
            }
            let mut times: Vec<f64> = vec![0.0];
            times.extend(ex.messages.iter().map(|(t, _)| *t));
            let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
            if gap > 20.0 {
                problems.push(format!(
                    "with a token: {gap:.1} s between messages (max 20)"
                ));
            }
        }
    }
    match &b {
        Err(e) => problems.push(format!("without a token: {e}")),
        Ok(call) => {
            let progress = call.exchange.progress();
            eprintln!(
                "  without progressToken: {:.1} s, {} progress notifications",
                call.elapsed.as_secs_f64(),
                progress.len()
            );
            if !progress.is_empty() {
                problems.push(format!("without a token: progress was sent: {progress:?}"));
            }
            if call.is_error() || call.text() != "done" {
                problems.push(format!("without a token: result {}", call.result));
            }
        }
    }
    let on_get: Vec<Value> = get_msgs
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .cloned()
        .collect();
    eprintln!(
        "  GET stream of the session without a token: HTTP {:?}, {} progress",
        get_status.lock().unwrap(),
        on_get.len()
    );
    if !on_get.is_empty() {
        problems.push(format!(
            "without a token: progress on the GET stream: {on_get:?}"
        ));
    }
    let panics: Vec<String> = panic_lines(&omni.stderr.text())
        .into_iter()
        .map(str::to_owned)
        .collect();
    if !panics.is_empty() {
        problems.push(format!("the server panicked: {panics:?}"));
    }
    summary_row(
        &format!("WIRE-33 heartbeat (S={s_secs} s)"),
        if problems.is_empty() { "ok" } else { "FAILED" },
        "heartbeat progress only with a token",
        started,
    );
    assert!(
        problems.is_empty(),
        "WIRE-33:\n  - {}",
        problems.join("\n  - ")
    );
}
