//! Streamable HTTP, by hand: one exchange ([`http_send`]) read as JSON or SSE, the standard
//! headers, and the handshakes ([`init_http`], [`init_stdio`]) for tests that speak raw
//! JSON-RPC. [`super::client`] builds the MCP clients on these.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::server::{HttpServer, StdioServer};
use super::sse::parse_sse;

/// How long we wait for the answer to one request before calling it lost.
pub(crate) const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// A built-in tool that takes no arguments: what `<any_tool>` stands for.
pub(crate) const ANY_TOOL: &str = "omniforge_instructions";

/// An HTTP client for loopback tests: no proxy from the environment, no TLS.
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// [`http_client`] that follows no redirect: a browser's sign-in is stepped through by hand,
/// each hop checked.
pub(crate) fn browser_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
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

/// Headers of a GET that opens the session's SSE stream.
pub(crate) fn get_headers(session: &str, version: &str) -> Vec<(String, String)> {
    vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), version.to_owned()),
    ]
}
