//! The interop wire cases (`tests/data/wire-cases.jsonl`) replayed against the real binary.
//!
//! Each test names one case. [`Run::check`] loads it, performs its `setup`, sends its
//! `requests` in order (stdio lines or HTTP requests), and evaluates its `expected.checks`
//! with a small interpreter. The interpreter knows exactly the vocabulary these cases use;
//! any key or condition it does not know fails the test, and a case in which no check was
//! evaluated fails too. What the data cannot express (which flags a server needs so that a
//! check's `if` holds, which step goes to another server) is written next to the test, in
//! the [`Run`] builder calls, with a comment.
//!
//! Besides the checks in the data, every HTTP error response that has a body must be a
//! JSON-RPC error object whose id is null or the request's id, and every 202 must have an
//! empty body without a JSON content type (the WIRE-06/07 summaries).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Map, Value, json};

use crate::support::{
    ANY_TOOL, Auth, HttpReply, HttpServer, REPLY_TIMEOUT, Session, StdioServer,
    VERSION_HEADER_SINCE, http_client, http_send, init_http, init_stdio, is_response, request_ids,
};

/// The cases, copied verbatim from `shared/interop/wire-cases.jsonl`.
const CASES: &str = include_str!("../data/wire-cases.jsonl");

/// The protocol revisions omniforge implements: `SERVER_SUPPORTED_VERSIONS` in the cases.
const SERVER_SUPPORTED_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The bearer token of servers started with [`Run::bearer_token`].
const TOKEN: &str = "e2e-test-token-5f0c1a7d9b2e4c68";

#[tokio::test]
async fn wire_01_newer_version_counter_offer() {
    Run::case("WIRE-01").check().await;
}

#[tokio::test]
async fn wire_02_supported_older_version_echoed() {
    Run::case("WIRE-02").check().await;
}

#[tokio::test]
async fn wire_03_initialize_not_blocked_by_version_header() {
    Run::case("WIRE-03").check().await;
}

#[tokio::test]
async fn wire_05_ping_answers_empty_object() {
    Run::case("WIRE-05").check().await;
}

#[tokio::test]
async fn wire_06_notification_post_gets_202_empty() {
    Run::case("WIRE-06").check().await;
}

#[tokio::test]
async fn wire_07_single_media_type_accept_served() {
    Run::case("WIRE-07").check().await;
}

#[tokio::test]
async fn wire_08_unknown_session_404_missing_400() {
    Run::case("WIRE-08").check().await;
}

#[tokio::test]
async fn wire_09_get_is_sse_or_405() {
    Run::case("WIRE-09").check().await;
}

#[tokio::test]
async fn wire_10_delete_terminates_session() {
    Run::case("WIRE-10").check().await;
}

#[tokio::test]
async fn wire_13_no_reply_to_notifications() {
    Run::case("WIRE-13").check().await;
}

#[tokio::test]
async fn wire_14_unknown_method_gets_32601() {
    Run::case("WIRE-14").check().await;
}

/// WIRE-15 depends on the negotiated revision, so it runs once per branch. Here the session
/// negotiates 2025-06-18 (the case's own setup): the array must be refused with 400/-32600
/// and id null, and its members must not be answered.
#[tokio::test]
async fn wire_15_batch_rejected_at_2025_06_18() {
    Run::case("WIRE-15")
        .expect_no_batch_member_answered()
        .check()
        .await;
}

/// WIRE-15 in a session negotiated at 2025-03-26, where batches are legal: the array must be
/// answered with one response per member. A 2025-03-26 client sends no MCP-Protocol-Version
/// header, so the case's `MCP-Protocol-Version: 2025-06-18` is dropped here.
#[tokio::test]
async fn wire_15_batch_processed_at_2025_03_26() {
    Run::case("WIRE-15")
        .init_version("2025-03-26")
        .version_header_follows_session()
        .check()
        .await;
}

#[tokio::test]
async fn wire_18_stdout_only_jsonrpc() {
    Run::case("WIRE-18").check().await;
}

#[tokio::test]
async fn wire_19_crlf_input_accepted() {
    Run::case("WIRE-19").check().await;
}

#[tokio::test]
async fn wire_20_lf_only_output() {
    Run::case("WIRE-20").check().await;
}

#[tokio::test]
async fn wire_27_tool_names_interop_safe() {
    Run::case("WIRE-27").check().await;
}

/// The case's "remote server with bearer auth" is ours with a token file and claude.ai on
/// the Origin allow-list; step 4 ("against the localhost server") goes to a default
/// loopback server without auth.
#[tokio::test]
async fn wire_34_origin_allow_list() {
    Run::case("WIRE-34")
        .setup_by_hand()
        .bearer_token()
        .server_args(&["--allow-origin", "https://claude.ai"])
        .holds("claude.ai on allow-list")
        .on_default_server(4)
        .check()
        .await;
}

/// The proxy is trusted by configuring the host names it presents; step 2 ("loopback-bound
/// deployment") goes to a default server, which binds 127.0.0.1 only.
#[tokio::test]
async fn wire_35_host_guard_proxy_aware() {
    Run::case("WIRE-35")
        .setup_by_hand()
        .server_args(&[
            "--allow-host",
            "mcp.example.com",
            "--allow-host",
            "mcp-upstream:8000",
        ])
        .holds("proxy trusted/configured")
        .holds("server bound to loopback")
        .on_default_server(2)
        .check()
        .await;
}

/// How one test runs a case: what it set up that the case's data cannot say.
struct Run {
    id: &'static str,
    /// Extra flags for the case's server.
    server_args: Vec<&'static str>,
    /// Start the case's HTTP server with a token file holding [`TOKEN`] (else
    /// `--insecure-no-auth`); `<token>` is replaced by it.
    bearer_token: bool,
    /// Steps sent to a separate default server instead of the case's server.
    default_server_steps: Vec<usize>,
    /// `if` conditions that this run's setup makes true.
    holds: Vec<&'static str>,
    /// The case's `setup` text is prose that this run's builder calls implement.
    setup_by_hand: bool,
    /// The version `init_http` asks for, instead of the one the setup names.
    init_version: Option<&'static str>,
    /// Send the negotiated version in `MCP-Protocol-Version` instead of the case's value,
    /// and no such header when the revision predates it.
    version_header_follows_session: bool,
    /// Extra check: no response to any batch member arrives.
    expect_no_batch_member_answered: bool,
}

impl Run {
    fn case(id: &'static str) -> Run {
        Run {
            id,
            server_args: Vec::new(),
            bearer_token: false,
            default_server_steps: Vec::new(),
            holds: Vec::new(),
            setup_by_hand: false,
            init_version: None,
            version_header_follows_session: false,
            expect_no_batch_member_answered: false,
        }
    }

    fn server_args(mut self, args: &[&'static str]) -> Run {
        self.server_args.extend_from_slice(args);
        self
    }

    fn bearer_token(mut self) -> Run {
        self.bearer_token = true;
        self
    }

    fn on_default_server(mut self, step: usize) -> Run {
        self.default_server_steps.push(step);
        self
    }

    fn holds(mut self, condition: &'static str) -> Run {
        self.holds.push(condition);
        self
    }

    fn setup_by_hand(mut self) -> Run {
        self.setup_by_hand = true;
        self
    }

    fn init_version(mut self, version: &'static str) -> Run {
        self.init_version = Some(version);
        self
    }

    fn version_header_follows_session(mut self) -> Run {
        self.version_header_follows_session = true;
        self
    }

    fn expect_no_batch_member_answered(mut self) -> Run {
        self.expect_no_batch_member_answered = true;
        self
    }

    /// Replays the case and panics with a full report if any check fails.
    async fn check(self) {
        let case = load_case(self.id);
        let mut runner = Runner::new(self, case);
        runner.run().await;
        runner.finish();
    }
}

/// The case with this id.
fn load_case(id: &str) -> Value {
    CASES
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).expect("wire-cases.jsonl line is JSON"))
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no case {id} in wire-cases.jsonl"))
}

/// What a case's `setup` asks for.
enum Setup {
    None,
    /// POST initialize at this version, capture the session; then, if `initialized`, POST
    /// notifications/initialized.
    InitHttp {
        version: String,
        initialized: bool,
    },
    /// initialize + notifications/initialized over stdio at this version.
    InitStdio {
        version: String,
    },
    /// Prose the interpreter does not understand.
    Prose(String),
}

fn parse_setup(setup: &Value) -> Setup {
    let Some(text) = setup.as_str() else {
        return Setup::None;
    };
    let version = || {
        Regex::new(r"\d{4}-\d{2}-\d{2}")
            .unwrap()
            .find(text)
            .map(|m| m.as_str().to_owned())
    };
    if text.starts_with("none") {
        Setup::None
    } else if let (true, Some(version)) = (text.starts_with("init_http:"), version()) {
        Setup::InitHttp {
            version,
            initialized: true,
        }
    } else if let (true, Some(version)) = (text.starts_with("POST initialize ("), version()) {
        Setup::InitHttp {
            version,
            initialized: false,
        }
    } else if let (true, Some(version)) = (text.starts_with("init_stdio:"), version()) {
        Setup::InitStdio { version }
    } else {
        Setup::Prose(text.to_owned())
    }
}

/// Which server a step went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The case's server.
    Main,
    /// A default server (`--insecure-no-auth`, no extra flags).
    Default,
    /// A fresh process started for this step alone ("separate process").
    Fresh(usize),
}

/// What one step sent and got back.
enum Outcome {
    Stdio(StdioOutcome),
    Http(HttpOutcome),
    /// The step could not be sent at all.
    Broken(String),
}

struct StdioOutcome {
    /// Index into `Runner::stdio`.
    server: usize,
    /// Messages read after sending, up to and including the response (for a request).
    received: Vec<Value>,
    /// Index in `received` of the response to this step's request.
    response: Option<usize>,
    /// From sending to reading the response.
    elapsed: Option<Duration>,
    /// Why no response was read (timeout, EOF, a stdout line that is not JSON...).
    problems: Vec<String>,
}

impl StdioOutcome {
    fn response(&self) -> Option<&Value> {
        self.response.map(|i| &self.received[i])
    }
}

struct HttpOutcome {
    /// The ids the request body asked to be answered.
    ids: Vec<Value>,
    /// The request body was a JSON array.
    batch: bool,
    reply: Result<HttpReply, String>,
}

impl HttpOutcome {
    /// What `json_path` looks at: a JSON body as sent; for SSE, the response to the request
    /// (one id), the list of responses (a batch), or the only message.
    fn document(&self) -> Result<Value, String> {
        let reply = self.reply.as_ref().map_err(|e| e.clone())?;
        if reply.content_type().as_deref() == Some("application/json") {
            return serde_json::from_slice(&reply.body)
                .map_err(|e| format!("JSON body does not parse: {e}"));
        }
        if reply.content_type().as_deref() == Some("text/event-stream") {
            if self.batch {
                let responses: Vec<Value> = reply
                    .messages
                    .iter()
                    .filter(|m| is_response(m))
                    .cloned()
                    .collect();
                return Ok(Value::Array(responses));
            }
            if let [id] = self.ids.as_slice() {
                return reply
                    .messages
                    .iter()
                    .find(|m| is_response(m) && m.get("id") == Some(id))
                    .cloned()
                    .ok_or_else(|| format!("no response with id {id} in the SSE stream"));
            }
            if let [only] = reply.messages.as_slice() {
                return Ok(only.clone());
            }
            return Err(format!(
                "SSE stream carries {} messages",
                reply.messages.len()
            ));
        }
        Err(format!(
            "no JSON-RPC body (HTTP {}, content-type {:?}, {} bytes)",
            reply.status,
            reply.content_type(),
            reply.body.len()
        ))
    }
}

/// The result of one check.
enum Verdict {
    Pass,
    Skip(String),
    Fail(String),
}

struct Runner {
    run: Run,
    case: Value,
    client: reqwest::Client,
    /// `stdio[0]` is the case's stdio server; later ones are "separate process" servers.
    stdio: Vec<StdioServer>,
    main_http: Option<HttpServer>,
    default_http: Option<HttpServer>,
    fresh_http: Vec<HttpServer>,
    session: Option<Session>,
    /// The version the setup negotiated, for `if_negotiated`.
    negotiated: Option<String>,
    outcomes: Vec<Outcome>,
    /// What was sent and received, for the failure report.
    transcript: String,
    failures: Vec<String>,
    skipped: Vec<String>,
    evaluated: usize,
}

impl Runner {
    fn new(run: Run, case: Value) -> Runner {
        Runner {
            run,
            case,
            client: http_client(),
            stdio: Vec::new(),
            main_http: None,
            default_http: None,
            fresh_http: Vec::new(),
            session: None,
            negotiated: None,
            outcomes: Vec::new(),
            transcript: String::new(),
            failures: Vec::new(),
            skipped: Vec::new(),
            evaluated: 0,
        }
    }

    fn fail(&mut self, what: impl Into<String>) {
        self.failures.push(what.into());
    }

    fn transport(&self) -> &str {
        self.case["transport"].as_str().unwrap_or("")
    }

    async fn run(&mut self) {
        let checks: Vec<Value> = self.case["expected"]["checks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let requests: Vec<Value> = self.case["requests"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if checks.is_empty() {
            self.fail("the case has no checks");
        }
        // Every check must be anchored to a step the case has, or to all steps.
        for (i, check) in checks.iter().enumerate() {
            match anchor(check) {
                Ok(Anchor::Step(n) | Anchor::AfterStep(n)) if n == 0 || n > requests.len() => {
                    self.fail(format!(
                        "check #{}: refers to step {n}, which the case lacks",
                        i + 1
                    ));
                }
                Ok(_) => {}
                Err(e) => self.fail(format!("check #{}: {e}", i + 1)),
            }
        }

        if let Err(e) = self.set_up().await {
            self.fail(format!("setup: {e}"));
            return;
        }

        for (i, request) in requests.iter().enumerate() {
            let n = i + 1;
            let outcome = self.step(n, request).await;
            if let Outcome::Broken(e) = &outcome {
                self.fail(format!("step {n}: could not be sent: {e}"));
            }
            self.outcomes.push(outcome);
            // Extras on every step: each request gets its response, stdout carries only
            // JSON, HTTP error bodies are JSON-RPC errors.
            match &self.outcomes[i] {
                Outcome::Http(h) => {
                    let extras = http_extras(n, request, h);
                    self.failures.extend(extras);
                }
                Outcome::Stdio(s) => {
                    let extras = s.problems.iter().map(|p| format!("step {n} (extra): {p}"));
                    self.failures.extend(extras);
                }
                Outcome::Broken(_) => {}
            }
            for (c, check) in checks.iter().enumerate() {
                if matches!(anchor(check), Ok(Anchor::Step(m) | Anchor::AfterStep(m)) if m == n) {
                    self.evaluate(c + 1, check).await;
                }
            }
            if self.run.expect_no_batch_member_answered {
                self.check_batch_members_unanswered(n);
            }
        }

        // The stdio "from process start to exit" checks need the whole stdout: ask every
        // stdio server to stop (EOF on stdin) and collect the rest of its output.
        for (i, server) in self.stdio.iter_mut().enumerate() {
            match server.close(Duration::from_secs(5)).await {
                Some(status) => {
                    let _ = writeln!(
                        self.transcript,
                        "stdio server #{i}: exited on EOF: {status}"
                    );
                }
                None => {
                    let _ = writeln!(
                        self.transcript,
                        "stdio server #{i}: still running 5 s after stdin EOF"
                    );
                }
            }
        }
        for (c, check) in checks.iter().enumerate() {
            if matches!(anchor(check), Ok(Anchor::AllSteps)) {
                self.evaluate(c + 1, check).await;
            }
        }
    }

    /// Starts the case's server and performs its setup.
    async fn set_up(&mut self) -> Result<(), String> {
        let setup = parse_setup(&self.case["setup"]);
        let args = self.run.server_args.clone();
        match self.transport().to_owned().as_str() {
            "stdio" => {
                self.stdio.push(StdioServer::start(&args));
                match setup {
                    Setup::None => {}
                    Setup::InitStdio { version } => {
                        let negotiated = init_stdio(&mut self.stdio[0], &version).await?;
                        let _ = writeln!(
                            self.transcript,
                            "setup: init_stdio {version} -> {negotiated}"
                        );
                        self.require_echo(&version, &negotiated)?;
                        self.negotiated = Some(negotiated);
                    }
                    Setup::Prose(text) if self.run.setup_by_hand => {
                        let _ = writeln!(self.transcript, "setup by hand: {text}");
                    }
                    Setup::Prose(text) => return Err(format!("not understood: {text:?}")),
                    Setup::InitHttp { .. } => return Err("an HTTP setup for a stdio case".into()),
                }
            }
            "http" => {
                let server = HttpServer::start(&args, &self.auth()).await;
                let _ = writeln!(self.transcript, "server: {} {:?}", server.url(), args);
                self.main_http = Some(server);
                match setup {
                    Setup::None => {}
                    Setup::InitHttp {
                        version,
                        initialized,
                    } => {
                        let version = self.run.init_version.map(str::to_owned).unwrap_or(version);
                        let server = self.main_http.as_ref().unwrap();
                        let session =
                            init_http(&self.client, server, &version, initialized).await?;
                        let _ = writeln!(
                            self.transcript,
                            "setup: initialize {version} -> {} session {}{}",
                            session.version,
                            session.id,
                            if initialized {
                                " + notifications/initialized"
                            } else {
                                ""
                            }
                        );
                        self.require_echo(&version, &session.version)?;
                        self.negotiated = Some(session.version.clone());
                        self.session = Some(session);
                    }
                    Setup::Prose(text) if self.run.setup_by_hand => {
                        let _ = writeln!(self.transcript, "setup by hand: {text}");
                    }
                    Setup::Prose(text) => return Err(format!("not understood: {text:?}")),
                    Setup::InitStdio { .. } => return Err("a stdio setup for an HTTP case".into()),
                }
            }
            other => return Err(format!("unknown transport {other:?}")),
        }
        Ok(())
    }

    /// A setup that asked for a supported version must get exactly that one back, or the
    /// run would not test what it claims to.
    fn require_echo(&self, asked: &str, got: &str) -> Result<(), String> {
        if SERVER_SUPPORTED_VERSIONS.contains(&asked) && asked != got {
            return Err(format!(
                "initialize asked for {asked} (supported) but negotiated {got}"
            ));
        }
        Ok(())
    }

    fn auth(&self) -> Auth {
        if self.run.bearer_token {
            Auth::Bearer(TOKEN.to_owned())
        } else {
            Auth::None
        }
    }

    /// Replaces the placeholders of the cases in `text`.
    fn fill(&self, text: &str) -> Result<String, String> {
        let mut out = text.replace("<any_tool>", ANY_TOOL);
        if self.run.bearer_token {
            out = out.replace("<token>", TOKEN);
        }
        if out.contains("<session-id>") {
            let session = self
                .session
                .as_ref()
                .ok_or("`<session-id>` but the setup opened no session")?;
            out = out.replace("<session-id>", &session.id);
        }
        // `<token>` without a token file is sent as it is: auth is off then.
        let left = Regex::new(r"<[a-z][a-z0-9_-]*>").unwrap();
        if let Some(m) = left.find_iter(&out).find(|m| m.as_str() != "<token>") {
            return Err(format!("unknown placeholder {}", m.as_str()));
        }
        Ok(out)
    }

    fn fill_json(&self, value: &Value) -> Result<Value, String> {
        Ok(match value {
            Value::String(s) => Value::String(self.fill(s)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.fill_json(v))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.fill_json(v)?)))
                    .collect::<Result<Map<_, _>, String>>()?,
            ),
            other => other.clone(),
        })
    }

    async fn step(&mut self, n: usize, request: &Value) -> Outcome {
        let separate = request["note"]
            .as_str()
            .is_some_and(|note| note.contains("separate process"));
        if let Some(line) = request["stdio"].as_str() {
            let mut bytes = match self.fill(line) {
                Ok(line) => line.into_bytes(),
                Err(e) => return Outcome::Broken(e),
            };
            bytes.push(b'\n');
            self.stdio_step(n, bytes, separate).await
        } else if let Some(raw) = request["stdio_raw"].as_str() {
            match self.fill(raw) {
                Ok(raw) => self.stdio_step(n, raw.into_bytes(), separate).await,
                Err(e) => Outcome::Broken(e),
            }
        } else if request["http"].is_object() {
            self.http_step(n, &request["http"], separate).await
        } else {
            Outcome::Broken(format!(
                "step has neither stdio, stdio_raw nor http: {request}"
            ))
        }
    }

    async fn stdio_step(&mut self, n: usize, bytes: Vec<u8>, separate: bool) -> Outcome {
        if self.transport() != "stdio" {
            return Outcome::Broken("a stdio step in an HTTP case".into());
        }
        let server = if separate {
            self.stdio.push(StdioServer::start(&self.run.server_args));
            self.stdio.len() - 1
        } else {
            0
        };
        let _ = writeln!(
            self.transcript,
            "step {n} -> stdio #{server}: {:?}",
            String::from_utf8_lossy(&bytes)
        );
        let id = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .filter(|m| m.get("method").is_some())
            .and_then(|m| m.get("id").cloned());
        let mut outcome = StdioOutcome {
            server,
            received: Vec::new(),
            response: None,
            elapsed: None,
            problems: Vec::new(),
        };
        let started = Instant::now();
        if let Err(e) = self.stdio[server].send_raw(&bytes).await {
            outcome.problems.push(e);
            return Outcome::Stdio(outcome);
        }
        // A notification gets no reply; for a request, read until its response.
        if let Some(id) = id {
            let deadline = started + REPLY_TIMEOUT;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match self.stdio[server].read_message(left).await {
                    Ok(m) => {
                        let _ = writeln!(self.transcript, "step {n} <- {m}");
                        let done = is_response(&m) && m.get("id") == Some(&id);
                        outcome.received.push(m);
                        if done {
                            outcome.response = Some(outcome.received.len() - 1);
                            outcome.elapsed = Some(started.elapsed());
                            break;
                        }
                    }
                    Err(e) if e.starts_with("stdout line is not JSON") => {
                        let _ = writeln!(self.transcript, "step {n} <- {e}");
                        outcome.problems.push(e);
                    }
                    Err(e) => {
                        let _ = writeln!(self.transcript, "step {n} <- {e}");
                        outcome
                            .problems
                            .push(format!("no response with id {id}: {e}"));
                        break;
                    }
                }
            }
        }
        Outcome::Stdio(outcome)
    }

    async fn http_step(&mut self, n: usize, http: &Value, separate: bool) -> Outcome {
        if self.transport() != "http" {
            return Outcome::Broken("an HTTP step in a stdio case".into());
        }
        let target = if self.run.default_server_steps.contains(&n) {
            if self.default_http.is_none() {
                self.default_http = Some(HttpServer::start(&[], &Auth::None).await);
            }
            Target::Default
        } else if separate {
            let server = HttpServer::start(&self.run.server_args, &self.auth()).await;
            self.fresh_http.push(server);
            Target::Fresh(self.fresh_http.len() - 1)
        } else {
            Target::Main
        };
        let server = match target {
            Target::Main => self.main_http.as_ref(),
            Target::Default => self.default_http.as_ref(),
            Target::Fresh(i) => self.fresh_http.get(i),
        };
        let Some(server) = server else {
            return Outcome::Broken("no server".into());
        };
        let method = http["method"].as_str().unwrap_or("POST").to_owned();
        let path = http["path"].as_str().unwrap_or("/mcp");
        let url = format!("{}{}", server.base(), path);

        let mut headers = Vec::new();
        for (name, value) in http["headers"].as_object().into_iter().flatten() {
            let value = match value.as_str().map(|v| self.fill(v)) {
                Some(Ok(v)) => v,
                Some(Err(e)) => return Outcome::Broken(e),
                None => return Outcome::Broken(format!("header {name} is not a string")),
            };
            headers.push((name.clone(), value));
        }
        if self.run.version_header_follows_session {
            let negotiated = self.negotiated.clone().unwrap_or_default();
            headers.retain(|(name, _)| !name.eq_ignore_ascii_case("mcp-protocol-version"));
            if negotiated.as_str() >= VERSION_HEADER_SINCE {
                headers.push(("MCP-Protocol-Version".into(), negotiated));
            }
        }
        let body = match http.get("body").map(|b| self.fill_json(b)).transpose() {
            Ok(body) => body,
            Err(e) => return Outcome::Broken(e),
        };
        let ids = request_ids(body.as_ref());
        let batch = body.as_ref().is_some_and(Value::is_array);
        let _ = writeln!(
            self.transcript,
            "step {n} -> {target:?} {method} {path} {headers:?} {}",
            body.as_ref().map(Value::to_string).unwrap_or_default()
        );
        let bytes = body.as_ref().map(|b| serde_json::to_vec(b).unwrap());
        let reply = http_send(&self.client, &method, &url, &headers, bytes, &ids).await;
        match &reply {
            Ok(r) => {
                let _ = writeln!(
                    self.transcript,
                    "step {n} <- HTTP {} {:?} {}{}",
                    r.status,
                    r.headers,
                    cut(&String::from_utf8_lossy(&r.body), 1500),
                    if r.notes.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", r.notes.join("; "))
                    }
                );
            }
            Err(e) => {
                let _ = writeln!(self.transcript, "step {n} <- {e}");
            }
        }
        Outcome::Http(HttpOutcome { ids, batch, reply })
    }

    /// WIRE-15 at >= 2025-06-18: the members of a rejected batch must not be answered.
    fn check_batch_members_unanswered(&mut self, n: usize) {
        let Some(Outcome::Http(h)) = self.outcomes.get(n - 1) else {
            return;
        };
        if !h.batch {
            return;
        }
        let Ok(reply) = &h.reply else { return };
        let answered: Vec<&Value> = reply
            .messages
            .iter()
            .filter(|m| is_response(m) && m["id"] != Value::Null)
            .collect();
        self.evaluated += 1;
        if !answered.is_empty() {
            self.fail(format!(
                "step {n} (extra): a refused batch must not be executed, yet members were answered: {answered:?}"
            ));
        }
    }

    /// Evaluates check number `c` (1-based) and records the verdict.
    async fn evaluate(&mut self, c: usize, check: &Value) {
        let label = format!("check #{c} {check}");
        match self.verdict(check).await {
            Verdict::Pass => self.evaluated += 1,
            Verdict::Skip(why) => self.skipped.push(format!("{label}: {why}")),
            Verdict::Fail(why) => {
                self.evaluated += 1;
                self.fail(format!("{label}\n      {why}"));
            }
        }
    }

    async fn verdict(&mut self, check: &Value) -> Verdict {
        let Some(check) = check.as_object() else {
            return Verdict::Fail("not an object".into());
        };
        let anchor = match anchor_of(check) {
            Ok(a) => a,
            Err(e) => return Verdict::Fail(e),
        };
        let mut keys: Vec<&str> = check.keys().map(String::as_str).collect();
        keys.retain(|k| !matches!(*k, "step" | "after_step" | "all_steps" | "level"));

        // Conditions first: a false one skips the check, an unknown one fails it.
        for key in ["if", "if_status", "if_negotiated", "if_step1_2xx"] {
            if let Some(value) = check.get(key) {
                keys.retain(|k| *k != key);
                match self.condition(key, value, anchor) {
                    Ok(true) => {}
                    Ok(false) => return Verdict::Skip(format!("condition {key}={value} is false")),
                    Err(e) => return Verdict::Fail(e),
                }
            }
        }

        let mut problems = Vec::new();
        let mut asserted = 0;
        let mut take = |key: &str| {
            let found = keys.iter().position(|k| *k == key).map(|i| keys.remove(i));
            found.and_then(|k| check.get(k))
        };

        // json_path with exactly one operator.
        let ops: Vec<(&str, &Value)> = ["equals", "not_equals", "in", "absent", "exists"]
            .into_iter()
            .filter_map(|op| take(op).map(|v| (op, v)))
            .collect();
        match (take("json_path"), ops.as_slice()) {
            (None, []) => {}
            (Some(path), [(op, expected)]) => {
                asserted += 1;
                if let Err(e) = self.json_path_check(anchor, path, op, expected) {
                    problems.push(e);
                }
            }
            (path, ops) => problems.push(format!(
                "json_path {path:?} needs exactly one operator, has {:?}",
                ops.iter().map(|(op, _)| *op).collect::<Vec<_>>()
            )),
        }
        let within = take("within_ms");
        let for_each = take("for_each");
        let matches = take("matches");

        // Every remaining key is an assertion.
        let remaining: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        for key in remaining {
            let value = &check[&key];
            asserted += 1;
            let result = match key.as_str() {
                "http_status" => self.http_status(anchor, std::slice::from_ref(value)),
                "http_status_in" => match value.as_array() {
                    Some(list) => self.http_status(anchor, list),
                    None => Err("http_status_in is not a list".into()),
                },
                "content_type" => self.content_type(anchor, value),
                "body" => self.body(anchor, value),
                "header_present" => self.header_present(anchor, value),
                "json_array_len" => self.json_array_len(anchor, value),
                "ids" => self.ids(anchor, value),
                "unique" => self.unique(anchor, value),
                "next_stdout_message" => self.next_stdout_message(anchor, value),
                "no_message_within_ms" => self.no_message_within(anchor, value).await,
                "process_alive" => self.process_alive(anchor, value).await,
                "stdout_lines_all_jsonrpc" => self.stdout_lines_all_jsonrpc(anchor, value),
                "stdout_lines_before_first_response" => {
                    self.lines_before_first_response(anchor, value)
                }
                "stdout_raw_bytes_excludes" => self.stdout_raw_bytes_excludes(anchor, value),
                "stdout_message_terminator" => self.stdout_message_terminator(anchor, value),
                other => Err(format!("the interpreter does not know `{other}`")),
            };
            if let Err(e) = result {
                problems.push(e);
            }
        }
        match (for_each, matches) {
            (None, None) => {}
            (Some(path), Some(pattern)) => {
                asserted += 1;
                if let Err(e) = self.for_each_matches(anchor, path, pattern) {
                    problems.push(e);
                }
            }
            _ => problems.push("for_each and matches go together".into()),
        }
        if let Some(ms) = within {
            asserted += 1;
            if let Err(e) = self.within(anchor, ms) {
                problems.push(e);
            }
        }
        if asserted == 0 {
            problems.push("the check asserts nothing".into());
        }
        if problems.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Fail(problems.join("\n      "))
        }
    }

    fn condition(&self, key: &str, value: &Value, anchor: Anchor) -> Result<bool, String> {
        match key {
            "if" => {
                let text = value.as_str().ok_or("`if` is not a string")?;
                if let Some(version) = text.strip_suffix(" supported")
                    && Regex::new(r"^\d{4}-\d{2}-\d{2}$")
                        .unwrap()
                        .is_match(version)
                {
                    return Ok(SERVER_SUPPORTED_VERSIONS.contains(&version));
                }
                if self.run.holds.contains(&text) {
                    return Ok(true);
                }
                Err(format!(
                    "unknown condition `if: {text}` (this run does not establish it)"
                ))
            }
            "if_status" => {
                let want = value.as_u64().ok_or("if_status is not a number")?;
                let reply = self.reply(anchor)?;
                Ok(u64::from(reply.status) == want)
            }
            "if_step1_2xx" => {
                let want = value.as_bool().ok_or("if_step1_2xx is not a boolean")?;
                let reply = self.reply(Anchor::Step(1))?;
                Ok((200..300).contains(&reply.status) == want)
            }
            "if_negotiated" => {
                let text = value.as_str().ok_or("if_negotiated is not a string")?;
                let negotiated = self
                    .negotiated
                    .as_deref()
                    .ok_or("if_negotiated, but no version was negotiated")?;
                Ok(match text.strip_prefix(">=") {
                    Some(v) => negotiated >= v,
                    None => match text.strip_prefix("<=") {
                        Some(v) => negotiated <= v,
                        None => negotiated == text,
                    },
                })
            }
            other => Err(format!("unknown condition {other}")),
        }
    }

    fn outcome(&self, anchor: Anchor) -> Result<&Outcome, String> {
        let n = match anchor {
            Anchor::Step(n) | Anchor::AfterStep(n) => n,
            Anchor::AllSteps => return Err("needs a step, not all_steps".into()),
        };
        match self.outcomes.get(n.wrapping_sub(1)) {
            Some(Outcome::Broken(e)) => Err(format!("step {n} was not sent: {e}")),
            Some(o) => Ok(o),
            None => Err(format!("step {n} has not run")),
        }
    }

    fn reply(&self, anchor: Anchor) -> Result<&HttpReply, String> {
        match self.outcome(anchor)? {
            Outcome::Http(h) => h
                .reply
                .as_ref()
                .map_err(|e| format!("no HTTP response: {e}")),
            _ => Err("an HTTP check on a stdio step".into()),
        }
    }

    fn stdio_outcome(&self, anchor: Anchor) -> Result<&StdioOutcome, String> {
        match self.outcome(anchor)? {
            Outcome::Stdio(s) => Ok(s),
            _ => Err("a stdio check on an HTTP step".into()),
        }
    }

    /// The JSON a step's `json_path` looks at.
    fn document(&self, anchor: Anchor) -> Result<Value, String> {
        match self.outcome(anchor)? {
            Outcome::Http(h) => h.document(),
            Outcome::Stdio(s) => s.response().cloned().ok_or_else(|| {
                if s.problems.is_empty() {
                    "the step got no response".to_owned()
                } else {
                    s.problems.join("; ")
                }
            }),
            Outcome::Broken(e) => Err(e.clone()),
        }
    }

    fn json_path_check(
        &self,
        anchor: Anchor,
        path: &Value,
        op: &str,
        expected: &Value,
    ) -> Result<(), String> {
        let path = path.as_str().ok_or("json_path is not a string")?;
        if path.contains('[') {
            return Err(format!("json_path {path} with [..] needs for_each/unique"));
        }
        let doc = self.document(anchor)?;
        let found = select(&doc, path)?.into_iter().next();
        let shown = || {
            format!(
                "got {path} = {} in {}",
                show(found),
                cut(&doc.to_string(), 600)
            )
        };
        let ok = match op {
            "equals" => found.is_some_and(|v| json_eq(v, expected)),
            "not_equals" => found.is_some_and(|v| !json_eq(v, expected)),
            "in" => {
                let list = expand_list(expected)?;
                found.is_some_and(|v| list.iter().any(|x| json_eq(v, x)))
            }
            "absent" => found.is_none() == expected.as_bool().ok_or("absent is not a boolean")?,
            "exists" => {
                let present = found.is_some_and(|v| !v.is_null());
                present == expected.as_bool().ok_or("exists is not a boolean")?
            }
            other => return Err(format!("unknown operator {other}")),
        };
        if ok {
            Ok(())
        } else {
            Err(format!("want {path} {op} {expected}; {}", shown()))
        }
    }

    fn http_status(&self, anchor: Anchor, allowed: &[Value]) -> Result<(), String> {
        let reply = self.reply(anchor)?;
        if allowed
            .iter()
            .any(|s| s.as_u64() == Some(u64::from(reply.status)))
        {
            Ok(())
        } else {
            Err(format!(
                "want HTTP status in {}, got {} (content-type {:?}) body {}",
                Value::Array(allowed.to_vec()),
                reply.status,
                reply.content_type(),
                cut(&String::from_utf8_lossy(&reply.body), 600)
            ))
        }
    }

    fn content_type(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let want = want.as_str().ok_or("content_type is not a string")?;
        let reply = self.reply(anchor)?;
        match reply.content_type() {
            Some(ct) if ct.eq_ignore_ascii_case(want) => Ok(()),
            got => Err(format!(
                "want Content-Type {want}, got {got:?} (HTTP {})",
                reply.status
            )),
        }
    }

    fn body(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        if want.as_str() != Some("empty") {
            return Err(format!(
                "the interpreter knows only body: \"empty\", not {want}"
            ));
        }
        let reply = self.reply(anchor)?;
        if reply.body.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "want an empty body, got {} bytes (HTTP {}, content-type {:?}): {}",
                reply.body.len(),
                reply.status,
                reply.content_type(),
                cut(&String::from_utf8_lossy(&reply.body), 600)
            ))
        }
    }

    fn header_present(&self, anchor: Anchor, name: &Value) -> Result<(), String> {
        let name = name.as_str().ok_or("header_present is not a string")?;
        let reply = self.reply(anchor)?;
        if reply.headers.contains_key(name) {
            Ok(())
        } else {
            Err(format!(
                "want header {name}, got HTTP {} with {:?}",
                reply.status, reply.headers
            ))
        }
    }

    fn json_array_len(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let want = want.as_u64().ok_or("json_array_len is not a number")?;
        let doc = self.document(anchor)?;
        match doc.as_array() {
            Some(items) if items.len() as u64 == want => Ok(()),
            _ => Err(format!(
                "want an array of {want}, got {}",
                cut(&doc.to_string(), 600)
            )),
        }
    }

    fn ids(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let mut want: Vec<String> = want
            .as_array()
            .ok_or("ids is not a list")?
            .iter()
            .map(Value::to_string)
            .collect();
        let doc = self.document(anchor)?;
        let items = doc
            .as_array()
            .ok_or_else(|| format!("want an array, got {}", cut(&doc.to_string(), 600)))?;
        // A batch response may come in any order (JSON-RPC 2.0 §6).
        let mut got: Vec<String> = items.iter().map(|m| m["id"].to_string()).collect();
        want.sort();
        got.sort();
        if want == got {
            Ok(())
        } else {
            Err(format!("want ids {want:?}, got {got:?}"))
        }
    }

    fn values_at(&self, anchor: Anchor, path: &Value) -> Result<Vec<Value>, String> {
        let path = path.as_str().ok_or("path is not a string")?;
        let doc = self.document(anchor)?;
        let found: Vec<Value> = select(&doc, path)?.into_iter().cloned().collect();
        if found.is_empty() {
            // Vacuous truth over nothing would hide a missing list.
            return Err(format!(
                "{path} selects nothing in {}",
                cut(&doc.to_string(), 600)
            ));
        }
        Ok(found)
    }

    fn for_each_matches(
        &self,
        anchor: Anchor,
        path: &Value,
        pattern: &Value,
    ) -> Result<(), String> {
        let pattern = pattern.as_str().ok_or("matches is not a string")?;
        let re = Regex::new(pattern).map_err(|e| format!("bad pattern {pattern}: {e}"))?;
        let bad: Vec<Value> = self
            .values_at(anchor, path)?
            .into_iter()
            .filter(|v| !v.as_str().is_some_and(|s| re.is_match(s)))
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!("these do not match {pattern}: {bad:?}"))
        }
    }

    fn unique(&self, anchor: Anchor, path: &Value) -> Result<(), String> {
        let values = self.values_at(anchor, path)?;
        let mut seen = Vec::new();
        let mut dupes = Vec::new();
        for v in values {
            if seen.contains(&v) {
                dupes.push(v);
            } else {
                seen.push(v);
            }
        }
        if dupes.is_empty() {
            Ok(())
        } else {
            Err(format!("duplicates: {dupes:?}"))
        }
    }

    fn within(&self, anchor: Anchor, ms: &Value) -> Result<(), String> {
        let ms = ms.as_u64().ok_or("within_ms is not a number")?;
        let elapsed = match self.outcome(anchor)? {
            Outcome::Stdio(s) => s.elapsed.ok_or("the step got no response")?,
            Outcome::Http(h) => h.reply.as_ref().map_err(Clone::clone)?.elapsed,
            Outcome::Broken(e) => return Err(e.clone()),
        };
        if elapsed <= Duration::from_millis(ms) {
            Ok(())
        } else {
            Err(format!("want a response within {ms} ms, took {elapsed:?}"))
        }
    }

    fn next_stdout_message(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let want = want
            .as_object()
            .ok_or("next_stdout_message is not an object")?;
        let s = self.stdio_outcome(anchor)?;
        let first = s.received.first().ok_or_else(|| {
            format!(
                "no message on stdout after the step ({})",
                s.problems.join("; ")
            )
        })?;
        let wrong: Vec<&String> = want
            .iter()
            .filter(|(k, v)| !first.get(k).is_some_and(|got| json_eq(got, v)))
            .map(|(k, _)| k)
            .collect();
        if wrong.is_empty() && first["jsonrpc"] == "2.0" {
            Ok(())
        } else {
            Err(format!(
                "want the next stdout message to have {want:?} (and jsonrpc 2.0), got {first}"
            ))
        }
    }

    async fn no_message_within(&mut self, anchor: Anchor, ms: &Value) -> Result<(), String> {
        let ms = ms.as_u64().ok_or("no_message_within_ms is not a number")?;
        let Anchor::AfterStep(_) = anchor else {
            return Err("no_message_within_ms needs after_step".into());
        };
        let server = self.stdio_outcome(anchor)?.server;
        match self.stdio[server].expect_silence(ms).await {
            Ok(()) => Ok(()),
            Err(line) => Err(format!(
                "want silence for {ms} ms, got {:?}",
                String::from_utf8_lossy(&line)
            )),
        }
    }

    async fn process_alive(&mut self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let want = want.as_bool().ok_or("process_alive is not a boolean")?;
        let server = self.stdio_outcome(anchor)?.server;
        let server = &mut self.stdio[server];
        let alive = if want {
            // scenario: still running a moment after its last reply, not only at once
            tokio::time::sleep(Duration::from_millis(300)).await;
            server.is_alive()
        } else {
            // A server that exits after its last reply: its exit is awaited.
            server.wait_exit(Duration::from_secs(5)).await.is_none()
        };
        if alive == want {
            Ok(())
        } else {
            Err(format!("want process alive = {want}, got {alive}"))
        }
    }

    /// All stdout of every stdio server of the case, per server.
    fn all_stdout(&self, anchor: Anchor) -> Result<Vec<Vec<u8>>, String> {
        if anchor != Anchor::AllSteps {
            return Err("a whole-stdout check needs all_steps".into());
        }
        if self.stdio.is_empty() {
            return Err("a stdout check in an HTTP case".into());
        }
        Ok(self.stdio.iter().map(StdioServer::stdout_bytes).collect())
    }

    fn stdout_lines_all_jsonrpc(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        if want != &Value::Bool(true) {
            return Err(format!(
                "stdout_lines_all_jsonrpc: {want} is not understood"
            ));
        }
        let mut bad = Vec::new();
        for out in self.all_stdout(anchor)? {
            if out.is_empty() {
                bad.push("no stdout at all".to_owned());
            }
            for line in out.split_inclusive(|&b| b == b'\n') {
                let text = String::from_utf8_lossy(line);
                let ok = serde_json::from_slice::<Value>(line)
                    .is_ok_and(|m| m.is_object() && m["jsonrpc"] == "2.0");
                if !ok {
                    bad.push(text.into_owned());
                }
            }
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "stdout lines that are not JSON-RPC messages: {bad:?}"
            ))
        }
    }

    fn lines_before_first_response(&self, anchor: Anchor, want: &Value) -> Result<(), String> {
        let want = want
            .as_u64()
            .ok_or("stdout_lines_before_first_response is not a number")?;
        for out in self.all_stdout(anchor)? {
            let lines: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
            let first = lines
                .iter()
                .position(|l| serde_json::from_slice::<Value>(l).is_ok_and(|m| is_response(&m)))
                .ok_or("no response on stdout at all")?;
            if first as u64 != want {
                return Err(format!(
                    "want {want} lines before the first response, got {first}: {:?}",
                    lines[..first]
                        .iter()
                        .map(|l| String::from_utf8_lossy(l))
                        .collect::<Vec<_>>()
                ));
            }
        }
        Ok(())
    }

    fn stdout_raw_bytes_excludes(&self, anchor: Anchor, hex: &Value) -> Result<(), String> {
        let needle = unhex(
            hex.as_str()
                .ok_or("stdout_raw_bytes_excludes is not a string")?,
        )?;
        for out in self.all_stdout(anchor)? {
            if let Some(at) = out
                .windows(needle.len())
                .position(|w| w == needle.as_slice())
            {
                let from = at.saturating_sub(40);
                return Err(format!(
                    "stdout contains {hex} at byte {at}: {:?}",
                    String::from_utf8_lossy(&out[from..(at + 40).min(out.len())])
                ));
            }
        }
        Ok(())
    }

    /// Each message is the JSON text followed by exactly this terminator: the stream ends
    /// with it, there are no empty fragments, and every fragment is one JSON value.
    fn stdout_message_terminator(&self, anchor: Anchor, hex: &Value) -> Result<(), String> {
        let term = unhex(
            hex.as_str()
                .ok_or("stdout_message_terminator is not a string")?,
        )?;
        if term != b"\n" {
            return Err(format!(
                "the interpreter knows only the terminator 0a, not {hex}"
            ));
        }
        for out in self.all_stdout(anchor)? {
            if out.is_empty() {
                return Err("no stdout at all".into());
            }
            if !out.ends_with(b"\n") {
                return Err(format!(
                    "stdout does not end with 0a: {:?}",
                    cut(&String::from_utf8_lossy(&out), 200)
                ));
            }
            for fragment in out[..out.len() - 1].split(|&b| b == b'\n') {
                let text = String::from_utf8_lossy(fragment);
                if fragment.ends_with(b"\r") {
                    return Err(format!("a message ends with 0d 0a: {:?}", cut(&text, 200)));
                }
                if serde_json::from_slice::<Value>(fragment).is_err() {
                    return Err(format!(
                        "a fragment between terminators is not one JSON message: {text:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Panics with the report if anything failed or nothing was checked.
    fn finish(mut self) {
        if self.evaluated == 0 {
            self.fail("no check of the case was evaluated");
        }
        if self.failures.is_empty() {
            // Shown by `cargo test -- --nocapture` / `nextest --no-capture`.
            eprintln!(
                "{}: {} check(s) passed, {} skipped{}",
                self.run.id,
                self.evaluated,
                self.skipped.len(),
                self.skipped
                    .iter()
                    .map(|s| format!("\n  (skipped {s})"))
                    .collect::<String>()
            );
            if std::env::var_os("E2E_TRANSCRIPT").is_some() {
                eprintln!("transcript:\n{}", self.transcript);
            }
            return;
        }
        let mut report = format!(
            "{} {}\n  expected: {}\n\n{} failure(s):\n",
            self.case["id"].as_str().unwrap_or("?"),
            self.case["title"].as_str().unwrap_or("?"),
            self.case["expected"]["summary"].as_str().unwrap_or("?"),
            self.failures.len()
        );
        for f in &self.failures {
            let _ = writeln!(report, "  - {f}");
        }
        for s in &self.skipped {
            let _ = writeln!(report, "  (skipped {s})");
        }
        let _ = writeln!(report, "\ntranscript:\n{}", self.transcript);
        for (i, s) in self.stdio.iter().enumerate() {
            let _ = writeln!(
                report,
                "--- stdio server #{i} stderr ---\n{}",
                s.stderr_text()
            );
        }
        let named = [("case", &self.main_http), ("default", &self.default_http)];
        for (name, server) in named {
            if let Some(s) = server {
                let _ = writeln!(
                    report,
                    "--- {name} HTTP server output ---\n{}",
                    s.output_text()
                );
            }
        }
        for (i, s) in self.fresh_http.iter().enumerate() {
            let _ = writeln!(
                report,
                "--- fresh HTTP server #{i} output ---\n{}",
                s.output_text()
            );
        }
        panic!("{report}");
    }
}

/// What a check is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    /// The response to step N.
    Step(usize),
    /// The moment just after step N.
    AfterStep(usize),
    /// Everything, from process start to exit.
    AllSteps,
}

fn anchor(check: &Value) -> Result<Anchor, String> {
    anchor_of(check.as_object().ok_or("a check is not an object")?)
}

fn anchor_of(check: &Map<String, Value>) -> Result<Anchor, String> {
    let step = |k: &str| {
        check.get(k).map(|v| {
            v.as_u64()
                .map(|n| n as usize)
                .ok_or(format!("{k} is not a number"))
        })
    };
    match (step("step"), step("after_step"), check.get("all_steps")) {
        (Some(n), None, None) => Ok(Anchor::Step(n?)),
        (None, Some(n), None) => Ok(Anchor::AfterStep(n?)),
        (None, None, Some(Value::Bool(true))) => Ok(Anchor::AllSteps),
        _ => Err("a check needs exactly one of step, after_step, all_steps: true".into()),
    }
}

/// Extra checks on every HTTP response (see the module doc).
fn http_extras(n: usize, request: &Value, h: &HttpOutcome) -> Vec<String> {
    let reply = match &h.reply {
        Ok(reply) => reply,
        Err(e) => return vec![format!("step {n} (extra): no HTTP response: {e}")],
    };
    let mut out = Vec::new();
    if reply.status == 202 {
        if !reply.body.is_empty() {
            out.push(format!(
                "step {n} (extra): 202 with a body: {}",
                cut(&String::from_utf8_lossy(&reply.body), 300)
            ));
        }
        if reply.content_type().as_deref() == Some("application/json") {
            out.push(format!(
                "step {n} (extra): 202 with Content-Type application/json"
            ));
        }
    }
    if reply.status >= 400 && !reply.body.is_empty() {
        let request_id = request["http"]["body"].get("id").cloned();
        let parsed = if reply.content_type().as_deref() == Some("text/event-stream") {
            match reply.messages.as_slice() {
                [one] => Ok(one.clone()),
                many => Err(format!("{} SSE messages", many.len())),
            }
        } else {
            serde_json::from_slice::<Value>(&reply.body).map_err(|e| e.to_string())
        };
        let ok = parsed.as_ref().is_ok_and(|m| {
            m["jsonrpc"] == "2.0"
                && m["error"]["code"].is_i64()
                && m["error"]["message"].is_string()
                && m.get("result").is_none()
                && (m.get("id") == Some(&Value::Null)
                    || (request_id.is_some() && m.get("id") == request_id.as_ref()))
        });
        if !ok {
            out.push(format!(
                "step {n} (extra): an HTTP {} body must be one JSON-RPC error object with id null{}; got {}",
                reply.status,
                request_id.map(|id| format!(" or {id}")).unwrap_or_default(),
                cut(&String::from_utf8_lossy(&reply.body), 600)
            ));
        }
    }
    out
}

/// The values at a dotted path such as `result.tools[*].name` (`[*]` selects every member,
/// `[N]` one member). A plain path selects at most one value.
fn select<'a>(doc: &'a Value, path: &str) -> Result<Vec<&'a Value>, String> {
    let seg = Regex::new(r"^([^\[\]]*)((?:\[(?:\*|\d+)\])*)$").unwrap();
    let index_re = Regex::new(r"\[(\*|\d+)\]").unwrap();
    let mut current = vec![doc];
    for part in path.split('.') {
        let caps = seg
            .captures(part)
            .ok_or_else(|| format!("bad json_path segment {part:?}"))?;
        let name = &caps[1];
        if !name.is_empty() {
            current = current.into_iter().filter_map(|v| v.get(name)).collect();
        }
        for index in index_re.captures_iter(&caps[2]) {
            current = match &index[1] {
                "*" => current
                    .into_iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .collect(),
                i => {
                    let i: usize = i.parse().unwrap();
                    current.into_iter().filter_map(|v| v.get(i)).collect()
                }
            };
        }
    }
    Ok(current)
}

/// `SERVER_SUPPORTED_VERSIONS` or a literal list.
fn expand_list(value: &Value) -> Result<Vec<Value>, String> {
    match value {
        Value::String(s) if s == "SERVER_SUPPORTED_VERSIONS" => {
            Ok(SERVER_SUPPORTED_VERSIONS.iter().map(|v| json!(v)).collect())
        }
        Value::Array(items) => Ok(items.clone()),
        other => Err(format!("`in` needs a list, got {other}")),
    }
}

/// JSON equality where `1` and `1.0` are the same number.
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn unhex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) || hex.is_empty() {
        return Err(format!("bad hex {hex:?}"));
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&hex[i..i + 2], 16).map_err(|e| format!("bad hex {hex:?}: {e}"))
        })
        .collect()
}

fn show(v: Option<&Value>) -> String {
    v.map(Value::to_string).unwrap_or_else(|| "(absent)".into())
}

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

// The interpreter itself: what it does not understand must fail, never pass.

#[tokio::test]
async fn interpreter_fails_what_it_does_not_know() {
    let mut runner = Runner::new(Run::case("SELF-TEST"), json!({"transport": "http"}));
    for check in [
        json!({"step": 1, "frobnicate": true}),
        json!({"step": 1, "if": "the moon is full", "http_status": 200}),
        json!({"step": 1}),
        json!({"step": 1, "level": "interop"}),
        json!({"step": 1, "json_path": "id"}),
        json!({"step": 1, "json_path": "id", "equals": 1, "in": [1]}),
        json!({"step": 1, "body": "tiny"}),
        json!({"stepp": 1, "http_status": 200}),
        json!({"step": 1, "http_status": 200}),
        json!({"step": 1, "for_each": "result.tools[*].name"}),
    ] {
        assert!(
            matches!(runner.verdict(&check).await, Verdict::Fail(_)),
            "should fail: {check}"
        );
    }
}

#[test]
fn json_path_selects_members() {
    let doc = json!({"result": {"tools": [{"name": "a"}, {"name": "b"}]}, "id": 0});
    let names: Vec<&Value> = select(&doc, "result.tools[*].name").unwrap();
    assert_eq!(names, [&json!("a"), &json!("b")]);
    assert_eq!(select(&doc, "result.tools[1].name").unwrap(), [&json!("b")]);
    assert_eq!(select(&doc, "id").unwrap(), [&json!(0)]);
    assert!(select(&doc, "error.code").unwrap().is_empty());
}
