//! SSE → JSON: collapses rmcp's SSE answer to one request into a single JSON response, for
//! clients that accept only `application/json` and for the members of a batch.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::transport::http::wire::{EVENT_STREAM, INTERNAL_ERROR, JSON, rpc_error};
use crate::transport::jsonrpc;

/// Collapses an SSE response into the JSON response to request `id`. Other responses pass
/// through.
pub(super) async fn sse_to_json(response: Response, id: &Value) -> Response {
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
        INTERNAL_ERROR,
        "Internal error: the request ended without a response",
    )
}

/// The JSON-RPC message a forwarded batch member came back with.
pub(super) async fn response_value(response: Response, id: &Value) -> Value {
    let status = response.status();
    let bytes = match response.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => Bytes::new(),
    };
    serde_json::from_slice::<Value>(&bytes).unwrap_or_else(|_| {
        jsonrpc::error_response(
            Some(id),
            INTERNAL_ERROR,
            format!("Internal error: HTTP {status} without a JSON body"),
        )
    })
}
