//! The call loop: one script run, with what it sends the caller while it runs. Progress and
//! log messages are forwarded (secrets scrubbed), a heartbeat keeps silent calls alive, and the
//! script's requests to the client are answered concurrently in this task (so rmcp associates
//! them with the call). A stream the script closed holds the answer until the client resumed.

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve.
#![allow(deprecated)]
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use omniforge_script::{RunError, RunOutput, RunSpec, ScriptMessage};
use rmcp::model::LoggingLevel;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::context::client::ClientLink;
use crate::context::progress::Progress;
use crate::context::request::LogFilter;
use crate::error::CallError;
use crate::runs::call_builtin::{self, BuiltinAccess};
use crate::runs::client_requests;
use crate::runs::input_required::{Answer, Replay};
use crate::runs::protocol_error;
use crate::runs::questions::{self, code};
use crate::runs::redact::{scrub, scrub_value};
use crate::script_host::host::{ScriptHost, WarmCall};

/// Most requests one run may have waiting for the client at once: a script cannot flood the
/// client (or the user, for elicitation) with requests.
const MAX_PENDING_ASKS: usize = 8;

/// How long a script may be silent before the server sends a heartbeat progress notification.
/// Clients time out silent requests (often after 60 s).
const HEARTBEAT: Duration = Duration::from_secs(15);

/// Who the run reports to.
pub(crate) struct Reporting<'a> {
    /// Progress for the request.
    pub(crate) progress: &'a Progress,
    /// The client, for log messages and the script's requests.
    pub(crate) client: &'a ClientLink,
    /// Which script log messages are sent.
    pub(crate) log_level: LogFilter,
    /// Exact values scrubbed from everything sent.
    pub(crate) secrets: &'a [String],
    /// Fires when the request is cancelled.
    pub(crate) ct: &'a CancellationToken,
    /// Set when the script ended its call with `protocol_error`: the call's answer.
    pub(crate) ended_with: &'a std::sync::Mutex<Option<CallError>>,
    /// The built-ins the script may call (`None`: none, e.g. `omniforge_test_tool`).
    pub(crate) builtins: Option<&'a BuiltinAccess<'a>>,
    /// Under 2026-07-28: the script's questions are answered from the round's input, and the
    /// first unanswered one ends the call `input_required`. `None`: asked live. Once the
    /// script started its task (`start_task`), they go through the task instead.
    pub(crate) replay: Option<&'a Replay<'a>>,
}

/// Runs `spec` to its end (warm when `warm` names a stored call whose template is ready),
/// forwarding what the script sends.
///
/// # Errors
/// [`RunError::Busy`] when every slot and queue place is taken, or the sandbox failed.
pub(crate) async fn run(
    host: &ScriptHost,
    mut spec: RunSpec,
    warm: Option<&WarmCall<'_>>,
    to: Reporting<'_>,
) -> Result<RunOutput, RunError> {
    let (tx, mut rx) = mpsc::channel::<ScriptMessage>(64);
    spec.messages = Some(tx);
    // `None`: no log message is sent.
    let threshold = match to.log_level {
        LogFilter::AtLeast(level) => Some(level.map_or(1, level_rank)),
        LogFilter::Off => None,
    };
    // `stop` ends the run early: a question under replay that ends the call.
    let stop = to.ct.child_token();
    let run = host.run(spec, warm, stop.clone());
    // Question requests the call ended on: held unanswered until the script is gone, so it
    // cannot go on (and do things) after the call decided its answer.
    let mut held = Vec::new();
    tokio::pin!(run);
    let mut heartbeat =
        tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
    // `ended` cancels the client requests still waiting when the run ends.
    let ended = CancellationToken::new();
    let mut asks = futures::stream::FuturesUnordered::<BoxFuture<'_, ()>>::new();
    let output = loop {
        tokio::select! {
            // What the script sent comes first: nothing it said before it ended is lost to
            // the run finishing in the same instant.
            biased;
            Some(message) = rx.recv() => match message {
                ScriptMessage::Progress(p) => {
                    heartbeat.reset();
                    send_progress(p, &to).await;
                }
                ScriptMessage::Log(log) => forward_log(log, threshold, &to).await,
                ScriptMessage::Request(request) if request.method() == "protocol_error" => {
                    let error = protocol_error::from_script(request.params(), to.secrets);
                    *to.ended_with.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                    request.respond(Ok(Value::Object(serde_json::Map::new())));
                }
                ScriptMessage::Request(request) if asks.len() >= MAX_PENDING_ASKS => {
                    request.respond(Err(omniforge_script::RpcError {
                        code: code::INVALID_REQUEST,
                        message: format!(
                            "too many requests to the client at once (at most {MAX_PENDING_ASKS}); \
                             wait for an answer first"
                        ),
                        data: None,
                    }));
                }
                ScriptMessage::Request(request)
                    if to.replay.is_some()
                        && questions::is_question(request.method())
                        && !to.client.task_started() =>
                {
                    // Secret values never reach the client, in a question neither.
                    let params = scrub_value(request.params().clone(), to.secrets);
                    let answer = match questions::parse(request.method(), &params) {
                        Err(e) => Answer::Reply(Err(e)),
                        Ok(ask) => to.replay.map_or(Answer::Reply(Ok(Value::Null)), |r| r.answer(&ask)),
                    };
                    match answer {
                        Answer::Reply(reply) => request.respond(reply),
                        Answer::Stop(end) => {
                            *to.ended_with.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
                            held.push(request);
                            stop.cancel();
                        }
                    }
                }
                ScriptMessage::Request(_) if stop.is_cancelled() => {}
                ScriptMessage::Request(request) if request.method() == "call_builtin" => {
                    asks.push(Box::pin(call_builtin::answer(request, to.builtins, to.secrets)));
                }
                ScriptMessage::Request(request) => {
                    asks.push(Box::pin(client_requests::answer(
                        request,
                        to.client,
                        &ended,
                        to.secrets,
                    )));
                }
                _ => {}
            },
            Some(()) = asks.next(), if !asks.is_empty() => {}
            output = &mut run => break output,
            _ = heartbeat.tick() => to.progress.heartbeat().await,
        }
    };
    // Progress and logs still queued when the run ended go out before the answer (a request
    // can no longer be answered: the script is gone).
    while let Ok(message) = rx.try_recv() {
        match message {
            ScriptMessage::Progress(p) => send_progress(p, &to).await,
            ScriptMessage::Log(log) => forward_log(log, threshold, &to).await,
            _ => {}
        }
    }
    ended.cancel();
    while asks.next().await.is_some() {}
    drop(asks);
    drop(held);
    // A stream the script closed: hold the answer until the client has resumed it.
    if let Some(stream) = &to.client.stream {
        stream.0.settle(to.ct).await;
    }
    output
}

/// Sends a script's progress (its message scrubbed of secrets).
async fn send_progress(p: omniforge_script::Progress, to: &Reporting<'_>) {
    let message = p.message.map(|m| scrub(&m, to.secrets));
    to.progress.send_raw(p.done, p.total, message).await;
}

/// Sends a script's log message as `notifications/message` when it is at or above the
/// threshold.
async fn forward_log(log: omniforge_script::LogMessage, threshold: Option<u8>, to: &Reporting<'_>) {
    let Some(threshold) = threshold else { return };
    let rank = level_name_rank(&log.level);
    if rank.is_none_or(|r| r < threshold) {
        return;
    }
    let Ok(level) = serde_json::from_value::<LoggingLevel>(Value::String(log.level.clone())) else {
        return;
    };
    #[allow(deprecated)] // logging is part of every revision before 2026-07-28
    let param =
        rmcp::model::LoggingMessageNotificationParam::new(level, scrub_value(log.data, to.secrets))
            .with_logger("script");
    #[allow(deprecated)]
    if let Some(peer) = &to.client.peer
        && let Err(error) = peer.notify_logging_message(param).await
    {
        tracing::debug!(%error, "log message not delivered");
    }
}

/// The rank of an MCP log level (RFC 5424 order).
fn level_rank(level: LoggingLevel) -> u8 {
    serde_json::to_value(level)
        .ok()
        .as_ref()
        .and_then(Value::as_str)
        .and_then(level_name_rank)
        .unwrap_or(1)
}

/// The rank of an MCP log level name (RFC 5424 order), `None` for an unknown name.
fn level_name_rank(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .and_then(|i| u8::try_from(i).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_are_ordered() {
        assert!(level_name_rank("debug") < level_name_rank("info"));
        assert!(level_name_rank("error") > level_name_rank("warning"));
        assert_eq!(level_name_rank("loud"), None);
        assert_eq!(level_rank(LoggingLevel::Warning), 3);
    }
}
