//! MCP over stdio (2025-11-25, Basic > Transports > stdio), behind a line filter.
//!
//! The filter sits between the real stdin/stdout and rmcp's newline-delimited transport and
//! fixes what rmcp 3.11 does not do on its own:
//! - an unparsable line is answered with -32700 (rmcp drops it silently);
//! - a notification (or a response) before the lifecycle starts is dropped, because rmcp
//!   stops serving when its first message is not a request;
//! - an unknown method is answered with -32601 at any time, also before `initialize`;
//! - a batch (JSON array) is answered as an array under a revision that allows batches
//!   (2025-03-26 and earlier), and with one -32600 error otherwise;
//! - `\r\n` line ends and blank lines are accepted; every message we write ends with a
//!   single `\n`;
//! - a line longer than the limit is discarded and answered with -32600, never buffered whole;
//! - a request rmcp would drop unanswered (nested past serde_json's depth limit when rmcp
//!   parses it again) gets -32700 with its id, and an unparsable line gets -32700 with the id
//!   recovered by scanning when there is one ([`unparsable`]). Every line refused here is
//!   answered unless it is a notification or a response.
//!
//! Only this module writes to stdout, and only whole JSON-RPC messages.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::mcp::handler::OmniForge;
use crate::mcp::state::Shared;
use crate::transport::jsonrpc::{self, Checked, code};
use crate::transport::unparsable;

/// The longest accepted input line, in bytes (16 MiB).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Prefix of the ids the filter gives batch members, so their answers can be regrouped. A
/// random per-connection part follows, so a client's own id can never be taken for one.
const BATCH_ID_PREFIX: &str = "omniforge-batch/";

/// Serves MCP on `input`/`output` until `input` ends or `shutdown` fires.
///
/// When `input` ends or `shutdown` fires, the filter stops reading, waits for in-flight tool
/// calls to finish and answer (the caller bounds that wait after a signal), then closes the
/// session.
///
/// # Errors
/// An I/O error on `input` or `output`.
pub(crate) async fn serve<R, W>(
    shared: Arc<Shared>,
    input: R,
    output: W,
    shutdown: CancellationToken,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_in) = tokio::io::duplex(1 << 16);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 16);
    let (out_tx, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let state = Arc::new(Mutex::new(FilterState::new()));
    let service_ct = CancellationToken::new();

    let service = {
        let handler = OmniForge::new(shared.clone());
        let ct = service_ct.clone();
        tokio::spawn(async move {
            match handler.serve_with_ct((rmcp_in, rmcp_out), ct).await {
                Ok(running) => {
                    let _ = running.waiting().await;
                }
                Err(error) => tracing::debug!(%error, "stdio session ended before it started"),
            }
        })
    };
    let pump = tokio::spawn(pump_rmcp_output(from_rmcp, out_tx.clone(), state.clone()));
    let writer = tokio::spawn(write_output(output, out_rx));

    let mut to_rmcp = to_rmcp;
    let read_result = tokio::select! {
        r = read_input(input, &mut to_rmcp, out_tx, state) => r,
        () = shutdown.cancelled() => Ok(()),
    };
    // Whether the input ended (the client has no more requests) or a signal came, the calls
    // already running are answered first; rmcp's input stays open until then, since its end
    // would cancel them. The caller bounds this wait after a signal.
    if !shared.calls.is_empty() {
        tracing::info!(
            calls = shared.calls.len(),
            "waiting for in-flight tool calls"
        );
    }
    shared.calls.close();
    shared.calls.wait().await;
    drop(to_rmcp);
    service_ct.cancel();
    let _ = service.await;
    let _ = pump.await;
    let write_result = writer.await.unwrap_or(Ok(()));
    read_result.and(write_result)
}

/// What the filter knows about the session.
#[derive(Default)]
struct FilterState {
    /// rmcp has selected a lifecycle; notifications may now be forwarded.
    started: bool,
    /// Ids (as JSON text) of requests forwarded before the start, other than ping/discover:
    /// a success answer to one of them means rmcp started a 2026-07-28 lifecycle.
    pre_start: HashSet<String>,
    /// The id of the last `initialize` request, to read the negotiated revision off its answer.
    initialize_id: Option<String>,
    /// The negotiated protocol revision.
    negotiated: Option<String>,
    next_batch: u64,
    batches: HashMap<u64, Batch>,
    /// `BATCH_ID_PREFIX` plus this connection's random part.
    batch_prefix: String,
}

impl FilterState {
    fn new() -> FilterState {
        FilterState {
            batch_prefix: format!("{BATCH_ID_PREFIX}{}/", uuid::Uuid::new_v4().simple()),
            ..FilterState::default()
        }
    }
}

struct Batch {
    responses: Vec<Value>,
    /// Answers still to come from rmcp.
    outstanding: usize,
    /// Internal id → the client's original id.
    original_ids: HashMap<String, Value>,
}

async fn read_input<R: AsyncRead + Unpin>(
    input: R,
    to_rmcp: &mut tokio::io::DuplexStream,
    out: mpsc::UnboundedSender<Vec<u8>>,
    state: Arc<Mutex<FilterState>>,
) -> io::Result<()> {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') && line.len() > MAX_LINE_BYTES {
            // Discard the rest of the over-long line without buffering it.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let n = (&mut reader)
                    .take(1 << 16)
                    .read_until(b'\n', &mut rest)
                    .await?;
                if n == 0 || rest.last() == Some(&b'\n') {
                    break;
                }
            }
            let message = format!("Invalid Request: message longer than {MAX_LINE_BYTES} bytes");
            send(
                &out,
                &jsonrpc::error_response(None, code::INVALID_REQUEST, message),
            );
            continue;
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_slice(text) {
            Ok(v) => v,
            Err(e) => {
                let id = unparsable::recover_id(text);
                send(
                    &out,
                    &jsonrpc::error_response(
                        id.as_ref(),
                        code::PARSE_ERROR,
                        format!("Parse error: {e}"),
                    ),
                );
                continue;
            }
        };
        let forward = match value {
            Value::Array(items) => filter_batch(items, &out, &state),
            single => filter_one(single, &out, &state).into_iter().collect(),
        };
        for message in forward {
            let mut bytes = serde_json::to_vec(&message).map_err(io::Error::other)?;
            bytes.push(b'\n');
            to_rmcp.write_all(&bytes).await?;
        }
    }
}

/// Checks one message; returns it if it should go to rmcp.
fn filter_one(
    value: Value,
    out: &mpsc::UnboundedSender<Vec<u8>>,
    state: &Mutex<FilterState>,
) -> Option<Value> {
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    match jsonrpc::check_message(value, None) {
        Checked::Request {
            id,
            method,
            message,
        } => {
            let key = id.to_string();
            if let Some(reason) = unparsable::rmcp_drops(&message) {
                send(out, &parse_error(&id, &reason));
                return None;
            }
            if method == "initialize" && st.initialize_id.is_some() {
                // A second handshake would replace the negotiated session state under rmcp.
                send(
                    out,
                    &jsonrpc::error_response(
                        Some(&id),
                        code::INVALID_REQUEST,
                        "Invalid Request: this connection is already initialized",
                    ),
                );
                return None;
            }
            if method == "initialize" {
                st.started = true;
                st.initialize_id = Some(key);
            } else if !st.started && method != "ping" && method != "server/discover" {
                st.pre_start.insert(key);
            }
            Some(message)
        }
        Checked::Notification { message } if st.started => Some(message),
        Checked::Notification { .. } => {
            tracing::debug!("dropped a notification that arrived before initialize");
            None
        }
        Checked::Drop { reason } => {
            tracing::debug!(%reason, "dropped a message that cannot be answered");
            None
        }
        Checked::Reject { response, .. } => {
            send(out, &response);
            None
        }
    }
}

/// The -32700 answer to a request rmcp could not parse.
fn parse_error(id: &Value, reason: &str) -> Value {
    jsonrpc::error_response(
        Some(id),
        code::PARSE_ERROR,
        format!("Parse error: {reason}"),
    )
}

/// Checks a batch; answers it at once or registers it for regrouping.
fn filter_batch(
    items: Vec<Value>,
    out: &mpsc::UnboundedSender<Vec<u8>>,
    state: &Mutex<FilterState>,
) -> Vec<Value> {
    if items.is_empty() {
        send(
            out,
            &jsonrpc::error_response(None, code::INVALID_REQUEST, "Invalid Request: empty batch"),
        );
        return Vec::new();
    }
    let negotiated = state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .negotiated
        .clone();
    let Some(version) = negotiated.filter(|v| jsonrpc::allows_batches(v)) else {
        let message = "Invalid Request: JSON-RPC batches are not supported in this session \
                       (protocol revision 2025-06-18 and later allow one message per line)";
        send(
            out,
            &jsonrpc::error_response(None, code::INVALID_REQUEST, message),
        );
        return Vec::new();
    };
    tracing::debug!(%version, size = items.len(), "processing a batch");
    let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
    let batch_no = st.next_batch;
    st.next_batch += 1;
    let mut batch = Batch {
        responses: Vec::new(),
        outstanding: 0,
        original_ids: HashMap::new(),
    };
    let mut forward = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        match jsonrpc::check_message(item, None) {
            Checked::Request {
                id,
                method,
                mut message,
            } => {
                if method == "initialize" {
                    let text = "Invalid Request: initialize must not be part of a batch";
                    batch.responses.push(jsonrpc::error_response(
                        Some(&id),
                        code::INVALID_REQUEST,
                        text,
                    ));
                    continue;
                }
                if let Some(reason) = unparsable::rmcp_drops(&message) {
                    batch.responses.push(parse_error(&id, &reason));
                    continue;
                }
                let internal = format!("{}{batch_no}/{i}", st.batch_prefix);
                message["id"] = Value::String(internal.clone());
                batch.original_ids.insert(internal, id);
                batch.outstanding += 1;
                forward.push(message);
            }
            Checked::Notification { message } => forward.push(message),
            Checked::Drop { reason } => tracing::debug!(%reason, "dropped a batch member"),
            Checked::Reject { response, .. } => batch.responses.push(response),
        }
    }
    if batch.outstanding == 0 {
        if !batch.responses.is_empty() {
            send(out, &Value::Array(batch.responses));
        }
    } else {
        st.batches.insert(batch_no, batch);
    }
    forward
}

/// Reads rmcp's output lines, regroups batch answers, notes the lifecycle, and passes
/// everything on to the writer.
async fn pump_rmcp_output(
    from_rmcp: tokio::io::DuplexStream,
    out: mpsc::UnboundedSender<Vec<u8>>,
    state: Arc<Mutex<FilterState>>,
) {
    let mut lines = BufReader::new(from_rmcp).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(mut value) = serde_json::from_str::<Value>(&line) else {
            tracing::error!("rmcp wrote a line that is not JSON; not forwarded");
            continue;
        };
        let is_response = value.get("method").is_none();
        if is_response && let Some(id) = value.get("id").cloned() {
            let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(internal) = id
                .as_str()
                .filter(|s| s.starts_with(st.batch_prefix.as_str()))
            {
                match regroup(&mut st, internal, &mut value) {
                    Regroup::Complete(done) => {
                        send(&out, &done);
                        continue;
                    }
                    Regroup::Pending => continue,
                    Regroup::NotABatchMember => {}
                }
            }
            let key = id.to_string();
            if st.initialize_id.as_deref() == Some(key.as_str()) {
                st.negotiated = value
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            if st.pre_start.remove(&key) && value.get("result").is_some() {
                st.started = true;
            }
        }
        if out.send(line.into_bytes()).is_err() {
            return;
        }
    }
}

/// What became of an answer whose id looks like a batch member's.
enum Regroup {
    /// The last member arrived: the whole batch answer.
    Complete(Value),
    /// Filed; more members to come.
    Pending,
    /// No batch is waiting for this id: forward the answer as it is.
    NotABatchMember,
}

/// Files one batch member's answer.
fn regroup(st: &mut FilterState, internal: &str, value: &mut Value) -> Regroup {
    let batch_no = internal
        .strip_prefix(st.batch_prefix.as_str())
        .and_then(|rest| rest.split('/').next())
        .and_then(|n| n.parse::<u64>().ok());
    let Some(batch) = batch_no.and_then(|n| st.batches.get_mut(&n)) else {
        return Regroup::NotABatchMember;
    };
    let Some(original) = batch.original_ids.remove(internal) else {
        return Regroup::NotABatchMember;
    };
    value["id"] = original;
    batch.responses.push(value.take());
    batch.outstanding -= 1;
    if batch.outstanding > 0 {
        return Regroup::Pending;
    }
    match batch_no.and_then(|n| st.batches.remove(&n)) {
        Some(b) => Regroup::Complete(Value::Array(b.responses)),
        None => Regroup::Pending,
    }
}

fn send(out: &mpsc::UnboundedSender<Vec<u8>>, message: &Value) {
    if let Ok(bytes) = serde_json::to_vec(message) {
        let _ = out.send(bytes);
    }
}

/// Writes each message followed by exactly one `\n`, flushing after each.
async fn write_output<W: AsyncWrite + Unpin>(
    mut output: W,
    mut messages: mpsc::UnboundedReceiver<Vec<u8>>,
) -> io::Result<()> {
    while let Some(mut bytes) = messages.recv().await {
        bytes.push(b'\n');
        output.write_all(&bytes).await?;
        output.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::entry::ToolSource;
    use crate::catalog::publish::Catalog;
    use crate::catalog::schema_profile::SchemaProfile;
    use crate::peers::Peers;
    use crate::tools::builtin::instructions::{self, SERVER_INSTRUCTIONS};
    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, DuplexStream};

    struct Conn {
        input: DuplexStream,
        output: tokio::io::Lines<BufReader<DuplexStream>>,
    }

    impl Conn {
        fn start() -> Conn {
            let catalog = Arc::new(Catalog::new(SchemaProfile::AsAuthored));
            catalog.replace(ToolSource::Builtin, vec![instructions::entry()]);
            let shared = Arc::new(Shared {
                catalog,
                peers: Arc::new(Peers::default()),
                page_size: 1000,
                calls: tokio_util::task::TaskTracker::new(),
                instructions: SERVER_INSTRUCTIONS,
                metrics: Arc::new(crate::telemetry::metrics::Metrics::new(1, true)),
                upstreams: Vec::new(),
                stored: None,
            });
            let (input, server_in) = tokio::io::duplex(1 << 16);
            let (server_out, output) = tokio::io::duplex(1 << 16);
            tokio::spawn(serve(
                shared,
                server_in,
                server_out,
                CancellationToken::new(),
            ));
            Conn {
                input,
                output: BufReader::new(output).lines(),
            }
        }
        async fn send(&mut self, text: &str) {
            self.input.write_all(text.as_bytes()).await.unwrap();
            self.input.write_all(b"\n").await.unwrap();
        }
        async fn recv(&mut self) -> Value {
            let line =
                tokio::time::timeout(std::time::Duration::from_secs(5), self.output.next_line())
                    .await
                    .expect("no answer within 5 s")
                    .unwrap()
                    .expect("output closed");
            serde_json::from_str(&line).unwrap()
        }
        async fn initialize(&mut self, version: &str) -> Value {
            self.send(&json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name":"t","version":"0"}}}).to_string()).await;
            let answer = self.recv().await;
            self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .await;
            answer
        }
    }

    #[tokio::test]
    async fn parse_error_then_still_serving() {
        let mut c = Conn::start();
        c.send("{not json").await;
        let err = c.recv().await;
        assert_eq!(err["error"]["code"], json!(code::PARSE_ERROR));
        assert_eq!(err["id"], Value::Null);
        c.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await;
        assert_eq!(c.recv().await, json!({"jsonrpc":"2.0","id":1,"result":{}}));
    }

    #[tokio::test]
    async fn first_line_notification_does_not_stop_the_server() {
        let mut c = Conn::start();
        c.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        let init = c.initialize("2025-06-18").await;
        assert_eq!(init["result"]["protocolVersion"], json!("2025-06-18"));
    }

    #[tokio::test]
    async fn batches_follow_the_negotiated_revision() {
        let mut c = Conn::start();
        c.initialize("2025-03-26").await;
        c.send(r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#).await;
        let answer = c.recv().await;
        let mut ids: Vec<String> = answer
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].to_string())
            .collect();
        ids.sort();
        assert_eq!(ids, ["\"b\"", "1"]);

        let mut c = Conn::start();
        c.initialize("2025-06-18").await;
        c.send(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
            .await;
        let answer = c.recv().await;
        assert_eq!(answer["error"]["code"], json!(code::INVALID_REQUEST));
        assert_eq!(answer["id"], Value::Null);
    }

    #[tokio::test]
    async fn a_client_id_that_looks_internal_is_answered() {
        let mut c = Conn::start();
        c.initialize("2025-03-26").await;
        c.send(r#"{"jsonrpc":"2.0","id":"omniforge-batch/0/0","method":"ping"}"#)
            .await;
        assert_eq!(c.recv().await["id"], json!("omniforge-batch/0/0"));
    }

    #[tokio::test]
    async fn a_second_initialize_is_refused_and_the_session_survives() {
        let mut c = Conn::start();
        c.initialize("2025-06-18").await;
        c.send(r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#).await;
        assert_eq!(
            c.recv().await["error"]["code"],
            json!(code::INVALID_REQUEST)
        );
        c.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await;
        assert_eq!(c.recv().await, json!({"jsonrpc":"2.0","id":6,"result":{}}));
    }

    #[tokio::test]
    async fn arguments_must_be_an_object() {
        let mut c = Conn::start();
        c.initialize("2025-11-25").await;
        for args in ["null", "[]", "3"] {
            c.send(&format!(
                r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"omniforge_instructions","arguments":{args}}}}}"#
            ))
            .await;
            let answer = c.recv().await;
            assert_eq!(answer["result"]["isError"], json!(true), "{args}");
            assert_eq!(
                answer["result"]["content"][0]["text"],
                json!("arguments must be a JSON object")
            );
        }
    }
}
