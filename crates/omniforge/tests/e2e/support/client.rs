//! THE MCP clients the tests speak through: [`HttpClient`] (Streamable HTTP sessions, with or
//! without a bearer token) and [`StdioClient`] (`omniforge stdio` as a child, raw JSON-RPC
//! lines, notifications kept). Both send, initialize, list, call a tool and wait for a
//! notification ([`HttpClient::notifications`], [`StdioClient::wait_for`]). The one-shot
//! bearer helpers ([`bearer_post`], [`bearer_session`]) are for tests that look at the HTTP
//! answer itself (status, `WWW-Authenticate`).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use super::http::{
    HttpReply, get_headers, http_client, http_send, initialize_request, is_response, post_headers,
};
use super::process::{Captured, drain, kill_and_reap, spawn_piped};
use super::server::omniforge_in;
use super::sse::{parse_sse, sse_messages_open};

/// THE MCP client over Streamable HTTP: an initialized 2025-06-18 session (optionally with a
/// bearer token), or the same session sent to another URL (a replica, the balancer).
pub(crate) struct HttpClient {
    http: reqwest::Client,
    /// The MCP endpoint this client posts to.
    pub(crate) url: String,
    token: Option<String>,
    /// `None`: no session.
    pub(crate) session: Option<String>,
    /// The revision asked for in `initialize` and sent as `MCP-Protocol-Version`.
    version: &'static str,
    next_id: u64,
}

/// The revision the HTTP sessions speak unless told otherwise ([`HttpClient::open_as`]).
const VERSION: &str = "2025-06-18";

impl HttpClient {
    /// Initializes a session at `url`, without a token.
    pub(crate) async fn open(url: &str) -> Result<HttpClient, String> {
        HttpClient::open_as(url, None, VERSION).await
    }

    /// Initializes a session at `url` with a bearer token; panics when that fails.
    pub(crate) async fn bearer(url: &str, token: &str) -> HttpClient {
        HttpClient::open_as(url, Some(token), VERSION)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Initializes a session at `url` speaking revision `version`, with a bearer token if
    /// given.
    pub(crate) async fn open_as(
        url: &str,
        token: Option<&str>,
        version: &'static str,
    ) -> Result<HttpClient, String> {
        let mut mcp = HttpClient {
            http: http_client(),
            url: url.to_owned(),
            token: token.map(str::to_owned),
            session: None,
            version,
            next_id: 1,
        };
        let reply = mcp
            .post(initialize_request(0, version), &[json!(0)])
            .await?;
        if reply.status != 200 {
            return Err(format!(
                "initialize: HTTP {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            ));
        }
        let session = reply
            .header("mcp-session-id")
            .ok_or("no Mcp-Session-Id")?
            .to_owned();
        mcp.session = Some(session);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let reply = mcp.post(note, &[]).await?;
        if reply.status != 202 {
            return Err(format!("initialized: HTTP {}", reply.status));
        }
        Ok(mcp)
    }

    /// The same session, sent to `url` (another replica, the balancer).
    pub(crate) fn same_session_at(&self, url: &str) -> HttpClient {
        HttpClient {
            http: self.http.clone(),
            url: url.to_owned(),
            token: self.token.clone(),
            session: self.session.clone(),
            version: self.version,
            next_id: self.next_id + 1000,
        }
    }

    fn with_token(&self, mut headers: Vec<(String, String)>) -> Vec<(String, String)> {
        if let Some(token) = &self.token {
            headers.push(("Authorization".into(), format!("Bearer {token}")));
        }
        headers
    }

    /// The headers of a POST in this session: Content-Type, Accept, Mcp-Session-Id,
    /// MCP-Protocol-Version and the token.
    pub(crate) fn headers(&self) -> Vec<(String, String)> {
        self.with_token(post_headers(
            self.session.as_deref(),
            self.session.as_ref().map(|_| self.version),
        ))
    }

    async fn post(&self, body: Value, wait: &[Value]) -> Result<HttpReply, String> {
        http_send(
            &self.http,
            "POST",
            &self.url,
            &self.headers(),
            Some(serde_json::to_vec(&body).unwrap()),
            wait,
        )
        .await
    }

    /// The headers of a GET on the session's SSE stream (notifications), with the token.
    pub(crate) fn stream_headers(&self) -> Vec<(String, String)> {
        let session = self.session.as_deref().expect("a session");
        self.with_token(get_headers(session, self.version))
    }

    /// Opens the session's GET stream: the notifications, as they arrive. Returns once the
    /// server has answered the GET (status 200, an event stream), so a change made after it
    /// is announced on it.
    pub(crate) async fn notifications(&self) -> mpsc::UnboundedReceiver<Value> {
        let mut req = self.http.get(&self.url);
        for (name, value) in self.stream_headers() {
            req = req.header(name, value);
        }
        sse_messages_open(req).await
    }

    /// One request: its whole response message (`result` or `error`), or why there was none
    /// (`HTTP 404`, a transport failure).
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = self.post(body, std::slice::from_ref(&id)).await?;
        if reply.status != 200 {
            return Err(format!("HTTP {}", reply.status));
        }
        reply
            .messages
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
            .ok_or_else(|| format!("{method}: no response ({:?})", reply.notes))
    }

    /// One request's `result`; panics on anything else.
    pub(crate) async fn result(&mut self, method: &str, params: Value) -> Value {
        let m = self
            .request(method, params.clone())
            .await
            .unwrap_or_else(|e| panic!("{method} {params}: {e}"));
        assert!(m.get("error").is_none(), "{method} {params}: {m}");
        m["result"].clone()
    }

    /// One request that must fail; its JSON-RPC `error`.
    pub(crate) async fn error(&mut self, method: &str, params: Value) -> Value {
        let m = self
            .request(method, params.clone())
            .await
            .unwrap_or_else(|e| panic!("{method} {params}: {e}"));
        m.get("error")
            .unwrap_or_else(|| panic!("{method}: not an error: {m}"))
            .clone()
    }

    /// `tools/list`: the names, in order.
    pub(crate) async fn tool_names(&mut self) -> Vec<String> {
        let list = self.result("tools/list", json!({})).await;
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `tools/call`: the first text, whether it is an error, and the whole result.
    pub(crate) async fn call(&mut self, name: &str, arguments: Value) -> (String, bool, Value) {
        let r = self
            .result("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        let text = r["content"][0]["text"].as_str().unwrap_or("").to_owned();
        (text, r["isError"] == true, r)
    }

    /// One request with its own `budget`: the whole [`Exchange`] on its POST stream, read
    /// until the response arrives (or the stream ends, or the budget passes; a reply cut off
    /// by the budget says so in `notes`). `Err` only when no answer started within the budget.
    pub(crate) async fn exchange(
        &mut self,
        method: &str,
        params: Value,
        budget: Duration,
    ) -> Result<Exchange, String> {
        let id = json!(self.next_id);
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let headers = self.headers();
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + budget;
        let mut req = self
            .http
            .post(&self.url)
            .body(serde_json::to_vec(&body).unwrap());
        for (k, v) in &headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut resp = match tokio::time::timeout_at(deadline, req.send()).await {
            Err(_) => return Err(format!("{method}: no response headers within {budget:?}")),
            Ok(Err(e)) => return Err(format!("{method}: request failed: {e:?}")),
            Ok(Ok(r)) => r,
        };
        let mut ex = Exchange {
            id,
            status: resp.status().as_u16(),
            content_type: media_type(&resp),
            ..Exchange::default()
        };
        let sse = ex.content_type.as_deref() == Some("text/event-stream");
        let mut pending = Vec::new();
        while !(sse && ex.response().is_some()) {
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
                    "body is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(&pending[..pending.len().min(300)])
                )),
            }
        }
        ex.elapsed = started.elapsed();
        Ok(ex)
    }
}

/// One request sent by [`HttpClient::exchange`] and everything that came back on its POST
/// stream, each message with its arrival time: for tests that time what arrives (progress
/// heartbeats) or give a call a budget of its own.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// The request's id.
    pub(crate) id: Value,
    pub(crate) status: u16,
    /// The media type of the answer, lower-cased, without parameters.
    pub(crate) content_type: Option<String>,
    /// (seconds since the request was sent, message), in arrival order.
    pub(crate) messages: Vec<(f64, Value)>,
    /// Problems met while reading (a reply not finished within the budget, a bad body).
    pub(crate) notes: Vec<String>,
    /// From sending the request to its response (or the end of reading).
    pub(crate) elapsed: Duration,
}

impl Exchange {
    /// The response (result or error) to the request.
    pub(crate) fn response(&self) -> Option<&Value> {
        self.messages
            .iter()
            .map(|(_, m)| m)
            .find(|m| is_response(m) && m.get("id") == Some(&self.id))
    }

    /// The `notifications/progress` that arrived, with their arrival times.
    pub(crate) fn progress(&self) -> Vec<(f64, Value)> {
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
    parse_sse(&complete, true).0
}

/// The media type of `resp`, lower-cased, without parameters.
fn media_type(resp: &reqwest::Response) -> Option<String> {
    let ct = resp.headers().get(reqwest::header::CONTENT_TYPE)?;
    let ct = ct.to_str().ok()?;
    Some(
        ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}

/// `omniforge --data-dir DIR --uv UV stdio ARGS...`, initialized (2025-11-25), speaking raw
/// JSON-RPC lines; notifications that arrive are kept in order.
pub(crate) struct StdioClient {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Notifications that arrived while waiting for responses, in order.
    pub(crate) notifications: Vec<Value>,
    stderr: Captured,
    /// The InitializeResult.
    pub(crate) initialize: Value,
}

impl StdioClient {
    pub(crate) async fn start(dir: &Path, extra: &[&str]) -> StdioClient {
        let mut child = spawn_piped(omniforge_in(dir).arg("stdio").args(extra)).unwrap();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut mcp = StdioClient {
            child,
            stdin,
            lines,
            next_id: 1,
            notifications: Vec::new(),
            stderr,
            initialize: Value::Null,
        };
        let init = mcp
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "content-e2e", "version": "0"}}),
            )
            .await;
        mcp.initialize = init["result"].clone();
        mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        mcp
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next message, or `None` after `timeout`.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Option<Value> {
        match tokio::time::timeout(timeout, self.lines.next_line()).await {
            Ok(Ok(Some(line))) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}")),
            ),
            Ok(_) => panic!("server stdout closed; stderr:\n{}", self.stderr.tail(4000)),
            Err(_) => None,
        }
    }

    /// Sends a request and returns its whole response (`result` or `error`).
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.next(left).await else {
                panic!(
                    "no answer to {method} within 120 s; stderr:\n{}",
                    self.stderr.tail(4000)
                );
            };
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            if message.get("method").is_some() && message.get("id").is_none() {
                self.notifications.push(message);
            }
        }
    }

    /// The `result` of a request that must succeed.
    pub(crate) async fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone()).await;
        assert!(
            response.get("error").is_none(),
            "{method} {params} failed: {response}"
        );
        response["result"].clone()
    }

    /// The `error` of a request that must fail.
    pub(crate) async fn error(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone()).await;
        assert!(
            response.get("result").is_none(),
            "{method} {params} should fail: {response}"
        );
        response["error"].clone()
    }

    pub(crate) async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.result("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// Waits for a notification with `method` (and, if given, `params`); earlier ones count.
    pub(crate) async fn wait_for(
        &mut self,
        method: &str,
        params: Option<&Value>,
        timeout: Duration,
    ) -> bool {
        let matches =
            |m: &Value| m["method"] == json!(method) && params.is_none_or(|p| &m["params"] == p);
        if let Some(i) = self.notifications.iter().position(matches) {
            self.notifications.remove(i);
            return true;
        }
        let deadline = Instant::now() + timeout;
        while let Some(message) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            if matches(&message) {
                return true;
            }
            self.notifications.push(message);
        }
        false
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// The text items of a CallToolResult, joined with `\n` (the one text there usually is).
pub(crate) fn text_of(result: &Value) -> String {
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

/// One MCP exchange over HTTP with a bearer token: status, `WWW-Authenticate`, session id, and
/// the JSON-RPC messages of the answer.
pub(crate) struct BearerReply {
    pub(crate) status: u16,
    pub(crate) challenge: Option<String>,
    pub(crate) session: Option<String>,
    pub(crate) messages: Vec<Value>,
}

impl BearerReply {
    pub(crate) fn result(&self) -> &Value {
        self.messages
            .iter()
            .find_map(|m| m.get("result"))
            .unwrap_or_else(|| panic!("no result in {:?}", self.messages))
    }
}

/// POSTs one message asking for a plain JSON answer (no SSE), with a timeout long enough for
/// a tool creation's environment build.
pub(crate) async fn bearer_post(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
    body: Value,
) -> BearerReply {
    let mut request = http_client()
        .post(url)
        .timeout(Duration::from_secs(120))
        .header("Accept", "application/json")
        .json(&body);
    if let Some(session) = session {
        request = request
            .header("Mcp-Session-Id", session)
            .header("MCP-Protocol-Version", "2025-11-25");
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let reply = request.send().await.unwrap();
    let header = |name: &str| {
        reply
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (challenge, session) = (header("www-authenticate"), header("mcp-session-id"));
    let status = reply.status().as_u16();
    let text = reply.text().await.unwrap();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(items)) => items,
        Ok(one) => vec![one],
        Err(_) => Vec::new(),
    };
    BearerReply {
        status,
        challenge,
        session,
        messages,
    }
}

/// `initialize` + `notifications/initialized` with `token`; the session id.
pub(crate) async fn bearer_session(url: &str, token: &str) -> String {
    let reply = bearer_post(url, Some(token), None, initialize_request(1, "2025-11-25")).await;
    assert_eq!(reply.status, 200, "initialize: {:?}", reply.messages);
    let session = reply.session.expect("a session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let reply = bearer_post(url, Some(token), Some(&session), note).await;
    assert_eq!(reply.status, 202);
    session
}

/// A `tools/call` request message.
pub(crate) fn call_message(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// The value of `name="..."` in a `WWW-Authenticate` challenge.
pub(crate) fn param<'a>(challenge: &'a str, name: &str) -> Option<&'a str> {
    let start = challenge.find(&format!("{name}=\""))? + name.len() + 2;
    let len = challenge[start..].find('"')?;
    Some(&challenge[start..start + len])
}
