//! The stateless revision's request rules (2026-07-28, SEP-2575), in one place for both
//! transports.
//!
//! **Which requests they apply to.** A request is a 2026-07-28 request when its
//! `MCP-Protocol-Version` header (HTTP) names 2026-07-28, or when its `params._meta` carries
//! one of the per-request keys ([`PER_REQUEST_KEYS`]). stdio has no headers, so there the
//! `_meta` alone decides. Every other request (2024-11-05 to 2025-11-25 sessions, and a
//! `server/discover` probe with empty params, WIRE-14) keeps the earlier revisions' answers.
//!
//! **The rules**, each with its JSON-RPC code and HTTP status ([`http_status`]):
//! - a method that 2026-07-28 removed (`initialize`, `ping`, `logging/setLevel`,
//!   `resources/subscribe`, `resources/unsubscribe`) or never had: -32601, 404;
//! - `_meta` missing, or without `protocolVersion` or `clientCapabilities`: -32602, 400;
//! - the header and the `_meta` version differ: -32020 (header mismatch), 400;
//! - a version the server does not serve: -32022 with `data: {supported, requested}`, 400;
//! - every error names the request's id.
//!
//! A request needing a client capability it did not declare (-32021, 400) is refused where
//! the need arises (a script's [`protocol_error`](crate::runs::run), rmcp's own
//! checks); [`http_status`] gives it its status.

use http::StatusCode;
use rmcp::model::{ErrorCode, ErrorData, ProtocolVersion};
use serde_json::{Value, json};

/// The stateless revision.
pub(crate) const STATELESS_REVISION: &str = "2026-07-28";

/// `_meta` key of the request's protocol revision.
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's declared capabilities.
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's name and version (optional).
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The `_meta` keys only a 2026-07-28 request carries.
pub(crate) const PER_REQUEST_KEYS: [&str; 3] = [
    META_PROTOCOL_VERSION,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
];

/// Methods 2026-07-28 removed: a request for one is answered like an unknown method.
const REMOVED_METHODS: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The request methods a 2026-07-28 request may name: the schema's client requests, plus the
/// extensions rmcp dispatches (tasks, skills, resource directories).
const METHODS: [&str; 16] = [
    "server/discover",
    "subscriptions/listen",
    "completion/complete",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// Whether a request is judged by the 2026-07-28 rules: its `MCP-Protocol-Version` header
/// (`None` on stdio) names that revision, or its `_meta` carries a per-request key.
pub(crate) fn applies(version_header: Option<&str>, message: &Value) -> bool {
    version_header.is_some_and(|v| v.trim() == STATELESS_REVISION)
        || message
            .pointer("/params/_meta")
            .and_then(Value::as_object)
            .is_some_and(|meta| PER_REQUEST_KEYS.iter().any(|k| meta.contains_key(*k)))
}

/// Checks a 2026-07-28 request (one with an id and a method) for a server serving the
/// revisions `supported`; `Some` is the error to answer with, `None` lets it through to rmcp.
pub(crate) fn check(
    version_header: Option<&str>,
    method: &str,
    message: &Value,
    supported: &[&str],
) -> Option<ErrorData> {
    if REMOVED_METHODS.contains(&method) {
        return Some(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method} does not exist in protocol revision 2026-07-28"),
            None,
        ));
    }
    if !METHODS.contains(&method) {
        return Some(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
            None,
        ));
    }
    let meta = message.pointer("/params/_meta").and_then(Value::as_object);
    let version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION));
    let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES));
    let mut missing = Vec::new();
    if !version.is_some_and(Value::is_string) {
        missing.push(META_PROTOCOL_VERSION);
    }
    if !capabilities.is_some_and(Value::is_object) {
        missing.push(META_CLIENT_CAPABILITIES);
    }
    if !missing.is_empty() {
        return Some(ErrorData::invalid_params(
            format!(
                "Invalid params: a 2026-07-28 request carries params._meta with {}",
                missing.join(" and ")
            ),
            Some(json!({"missing": missing})),
        ));
    }
    let requested = version.and_then(Value::as_str).unwrap_or_default();
    if let Some(header) = version_header.map(str::trim)
        && header != requested
    {
        return Some(ErrorData::header_mismatch(
            format!(
                "MCP-Protocol-Version header ({header}) does not match request _meta \
                 protocolVersion ({requested})"
            ),
            None,
        ));
    }
    if !supported.contains(&requested) {
        return Some(unsupported_version(requested, supported));
    }
    None
}

/// -32022 for `requested`, listing `supported` (what `server/discover` reports).
pub(crate) fn unsupported_version(requested: &str, supported: &[&str]) -> ErrorData {
    let supported: Vec<ProtocolVersion> = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| supported.contains(&v.as_str()))
        .cloned()
        .collect();
    let mut error = ErrorData::unsupported_protocol_version(
        serde_json::from_value(Value::String(requested.to_owned()))
            .unwrap_or(ProtocolVersion::LATEST),
        &supported,
    );
    // The requested value goes back exactly as sent.
    if let Some(Value::Object(data)) = error.data.as_mut() {
        data.insert("requested".into(), Value::String(requested.to_owned()));
    }
    error.message =
        format!("Unsupported protocol version {requested:?}; this server serves the listed ones")
            .into();
    error
}

/// The HTTP status of a JSON-RPC error answering a 2026-07-28 request (Streamable HTTP,
/// 2026-07-28): a malformed or refused request is 400, an unknown method 404.
pub(crate) fn http_status(code: i64) -> StatusCode {
    let code = i32::try_from(code).map(ErrorCode).ok();
    match code {
        Some(ErrorCode::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            ErrorCode::PARSE_ERROR
            | ErrorCode::INVALID_REQUEST
            | ErrorCode::INVALID_PARAMS
            | ErrorCode::HEADER_MISMATCH
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUPPORTED: [&str; 2] = ["2025-11-25", "2026-07-28"];

    fn request(method: &str, meta: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": meta}})
    }

    fn meta(version: &str) -> Value {
        json!({META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}})
    }

    #[test]
    fn which_requests_are_stateless() {
        let empty = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
        assert!(!applies(None, &empty), "WIRE-14's probe stays legacy");
        assert!(applies(Some("2026-07-28"), &empty));
        assert!(!applies(Some("2025-06-18"), &empty));
        assert!(applies(None, &request("tools/list", meta("2026-07-28"))));
        assert!(applies(
            None,
            &request("tools/list", json!({META_CLIENT_INFO: {}}))
        ));
        assert!(!applies(
            None,
            &request("tools/list", json!({"progressToken": 1}))
        ));
    }

    #[test]
    fn each_rule_has_its_code() {
        let code = |header, method, meta| {
            check(header, method, &request(method, meta), &SUPPORTED).map(|e| e.code)
        };
        assert_eq!(code(None, "tools/list", meta("2026-07-28")), None);
        for removed in REMOVED_METHODS {
            assert_eq!(
                code(None, removed, meta("2026-07-28")),
                Some(ErrorCode::METHOD_NOT_FOUND)
            );
        }
        assert_eq!(
            code(None, "no/such", meta("2026-07-28")),
            Some(ErrorCode::METHOD_NOT_FOUND)
        );
        assert_eq!(
            code(None, "tools/list", json!({})),
            Some(ErrorCode::INVALID_PARAMS)
        );
        assert_eq!(
            code(None, "tools/list", json!({META_CLIENT_CAPABILITIES: {}})),
            Some(ErrorCode::INVALID_PARAMS)
        );
        assert_eq!(
            code(Some("2026-07-28"), "tools/list", meta("v999")),
            Some(ErrorCode::HEADER_MISMATCH)
        );
        assert_eq!(
            code(Some("v999"), "tools/list", meta("v999")),
            Some(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION)
        );
    }

    #[test]
    fn unsupported_version_lists_the_supported_ones() {
        let error = unsupported_version("v999.0.0", &SUPPORTED);
        let data = error.data.unwrap();
        assert_eq!(data["requested"], "v999.0.0");
        assert_eq!(data["supported"], json!(SUPPORTED));
    }
}
