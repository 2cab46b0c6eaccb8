//! The HTTP front's shared vocabulary: header names, media types, and JSON-RPC error bodies
//! with an HTTP status (rmcp answers many errors in plain text; clients parse JSON-RPC).

use axum::body::Body;
use axum::response::Response;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::transport::jsonrpc::{self, code};

/// The session header.
pub(super) const SESSION_ID: &str = "mcp-session-id";
/// The protocol revision header.
pub(super) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// `application/json`.
pub(super) const JSON: &str = "application/json";
/// `text/event-stream`.
pub(super) const EVENT_STREAM: &str = "text/event-stream";
/// JSON-RPC error code for transport-level refusals that have no standard code
/// (unauthorized, forbidden, unknown session), as the TypeScript SDK uses it.
pub(super) const SERVER_ERROR: i64 = -32001;
/// JSON-RPC "Internal error".
pub(super) const INTERNAL_ERROR: i64 = -32603;

/// What rmcp's 500 says when the session's worker has ended.
const SESSION_ENDED: &str = "Session service terminated";

/// A JSON-RPC error response with an HTTP status.
pub(super) fn rpc_error(
    status: StatusCode,
    id: Option<&Value>,
    code: i64,
    message: impl Into<String>,
) -> Response {
    json_response(status, &jsonrpc::error_response(id, code, message))
}

/// A JSON body with an HTTP status.
pub(super) fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// Gives an rmcp error response that is not JSON a JSON-RPC error body (same status).
pub(super) async fn json_errors(response: Response, id: Option<&Value>) -> Response {
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
    // A session whose worker has ended (closed or expired while this request waited for it)
    // is gone: rmcp says 500 "Session service terminated", clients need 404 to start anew.
    let status = if status.is_server_error() && text.contains(SESSION_ENDED) {
        parts.status = StatusCode::NOT_FOUND;
        StatusCode::NOT_FOUND
    } else {
        status
    };
    let message = if status == StatusCode::NOT_FOUND && !text.starts_with("Not Found") {
        "Not Found: the session does not exist or has expired; start a new one with initialize"
            .to_owned()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let code = match status {
        StatusCode::NOT_FOUND | StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => SERVER_ERROR,
        s if s.is_server_error() => INTERNAL_ERROR,
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
