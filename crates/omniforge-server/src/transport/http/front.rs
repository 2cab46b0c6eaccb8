//! The MCP endpoint: every request passes [`access`](super::access) and
//! [`negotiation`](super::negotiation), then is forwarded to rmcp's
//! [`StreamableHttpService`] one JSON-RPC message at a time (a batch is split here and its
//! answers regrouped), and rmcp's plain-text errors get JSON-RPC bodies.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http::header::{ACCEPT, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::Full;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use serde_json::Value;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::auth::Principal;
use crate::context::request::FrontInfo;
use crate::mcp::handler::OmniForge;
use crate::mcp::state::Shared;
use crate::telemetry::metrics::{Metrics, StreamKind};
use crate::transport::http::access::{self, ALLOWED_METHODS, Access};
use crate::transport::http::negotiation::{self, Reply};
use crate::transport::http::resume::ResumableSessions;
use crate::transport::http::sessions::SessionBook;
use crate::transport::http::sse_json::{response_value, sse_to_json};
use crate::transport::http::wire::{
    JSON, PROTOCOL_VERSION, SERVER_ERROR, SESSION_ID, json_errors, json_response, rpc_error,
};
use crate::transport::jsonrpc::{self, Checked, code};
use crate::transport::stateless;

/// The endpoint's state.
pub(super) struct Front {
    pub(super) shared: Arc<Shared>,
    pub(super) access: Access,
    pub(super) max_body_bytes: usize,
    pub(super) mcp: StreamableHttpService<OmniForge, ResumableSessions>,
    pub(super) book: Arc<SessionBook>,
    /// POST answers still streaming to their clients: shutdown waits for them after the calls.
    pub(super) answers: TaskTracker,
}

/// The MCP endpoint's handler (every method). An error status here never came from a handler
/// (they answer in JSON-RPC, with 200): it counts as a request the front refused.
pub(super) async fn endpoint(State(front): State<Arc<Front>>, request: Request<Body>) -> Response {
    let response = front.answer(request).await;
    front.shared.metrics.refused(response.status().as_u16());
    response
}

impl Front {
    /// The endpoint's answer: Host and Origin checks, CORS preflight, then [`Front::dispatch`].
    async fn answer(self: &Arc<Self>, request: Request<Body>) -> Response {
        if let Err(response) = self.access.check_host(request.headers()) {
            return response;
        }
        let origin = match self.access.check_origin(request.headers()) {
            Ok(origin) => origin,
            Err(response) => return response,
        };
        let mut response = if request.method() == Method::OPTIONS {
            access::preflight(request.headers(), origin.is_some())
        } else {
            self.dispatch(request).await
        };
        if let Some(origin) = origin {
            access::allow_origin(&mut response, origin);
        }
        response
    }
}

/// Keeps `token` until an SSE answer's body has been written (or dropped), so shutdown can wait
/// for the answers of calls that finished inside the grace period, and counts the stream in
/// the open-streams gauge meanwhile. Other bodies are complete already.
fn track(response: Response, token: TaskTrackerToken, metrics: &Metrics) -> Response {
    hold_while_streaming(response, || {
        (token, metrics.stream_opened(StreamKind::Post))
    })
}

/// Counts a GET answer streamed as SSE in the open-streams gauge until its body ends or is
/// dropped (the client went away).
fn count_stream(response: Response, metrics: &Metrics) -> Response {
    hold_while_streaming(response, || metrics.stream_opened(StreamKind::Get))
}

/// When `response` is an SSE stream, keeps what `guard` makes alive until its body ends or is
/// dropped; other responses pass unchanged (and `guard` is not called).
fn hold_while_streaming<G: Send + Sync + 'static>(
    response: Response,
    guard: impl FnOnce() -> G,
) -> Response {
    let streaming = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streaming {
        return response;
    }
    let guard = guard();
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

impl Front {
    async fn dispatch(self: &Arc<Self>, request: Request<Body>) -> Response {
        if let Err(response) = self.access.check_query(request.uri()) {
            return response;
        }
        let principal = match self.access.authenticate(request.headers()).await {
            Ok(principal) => principal,
            Err(response) => return response,
        };
        let session = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &session
            && !self.book.may_use(id, &principal.id)
        {
            return rpc_error(
                StatusCode::FORBIDDEN,
                None,
                SERVER_ERROR,
                "Forbidden: this session belongs to another token",
            );
        }
        let (mut parts, body) = request.into_parts();
        match parts.method {
            Method::POST => {
                let token = self.answers.token();
                let response = self.post(parts, body, principal, session).await;
                track(response, token, &self.shared.metrics)
            }
            Method::GET | Method::DELETE => {
                let negotiated = session.as_deref().and_then(|id| self.book.version(id));
                if let Err(response) =
                    negotiation::fill_protocol_version(&mut parts.headers, negotiated, None)
                {
                    return response;
                }
                parts.extensions.insert(FrontInfo {
                    principal: principal.clone(),
                    json_reply: false,
                });
                let deleting = parts.method == Method::DELETE;
                let mut response = self.mcp.handle(Request::from_parts(parts, body)).await;
                // rmcp answers a DELETE with 202; the official SDK clients expect 200 or 204.
                if deleting && response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                let response = json_errors(response.map(Body::new), None).await;
                if let Some(id) = &session
                    && (response.status() == StatusCode::NOT_FOUND
                        || (deleting && response.status().is_success()))
                {
                    self.book.close(id);
                }
                if deleting {
                    response
                } else {
                    count_stream(response, &self.shared.metrics)
                }
            }
            _ => {
                let mut response = rpc_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    None,
                    code::INVALID_REQUEST,
                    "Method Not Allowed: use POST, GET or DELETE",
                );
                response
                    .headers_mut()
                    .insert(ALLOW, HeaderValue::from_static(ALLOWED_METHODS));
                response
            }
        }
    }

    async fn post(
        self: &Arc<Self>,
        parts: http::request::Parts,
        body: Body,
        principal: Principal,
        session: Option<String>,
    ) -> Response {
        if let Err(response) = negotiation::check_content_type(&parts.headers) {
            return response;
        }
        let reply = match negotiation::reply_mode(&parts.headers) {
            Ok(reply) => reply,
            Err(response) => return response,
        };
        let bytes = match negotiation::read_body(body, &parts.headers, self.max_body_bytes).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        let value: Value = match serde_json::from_slice(&bytes) {
            Ok(value) => value,
            Err(e) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    code::PARSE_ERROR,
                    format!("Parse error: {e}"),
                );
            }
        };
        let version_header = parts
            .headers
            .get(PROTOCOL_VERSION)
            .map(|v| v.to_str().unwrap_or("").to_owned());
        match value {
            Value::Array(items) => self.batch(parts, items, principal, session).await,
            single => match jsonrpc::check_message(single, version_header.as_deref()) {
                Checked::Request {
                    id,
                    method,
                    message,
                } => {
                    if method == "initialize"
                        && session.as_deref().is_some_and(|s| self.book.contains(s))
                    {
                        // A second handshake would replace the session's negotiated state.
                        return rpc_error(
                            StatusCode::BAD_REQUEST,
                            Some(&id),
                            code::INVALID_REQUEST,
                            "Invalid Request: this session is already initialized; initialize \
                             without Mcp-Session-Id to start a new one",
                        );
                    }
                    let init = (method == "initialize").then(|| {
                        message
                            .pointer("/params/protocolVersion")
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    });
                    // A new session holds a place under `--max-sessions` while it opens.
                    let _admission = match init.is_some() && session.is_none() {
                        false => None,
                        true => match self.book.admit() {
                            Some(admission) => Some(admission),
                            None => {
                                tracing::warn!("--max-sessions reached; a new session was refused");
                                return rpc_error(
                                    StatusCode::SERVICE_UNAVAILABLE,
                                    Some(&id),
                                    SERVER_ERROR,
                                    "Service Unavailable: the server has reached its \
                                     --max-sessions limit; retry later",
                                );
                            }
                        },
                    };
                    let response = self
                        .forward(
                            &parts,
                            message,
                            &principal,
                            session.as_deref(),
                            init,
                            reply == Reply::Json,
                        )
                        .await;
                    match reply {
                        Reply::Json => sse_to_json(response, &id).await,
                        Reply::Sse => response,
                    }
                }
                Checked::Notification { message } => {
                    self.forward(&parts, message, &principal, session.as_deref(), None, false)
                        .await
                }
                Checked::Drop { reason } => rpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    code::INVALID_REQUEST,
                    format!("Bad Request: message not accepted ({reason})"),
                ),
                Checked::Reject {
                    response,
                    stateless,
                } => {
                    let code = response.pointer("/error/code").and_then(Value::as_i64);
                    let status = match code {
                        Some(code) if stateless => stateless::http_status(code),
                        Some(code::INVALID_REQUEST | code::PARSE_ERROR) => StatusCode::BAD_REQUEST,
                        _ => StatusCode::OK,
                    };
                    json_response(status, &response)
                }
            },
        }
    }

    /// Sends one checked message through rmcp; converts plain-text errors to JSON-RPC.
    /// `initialize` is `Some(requested revision)` for an initialize request. `json_only`: the
    /// answer is collapsed into one JSON response, so the client sees nothing else the
    /// request's SSE stream carries (the handler is told in its [`FrontInfo`]).
    async fn forward(
        &self,
        template: &http::request::Parts,
        message: Value,
        principal: &Principal,
        session: Option<&str>,
        initialize: Option<Option<String>>,
        json_only: bool,
    ) -> Response {
        let id = message.get("id").cloned();
        let mut request = Request::new(Full::new(Bytes::from(message.to_string())));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = template.uri.clone();
        *request.version_mut() = template.version;
        let headers = request.headers_mut();
        *headers = template.headers.clone();
        headers.remove(CONTENT_LENGTH);
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
        if initialize.is_some() {
            // Negotiation happens in the body (WIRE-03): the header is not checked here.
            headers.remove(PROTOCOL_VERSION);
        } else {
            let negotiated = session.and_then(|id| self.book.version(id));
            if let Err(response) =
                negotiation::fill_protocol_version(headers, negotiated, id.as_ref())
            {
                return response;
            }
        }
        request.extensions_mut().insert(FrontInfo {
            principal: principal.clone(),
            json_reply: json_only,
        });
        let response = self.mcp.handle(request).await.map(Body::new);
        if let Some(requested) = initialize
            && response.status().is_success()
            && let Some(new_id) = response
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
        {
            let version = jsonrpc::negotiated_version(requested.as_deref());
            self.book.open(new_id, version, principal.id.clone());
        }
        let response = json_errors(response, id.as_ref()).await;
        if let Some(session) = session
            && response.status() == StatusCode::NOT_FOUND
        {
            self.book.close(session);
        }
        response
    }

    /// A JSON array body: processed under revisions that allow batches, refused otherwise.
    async fn batch(
        self: &Arc<Self>,
        parts: http::request::Parts,
        items: Vec<Value>,
        principal: Principal,
        session: Option<String>,
    ) -> Response {
        let negotiated = session.as_deref().and_then(|id| self.book.version(id));
        if let Err(response) = negotiation::check_batch(items.len(), negotiated, &parts.headers) {
            return response;
        }
        let version_header = parts
            .headers
            .get(PROTOCOL_VERSION)
            .map(|v| v.to_str().unwrap_or("").to_owned());
        let work = items.into_iter().map(|item| {
            let version_header = version_header.as_deref();
            let parts = &parts;
            let principal = &principal;
            let session = session.as_deref();
            async move {
                match jsonrpc::check_message(item, version_header) {
                    Checked::Request { id, method, .. } if method == "initialize" => {
                        Some(jsonrpc::error_response(
                            Some(&id),
                            code::INVALID_REQUEST,
                            "Invalid Request: initialize must not be part of a batch",
                        ))
                    }
                    Checked::Request { id, message, .. } => {
                        let response = self
                            .forward(parts, message, principal, session, None, true)
                            .await;
                        Some(response_value(sse_to_json(response, &id).await, &id).await)
                    }
                    Checked::Notification { message } => {
                        let _ = self
                            .forward(parts, message, principal, session, None, false)
                            .await;
                        None
                    }
                    Checked::Drop { .. } => None,
                    Checked::Reject { response, .. } => Some(response),
                }
            }
        });
        let answers: Vec<Value> = futures::future::join_all(work)
            .await
            .into_iter()
            .flatten()
            .collect();
        if answers.is_empty() {
            StatusCode::ACCEPTED.into_response()
        } else {
            json_response(StatusCode::OK, &Value::Array(answers))
        }
    }
}
