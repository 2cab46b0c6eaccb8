//! Server fixtures: the real `omniforge` binary over stdio or Streamable HTTP.
//!
//! Every server gets its own temporary data directory and is killed when its fixture is
//! dropped. Its stderr (and, for HTTP, its stdout) is drained for the whole life of the
//! process, so a chatty server can never block on a full pipe, and the captured text is
//! printed when a test fails.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

use crate::procs::{Captured, Serve, drain, kill_and_reap};

/// The binary under test, built by cargo for this test target.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_omniforge");

/// How long a server may take to be ready (its `--ready-file` to appear).
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long we wait for the answer to one request before calling it lost.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A built-in tool that takes no arguments: what `<any_tool>` stands for.
pub(crate) const ANY_TOOL: &str = "omniforge_instructions";

// ---------------------------------------------------------------------------------------
// Paths, dependencies and the command line
// ---------------------------------------------------------------------------------------

/// The repository root (this crate is `crates/omniforge`).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What `scripts/bootstrap` installs: uv, Node 22, the official MCP clients.
pub(crate) fn deps() -> PathBuf {
    repo_root().join(".deps")
}

/// `.deps/bin/uv`.
pub(crate) fn uv() -> PathBuf {
    deps().join("bin/uv")
}

/// The interpreter of PyPI `mcp` 1.x.
pub(crate) fn python1() -> PathBuf {
    deps().join("py-mcp1/bin/python")
}

/// The interpreter of PyPI `mcp` 2.x.
pub(crate) fn python2() -> PathBuf {
    deps().join("py-mcp2/bin/python")
}

/// Node 22.
pub(crate) fn node22() -> PathBuf {
    deps().join("bin/node22")
}

/// The `node_modules` holding `@modelcontextprotocol/sdk`.
pub(crate) fn ts_modules() -> PathBuf {
    deps().join("node/node_modules")
}

/// A folder of this test binary's sources, e.g. `client_drivers`.
pub(crate) fn e2e_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

/// Fails (never skips) when something from `.deps/` is missing.
pub(crate) fn require(paths: &[PathBuf]) {
    for path in paths {
        assert!(
            path.exists(),
            "{} is missing: the test dependencies are not installed. Run `scripts/bootstrap` \
             (from the repository root) to install uv, the MCP clients, Node 22 and the Connect \
             fixture's node_modules into place, then rerun the tests.",
            path.display()
        );
    }
}

/// Removes proxy settings so loopback HTTP goes straight to the server.
pub(crate) fn no_proxy(cmd: &mut Command) -> &mut Command {
    cmd.env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
}

/// `python SCRIPT`, unbuffered and writing no bytecode.
pub(crate) fn python_driver(python: &Path, script: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// `node22 SCRIPT`, with the script copied into `dir/ts` next to a link to [`ts_modules`]
/// (ESM resolves `@modelcontextprotocol/sdk` next to the script).
pub(crate) fn node_driver(dir: &Path, script: &Path) -> Command {
    let home = dir.join("ts");
    std::fs::create_dir(&home).unwrap();
    let copy = home.join(script.file_name().unwrap());
    std::fs::copy(script, &copy).unwrap();
    std::os::unix::fs::symlink(ts_modules(), home.join("node_modules")).unwrap();
    let mut cmd = Command::new(node22());
    cmd.arg(copy);
    cmd
}

/// Spawns `cmd` with all three pipes; the child is killed when dropped.
pub(crate) fn spawn_piped(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// Forwards each line of `stdout` through a channel until EOF.
pub(crate) fn line_channel(stdout: ChildStdout) -> mpsc::UnboundedReceiver<String> {
    let (tx, lines) = mpsc::unbounded_channel();
    let mut out = BufReader::new(stdout).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = out.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// `omniforge --data-dir DIR --uv UV`, without colours; add the subcommand. Fails when uv is
/// missing.
pub(crate) fn omniforge_in(dir: &Path) -> Command {
    let uv = uv();
    assert!(
        uv.exists(),
        "{} is missing: run `scripts/bootstrap`",
        uv.display()
    );
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(dir)
        .arg("--uv")
        .arg(uv)
        .env("NO_COLOR", "1");
    cmd
}

/// Runs `omniforge --data-dir DIR --uv UV ARGS...` (with `stdin` as its input, else none);
/// returns (success, stdout, stderr).
pub(crate) async fn omniforge_cli(
    dir: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut child = spawn_piped(omniforge_in(dir).args(args)).unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the command did not finish within 180 s")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Why a read from the server's stdout gave no line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// Nothing arrived within the timeout.
    Timeout,
    /// stdout was closed (the process exited or closed it).
    Closed,
}

/// `omniforge stdio --data-dir DIR`: MCP over newline-delimited JSON-RPC on stdin/stdout.
pub(crate) struct StdioServer {
    child: Child,
    /// Taken (dropped) by [`StdioServer::close`] to send EOF.
    stdin: Option<ChildStdin>,
    /// Complete stdout lines, each with its terminator (the last one may lack it).
    lines: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Every byte the server wrote to stdout, from process start.
    stdout: Captured,
    stderr: Captured,
    _dir: TempDir,
}

impl StdioServer {
    /// Starts `omniforge stdio --data-dir <fresh temp dir> ARGS...`.
    pub(crate) fn start(args: &[&str]) -> StdioServer {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(BIN)
            .arg("stdio")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let stdin = child.stdin.take();
        let mut out = child.stdout.take().unwrap();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());

        let stdout = Captured::default();
        let (tx, lines) = mpsc::unbounded_channel();
        let sink = stdout.clone();
        tokio::spawn(async move {
            let mut pending = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = match out.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                sink.push(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let _ = tx.send(line);
                }
            }
            if !pending.is_empty() {
                let _ = tx.send(pending);
            }
        });
        StdioServer {
            child,
            stdin,
            lines,
            stdout,
            stderr,
            _dir: dir,
        }
    }

    /// Writes `line` followed by a single `\n`.
    pub(crate) async fn send_line(&mut self, line: &str) -> Result<(), String> {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.send_raw(&bytes).await
    }

    /// Writes `bytes` exactly as given.
    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin
            .write_all(bytes)
            .await
            .map_err(|e| format!("write to server stdin: {e}"))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("flush server stdin: {e}"))
    }

    /// The next stdout line, terminator included.
    pub(crate) async fn read_raw_line(&mut self, timeout: Duration) -> Result<Vec<u8>, ReadError> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Err(_) => Err(ReadError::Timeout),
            Ok(None) => Err(ReadError::Closed),
            Ok(Some(line)) => Ok(line),
        }
    }

    /// The next stdout line parsed as JSON. A line that is not JSON is an error carrying the
    /// line; a read that times out or hits EOF is an error saying so.
    pub(crate) async fn read_message(&mut self, timeout: Duration) -> Result<Value, String> {
        let line = self.read_raw_line(timeout).await.map_err(|e| match e {
            ReadError::Timeout => format!("no stdout line within {timeout:?}"),
            ReadError::Closed => "stdout closed".to_owned(),
        })?;
        serde_json::from_slice(&line).map_err(|e| {
            format!(
                "stdout line is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// Ok if stdout stays silent for `ms`; otherwise the line that arrived.
    pub(crate) async fn expect_silence(&mut self, ms: u64) -> Result<(), Vec<u8>> {
        match self.read_raw_line(Duration::from_millis(ms)).await {
            Ok(line) => Err(line),
            Err(_) => Ok(()),
        }
    }

    /// Whether the process is still running.
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Closes stdin (the stdio way to ask a server to stop) and waits up to `timeout` for
    /// the process to exit and stdout to reach EOF. `None` if it did not exit in time.
    pub(crate) async fn close(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()?
            .ok()?;
        // Let the reader task see EOF, so `stdout_bytes` holds everything written.
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while self.lines.recv().await.is_some() {}
        })
        .await;
        Some(status)
    }

    /// Every byte written to stdout so far, from process start.
    pub(crate) fn stdout_bytes(&self) -> Vec<u8> {
        self.stdout.bytes()
    }

    /// The end of what the server wrote to stderr.
    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.tail(6000)
    }

    /// Everything the server wrote to stderr so far.
    pub(crate) fn stderr_all(&self) -> String {
        self.stderr.text()
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// How an HTTP server authenticates clients.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    /// `--insecure-no-auth`.
    None,
    /// `--token-file FILE` with one line `e2e TOKEN tools:call` (NAME TOKEN SCOPES).
    Bearer(String),
    /// `--token-file FILE` with these lines (`NAME TOKEN SCOPES` each).
    TokenFile(String),
}

/// `omniforge serve --listen 127.0.0.1:0 --data-dir DIR`: Streamable HTTP, started through
/// [`Serve`] (ready when its `--ready-file` appears).
pub(crate) struct HttpServer {
    server: Serve,
    _dir: TempDir,
}

impl HttpServer {
    /// Starts `omniforge serve --listen 127.0.0.1:0 --data-dir <fresh temp dir>` plus the
    /// flags for `auth` and `args`, and waits (up to [`START_TIMEOUT`]) until it is ready.
    pub(crate) async fn start(args: &[&str], auth: &Auth) -> HttpServer {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mut command = Serve::command().args(&["--data-dir".as_ref(), data.as_os_str()]);
        match auth {
            Auth::None => command = command.args(&["--insecure-no-auth"]),
            Auth::Bearer(token) => {
                let file = dir.path().join("token");
                write_private(&file, &format!("e2e {token} tools:call\n"));
                command = command.args(&["--token-file".as_ref(), file.as_os_str()]);
            }
            Auth::TokenFile(lines) => {
                let file = dir.path().join("token");
                write_private(&file, lines);
                command = command.args(&["--token-file".as_ref(), file.as_os_str()]);
            }
        }
        let server = command.args(args).start().await;
        HttpServer { server, _dir: dir }
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn url(&self) -> &str {
        &self.server.url
    }

    /// Scheme, host and port, e.g. `http://127.0.0.1:PORT`.
    pub(crate) fn base(&self) -> &str {
        &self.server.base
    }

    /// The server's `--data-dir` (for the command line on the same store).
    pub(crate) fn data_dir(&self) -> std::path::PathBuf {
        self._dir.path().join("data")
    }

    /// Everything the server wrote to stderr so far.
    pub(crate) fn stderr_all(&self) -> String {
        self.server.stderr()
    }

    /// The end of what the server wrote to stderr (and stdout, which should be empty).
    pub(crate) fn output_text(&self) -> String {
        self.server.output_tail()
    }
}

/// Writes a secret file readable only by its owner.
fn write_private(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// An HTTP client for loopback tests: no proxy from the environment, no TLS.
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// What an HTTP exchange returned.
#[derive(Debug)]
pub(crate) struct HttpReply {
    pub(crate) status: u16,
    pub(crate) headers: reqwest::header::HeaderMap,
    /// The body bytes read (all of it, or as much of an SSE stream as we waited for).
    pub(crate) body: Vec<u8>,
    /// The JSON-RPC messages in the body: a JSON body's object (or array members), or the
    /// `data:` of each non-empty SSE event.
    pub(crate) messages: Vec<Value>,
    /// Problems met while reading the body (a stream that stalled, an unparsable event).
    pub(crate) notes: Vec<String>,
    /// From sending the request to having read what we waited for.
    pub(crate) elapsed: Duration,
}

impl HttpReply {
    /// The media type of the body, lower-cased, without parameters.
    pub(crate) fn content_type(&self) -> Option<String> {
        let ct = self
            .headers
            .get(reqwest::header::CONTENT_TYPE)?
            .to_str()
            .ok()?;
        Some(
            ct.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase(),
        )
    }

    /// A response header as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Ids of the requests in a JSON-RPC body (one message or a batch): what the replies must
/// answer.
pub(crate) fn request_ids(body: Option<&Value>) -> Vec<Value> {
    let one = |m: &Value| match (m.get("id"), m.get("method")) {
        (Some(id), Some(_)) => Some(id.clone()),
        _ => None,
    };
    match body {
        Some(Value::Array(items)) => items.iter().filter_map(one).collect(),
        Some(m) => one(m).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Sends one HTTP request and reads the reply.
///
/// A JSON body is read to the end. An SSE body is read until every id in `wait_ids` has a
/// response (or the stream ends, or [`REPLY_TIMEOUT`] passes); a GET/DELETE/OPTIONS SSE
/// stream with nothing to wait for is not read at all (it may stay open forever).
pub(crate) async fn http_send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    body: Option<Vec<u8>>,
    wait_ids: &[Value],
) -> Result<HttpReply, String> {
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
    let is_post = method == reqwest::Method::POST;
    let mut req = client.request(method, url);
    for (name, value) in headers {
        req = req.header(name.as_str(), value.as_str());
    }
    if let Some(body) = body {
        req = req.body(body);
    }
    let started = Instant::now();
    let mut resp = match tokio::time::timeout(REPLY_TIMEOUT, req.send()).await {
        Err(_) => return Err(format!("no response headers within {REPLY_TIMEOUT:?}")),
        Ok(Err(e)) => return Err(format!("request failed: {e:?}")),
        Ok(Ok(resp)) => resp,
    };
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut reply = HttpReply {
        status,
        headers,
        body: Vec::new(),
        messages: Vec::new(),
        notes: Vec::new(),
        elapsed: Duration::ZERO,
    };
    let is_sse = reply.content_type().as_deref() == Some("text/event-stream");
    if is_sse && wait_ids.is_empty() && !is_post {
        reply.notes.push("SSE stream left unread".to_owned());
        reply.elapsed = started.elapsed();
        return Ok(reply);
    }
    // For SSE with nothing to wait for, give the stream a short while to end by itself.
    let budget = if is_sse && wait_ids.is_empty() {
        Duration::from_secs(2)
    } else {
        REPLY_TIMEOUT
    };
    let deadline = tokio::time::Instant::now() + budget;
    loop {
        if is_sse {
            let (messages, _) = parse_sse(&reply.body, false);
            if !wait_ids.is_empty() && wait_ids.iter().all(|id| answered(&messages, id)) {
                break;
            }
        }
        match tokio::time::timeout_at(deadline, resp.chunk()).await {
            Err(_) => {
                reply.notes.push(format!(
                    "body not finished after {budget:?}; stopped reading"
                ));
                break;
            }
            Ok(Err(e)) => {
                reply.notes.push(format!("body read failed: {e}"));
                break;
            }
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => reply.body.extend_from_slice(&chunk),
        }
    }
    reply.elapsed = started.elapsed();
    if is_sse {
        let (messages, errors) = parse_sse(&reply.body, true);
        reply.messages = messages;
        reply.notes.extend(errors);
    } else if reply.content_type().as_deref() == Some("application/json") && !reply.body.is_empty()
    {
        match serde_json::from_slice::<Value>(&reply.body) {
            Ok(Value::Array(items)) => reply.messages = items,
            Ok(v) => reply.messages = vec![v],
            Err(e) => reply.notes.push(format!("JSON body does not parse: {e}")),
        }
    }
    Ok(reply)
}

/// Whether `messages` hold a response (result or error) for `id`.
pub(crate) fn answered(messages: &[Value], id: &Value) -> bool {
    messages
        .iter()
        .any(|m| is_response(m) && m.get("id") == Some(id))
}

/// A JSON-RPC response: has an id and a result or an error.
pub(crate) fn is_response(m: &Value) -> bool {
    m.get("id").is_some() && (m.get("result").is_some() || m.get("error").is_some())
}

/// The JSON-RPC messages in an SSE body, and the problems found.
///
/// Events are separated by blank lines; each event's `data:` lines are joined with `\n`.
/// Events without data (priming events carrying only an `id:` or `retry:`) are skipped; a
/// data payload that is a JSON array contributes its members. With `at_end == false`, a
/// final event not yet closed by a blank line is left for later.
pub(crate) fn parse_sse(body: &[u8], at_end: bool) -> (Vec<Value>, Vec<String>) {
    let text = String::from_utf8_lossy(body)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    let mut blocks: Vec<&str> = text.split("\n\n").collect();
    if !at_end {
        // The last block is complete only if the text ended with a blank line.
        blocks.pop();
    }
    let mut messages = Vec::new();
    let mut errors = Vec::new();
    for block in blocks {
        let data: Vec<&str> = block
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let data = data.join("\n");
        if data.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&data) {
            Ok(Value::Array(items)) => messages.extend(items),
            Ok(v) => messages.push(v),
            Err(e) => errors.push(format!("SSE data is not JSON ({e}): {data:?}")),
        }
    }
    (messages, errors)
}

/// The standard headers of a client POST.
pub(crate) fn post_headers(session: Option<&str>, version: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
    ];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id".to_owned(), s.to_owned()));
    }
    if let Some(v) = version {
        h.push(("MCP-Protocol-Version".to_owned(), v.to_owned()));
    }
    h
}

/// An `initialize` request body.
pub(crate) fn initialize_request(id: u64, version: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "omniforge-e2e", "version": "0"}
        }
    })
}

/// An HTTP session opened by [`init_http`].
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The `Mcp-Session-Id` the server assigned.
    pub(crate) id: String,
    /// `result.protocolVersion` of the InitializeResult.
    pub(crate) version: String,
}

/// The first revision whose clients send the `MCP-Protocol-Version` header.
pub(crate) const VERSION_HEADER_SINCE: &str = "2025-06-18";

/// POSTs `initialize` asking for `version` and captures `Mcp-Session-Id`; with
/// `initialized`, then POSTs `notifications/initialized` in that session (with the
/// `MCP-Protocol-Version` header when the negotiated revision has it) and requires 202.
pub(crate) async fn init_http(
    client: &reqwest::Client,
    server: &HttpServer,
    version: &str,
    initialized: bool,
) -> Result<Session, String> {
    let body = serde_json::to_vec(&initialize_request(1, version)).unwrap();
    let reply = http_send(
        client,
        "POST",
        server.url(),
        &post_headers(None, None),
        Some(body),
        &[json!(1)],
    )
    .await
    .map_err(|e| format!("initialize: {e}"))?;
    if reply.status != 200 {
        return Err(format!(
            "initialize: HTTP {} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        ));
    }
    let id = reply
        .header("mcp-session-id")
        .ok_or("initialize: no Mcp-Session-Id header in the reply")?
        .to_owned();
    let result = reply
        .messages
        .iter()
        .find(|m| m.get("id") == Some(&json!(1)))
        .and_then(|m| m.get("result"))
        .ok_or_else(|| format!("initialize: no result in {:?}", reply.messages))?;
    let negotiated = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or("initialize: result has no protocolVersion")?
        .to_owned();
    if initialized {
        let header = (negotiated.as_str() >= VERSION_HEADER_SINCE).then_some(negotiated.as_str());
        let body = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
        let reply = http_send(
            client,
            "POST",
            server.url(),
            &post_headers(Some(&id), header),
            Some(body),
            &[],
        )
        .await
        .map_err(|e| format!("notifications/initialized: {e}"))?;
        if reply.status != 202 {
            return Err(format!(
                "notifications/initialized: HTTP {} (want 202) {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            ));
        }
    }
    Ok(Session {
        id,
        version: negotiated,
    })
}

/// Writes `initialize` for `version`, reads its response, writes
/// `notifications/initialized`; returns the negotiated version.
pub(crate) async fn init_stdio(server: &mut StdioServer, version: &str) -> Result<String, String> {
    let req = initialize_request(0, version).to_string();
    server.send_line(&req).await?;
    let deadline = Instant::now() + REPLY_TIMEOUT;
    let response = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = server
            .read_message(left)
            .await
            .map_err(|e| format!("initialize: {e}"))?;
        if m.get("id") == Some(&json!(0)) && is_response(&m) {
            break m;
        }
    };
    let negotiated = response
        .pointer("/result/protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("initialize: no result.protocolVersion in {response}"))?
        .to_owned();
    server
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await?;
    Ok(negotiated)
}

#[test]
fn sse_parsing_skips_priming_events_and_waits_for_whole_events() {
    let body = b"id: 0\r\nretry: 3000\r\ndata:\r\n\r\n: comment\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\n\
                 data: \"id\":1,\"result\":{}}\n\ndata: [{\"id\":2,\"result\":{}},{\"id\":3,\"result\":{}}]\n\n\
                 data: {\"id\":4";
    let (messages, errors) = parse_sse(body, false);
    let ids: Vec<&Value> = messages.iter().map(|m| &m["id"]).collect();
    assert_eq!(ids, [&json!(1), &json!(2), &json!(3)]);
    assert!(errors.is_empty(), "{errors:?}");
    let (messages, errors) = parse_sse(body, true);
    assert_eq!(messages.len(), 3);
    assert_eq!(errors.len(), 1, "the cut-off last event does not parse");
}
