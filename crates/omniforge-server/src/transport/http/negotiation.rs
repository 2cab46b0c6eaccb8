//! What a POST asks for and may carry: `Content-Type`, `Accept` (SSE or one JSON answer), the
//! body limit, `MCP-Protocol-Version`, and whether a batch is allowed.

// A rejection is a ready `Response` (axum's idiom); see `access.rs`.
#![allow(clippy::result_large_err)]

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::BodyExt;

use crate::transport::http::wire::{EVENT_STREAM, JSON, PROTOCOL_VERSION, rpc_error};
use crate::transport::jsonrpc::{self, code};

/// How the client wants the answer to a POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// `text/event-stream` (also for `*/*` and a missing Accept: it keeps progress notifications).
    Sse,
    /// `application/json` only: the SSE stream is collapsed into the single response.
    Json,
}

/// Reads `Accept`; 406 when the client takes neither JSON nor SSE.
pub(super) fn reply_mode(headers: &HeaderMap) -> Result<Reply, Response> {
    accepted(headers).ok_or_else(|| {
        rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            None,
            code::INVALID_REQUEST,
            "Not Acceptable: the client must accept application/json or text/event-stream",
        )
    })
}

fn accepted(headers: &HeaderMap) -> Option<Reply> {
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

/// A POST body must be `application/json`; 415 otherwise.
pub(super) fn check_content_type(headers: &HeaderMap) -> Result<(), Response> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case(JSON)
    {
        Ok(())
    } else {
        Err(rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            code::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        ))
    }
}

/// Reads a request body up to `limit` bytes; 413 beyond it.
pub(super) async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, Response> {
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

/// Fills in or checks `MCP-Protocol-Version` for a request inside a session that negotiated
/// `negotiated`.
///
/// Absent: the negotiated revision is filled in (rmcp would assume 2025-03-26). Present: it
/// must name a revision we serve (2025-06-18, Basic > Transports > Protocol Version Header:
/// "invalid or unsupported" gets 400). A supported revision other than the negotiated one
/// is tolerated, as the reference servers do (the conformance suite sends 2025-03-26
/// inside 2025-11-25 sessions); the session keeps its negotiated revision. `id`: the
/// request's, which the error names.
pub(super) fn fill_protocol_version(
    headers: &mut HeaderMap,
    negotiated: Option<&'static str>,
    id: Option<&serde_json::Value>,
) -> Result<(), Response> {
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
            id,
            code::INVALID_REQUEST,
            format!(
                "Bad Request: unsupported MCP-Protocol-Version '{sent}' (supported: {})",
                jsonrpc::SUPPORTED_VERSIONS.join(", ")
            ),
        )),
    }
}

/// Whether a batch may be processed: under the session's negotiated revision, else the header's.
/// 400 / -32600 for an empty batch or a revision without batches (rmcp answers 415).
pub(super) fn check_batch(
    len: usize,
    negotiated: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), Response> {
    if len == 0 {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            code::INVALID_REQUEST,
            "Invalid Request: empty batch",
        ));
    }
    let version =
        negotiated.or_else(|| headers.get(PROTOCOL_VERSION).and_then(|v| v.to_str().ok()));
    if version.is_some_and(jsonrpc::allows_batches) {
        return Ok(());
    }
    Err(rpc_error(
        StatusCode::BAD_REQUEST,
        None,
        code::INVALID_REQUEST,
        format!(
            "Invalid Request: JSON-RPC batches are not supported under protocol revision {} \
             (2025-06-18 and later take one message per POST)",
            version.unwrap_or("(none negotiated)")
        ),
    ))
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
            accepted(&headers("application/json, text/event-stream")),
            Some(Reply::Sse)
        );
        assert_eq!(accepted(&headers("text/event-stream")), Some(Reply::Sse));
        assert_eq!(accepted(&headers("application/json")), Some(Reply::Json));
        assert_eq!(
            accepted(&headers("application/json;q=0.9")),
            Some(Reply::Json)
        );
        assert_eq!(accepted(&headers("*/*")), Some(Reply::Sse));
        assert_eq!(accepted(&headers("text/html")), None);
        assert_eq!(accepted(&HeaderMap::new()), Some(Reply::Sse));
    }
}
