//! The side channel between a running script and its caller.
//!
//! A Unix socketpair per run: the script's end is an inherited descriptor whose number is in
//! `OMNIFORGE_FD`. Both directions carry newline-delimited JSON-RPC 2.0. The script sends
//! notifications (`progress`, `log`, `result`, or any other method) and requests (any method
//! with an `id`, e.g. `sample`, `elicit`, `roots`); the caller answers requests through the
//! [`ScriptRequest`] it receives. A request the caller drops unanswered gets a JSON-RPC error,
//! so the script never waits forever (it also has its own timeout).
//!
//! These are the script protocol's types, not MCP's: the server maps them to MCP.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// JSON-RPC error code sent when the caller dropped a request without answering it.
pub const REQUEST_DROPPED: i64 = -32603;
/// JSON-RPC error code sent when the run has no message receiver at all.
pub const METHOD_NOT_FOUND: i64 = -32601;

/// One message from a running script.
#[derive(Debug)]
#[non_exhaustive]
pub enum ScriptMessage {
    /// `progress` notification. The helper drops non-increasing `done` values.
    Progress(Progress),
    /// `log` notification.
    Log(LogMessage),
    /// `result` notification: the script's structured result. The last one also lands in
    /// [`RunOutput::result`](crate::RunOutput::result).
    Result(ScriptResult),
    /// Any other notification (a method without an `id`).
    Notification {
        /// The method name.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A request (a method with an `id`); answer it with [`ScriptRequest::respond`].
    Request(ScriptRequest),
}

/// A `progress` notification from the script.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Work done so far (any unit the script chooses).
    pub done: f64,
    /// Total work, when the script knows it.
    pub total: Option<f64>,
    /// A short human-readable message.
    pub message: Option<String>,
}

/// A `log` notification from the script.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMessage {
    /// MCP log level as the script sent it (`debug`, `info`, `warning`, `error`, …).
    pub level: String,
    /// Any JSON value.
    pub data: Value,
}

/// A `result` notification: what the script wants returned besides its stdout.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptResult {
    /// Content for the caller (free-form JSON; the server decides how to render it).
    pub content: Option<Value>,
    /// Structured result (MCP `structuredContent`).
    pub structured: Option<Value>,
    /// The script reports a tool-level failure (MCP `isError`) with this content.
    pub is_error: bool,
}

/// A JSON-RPC error sent back to the script.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code.
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Optional extra data.
    pub data: Option<Value>,
}

/// A request from the script, waiting for an answer.
///
/// Dropping it unanswered sends the script a JSON-RPC error ([`REQUEST_DROPPED`]).
#[derive(Debug)]
pub struct ScriptRequest {
    method: String,
    params: Value,
    responder: oneshot::Sender<Result<Value, RpcError>>,
}

impl ScriptRequest {
    /// The requested method, e.g. `sample`.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The request params (`null` when absent).
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// Sends the answer to the script. Does nothing if the run has already ended.
    pub fn respond(self, answer: Result<Value, RpcError>) {
        // The receiver is gone only when the run ended; nothing to tell anyone then.
        let _ = self.responder.send(answer);
    }
}

/// Limits of the channel for one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChannelLimits {
    /// Longest accepted message line; longer lines are skipped (and requests among them
    /// cannot be answered, since their id is unread).
    pub(crate) max_message_bytes: usize,
}

/// Serves the parent's end of the channel until the script side closes it or `stop` fires.
/// Returns the last `result` the script sent.
pub(crate) async fn serve(
    sock: UnixStream,
    messages: Option<mpsc::Sender<ScriptMessage>>,
    limits: ChannelLimits,
    stop: CancellationToken,
) -> Option<ScriptResult> {
    let (rd, mut wr) = sock.into_split();
    let mut reader = BufReader::new(rd);
    // Responses to the script go through one writer task, so answers that arrive
    // concurrently never interleave on the socket.
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = msg.to_string().into_bytes();
            line.push(b'\n');
            if wr.write_all(&line).await.is_err() {
                break;
            }
        }
    });
    // One task per pending request, each waiting for the caller's answer. Dropping the set
    // at the end of the run abandons the ones still waiting.
    let mut pending = JoinSet::new();
    let mut last_result = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            r = read_line_limited(&mut reader, &mut line, limits.max_message_bytes) => r,
            () = stop.cancelled() => break,
        };
        match read {
            Ok(Line::Eof) | Err(_) => break,
            Ok(Line::TooLong) => {
                tracing::debug!("side channel: message over the size limit skipped");
                continue;
            }
            Ok(Line::Complete) => {}
        }
        let (method, params, id) = match classify(&line) {
            Incoming::Skip => continue,
            Incoming::Unparsable => {
                let _ = out_tx.send(error_response(&Value::Null, -32700, "parse error"));
                continue;
            }
            Incoming::Message { method, params, id } => (method, params, id),
        };
        match id {
            Some(id) => {
                let (tx, rx) = oneshot::channel();
                let request = ScriptRequest {
                    method: method.clone(),
                    params,
                    responder: tx,
                };
                let delivered = match &messages {
                    Some(sender) => tokio::select! {
                        r = sender.send(ScriptMessage::Request(request)) => r.is_ok(),
                        () = stop.cancelled() => break,
                    },
                    None => false,
                };
                if !delivered {
                    let _ = out_tx.send(error_response(
                        &id,
                        METHOD_NOT_FOUND,
                        &format!("no handler for {method:?}"),
                    ));
                    continue;
                }
                let out = out_tx.clone();
                pending.spawn(async move {
                    let response = match rx.await {
                        Ok(Ok(result)) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Ok(Err(e)) => {
                            let mut err = json!({"code": e.code, "message": e.message});
                            if let Some(data) = e.data {
                                err["data"] = data;
                            }
                            json!({"jsonrpc": "2.0", "id": id, "error": err})
                        }
                        Err(_) => error_response(
                            &id,
                            REQUEST_DROPPED,
                            &format!("request {method:?} was not answered"),
                        ),
                    };
                    let _ = out.send(response);
                });
            }
            _ => {
                let Some(message) = notification(method, params) else {
                    continue;
                };
                if let ScriptMessage::Result(r) = &message {
                    last_result = Some(r.clone());
                }
                let Some(sender) = &messages else { continue };
                match message {
                    // Progress is lossy by nature: never let a slow receiver stall the
                    // script for it.
                    m @ ScriptMessage::Progress(_) => {
                        let _ = sender.try_send(m);
                    }
                    m => {
                        tokio::select! {
                            _ = sender.send(m) => {}
                            () = stop.cancelled() => break,
                        }
                    }
                }
            }
        }
    }
    drop(pending);
    writer.abort();
    last_result
}

/// One line from the script, read.
#[derive(Debug)]
enum Incoming {
    /// Blank, or a JSON value that is not a message to act on (a response, no method).
    Skip,
    /// Not JSON: the script gets a parse error.
    Unparsable,
    /// A request (with a non-null `id`) or a notification.
    Message {
        method: String,
        params: Value,
        id: Option<Value>,
    },
}

/// Reads one line (without its newline) the script sent. Total: any bytes give an answer.
fn classify(line: &[u8]) -> Incoming {
    let text = line.trim_ascii();
    if text.is_empty() {
        return Incoming::Skip;
    }
    let msg: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => {
            tracing::debug!(error = %e, "side channel: unparsable message");
            return Incoming::Unparsable;
        }
    };
    let Some(method) = msg.get("method").and_then(Value::as_str).map(str::to_owned) else {
        // Responses from the script are not expected: the server sends it no requests.
        return Incoming::Skip;
    };
    Incoming::Message {
        method,
        params: msg.get("params").cloned().unwrap_or(Value::Null),
        id: msg.get("id").filter(|id| !id.is_null()).cloned(),
    }
}

fn notification(method: String, params: Value) -> Option<ScriptMessage> {
    Some(match method.as_str() {
        "progress" => ScriptMessage::Progress(Progress {
            done: params.get("done").and_then(Value::as_f64)?,
            total: params.get("total").and_then(Value::as_f64),
            message: params
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }),
        "log" => ScriptMessage::Log(LogMessage {
            level: params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info")
                .to_owned(),
            data: params.get("data").cloned().unwrap_or(Value::Null),
        }),
        "result" => ScriptMessage::Result(ScriptResult {
            content: params.get("content").filter(|v| !v.is_null()).cloned(),
            structured: params.get("structured").filter(|v| !v.is_null()).cloned(),
            is_error: params
                .get("is_error")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }),
        _ => ScriptMessage::Notification { method, params },
    })
}

fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (without the newline), keeping at most `max`
/// bytes; a longer line is consumed to its end and reported as [`Line::TooLong`].
async fn read_line_limited<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            // The stream ended: a last line without a newline still counts (too long or not).
            return Ok(if too_long {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(if done { take + 1 } else { take });
        if done {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let data: &[u8] = b"short\nthis line is too long\nok\npartial";
        let mut reader = BufReader::with_capacity(4, data);
        let mut buf = Vec::new();
        let mut seen = Vec::new();
        loop {
            buf.clear();
            match read_line_limited(&mut reader, &mut buf, 8).await.unwrap() {
                Line::Eof => break,
                Line::TooLong => seen.push("<too long>".to_owned()),
                Line::Complete => seen.push(String::from_utf8(buf.clone()).unwrap()),
            }
        }
        assert_eq!(seen, ["short", "<too long>", "ok", "partial"]);
    }

    use proptest::prelude::*;

    /// Any JSON value, nested a few levels.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("method".to_owned()),
                        Just("params".to_owned()),
                        Just("id".to_owned()),
                        Just("done".to_owned()),
                        Just("total".to_owned()),
                        Just("level".to_owned()),
                        Just("content".to_owned()),
                        Just("structured".to_owned()),
                        Just("is_error".to_owned()),
                        ".{0,6}",
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever bytes a script writes as a line, reading it never panics.
        #[test]
        fn any_line_is_read_without_panicking(line in prop::collection::vec(any::<u8>(), 0..600)) {
            let _ = classify(&line);
        }

        /// Message-shaped JSON with any method and params maps to a message or is skipped,
        /// never a panic.
        #[test]
        fn any_message_maps_without_panicking(
            method in prop_oneof![
                Just("progress".to_owned()),
                Just("log".to_owned()),
                Just("result".to_owned()),
                Just("sample".to_owned()),
                ".{0,8}",
            ],
            params in json(),
            id in json(),
        ) {
            let line = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id}).to_string();
            match classify(line.as_bytes()) {
                Incoming::Message { method: m, params, id: i } => {
                    prop_assert_eq!(&m, &method);
                    prop_assert_eq!(i.is_some(), !id.is_null());
                    let _ = notification(m, params);
                }
                other => prop_assert!(false, "{other:?}"),
            }
        }

        /// The line reader splits any stream into the lines it holds, whatever the buffer
        /// size and the limit; no kept line is longer than the limit.
        #[test]
        fn the_line_reader_takes_any_stream(
            data in prop::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..2000),
            capacity in 1usize..64,
            max in 1usize..64,
        ) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let lines = rt.block_on(async {
                let mut reader = BufReader::with_capacity(capacity, data.as_slice());
                let mut buf = Vec::new();
                let mut lines = Vec::new();
                loop {
                    buf.clear();
                    match read_line_limited(&mut reader, &mut buf, max).await.unwrap() {
                        Line::Eof => break,
                        Line::TooLong => lines.push(None),
                        Line::Complete => lines.push(Some(buf.clone())),
                    }
                }
                lines
            });
            let expected: Vec<&[u8]> = {
                let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
                if data.last() == Some(&b'\n') || data.is_empty() {
                    parts.pop();
                }
                parts
            };
            prop_assert_eq!(lines.len(), expected.len());
            for (got, want) in lines.iter().zip(&expected) {
                match got {
                    Some(line) => prop_assert_eq!(line.as_slice(), *want),
                    None => prop_assert!(want.len() > max),
                }
            }
        }

        /// The whole channel, fed any bytes by a script, ends when the script closes its end
        /// and never panics.
        #[test]
        fn the_channel_survives_any_bytes(data in prop::collection::vec(any::<u8>(), 0..4000)) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let (ours, theirs) = UnixStream::pair().unwrap();
                let (tx, mut rx) = mpsc::channel(4);
                let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
                let serving = tokio::spawn(serve(
                    ours,
                    Some(tx),
                    ChannelLimits { max_message_bytes: 256 },
                    CancellationToken::new(),
                ));
                let (_rd, mut wr) = theirs.into_split();
                let _ = wr.write_all(&data).await;
                drop(wr);
                drop(_rd);
                let _ = serving.await.unwrap();
                drain.abort();
            });
        }
    }
}
