//! Server-sent events: parsing an SSE body, and long-lived streams (a session's GET stream, a
//! `subscriptions/listen` POST) read in the background, to wait for notifications.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::http::REPLY_TIMEOUT;

/// A long-lived SSE response (a GET stream, or a `subscriptions/listen` POST) read in the
/// background; its JSON-RPC messages arrive on a channel.
pub(crate) struct EventStream {
    rx: mpsc::UnboundedReceiver<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sends a request whose answer is an SSE stream to keep open. Returns the status and
/// headers, and the stream when the answer is `text/event-stream` (else the body text).
pub(crate) async fn open_stream(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(String, String)],
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Result<EventStream, String>) {
    let mut req = client.request(method, url);
    for (name, value) in headers {
        req = req.header(name.as_str(), value.as_str());
    }
    if let Some(body) = body {
        req = req.body(body.to_string());
    }
    let mut resp = tokio::time::timeout(REPLY_TIMEOUT, req.send())
        .await
        .expect("no response headers in time")
        .expect("request failed");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let is_sse = headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        let text = tokio::time::timeout(REPLY_TIMEOUT, resp.text())
            .await
            .map(|r| r.unwrap_or_default())
            .unwrap_or_default();
        return (status, headers, Err(text));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut body = Vec::new();
        let mut sent = 0;
        while let Ok(Some(chunk)) = resp.chunk().await {
            body.extend_from_slice(&chunk);
            let (messages, _) = parse_sse(&body, false);
            for m in messages.into_iter().skip(sent) {
                sent += 1;
                if tx.send(m).is_err() {
                    return;
                }
            }
        }
    });
    (status, headers, Ok(EventStream { rx, task }))
}

impl EventStream {
    /// Reads messages until one satisfies `want`; returns it and those read before it.
    pub(crate) async fn wait_for(
        &mut self,
        timeout: Duration,
        want: impl Fn(&Value) -> bool,
    ) -> Result<(Value, Vec<Value>), String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut before = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Err(_) => {
                    return Err(format!(
                        "nothing matching within {timeout:?}; got {before:?}"
                    ));
                }
                Ok(None) => return Err(format!("the stream ended; got {before:?}")),
                Ok(Some(m)) if want(&m) => return Ok((m, before)),
                Ok(Some(m)) => before.push(m),
            }
        }
    }

    /// Messages that have already arrived, without waiting.
    pub(crate) fn drain_now(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(m) = self.rx.try_recv() {
            out.push(m);
        }
        out
    }
}

/// Reads `rx` (a [`sse_messages`] channel) until a message satisfies `want`, for at most
/// `within`: that message, or what arrived instead.
pub(crate) async fn wait_message(
    rx: &mut mpsc::UnboundedReceiver<Value>,
    within: Duration,
    want: impl Fn(&Value) -> bool,
) -> Result<Value, String> {
    let deadline = tokio::time::Instant::now() + within;
    let mut before = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) => {
                return Err(format!(
                    "nothing matching within {within:?}; got {before:?}"
                ));
            }
            Ok(None) => return Err(format!("the stream ended; got {before:?}")),
            Ok(Some(m)) if want(&m) => return Ok(m),
            Ok(Some(m)) => before.push(m),
        }
    }
}

pub(crate) fn is_list_changed(m: &Value) -> bool {
    m.get("method") == Some(&json!("notifications/tools/list_changed"))
}

/// Sends `req` and forwards the JSON messages of its SSE answer as they arrive.
pub(crate) fn sse_messages(req: reqwest::RequestBuilder) -> mpsc::UnboundedReceiver<Value> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let Ok(resp) = req.send().await else {
            return;
        };
        forward_sse(resp, tx).await;
    });
    rx
}

/// [`sse_messages`], returning only once the answer's headers are in: the stream is open
/// (panics unless it is a 200 event stream, within [`REPLY_TIMEOUT`]).
pub(crate) async fn sse_messages_open(
    req: reqwest::RequestBuilder,
) -> mpsc::UnboundedReceiver<Value> {
    let resp = tokio::time::timeout(REPLY_TIMEOUT, req.send())
        .await
        .expect("no stream headers in time")
        .expect("the stream request failed");
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    assert!(
        resp.status() == 200 && is_sse,
        "not an open event stream: HTTP {} {:?}",
        resp.status(),
        resp.headers()
    );
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(forward_sse(resp, tx));
    rx
}

/// Forwards the JSON `data:` of each SSE event of `resp` until it ends or `tx` closes.
async fn forward_sse(mut resp: reqwest::Response, tx: mpsc::UnboundedSender<Value>) {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            for line in String::from_utf8_lossy(&event).lines() {
                if let Some(data) = line.strip_prefix("data:")
                    && let Ok(v) = serde_json::from_str::<Value>(data.trim())
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        }
    }
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
