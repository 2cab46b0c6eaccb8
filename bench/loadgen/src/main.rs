//! `loadgen`: the load generator of OmniForge's benchmarks (issue 6).
//!
//! It speaks MCP the way real clients do (initialize, `notifications/initialized`,
//! `Mcp-Session-Id`, `MCP-Protocol-Version`), keeps N concurrent clients for a fixed duration
//! or request count, and records latency histograms (`hdrhistogram`, nanosecond resolution).
//! Every subcommand prints one JSON object (the result) on stdout and appends it to `--out`.
//!
//! ```text
//! loadgen http     --url http://127.0.0.1:PORT/mcp [--stateless] --clients 32 --duration-s 10 --warmup-s 2 \
//!                  --method call --tool omniforge_instructions [--args '{}'] [--rss-pid PID]
//! loadgen connect  --url http://127.0.0.1:PORT/fixture.v1.FixtureService/Echo --body '{"text":"hi"}' --clients 1 ...
//! loadgen stdio    --requests 10000 --tool NAME [--dump-text FILE] -- CMD ARGS...
//! loadgen sessions --url URL --count 1000 [--sse] --rss-pid PID
//! loadgen startup  --runs 20 --ready stdio|URL -- CMD ARGS...
//! loadgen exec     --runs 50 --stdin '{"x":1}' -- CMD ARGS...      (a bare process run, timed)
//! ```
//!
//! Only loopback targets are accepted. Every loop is bounded by a duration or a count, and
//! every wait has a timeout. The runtime is single-threaded: the benchmark pins the load
//! generator to one core (`taskset -c 1`) and the server to another.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Args, Parser, Subcommand};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

type BoxError = Box<dyn std::error::Error>;

#[derive(Parser)]
#[command(about = "MCP load generator for OmniForge's benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Clone, Default)]
struct Common {
    /// `key=value` copied into the result (system, workload, ...); repeatable.
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Append the result (one JSON line) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Report this process's VmRSS/VmHWM (kB) after the run.
    #[arg(long)]
    rss_pid: Option<u32>,
    /// Exit with status 1 if any request failed.
    #[arg(long)]
    fail_on_error: bool,
}

#[derive(Args, Clone)]
struct Load {
    /// Concurrent clients, each with its own connection (and session).
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// Measure for this long (after the warm-up).
    #[arg(long)]
    duration_s: Option<f64>,
    /// Or: stop after this many requests in total (after the warm-up).
    #[arg(long)]
    requests: Option<u64>,
    /// Run this long before measuring.
    #[arg(long, default_value_t = 0.0)]
    warmup_s: f64,
    /// A request that takes longer counts as an error.
    #[arg(long, default_value_t = 60.0)]
    timeout_s: f64,
    /// Each client waits this long before each request (not measured): calls spaced as an
    /// agent spaces its tool calls, rather than back to back.
    #[arg(long, default_value_t = 0.0)]
    pause_ms: f64,
}

#[derive(Subcommand)]
enum Cmd {
    /// MCP over Streamable HTTP, session (default) or stateless mode.
    Http {
        #[arg(long)]
        url: String,
        /// No session: initialize once per client (no Mcp-Session-Id), then plain requests.
        #[arg(long)]
        stateless: bool,
        /// `call` (tools/call), `list` (tools/list, first page) or `ping`.
        #[arg(long, default_value = "call")]
        method: String,
        #[arg(long, default_value = "omniforge_instructions")]
        tool: String,
        /// Tool arguments (a JSON object).
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long, default_value = "2025-11-25")]
        protocol: String,
        /// Every response body must contain this.
        #[arg(long)]
        expect: Option<String>,
        /// Send `Authorization: Bearer TOKEN` with every request (a server with `--token-file`).
        #[arg(long)]
        bearer: Option<String>,
        #[command(flatten)]
        load: Load,
        #[command(flatten)]
        common: Common,
    },
    /// Plain Connect unary calls (HTTP POST of a JSON body), for the direct-upstream baseline.
    Connect {
        #[arg(long)]
        url: String,
        #[arg(long)]
        body: String,
        #[arg(long)]
        expect: Option<String>,
        #[command(flatten)]
        load: Load,
        #[command(flatten)]
        common: Common,
    },
    /// MCP over stdio: spawn the server, then sequential tools/call on one connection.
    Stdio {
        #[arg(long, default_value_t = 10_000)]
        requests: u64,
        /// Calls before measuring.
        #[arg(long, default_value_t = 200)]
        warmup: u64,
        #[arg(long, default_value = "omniforge_instructions")]
        tool: String,
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long)]
        expect: Option<String>,
        /// Write the first result's text to this file (then exit unless --requests > 1).
        #[arg(long)]
        dump_text: Option<PathBuf>,
        /// The server's stderr goes here (default: discarded).
        #[arg(long)]
        stderr_file: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
        /// The server command.
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Open N MCP sessions, leave them idle, and report the server's RSS growth.
    Sessions {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 1000)]
        count: usize,
        /// Also open the standalone GET SSE stream of each session (one connection each), as
        /// every real client does right after initialize.
        #[arg(long)]
        sse: bool,
        /// Wait this long with everything open before reading the RSS.
        #[arg(long, default_value_t = 2.0)]
        hold_s: f64,
        #[arg(long, default_value = "2025-11-25")]
        protocol: String,
        /// Send `Authorization: Bearer TOKEN` with every request.
        #[arg(long)]
        bearer: Option<String>,
        /// After the RSS with the sessions open, wait this long (past the server's session idle
        /// timeout) and report the RSS again as `rss_expired_kb`.
        #[arg(long)]
        expire_wait_s: Option<f64>,
        #[command(flatten)]
        common: Common,
    },
    /// Spawn the server RUNS times; time spawn to the first successful initialize answer.
    Startup {
        #[arg(long, default_value_t = 20)]
        runs: usize,
        /// `stdio`, or the MCP URL to POST initialize to (retried every millisecond).
        #[arg(long)]
        ready: String,
        /// Report the RSS of the started process this long after it became ready (last run).
        #[arg(long)]
        idle_rss_after_s: Option<f64>,
        #[command(flatten)]
        common: Common,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Run a command RUNS times with STDIN on its stdin; time each run (the bare baseline).
    Exec {
        #[arg(long, default_value_t = 50)]
        runs: usize,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value = "")]
        stdin: String,
        #[arg(long)]
        expect: Option<String>,
        /// Runs at once (threads, each running its share of RUNS back to back): the bare
        /// baseline of N concurrent clients.
        #[arg(long, default_value_t = 1)]
        parallel: usize,
        #[command(flatten)]
        common: Common,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
}

fn main() {
    raise_fd_limit();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, run(cli.cmd));
    match result {
        Ok(()) => {}
        Err(e) => {
            eprintln!("loadgen: error: {e}");
            std::process::exit(1);
        }
    }
}

async fn run(cmd: Cmd) -> Result<(), BoxError> {
    match cmd {
        Cmd::Http {
            url,
            stateless,
            method,
            tool,
            args,
            protocol,
            expect,
            bearer,
            load,
            common,
        } => {
            let ep = Endpoint::parse(&url)?;
            let params = match method.as_str() {
                "call" => {
                    let args: Value = serde_json::from_str(&args)?;
                    json!({"name": tool, "arguments": args}).to_string()
                }
                "list" => "{}".to_owned(),
                "ping" => "{}".to_owned(),
                m => return Err(format!("unknown --method {m}").into()),
            };
            let method = match method.as_str() {
                "call" => "tools/call",
                "list" => "tools/list",
                _ => "ping",
            };
            let spec = Rc::new(McpSpec {
                ep,
                stateless,
                protocol,
                method,
                params,
                expect,
                auth: bearer.map(|t| format!("Bearer {t}")),
                json_replies: Cell::new(0),
                sse_replies: Cell::new(0),
            });
            let mut result = run_load(&load, |_| {
                let spec = spec.clone();
                async move { McpClient::open(spec).await }
            })
            .await?;
            result["mode"] = json!(if stateless {
                "http-stateless"
            } else {
                "http-session"
            });
            // How the answers came: one JSON body, or an SSE stream (warm-up included).
            result["json_replies"] = json!(spec.json_replies.get());
            result["sse_replies"] = json!(spec.sse_replies.get());
            finish(result, &common)
        }
        Cmd::Connect {
            url,
            body,
            expect,
            load,
            common,
        } => {
            let ep = Rc::new(Endpoint::parse(&url)?);
            let body = Bytes::from(body);
            let mut result = run_load(&load, |_| {
                let ep = ep.clone();
                let body = body.clone();
                let expect = expect.clone();
                async move {
                    Ok(ConnectClient {
                        conn: Conn::open(ep).await?,
                        body,
                        expect,
                    })
                }
            })
            .await?;
            result["mode"] = json!("connect");
            finish(result, &common)
        }
        Cmd::Stdio {
            requests,
            warmup,
            tool,
            args,
            expect,
            dump_text,
            stderr_file,
            common,
            cmd,
        } => {
            let args: Value = serde_json::from_str(&args)?;
            let result = run_stdio(
                &cmd,
                requests,
                warmup,
                &tool,
                &args,
                expect.as_deref(),
                dump_text,
                stderr_file,
            )
            .await?;
            finish(result, &common)
        }
        Cmd::Sessions {
            url,
            count,
            sse,
            hold_s,
            protocol,
            bearer,
            expire_wait_s,
            common,
        } => {
            let pid = common.rss_pid.ok_or("sessions needs --rss-pid")?;
            let auth = bearer.map(|t| format!("Bearer {t}"));
            let result = run_sessions(
                &url,
                count,
                sse,
                hold_s,
                &protocol,
                auth.as_deref(),
                expire_wait_s,
                pid,
            )
            .await?;
            finish(result, &common)
        }
        Cmd::Startup {
            runs,
            ready,
            idle_rss_after_s,
            common,
            cmd,
        } => {
            let result = run_startup(&cmd, runs, &ready, idle_rss_after_s).await?;
            finish(result, &common)
        }
        Cmd::Exec {
            runs,
            warmup,
            stdin,
            expect,
            parallel,
            common,
            cmd,
        } => {
            let result = run_exec(&cmd, runs, warmup, &stdin, expect.as_deref(), parallel)?;
            finish(result, &common)
        }
    }
}

/// Adds tags and RSS, prints the result and appends it to `--out`.
fn finish(mut result: Value, common: &Common) -> Result<(), BoxError> {
    for tag in &common.tags {
        let (k, v) = tag
            .split_once('=')
            .ok_or_else(|| format!("--tag {tag}: expected key=value"))?;
        result[k] = json!(v);
    }
    if let Some(pid) = common.rss_pid {
        if let Some((rss, hwm)) = rss_kb(pid) {
            result["rss_kb"] = json!(rss);
            result["hwm_kb"] = json!(hwm);
        }
        if let Some((anon, file)) = rss_split_kb(pid) {
            result["rss_anon_kb"] = json!(anon);
            result["rss_file_kb"] = json!(file);
        }
    }
    let line = result.to_string();
    println!("{line}");
    if let Some(out) = &common.out {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)?;
        writeln!(f, "{line}")?;
    }
    let errors = result.get("errors").and_then(Value::as_u64).unwrap_or(0);
    if common.fail_on_error
        && (errors > 0 || result.get("count").and_then(Value::as_u64) == Some(0))
    {
        return Err(format!("{errors} request(s) failed").into());
    }
    Ok(())
}

/// VmRSS and VmHWM of `pid`, in kB.
fn rss_kb(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// RssAnon and RssFile of `pid`, in kB (heap vs mapped binary and libraries).
fn rss_split_kb(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((field("RssAnon:")?, field("RssFile:")?))
}

fn raise_fd_limit() {
    // SAFETY: plain getrlimit/setrlimit on a stack value.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Histograms

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 120_000_000_000, 3).expect("valid histogram bounds")
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = (d.as_nanos() as u64).clamp(1_000, 120_000_000_000);
    h.record(ns).expect("value within bounds");
}

fn summary(h: &Histogram<u64>) -> Value {
    let us = |ns: u64| (ns as f64 / 1000.0 * 10.0).round() / 10.0;
    if h.is_empty() {
        return json!(null);
    }
    json!({
        "min": us(h.min()),
        "p50": us(h.value_at_quantile(0.50)),
        "p90": us(h.value_at_quantile(0.90)),
        "p99": us(h.value_at_quantile(0.99)),
        "p999": us(h.value_at_quantile(0.999)),
        "max": us(h.max()),
        "mean": (h.mean() / 1000.0 * 10.0).round() / 10.0,
    })
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 connections (hyper, one connection per client, keep-alive)

struct Endpoint {
    addr: SocketAddr,
    host: String,
    path: String,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Endpoint, BoxError> {
        let uri: http::Uri = url.parse()?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("{url}: only http:// is supported").into());
        }
        let authority = uri.authority().ok_or("URL without host")?;
        let port = authority.port_u16().unwrap_or(80);
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let ip: std::net::IpAddr = match host {
            "localhost" => "127.0.0.1".parse()?,
            h => h.parse().map_err(|_| format!("{url}: use a loopback IP"))?,
        };
        if !ip.is_loopback() {
            return Err(format!("{url}: only loopback targets are allowed").into());
        }
        Ok(Endpoint {
            addr: SocketAddr::new(ip, port),
            host: authority.as_str().to_owned(),
            path: uri
                .path_and_query()
                .map_or("/".to_owned(), |p| p.as_str().to_owned()),
        })
    }
}

struct Reply {
    status: u16,
    session: Option<String>,
    /// `Content-Type: application/json` (else an SSE stream or an empty body).
    json: bool,
    body: Bytes,
}

struct Conn {
    ep: Rc<Endpoint>,
    sender: SendRequest<Full<Bytes>>,
}

impl Conn {
    async fn open(ep: Rc<Endpoint>) -> Result<Conn, BoxError> {
        let sender = handshake(&ep).await?;
        Ok(Conn { ep, sender })
    }

    /// One request; reconnects once if the server closed the keep-alive connection.
    async fn send(
        &mut self,
        method: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Reply, BoxError> {
        for attempt in 0..2 {
            if self.sender.ready().await.is_err() || self.sender.is_closed() {
                self.sender = handshake(&self.ep).await?;
            }
            let mut req = http::Request::builder()
                .method(method)
                .uri(&self.ep.path)
                .header("host", &self.ep.host);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            let req = req.body(Full::new(body.clone()))?;
            match self.sender.send_request(req).await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let session = resp
                        .headers()
                        .get("mcp-session-id")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let json = resp
                        .headers()
                        .get("content-type")
                        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
                    let body = resp.into_body().collect().await?.to_bytes();
                    return Ok(Reply {
                        status,
                        session,
                        json,
                        body,
                    });
                }
                Err(e) if attempt == 0 && (e.is_closed() || e.is_incomplete_message()) => {
                    self.sender = handshake(&self.ep).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err("connection closed twice".into())
    }
}

async fn handshake(ep: &Endpoint) -> Result<SendRequest<Full<Bytes>>, BoxError> {
    let stream = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(ep.addr),
    )
    .await??;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

// ---------------------------------------------------------------------------------------------
// MCP over Streamable HTTP

struct McpSpec {
    ep: Endpoint,
    stateless: bool,
    protocol: String,
    method: &'static str,
    /// The request's params, as JSON text.
    params: String,
    expect: Option<String>,
    /// The `Authorization` header value, if any.
    auth: Option<String>,
    json_replies: Cell<u64>,
    sse_replies: Cell<u64>,
}

struct McpClient {
    spec: Rc<McpSpec>,
    conn: Conn,
    session: Option<String>,
    next_id: u64,
}

const ACCEPT: &str = "application/json, text/event-stream";

fn initialize_body(id: u64, protocol: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": protocol, "capabilities": {},
        "clientInfo": {"name": "omniforge-loadgen", "version": "0.1.0"}}})
    .to_string()
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

impl McpClient {
    async fn open(spec: Rc<McpSpec>) -> Result<McpClient, BoxError> {
        let conn = Conn::open(Rc::new(Endpoint {
            addr: spec.ep.addr,
            host: spec.ep.host.clone(),
            path: spec.ep.path.clone(),
        }))
        .await?;
        let mut client = McpClient {
            spec,
            conn,
            session: None,
            next_id: 1,
        };
        client.initialize().await?;
        Ok(client)
    }

    async fn initialize(&mut self) -> Result<(), BoxError> {
        let (session, _) = mcp_initialize(
            &mut self.conn,
            &self.spec.protocol,
            self.spec.auth.as_deref(),
        )
        .await?;
        if !self.spec.stateless && session.is_none() {
            return Err("initialize answered without Mcp-Session-Id (session mode)".into());
        }
        self.session = session;
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("mcp-protocol-version", self.spec.protocol.as_str()),
        ];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id", s.as_str()));
        }
        if let Some(a) = &self.spec.auth {
            headers.push(("authorization", a.as_str()));
        }
        let reply = self
            .conn
            .send("POST", &headers, Bytes::from_static(INITIALIZED.as_bytes()))
            .await?;
        if reply.status != 202 && reply.status != 200 {
            return Err(format!("notifications/initialized: HTTP {}", reply.status).into());
        }
        Ok(())
    }

    async fn request(&mut self) -> Result<(), String> {
        let id = self.next_id;
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{}","params":{}}}"#,
            self.spec.method, self.spec.params
        );
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("mcp-protocol-version", self.spec.protocol.as_str()),
        ];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id", s.as_str()));
        }
        if let Some(a) = &self.spec.auth {
            headers.push(("authorization", a.as_str()));
        }
        let reply = self
            .conn
            .send("POST", &headers, Bytes::from(body))
            .await
            .map_err(|e| e.to_string())?;
        let kind = match reply.json {
            true => &self.spec.json_replies,
            false => &self.spec.sse_replies,
        };
        kind.set(kind.get() + 1);
        if reply.status != 200 {
            return Err(format!(
                "HTTP {}: {}",
                reply.status,
                String::from_utf8_lossy(&reply.body[..reply.body.len().min(200)])
            ));
        }
        // Large answers (a tools/list page of 1,000 tools is ~0.5 MB) are checked by bytes, not
        // parsed: the client's own JSON parsing would otherwise inflate the server's latency.
        if reply.body.len() > 64 * 1024 {
            let id_field = format!("\"id\":{id}");
            if !contains(&reply.body, id_field.as_bytes()) || !contains(&reply.body, b"\"result\"")
            {
                return Err(format!(
                    "no result for id {id}: {}",
                    String::from_utf8_lossy(&reply.body[..300])
                ));
            }
        } else {
            let message = response_message(&reply.body, id)?;
            check_result(&message, self.spec.method == "tools/call")?;
        }
        if let Some(expect) = &self.spec.expect {
            if !contains(&reply.body, expect.as_bytes()) {
                return Err(format!("response lacks {expect:?}"));
            }
        }
        Ok(())
    }
}

/// POSTs initialize; returns the session id and the result.
async fn mcp_initialize(
    conn: &mut Conn,
    protocol: &str,
    auth: Option<&str>,
) -> Result<(Option<String>, Value), BoxError> {
    let mut headers = vec![("content-type", "application/json"), ("accept", ACCEPT)];
    if let Some(a) = auth {
        headers.push(("authorization", a));
    }
    let reply = conn
        .send("POST", &headers, Bytes::from(initialize_body(0, protocol)))
        .await?;
    if reply.status != 200 {
        return Err(format!(
            "initialize: HTTP {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(300)])
        )
        .into());
    }
    let message = response_message(&reply.body, 0)?;
    let result = message
        .get("result")
        .cloned()
        .ok_or_else(|| format!("initialize failed: {message}"))?;
    Ok((reply.session, result))
}

/// The JSON-RPC response with `id` in a JSON or SSE body.
fn response_message(body: &[u8], id: u64) -> Result<Value, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return serde_json::from_str(trimmed).map_err(|e| format!("bad JSON: {e}"));
    }
    // SSE: events separated by blank lines; `data:` lines hold the messages.
    let mut data = String::new();
    let mut events = Vec::new();
    for line in text.lines() {
        if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        } else if line.is_empty() && !data.is_empty() {
            events.push(std::mem::take(&mut data));
        }
    }
    if !data.is_empty() {
        events.push(data);
    }
    for event in events {
        if let Ok(v) = serde_json::from_str::<Value>(&event) {
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(v);
            }
        }
    }
    Err(format!(
        "no response with id {id} in: {}",
        &text[..text.len().min(300)]
    ))
}

fn check_result(message: &Value, is_call: bool) -> Result<(), String> {
    let result = message.get("result").ok_or_else(|| {
        format!(
            "error response: {}",
            message.get("error").unwrap_or(message)
        )
    })?;
    if is_call && result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = result.to_string();
        return Err(format!("isError result: {}", &text[..text.len().min(300)]));
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

struct ConnectClient {
    conn: Conn,
    body: Bytes,
    expect: Option<String>,
}

impl Worker for ConnectClient {
    async fn call(&mut self) -> Result<(), String> {
        let reply = self
            .conn
            .send(
                "POST",
                &[
                    ("content-type", "application/json"),
                    ("connect-protocol-version", "1"),
                ],
                self.body.clone(),
            )
            .await
            .map_err(|e| e.to_string())?;
        if reply.status != 200 {
            return Err(format!(
                "HTTP {}: {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            ));
        }
        if let Some(expect) = &self.expect {
            if !contains(&reply.body, expect.as_bytes()) {
                return Err(format!("response lacks {expect:?}"));
            }
        }
        Ok(())
    }
}

impl Worker for McpClient {
    async fn call(&mut self) -> Result<(), String> {
        self.request().await
    }
}

// ---------------------------------------------------------------------------------------------
// The closed-loop driver: N clients, each sending its next request when the previous answered.

trait Worker {
    async fn call(&mut self) -> Result<(), String>;
}

async fn run_load<W, F, Fut>(load: &Load, mut make: F) -> Result<Value, BoxError>
where
    W: Worker + 'static,
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<W, BoxError>>,
{
    if load.duration_s.is_none() && load.requests.is_none() {
        return Err("give --duration-s or --requests".into());
    }
    // Sessions are opened before the clock starts; opening is not part of the measurement.
    let mut workers = Vec::with_capacity(load.clients);
    for i in 0..load.clients {
        workers.push(make(i).await?);
    }
    let start = Instant::now();
    let warm_end = start + Duration::from_secs_f64(load.warmup_s);
    let end = load
        .duration_s
        .map(|d| warm_end + Duration::from_secs_f64(d));
    // Hard cap for count-bounded runs.
    let deadline = end.unwrap_or(start + Duration::from_secs(900));
    let state = Rc::new(LoadState {
        remaining: Cell::new(load.requests.unwrap_or(u64::MAX)),
        hist: RefCell::new(new_hist()),
        errors: Cell::new(0),
        first_error: RefCell::new(None),
        first_done: Cell::new(None),
        last_done: Cell::new(None),
    });
    let per_call = Duration::from_secs_f64(load.timeout_s);
    let pause = Duration::from_secs_f64(load.pause_ms / 1000.0);
    let mut handles = Vec::new();
    for mut w in workers {
        let state = state.clone();
        let counted = load.requests.is_some();
        handles.push(tokio::task::spawn_local(async move {
            loop {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                // A count-bounded run counts only measured requests against the budget.
                if counted && now >= warm_end {
                    let r = state.remaining.get();
                    if r == 0 {
                        break;
                    }
                    state.remaining.set(r - 1);
                }
                let t0 = Instant::now();
                let outcome = tokio::time::timeout(per_call, w.call()).await;
                let t1 = Instant::now();
                if t0 < warm_end || t1 > deadline && end.is_some() {
                    continue;
                }
                if state.first_done.get().is_none() {
                    state.first_done.set(Some(t0));
                }
                state.last_done.set(Some(t1));
                match outcome {
                    Ok(Ok(())) => record(&mut state.hist.borrow_mut(), t1 - t0),
                    Ok(Err(e)) => state.error(e),
                    Err(_) => state.error(format!("timeout ({} s)", per_call.as_secs_f64())),
                }
            }
        }));
    }
    for h in handles {
        h.await?;
    }
    let window = match (end, state.first_done.get(), state.last_done.get()) {
        (Some(end), _, _) => end - warm_end,
        (None, Some(a), Some(b)) => b - a.min(warm_end.max(start)),
        _ => Duration::from_secs(0),
    };
    let hist = state.hist.borrow();
    let count = hist.len();
    Ok(json!({
        "clients": load.clients,
        "count": count,
        "errors": state.errors.get(),
        "first_error": *state.first_error.borrow(),
        "window_s": window.as_secs_f64(),
        "rps": if window.as_secs_f64() > 0.0 { count as f64 / window.as_secs_f64() } else { 0.0 },
        "lat_us": summary(&hist),
    }))
}

struct LoadState {
    remaining: Cell<u64>,
    hist: RefCell<Histogram<u64>>,
    errors: Cell<u64>,
    first_error: RefCell<Option<String>>,
    first_done: Cell<Option<Instant>>,
    last_done: Cell<Option<Instant>>,
}

impl LoadState {
    fn error(&self, e: String) {
        self.errors.set(self.errors.get() + 1);
        let mut first = self.first_error.borrow_mut();
        if first.is_none() {
            eprintln!("loadgen: first error: {e}");
            *first = Some(e);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// stdio

struct StdioPeer {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::BufReader<tokio::process::ChildStdout>,
    line: String,
}

impl StdioPeer {
    fn spawn(cmd: &[String], stderr_file: Option<&PathBuf>) -> Result<StdioPeer, BoxError> {
        let stderr = match stderr_file {
            Some(p) => std::process::Stdio::from(std::fs::File::create(p)?),
            None => std::process::Stdio::null(),
        };
        let mut child = tokio::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", cmd[0]))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(StdioPeer {
            child,
            stdin,
            stdout,
            line: String::new(),
        })
    }

    async fn send(&mut self, line: &str) -> Result<(), BoxError> {
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.write_all(b"\n").await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Reads lines until the response with `id` (server notifications are skipped).
    async fn response(&mut self, id: u64) -> Result<Value, BoxError> {
        loop {
            self.line.clear();
            let n = tokio::time::timeout(
                Duration::from_secs(60),
                self.stdout.read_line(&mut self.line),
            )
            .await??;
            if n == 0 {
                return Err("server closed stdout".into());
            }
            // Cheap pre-filter: only parse lines that can be our response.
            let v: Value = serde_json::from_str(self.line.trim_end())?;
            if v.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(v);
            }
        }
    }

    async fn initialize(&mut self) -> Result<Value, BoxError> {
        self.send(&initialize_body(0, "2025-11-25")).await?;
        let v = self.response(0).await?;
        self.send(INITIALIZED).await?;
        Ok(v)
    }

    async fn close(mut self) {
        drop(self.stdin);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_stdio(
    cmd: &[String],
    requests: u64,
    warmup: u64,
    tool: &str,
    args: &Value,
    expect: Option<&str>,
    dump_text: Option<PathBuf>,
    stderr_file: Option<PathBuf>,
) -> Result<Value, BoxError> {
    let mut peer = StdioPeer::spawn(cmd, stderr_file.as_ref())?;
    let pid = peer.child.id();
    peer.initialize().await?;
    let mut hist = new_hist();
    let mut errors = 0u64;
    let mut first_error: Option<String> = None;
    let mut started = Instant::now();
    for i in 0..warmup + requests {
        if i == warmup {
            started = Instant::now();
        }
        let id = i + 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}})
        .to_string();
        let t0 = Instant::now();
        peer.send(&line).await?;
        let v = peer.response(id).await?;
        let dt = t0.elapsed();
        if i == 0 {
            if let Some(path) = &dump_text {
                let text = v["result"]["content"][0]["text"]
                    .as_str()
                    .ok_or_else(|| format!("no text in {v}"))?;
                std::fs::write(path, text)?;
            }
        }
        let mut outcome = check_result(&v, true);
        if let (Ok(()), Some(e)) = (&outcome, expect) {
            if !v.to_string().contains(e) {
                outcome = Err(format!("response lacks {e:?}"));
            }
        }
        if i >= warmup {
            match outcome {
                Ok(()) => record(&mut hist, dt),
                Err(e) => {
                    errors += 1;
                    if first_error.is_none() {
                        eprintln!("loadgen: first error: {e}");
                        first_error = Some(e);
                    }
                }
            }
        }
    }
    let total = started.elapsed();
    let rss = pid.and_then(rss_kb);
    peer.close().await;
    Ok(json!({
        "mode": "stdio",
        "clients": 1,
        "count": hist.len(),
        "errors": errors,
        "first_error": first_error,
        "window_s": total.as_secs_f64(),
        "rps": if requests > 0 { hist.len() as f64 / total.as_secs_f64() } else { 0.0 },
        "lat_us": summary(&hist),
        "server_rss_kb": rss.map(|r| r.0),
    }))
}

// ---------------------------------------------------------------------------------------------
// Idle sessions and their memory

#[allow(clippy::too_many_arguments)]
async fn run_sessions(
    url: &str,
    count: usize,
    sse: bool,
    hold_s: f64,
    protocol: &str,
    auth: Option<&str>,
    expire_wait_s: Option<f64>,
    pid: u32,
) -> Result<Value, BoxError> {
    let ep = Rc::new(Endpoint::parse(url)?);
    let before = rss_kb(pid).ok_or("cannot read the server's RSS")?;
    // Open sessions over a few keep-alive connections.
    const POOL: usize = 8;
    let ids: Rc<RefCell<Vec<String>>> = Rc::default();
    let hist = Rc::new(RefCell::new(new_hist()));
    let mut tasks = Vec::new();
    let started = Instant::now();
    for t in 0..POOL {
        let n = count / POOL + usize::from(t < count % POOL);
        let (ep, ids, hist, protocol) =
            (ep.clone(), ids.clone(), hist.clone(), protocol.to_owned());
        let auth = auth.map(str::to_owned);
        tasks.push(tokio::task::spawn_local(async move {
            let mut conn = Conn::open(ep).await?;
            for _ in 0..n {
                let t0 = Instant::now();
                let (session, _) = mcp_initialize(&mut conn, &protocol, auth.as_deref()).await?;
                let session = session.ok_or("no Mcp-Session-Id")?;
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", ACCEPT),
                    ("mcp-protocol-version", protocol.as_str()),
                    ("mcp-session-id", session.as_str()),
                ];
                if let Some(a) = &auth {
                    headers.push(("authorization", a.as_str()));
                }
                let reply = conn
                    .send("POST", &headers, Bytes::from_static(INITIALIZED.as_bytes()))
                    .await?;
                if reply.status != 202 && reply.status != 200 {
                    return Err(format!("initialized: HTTP {}", reply.status).into());
                }
                record(&mut hist.borrow_mut(), t0.elapsed());
                ids.borrow_mut().push(session);
            }
            Ok::<(), BoxError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let open_s = started.elapsed().as_secs_f64();
    // The standalone GET stream of each session, on its own connection, kept open.
    let mut streams = 0usize;
    let mut holders = Vec::new();
    if sse {
        let ids = ids.borrow().clone();
        for id in ids {
            let mut sender = handshake(&ep).await?;
            let mut req = http::Request::builder()
                .method("GET")
                .uri(&ep.path)
                .header("host", &ep.host)
                .header("accept", "text/event-stream")
                .header("mcp-protocol-version", protocol)
                .header("mcp-session-id", &id);
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let req = req.body(Full::new(Bytes::new()))?;
            let resp = sender.send_request(req).await?;
            if resp.status() != 200 {
                return Err(format!("GET stream: HTTP {}", resp.status()).into());
            }
            streams += 1;
            let mut body = resp.into_body();
            holders.push(tokio::task::spawn_local(async move {
                let _keep = sender;
                while let Some(Ok(_)) = body.frame().await {}
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs_f64(hold_s)).await;
    let after = rss_kb(pid).ok_or("cannot read the server's RSS")?;
    for h in holders {
        h.abort();
    }
    // Every session idle (no stream, no message) past the server's idle timeout: expired.
    let expired = match expire_wait_s {
        Some(s) => {
            tokio::time::sleep(Duration::from_secs_f64(s)).await;
            Some(rss_kb(pid).ok_or("cannot read the server's RSS")?.0)
        }
        None => None,
    };
    let delta = after.0 as i64 - before.0 as i64;
    Ok(json!({
        "rss_expired_kb": expired,
        "mode": if sse { "sessions+sse" } else { "sessions" },
        "sessions": ids.borrow().len(),
        "sse_streams": streams,
        "open_s": open_s,
        "rss_before_kb": before.0,
        "rss_after_kb": after.0,
        "rss_delta_kb": delta,
        "per_session_kb": delta as f64 / count.max(1) as f64,
        "init_lat_us": summary(&hist.borrow()),
    }))
}

// ---------------------------------------------------------------------------------------------
// Start-up to ready

async fn run_startup(
    cmd: &[String],
    runs: usize,
    ready: &str,
    idle_rss_after_s: Option<f64>,
) -> Result<Value, BoxError> {
    let mut hist = new_hist();
    let mut idle_rss = None;
    let mut idle_split = None;
    let mut samples = Vec::new();
    for run in 0..runs {
        let t0 = Instant::now();
        let (child, pid, mut stdio) = if ready == "stdio" {
            let mut peer = StdioPeer::spawn(cmd, None)?;
            peer.send(&initialize_body(0, "2025-11-25")).await?;
            peer.response(0).await?;
            let pid = peer.child.id();
            (None, pid, Some(peer))
        } else {
            let ep = Rc::new(Endpoint::parse(ready)?);
            let child = tokio::process::Command::new(&cmd[0])
                .args(&cmd[1..])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| format!("spawning {}: {e}", cmd[0]))?;
            let pid = child.id();
            let deadline = t0 + Duration::from_secs(60);
            loop {
                if Instant::now() > deadline {
                    return Err(format!("{ready} not ready after 60 s").into());
                }
                let ok = async {
                    let mut conn = Conn::open(ep.clone()).await?;
                    mcp_initialize(&mut conn, "2025-11-25", None).await
                }
                .await;
                if ok.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (Some(child), pid, None)
        };
        let dt = t0.elapsed();
        record(&mut hist, dt);
        samples.push((dt.as_secs_f64() * 1000.0 * 100.0).round() / 100.0);
        if run + 1 == runs {
            if let (Some(s), Some(pid)) = (idle_rss_after_s, pid) {
                tokio::time::sleep(Duration::from_secs_f64(s)).await;
                idle_rss = rss_kb(pid).map(|r| r.0);
                idle_split = rss_split_kb(pid);
            }
        }
        if let Some(mut child) = child {
            let _ = child.kill().await;
        }
        if let Some(peer) = stdio.take() {
            let mut child = peer.child;
            let _ = child.kill().await;
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    Ok(json!({
        "mode": "startup",
        "runs": runs,
        "ready": ready,
        "ms": samples,
        "lat_us": summary(&hist),
        "idle_rss_kb": idle_rss,
        "idle_rss_anon_kb": idle_split.map(|s| s.0),
        "idle_rss_file_kb": idle_split.map(|s| s.1),
    }))
}

// ---------------------------------------------------------------------------------------------
// A bare process run

fn run_exec(
    cmd: &[String],
    runs: usize,
    warmup: usize,
    stdin: &str,
    expect: Option<&str>,
    parallel: usize,
) -> Result<Value, BoxError> {
    let parallel = parallel.max(1);
    let started = Instant::now();
    let shares = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..parallel)
            .map(|t| {
                let share = runs / parallel + usize::from(t < runs % parallel);
                scope.spawn(move || exec_runs(cmd, share, warmup, stdin, expect))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().map_err(|_| "an exec thread panicked".to_owned()))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let wall = started.elapsed().as_secs_f64();
    let mut hist = new_hist();
    let mut outputs = BTreeMap::new();
    let mut busy = 0.0;
    for share in shares {
        let (h, o, measured_s) = share.map_err(|e| e.to_string())?;
        hist.add(&h)?;
        for (k, n) in o {
            *outputs.entry(k).or_insert(0) += n;
        }
        busy = f64::max(busy, measured_s);
    }
    let count = hist.len();
    Ok(json!({
        "mode": "exec",
        "runs": runs,
        "parallel": parallel,
        "count": count,
        "wall_s": wall,
        // Runs per second over the longest thread's measured part (warm-up runs excluded).
        "rps": if busy > 0.0 { count as f64 / busy } else { 0.0 },
        "lat_us": summary(&hist),
        "outputs": outputs,
    }))
}

type ExecShare = (Histogram<u64>, BTreeMap<String, u64>, f64);

/// One thread's share of `run_exec`: `warmup` unmeasured runs, then `runs` timed ones.
fn exec_runs(
    cmd: &[String],
    runs: usize,
    warmup: usize,
    stdin: &str,
    expect: Option<&str>,
) -> Result<ExecShare, String> {
    let mut hist = new_hist();
    let mut outputs = BTreeMap::new();
    let mut measured_from = None;
    for i in 0..warmup + runs {
        if i == warmup {
            measured_from = Some(Instant::now());
        }
        let t0 = Instant::now();
        let mut child = std::process::Command::new(&cmd[0])
            .args(&cmd[1..])
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", cmd[0]))?;
        child
            .stdin
            .take()
            .ok_or("no stdin")?
            .write_all(stdin.as_bytes())
            .map_err(|e| e.to_string())?;
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let dt = t0.elapsed();
        if !out.status.success() {
            return Err(format!(
                "{:?} failed: {}",
                cmd,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(e) = expect {
            if !text.contains(e) {
                return Err(format!("output lacks {e:?}: {text}"));
            }
        }
        *outputs
            .entry(text.lines().next().unwrap_or("").to_owned())
            .or_insert(0) += 1;
        if i >= warmup {
            record(&mut hist, dt);
        }
    }
    let measured_s = measured_from.map_or(0.0, |t| t.elapsed().as_secs_f64());
    Ok((hist, outputs, measured_s))
}
