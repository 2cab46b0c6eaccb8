//! Streamable HTTP (2025-11-25, Basic > Transports > Streamable HTTP) behind an axum front.
//!
//! rmcp's [`StreamableHttpService`] does the protocol work: sessions, SSE streams, GET and
//! DELETE. The front in this module runs first and fixes what rmcp 3.11 answers differently
//! from what clients need:
//! - **Host** (DNS rebinding) and **Origin** are checked here, and a rejection is a 403 with a
//!   JSON-RPC error body (rmcp answers plain text). Origin validation is on by default:
//!   loopback origins plus `--allow-origin` entries. The Host check is on for loopback binds
//!   and whenever `--allow-host` is given.
//! - **Bearer tokens** (`--token-file`): 401 with `WWW-Authenticate: Bearer` when missing or
//!   wrong; a session belongs to the token that opened it.
//! - **Accept**: a client that accepts only `application/json` gets a JSON answer (rmcp
//!   insists on both types and answers SSE in session mode); only `text/event-stream` gets
//!   SSE; neither gets 406 with a JSON-RPC body.
//! - **Batches** (a JSON array body): answered as an array under 2025-03-26 and earlier;
//!   rejected with 400 / -32600 under later revisions (rmcp answers 415).
//! - **MCP-Protocol-Version**: ignored on `initialize` (negotiation happens in the body);
//!   afterwards, when absent, the session's negotiated revision is used (rmcp assumes
//!   2025-03-26), and when present it must equal the negotiated one.
//! - The body limit is answered with 413 and a JSON-RPC body; every other plain-text error
//!   rmcp produces (400, 404, 405, 406, 415) gets a JSON-RPC body too.
//! - `tools/call` arguments that are `null` or not an object reach the handler
//!   ([`crate::jsonrpc`]).

// The front's checks return a ready `Response` as their error: it is built once per rejected
// request, so its size on the stack does not matter.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use bytes::Bytes;
use futures::StreamExt;
use http::header::{
    ACCEPT, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, VARY, WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::auth::{Principal, TokenSet};
use crate::catalog::ToolSource;
use crate::handler::{OmniForge, Shared};
use crate::jsonrpc::{self, Checked, code};
use crate::streams::Sessions;

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
/// JSON-RPC error code for transport-level refusals that have no standard code
/// (unauthorized, forbidden, unknown session), as the TypeScript SDK uses it.
const SERVER_ERROR: i64 = -32001;

/// How the HTTP front is configured. Built by the binary from flags, environment and file.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The MCP endpoint path, e.g. `/mcp`.
    pub path: String,
    /// Serve without sessions, so any replica can answer any request.
    pub stateless: bool,
    /// Browser origins allowed besides loopback ones, e.g. `https://claude.ai`.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values accepted, e.g. `mcp.example.com` or `mcp-upstream:8000`.
    pub allowed_hosts: Vec<String>,
    /// Whether to check `Host` at all: on for loopback binds and when `allowed_hosts` is set.
    pub check_host: bool,
    /// Accepted bearer tokens; empty means no authentication (loopback binds only).
    pub tokens: TokenSet,
    /// The largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// How long an idle session is kept before it expires (then its id gets 404).
    pub session_idle_timeout: Duration,
}

/// Per-session facts the front needs and rmcp does not expose.
#[derive(Debug, Clone)]
struct SessionInfo {
    /// The revision negotiated by `initialize`.
    version: &'static str,
    /// The name of the token that opened the session.
    owner: String,
}

struct Front {
    shared: Arc<Shared>,
    config: HttpConfig,
    mcp: StreamableHttpService<OmniForge, Sessions>,
    session_manager: Arc<Sessions>,
    /// A std lock: held for map operations only, never across an `.await`.
    sessions: Mutex<HashMap<String, SessionInfo>>,
}

/// Builds the axum app: the MCP endpoint at `config.path` and `GET /healthz`.
///
/// `rmcp_ct` ends every session and SSE stream when cancelled.
pub fn app(shared: Arc<Shared>, config: HttpConfig, rmcp_ct: CancellationToken) -> Router {
    let mut session_manager = LocalSessionManager::default();
    session_manager.session_config.keep_alive = Some(config.session_idle_timeout);
    let session_manager = Arc::new(Sessions::new(session_manager));
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!config.stateless)
        // The front checks Host and Origin; rmcp's checks would answer in plain text.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(config.max_body_bytes)
        .with_cancellation_token(rmcp_ct);
    let factory_shared = shared.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(OmniForge::new(factory_shared.clone())),
        session_manager.clone(),
        rmcp_config,
    );
    let path = config.path.clone();
    let front = Arc::new(Front {
        shared,
        config,
        mcp,
        session_manager,
        sessions: Mutex::new(HashMap::new()),
    });
    tokio::spawn(prune_sessions(Arc::downgrade(&front)));
    Router::new()
        .route("/healthz", get(healthz))
        .route(&path, axum::routing::any(mcp_endpoint))
        .with_state(front)
}

/// Serves `app` on `listener` until `shutdown` fires, then stops accepting, lets in-flight
/// tool calls finish within `grace`, and ends what is left.
///
/// # Errors
/// An I/O error from the listener.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    config: HttpConfig,
    shutdown: CancellationToken,
    grace: Duration,
) -> std::io::Result<()> {
    let rmcp_ct = CancellationToken::new();
    let router = app(shared.clone(), config, rmcp_ct.clone());
    let drain = {
        let shutdown = shutdown.clone();
        let rmcp_ct = rmcp_ct.clone();
        async move {
            shutdown.cancelled().await;
            shared.calls.close();
            if tokio::time::timeout(grace, shared.calls.wait())
                .await
                .is_err()
            {
                tracing::warn!(grace = ?grace, "in-flight tool calls outlived the grace period; cancelling them");
            }
            rmcp_ct.cancel();
        }
    };
    tokio::spawn(drain);
    // SSE answers are written in pieces (headers, priming event, message); without
    // TCP_NODELAY each later piece waits for the client's delayed ACK (about 40 ms on Linux).
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "setting TCP_NODELAY failed");
        }
    });
    let server = axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown.clone().cancelled_owned());
    tokio::select! {
        result = server => result,
        // Connections that outlive the cancelled sessions (idle keep-alives) do not hold us.
        () = async { rmcp_ct.cancelled().await; tokio::time::sleep(Duration::from_secs(2)).await } => Ok(()),
    }
}

async fn prune_sessions(front: std::sync::Weak<Front>) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let Some(front) = front.upgrade() else { return };
        let ids: Vec<String> = front.lock_sessions().keys().cloned().collect();
        for id in ids {
            if !front
                .session_manager
                .has_session(&id.clone().into())
                .await
                .unwrap_or(false)
            {
                front.lock_sessions().remove(&id);
            }
        }
    }
}

async fn healthz(State(front): State<Arc<Front>>) -> Response {
    let snapshot = front.shared.catalog.snapshot();
    let tools: serde_json::Map<String, Value> = [
        ToolSource::Builtin,
        ToolSource::Manifest,
        ToolSource::Stored,
    ]
    .into_iter()
    .map(|s| (s.as_str().to_owned(), json!(snapshot.count(s))))
    .collect();
    // The script sandbox layers, under the names `omniforge doctor` uses: whether each is
    // active, and (as in `doctor --json`) how, or why not.
    let layers = front.shared.forge.iter().flat_map(|f| f.layers());
    let sandbox: serde_json::Map<String, Value> = layers
        .clone()
        .map(|l| (l.name.to_owned(), json!(l.active)))
        .collect();
    let sandbox_layers: Vec<Value> = layers
        .map(|l| json!({"name": l.name, "active": l.active, "detail": l.detail}))
        .collect();
    axum::Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "tools": tools,
        "sandbox": sandbox,
        "sandbox_layers": sandbox_layers,
        "sessions": front.lock_sessions().len(),
    }))
    .into_response()
}

/// A JSON-RPC error response with an HTTP status.
fn rpc_error(
    status: StatusCode,
    id: Option<&Value>,
    code: i64,
    message: impl Into<String>,
) -> Response {
    json_response(status, &jsonrpc::error_response(id, code, message))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

async fn mcp_endpoint(State(front): State<Arc<Front>>, request: Request<Body>) -> Response {
    if let Err(response) = front.check_host(request.headers()) {
        return response;
    }
    let origin = match front.check_origin(request.headers()) {
        Ok(origin) => origin,
        Err(response) => return response,
    };
    let mut response = if request.method() == Method::OPTIONS {
        preflight(request.headers(), origin.is_some())
    } else {
        front.dispatch(request).await
    };
    if let Some(origin) = origin {
        let headers = response.headers_mut();
        headers.insert("access-control-allow-origin", origin);
        headers.insert(
            "access-control-expose-headers",
            HeaderValue::from_static("Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"),
        );
        headers.append(VARY, HeaderValue::from_static("Origin"));
    }
    response
}

/// Answers a CORS preflight (or a plain OPTIONS) for the MCP endpoint.
fn preflight(headers: &HeaderMap, cors: bool) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    out.insert(
        ALLOW,
        HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
    );
    if cors {
        out.insert(
            "access-control-allow-methods",
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        let requested = headers
            .get("access-control-request-headers")
            .cloned()
            .unwrap_or(HeaderValue::from_static(
                "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id",
            ));
        out.insert("access-control-allow-headers", requested);
        out.insert("access-control-max-age", HeaderValue::from_static("600"));
    }
    response
}

/// Marks a request whose answer the front collapses into one JSON response (the client
/// accepts only `application/json`, or sent a batch): nothing else on the request's SSE stream
/// reaches the client, so a tool cannot ask it anything or close the stream for a resume.
#[derive(Debug, Clone, Copy)]
pub struct JsonReply;

/// How the client wants the answer to a POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    /// `text/event-stream` (also for `*/*` and a missing Accept: it keeps progress notifications).
    Sse,
    /// `application/json` only: the SSE stream is collapsed into the single response.
    Json,
}

fn reply_mode(headers: &HeaderMap) -> Option<Reply> {
    let Some(accept) = headers.get(ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(Reply::Sse);
    };
    let (mut json, mut sse, mut any) = (false, false, false);
    for item in accept.split(',') {
        let essence = item
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match essence.as_str() {
            JSON => json = true,
            EVENT_STREAM => sse = true,
            "*/*" | "application/*" | "text/*" => any = true,
            _ => {}
        }
    }
    match (sse, json, any) {
        (true, _, _) | (false, false, true) => Some(Reply::Sse),
        (false, true, _) => Some(Reply::Json),
        (false, false, false) => None,
    }
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Splits `host[:port]` (with `[v6]` brackets) into host and optional port.
fn split_authority(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (authority, None),
    }
}

// An axum `Response` is the error type on purpose (axum's idiom: a rejection is a response);
// its size does not matter on these per-request paths.
#[allow(clippy::result_large_err)]
impl Front {
    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionInfo>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// DNS-rebinding guard. The spec mandates Origin checks, not Host checks; this one is
    /// on for loopback binds (where rebinding is the threat) and whenever hosts are listed.
    fn check_host(&self, headers: &HeaderMap) -> Result<(), Response> {
        if !self.config.check_host {
            return Ok(());
        }
        let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
            return Ok(());
        };
        let (name, _) = split_authority(host);
        let allowed = is_loopback_host(name)
            || self.config.allowed_hosts.iter().any(|entry| {
                if split_authority(entry).1.is_some() {
                    entry.eq_ignore_ascii_case(host)
                } else {
                    entry.eq_ignore_ascii_case(name)
                }
            });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(host, "rejected a request: Host is not allowed");
            Err(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                SERVER_ERROR,
                format!("Forbidden: Host '{host}' is not allowed (add it with --allow-host)"),
            ))
        }
    }

    /// Origin validation (2025-11-25, Streamable HTTP > Security Warning, item 1). Returns
    /// the origin to echo in CORS headers when the request carries an allowed one.
    fn check_origin(&self, headers: &HeaderMap) -> Result<Option<HeaderValue>, Response> {
        let Some(value) = headers.get(ORIGIN) else {
            return Ok(None);
        };
        let origin = value.to_str().unwrap_or("").trim_end_matches('/');
        let loopback = origin
            .split_once("://")
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .is_some_and(|(_, authority)| is_loopback_host(split_authority(authority).0));
        let listed = self
            .config
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin));
        if origin != "null" && (loopback || listed) {
            Ok(Some(value.clone()))
        } else {
            tracing::warn!(origin, "rejected a request: Origin is not allowed");
            Err(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                SERVER_ERROR,
                format!("Forbidden: Origin '{origin}' is not allowed (add it with --allow-origin)"),
            ))
        }
    }

    fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Response> {
        if self.config.tokens.is_empty() {
            return Ok(Principal::anonymous());
        }
        let presented = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            });
        let (challenge, message) = match presented
            .map(|t| self.config.tokens.authenticate(t.trim()))
        {
            Some(Some(principal)) => return Ok(principal),
            Some(None) => (
                r#"Bearer realm="omniforge", error="invalid_token", error_description="the token is not valid""#,
                "Unauthorized: the bearer token is not valid",
            ),
            None => (
                r#"Bearer realm="omniforge""#,
                "Unauthorized: a bearer token is required",
            ),
        };
        let mut response = rpc_error(StatusCode::UNAUTHORIZED, None, SERVER_ERROR, message);
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        Err(response)
    }

    async fn dispatch(self: &Arc<Self>, request: Request<Body>) -> Response {
        let principal = match self.authenticate(request.headers()) {
            Ok(principal) => principal,
            Err(response) => return response,
        };
        let session = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &session {
            let owner = self.lock_sessions().get(id).map(|s| s.owner.clone());
            if owner.is_some_and(|owner| owner != principal.name) {
                return rpc_error(
                    StatusCode::FORBIDDEN,
                    None,
                    SERVER_ERROR,
                    "Forbidden: this session belongs to another token",
                );
            }
        }
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(principal.clone());
        match parts.method {
            Method::POST => self.post(parts, body, principal, session).await,
            Method::GET | Method::DELETE => {
                if let Err(response) =
                    self.fill_protocol_version(&mut parts.headers, session.as_deref())
                {
                    return response;
                }
                let deleting = parts.method == Method::DELETE;
                let mut response = self.mcp.handle(Request::from_parts(parts, body)).await;
                // rmcp answers a DELETE with 202; the official SDK clients expect 200 or 204.
                if deleting && response.status() == StatusCode::ACCEPTED {
                    *response.status_mut() = StatusCode::NO_CONTENT;
                }
                if let Some(id) = &session
                    && (response.status() == StatusCode::NOT_FOUND
                        || (deleting && response.status().is_success()))
                {
                    self.lock_sessions().remove(id);
                }
                json_errors(response.map(Body::new), None).await
            }
            _ => {
                let mut response = rpc_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    None,
                    code::INVALID_REQUEST,
                    "Method Not Allowed: use POST, GET or DELETE",
                );
                response.headers_mut().insert(
                    ALLOW,
                    HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
                );
                response
            }
        }
    }

    /// Fills in or checks `MCP-Protocol-Version` for a request inside a known session.
    ///
    /// Absent: the negotiated revision is filled in (rmcp would assume 2025-03-26). Present: it
    /// must name a revision we serve (2025-06-18, Basic > Transports > Protocol Version Header:
    /// "invalid or unsupported" gets 400). A supported revision other than the negotiated one
    /// is tolerated, as the reference servers do (the conformance suite sends 2025-03-26
    /// inside 2025-11-25 sessions); the session keeps its negotiated revision.
    fn fill_protocol_version(
        &self,
        headers: &mut HeaderMap,
        session: Option<&str>,
    ) -> Result<(), Response> {
        let negotiated = session.and_then(|id| self.lock_sessions().get(id).map(|s| s.version));
        match headers
            .get(PROTOCOL_VERSION)
            .map(|v| v.to_str().unwrap_or(""))
        {
            None => {
                if let Some(version) = negotiated {
                    headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(version));
                }
                Ok(())
            }
            Some(sent) if jsonrpc::SUPPORTED_VERSIONS.contains(&sent) => {
                if negotiated.is_some_and(|v| v != sent) {
                    tracing::debug!(
                        sent,
                        negotiated,
                        "MCP-Protocol-Version differs from the negotiated revision"
                    );
                }
                Ok(())
            }
            Some(sent) => Err(rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                code::INVALID_REQUEST,
                format!(
                    "Bad Request: unsupported MCP-Protocol-Version '{sent}' (supported: {})",
                    jsonrpc::SUPPORTED_VERSIONS.join(", ")
                ),
            )),
        }
    }

    async fn post(
        self: &Arc<Self>,
        parts: http::request::Parts,
        body: Body,
        principal: Principal,
        session: Option<String>,
    ) -> Response {
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case(JSON)
        {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                None,
                code::INVALID_REQUEST,
                "Unsupported Media Type: Content-Type must be application/json",
            );
        }
        let Some(reply) = reply_mode(&parts.headers) else {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                None,
                code::INVALID_REQUEST,
                "Not Acceptable: the client must accept application/json or text/event-stream",
            );
        };
        let bytes = match read_body(body, &parts.headers, self.config.max_body_bytes).await {
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
        match value {
            Value::Array(items) => self.batch(parts, items, principal, session).await,
            single => match jsonrpc::check_message(single) {
                Checked::Request {
                    id,
                    method,
                    message,
                } => {
                    if method == "initialize"
                        && session
                            .as_deref()
                            .is_some_and(|s| self.lock_sessions().contains_key(s))
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
                Checked::Reject { response } => {
                    let status = match response.pointer("/error/code").and_then(Value::as_i64) {
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
    /// request's SSE stream carries (the handler is told with a [`JsonReply`] marker).
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
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(template.uri.clone())
            .version(template.version)
            .body(Full::new(Bytes::from(message.to_string())))
            .unwrap_or_default();
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
        } else if let Err(response) = self.fill_protocol_version(headers, session) {
            return response;
        }
        request.extensions_mut().insert(principal.clone());
        if json_only {
            request.extensions_mut().insert(JsonReply);
        }
        let response = self.mcp.handle(request).await.map(Body::new);
        if let Some(requested) = initialize
            && response.status().is_success()
            && let Some(new_id) = response
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
        {
            let info = SessionInfo {
                version: jsonrpc::negotiated_version(requested.as_deref()),
                owner: principal.name.clone(),
            };
            self.lock_sessions().insert(new_id.to_owned(), info);
        }
        if let Some(session) = session
            && response.status() == StatusCode::NOT_FOUND
        {
            self.lock_sessions().remove(session);
        }
        json_errors(response, id.as_ref()).await
    }

    /// A JSON array body: processed under revisions that allow batches, refused otherwise.
    async fn batch(
        self: &Arc<Self>,
        parts: http::request::Parts,
        items: Vec<Value>,
        principal: Principal,
        session: Option<String>,
    ) -> Response {
        if items.is_empty() {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                code::INVALID_REQUEST,
                "Invalid Request: empty batch",
            );
        }
        let version = session
            .as_deref()
            .and_then(|id| self.lock_sessions().get(id).map(|s| s.version.to_owned()))
            .or_else(|| {
                parts
                    .headers
                    .get(PROTOCOL_VERSION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            });
        if !version.as_deref().is_some_and(jsonrpc::allows_batches) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                code::INVALID_REQUEST,
                format!(
                    "Invalid Request: JSON-RPC batches are not supported under protocol revision {} \
                     (2025-06-18 and later take one message per POST)",
                    version.as_deref().unwrap_or("(none negotiated)")
                ),
            );
        }
        let work = items.into_iter().map(|item| {
            let parts = &parts;
            let principal = &principal;
            let session = session.as_deref();
            async move {
                match jsonrpc::check_message(item) {
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
                    Checked::Reject { response } => Some(response),
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

/// Reads a request body up to `limit` bytes; 413 beyond it.
async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, Response> {
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            code::INVALID_REQUEST,
            format!("Payload Too Large: the request body limit is {limit} bytes"),
        )
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            code::INVALID_REQUEST,
            format!("Bad Request: could not read the body: {e}"),
        )),
    }
}

/// Gives an rmcp error response that is not JSON a JSON-RPC error body (same status).
async fn json_errors(response: Response, id: Option<&Value>) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(JSON));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match body.collect().await {
        Ok(c) => String::from_utf8_lossy(&c.to_bytes()).into_owned(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let code = match status {
        StatusCode::NOT_FOUND | StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => SERVER_ERROR,
        s if s.is_server_error() => -32603,
        _ => code::INVALID_REQUEST,
    };
    // A 404 session error answers the transport, not one request: no id.
    let id = if status == StatusCode::NOT_FOUND {
        None
    } else {
        id
    };
    let body = jsonrpc::error_response(id, code, message).to_string();
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}

/// Collapses an SSE response into the JSON response to request `id` (for clients that
/// accept only `application/json`). Other responses pass through.
async fn sse_to_json(response: Response, id: &Value) -> Response {
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(EVENT_STREAM));
    if !response.status().is_success() || !is_sse {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let mut events = sse_stream::SseStream::from_bytes_stream(body.into_data_stream());
    while let Some(event) = events.next().await {
        let Ok(event) = event else { break };
        let Some(data) = event.data.filter(|d| !d.is_empty()) else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<Value>(&data) else {
            continue;
        };
        if message.get("method").is_none() && message.get("id") == Some(id) {
            parts
                .headers
                .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            parts.headers.remove(CONTENT_LENGTH);
            parts.headers.remove("cache-control");
            return Response::from_parts(parts, Body::from(data));
        }
    }
    rpc_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(id),
        -32603,
        "Internal error: the request ended without a response",
    )
}

/// The JSON-RPC message a forwarded batch member came back with.
async fn response_value(response: Response, id: &Value) -> Value {
    let status = response.status();
    let bytes = match response.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => Bytes::new(),
    };
    serde_json::from_slice::<Value>(&bytes).unwrap_or_else(|_| {
        jsonrpc::error_response(
            Some(id),
            -32603,
            format!("Internal error: HTTP {status} without a JSON body"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, HeaderValue::from_str(accept).unwrap());
        h
    }

    #[test]
    fn accept_negotiation() {
        assert_eq!(
            reply_mode(&headers("application/json, text/event-stream")),
            Some(Reply::Sse)
        );
        assert_eq!(reply_mode(&headers("text/event-stream")), Some(Reply::Sse));
        assert_eq!(reply_mode(&headers("application/json")), Some(Reply::Json));
        assert_eq!(
            reply_mode(&headers("application/json;q=0.9")),
            Some(Reply::Json)
        );
        assert_eq!(reply_mode(&headers("*/*")), Some(Reply::Sse));
        assert_eq!(reply_mode(&headers("text/html")), None);
        assert_eq!(reply_mode(&HeaderMap::new()), Some(Reply::Sse));
    }

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("localhost:8080"),
            ("localhost", Some("8080"))
        );
        assert_eq!(split_authority("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_authority("example.com"), ("example.com", None));
        assert!(
            is_loopback_host("127.0.0.5")
                && is_loopback_host("[::1]")
                && is_loopback_host("LOCALHOST")
        );
        assert!(!is_loopback_host("evil.example.com") && !is_loopback_host("10.0.0.1"));
    }
}
