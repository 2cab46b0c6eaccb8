//! Requests a running script sends to the MCP client that called its tool.
//!
//! The helper module's questions (`ask`, `sample`, `elicit`, `roots`) arrive over the script's
//! side channel as requests ([`crate::runs::questions`]). Before 2026-07-28 each
//! question becomes the MCP request (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) sent through the calling session's rmcp [`Peer`](rmcp::service::Peer), tagged with the tool call's
//! request id, so over Streamable HTTP it rides the call's own POST SSE stream (SEP-2260, as
//! rmcp routes it). The params go out unchanged (an elicitation schema keeps its defaults and
//! every enum form), and the client's result comes back to the script unchanged.
//!
//! A request is refused with a clear JSON-RPC error, without asking the client, when there is
//! no client (the command line), when the protocol revision forbids server-to-client requests
//! (2026-07-28), or when the client did not declare the capability. It is bounded by
//! `timeout_s` (rmcp then sends `notifications/cancelled`) and by the run: when the tool call
//! ends or is cancelled first, the client's request is cancelled too.
//!
//! `close_sse_stream` is the fourth script request: it closes the call's POST SSE stream so the
//! client resumes it with `Last-Event-ID` ([`crate::context::stream`]). `client_capabilities`
//! answers what the client declared for this call (the request's `_meta` under 2026-07-28,
//! the session's `initialize` before; `null` without a client), so a tool can adapt.

use std::time::Duration;

use omniforge_script::{RpcError, ScriptRequest};
use rmcp::model::{
    CancelledNotificationParam, CustomRequest, ProtocolVersion, RequestMetaObject, ServerRequest,
};
use rmcp::service::{OriginatingRequestId, Peer, PeerRequestOptions, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::context::client::ClientLink;
use crate::context::task::StartError;
use crate::runs::questions::{self, Ask, Question, code, error};
use crate::runs::redact::scrub_value;
use crate::runs::task_input;

/// Answers one script request. `ended` fires when the run is over (the script exited, timed
/// out or was cancelled): a client request still waiting is then cancelled.
/// Exact `secrets` values in what is sent are replaced by `[redacted]`, as in results.
pub(crate) async fn answer(
    request: ScriptRequest,
    link: &ClientLink,
    ended: &CancellationToken,
    secrets: &[String],
) {
    let params = scrub_value(request.params().clone(), secrets);
    let answer = match request.method() {
        method if questions::is_question(method) => match questions::parse(method, &params) {
            Ok(ask) => match link.task_link() {
                Some(task) => task_input::ask(&task, link.capabilities.as_ref(), &ask, ended).await,
                None => ask_live(link, &ask, ended).await,
            },
            Err(e) => Err(e),
        },
        "close_sse_stream" => close_stream(link, request.params()).await,
        "start_task" => start_task(link).await,
        "client_capabilities" => Ok(json!({"capabilities": link.capabilities})),
        other => Err(error(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown request {other:?}: scripts can send ask, sample, elicit, roots, \
                 close_sse_stream, client_capabilities, start_task, call_builtin and \
                 protocol_error"
            ),
        )),
    };
    request.respond(answer);
}

/// `start_task`: a call whose tool starts its task in the script (`taskStart: "script"`,
/// called by a client that declared the Tasks extension) becomes its task now, and the client
/// gets the task. Anywhere else nothing happens: `{"task": true}` when the call runs as a
/// task (it was one from its start), `{"task": false}` when it is an ordinary request.
async fn start_task(link: &ClientLink) -> Result<Value, RpcError> {
    if link.task.is_some() {
        return Ok(json!({"task": true}));
    }
    let Some(starter) = &link.starter else {
        return Ok(json!({"task": false}));
    };
    match starter.start().await {
        Ok(task) => Ok(json!({"task": true, "taskId": task.task_id})),
        Err(e @ StartError::Store(_)) => {
            tracing::warn!(error = %e, "a script's start_task");
            Err(error(code::INTERNAL_ERROR, e.to_string()))
        }
        Err(e) => Err(error(code::INTERNAL_ERROR, e.to_string())),
    }
}

async fn close_stream(link: &ClientLink, params: &Value) -> Result<Value, RpcError> {
    let retry = match params.get("retry_ms") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(ms) if ms <= 600_000 => Some(Duration::from_millis(ms)),
            _ => {
                return Err(error(
                    code::INVALID_PARAMS,
                    "retry_ms must be an integer from 0 to 600000",
                ));
            }
        },
    };
    let Some(stream) = &link.stream else {
        return Ok(json!({"closed": false}));
    };
    match stream.0.close(retry).await {
        Ok(()) => Ok(json!({"closed": true})),
        Err(e) => Err(error(
            code::INTERNAL_ERROR,
            format!("the SSE stream could not be closed: {e}"),
        )),
    }
}

/// Asks the live client every question of `ask` at once (after checking that all can be
/// sent); the client's results come back as it answered, by key (`q1`, `q2`, … for an old
/// helper's unkeyed request, which gets the bare result).
async fn ask_live(
    link: &ClientLink,
    ask: &Ask,
    ended: &CancellationToken,
) -> Result<Value, RpcError> {
    let Some(first) = ask.questions.first() else {
        return Err(error(code::INVALID_PARAMS, "no question"));
    };
    let method = first.kind.method();
    let Some(peer) = &link.peer else {
        return Err(error(
            code::INTERNAL_ERROR,
            format!(
                "{method} needs an MCP client, and this run has none (it was started from the \
                 command line)"
            ),
        ));
    };
    if link
        .protocol_version
        .as_ref()
        .is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28)
    {
        return Err(error(
            code::INVALID_REQUEST,
            format!(
                "{method} cannot be sent: protocol revision 2026-07-28, which this call uses, \
                 forbids server-to-client requests"
            ),
        ));
    }
    if link.json_reply {
        return Err(error(
            code::INVALID_REQUEST,
            format!(
                "{method} cannot be sent: the client accepts only application/json for this \
                 call, so it cannot receive requests while the call runs"
            ),
        ));
    }
    let Some(capabilities) = &link.capabilities else {
        return Err(error(
            code::METHOD_NOT_FOUND,
            format!(
                "{method} cannot be sent: the client's capabilities are unknown (no initialize \
                 handshake on this connection, e.g. stateless HTTP)"
            ),
        ));
    };
    questions::check_declared(ask, capabilities)?;
    let answers = futures::future::join_all(
        ask.questions
            .iter()
            .map(|q| forward(peer, link, q, ask.timeout, ended)),
    )
    .await;
    let mut responses = serde_json::Map::new();
    for (i, (question, answer)) in ask.questions.iter().zip(answers).enumerate() {
        let answer = answer?;
        if ask.legacy {
            return Ok(answer);
        }
        let key = question
            .key
            .clone()
            .unwrap_or_else(|| format!("q{}", i + 1));
        responses.insert(key, answer);
    }
    Ok(json!({"responses": responses}))
}

/// Sends one question to the client; its result comes back as it answered.
async fn forward(
    peer: &Peer<RoleServer>,
    link: &ClientLink,
    question: &Question,
    timeout: Option<Duration>,
    ended: &CancellationToken,
) -> Result<Value, RpcError> {
    let method = question.kind.method();
    let mut body = question.params.clone();
    let mut options = PeerRequestOptions::no_options();
    options.timeout = timeout;
    // rmcp adds its own `_meta` (a progress token); a script's `_meta` joins it.
    if let Some(meta) = body.as_mut().and_then(|b| b.remove("_meta")) {
        let meta: RequestMetaObject = serde_json::from_value(meta)
            .map_err(|e| error(code::INVALID_PARAMS, format!("_meta: {e}")))?;
        options = options.with_meta(meta);
    }
    let mut request = CustomRequest::new(method, body.map(Value::Object));
    if let Some(id) = &link.request_id {
        // Over Streamable HTTP this puts the request on the call's own SSE stream.
        request.extensions.insert(OriginatingRequestId(id.clone()));
    }
    let handle = peer
        .send_request_with_option(ServerRequest::CustomRequest(request), options)
        .await
        .map_err(|e| service_error(method, e))?;
    let id = handle.id.clone();
    tokio::select! {
        answer = handle.await_response() => match answer {
            Ok(result) => serde_json::to_value(result)
                .map_err(|e| error(code::INTERNAL_ERROR, format!("the client's answer: {e}"))),
            Err(e) => Err(service_error(method, e)),
        },
        () = ended.cancelled() => {
            let param = CancelledNotificationParam::new(
                Some(id),
                Some("the tool call ended".to_owned()),
            );
            if let Err(e) = peer.notify_cancelled(param).await {
                tracing::debug!(error = %e, "cancelling a client request failed");
            }
            Err(error(code::INTERNAL_ERROR, format!("{method}: the tool call ended first")))
        }
    }
}

fn service_error(method: &str, e: rmcp::ServiceError) -> RpcError {
    match e {
        rmcp::ServiceError::McpError(data) => RpcError {
            code: i64::from(data.code.0),
            message: format!(
                "the client answered {method} with an error: {}",
                data.message
            ),
            data: data.data,
        },
        rmcp::ServiceError::Timeout { timeout } => error(
            code::TIMEOUT,
            format!(
                "the client did not answer {method} within {:.1} s",
                timeout.as_secs_f64()
            ),
        ),
        rmcp::ServiceError::TransportClosed => error(
            code::INTERNAL_ERROR,
            format!("{method}: the client connection is closed"),
        ),
        other => error(code::INTERNAL_ERROR, format!("{method}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refused_without_a_client_or_with_bad_params() {
        let ended = CancellationToken::new();
        let no_client = ClientLink::default();
        let ask = questions::parse("sample", &json!({"request": {}})).unwrap();
        let e = ask_live(&no_client, &ask, &ended).await.unwrap_err();
        assert_eq!(e.code, code::INTERNAL_ERROR);
        assert!(e.message.contains("has none"), "{}", e.message);
        // close_sse_stream without a stream: nothing to close.
        assert_eq!(
            close_stream(&no_client, &json!({})).await.unwrap(),
            json!({"closed": false})
        );
        let e = close_stream(&no_client, &json!({"retry_ms": -1}))
            .await
            .unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
    }
}
