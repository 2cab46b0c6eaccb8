//! The thin layer in front of rmcp's dispatch, shared by the stdio line filter and the HTTP
//! front: JSON-RPC 2.0 envelope checks, the errors rmcp would otherwise swallow, protocol
//! revision facts, and the one rewrite OmniForge needs (`tools/call` arguments).
//!
//! rmcp 3.11 drops an unparsable stdio line silently, reads `arguments: null` as absent and
//! rejects a non-object `arguments` as an invalid request. The prototype answers both with
//! the tool-level error "arguments must be a JSON object", so [`check_message`] moves such
//! arguments out of the way and leaves a marker in `_meta` ([`INVALID_ARGUMENTS_META`]) that
//! the handler turns into that `isError` result.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorData};
use serde_json::{Map, Value, json};

use crate::transport::stateless;

pub(crate) use crate::context::request::INVALID_ARGUMENTS_META;

/// The client-to-server request methods rmcp 3.11 dispatches (its `ClientRequest` variants).
/// Any other method is answered with -32601; one of these with malformed params, with -32602.
pub(crate) const KNOWN_METHODS: [&str; 21] = [
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/directory/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
];

/// Methods that exist only in the stateless revision 2026-07-28.
const STATELESS_ONLY_METHODS: [&str; 2] = ["server/discover", "subscriptions/listen"];

/// Where a 2026-07-28 request carries its protocol revision.
const PROTOCOL_VERSION_META_POINTER: &str =
    "/params/_meta/io.modelcontextprotocol~1protocolVersion";

/// JSON-RPC 2.0 §5.1 codes used by the front.
pub(crate) mod code {
    /// Invalid JSON was received.
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid Request object.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist.
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
}

/// The protocol revisions OmniForge serves, oldest first.
pub(crate) const SUPPORTED_VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The newest revision that still has an `initialize` handshake: the answer to an
/// `initialize` naming a revision we do not serve (2025-11-25, Lifecycle > Version Negotiation).
pub(crate) const NEWEST_WITH_HANDSHAKE: &str = "2025-11-25";

/// The revision an `initialize` asking for `requested` is answered with. Mirrors rmcp's
/// negotiation: echo a supported revision that has a handshake, else counter-offer
/// [`NEWEST_WITH_HANDSHAKE`]. Never an error.
pub(crate) fn negotiated_version(requested: Option<&str>) -> &'static str {
    SUPPORTED_VERSIONS[..4]
        .iter()
        .find(|v| Some(**v) == requested)
        .copied()
        .unwrap_or(NEWEST_WITH_HANDSHAKE)
}

/// Whether a revision allows JSON-RPC batches. They were part of 2025-03-26 (and plain
/// JSON-RPC before it) and removed in 2025-06-18 (Basic > Transports, "single message").
pub(crate) fn allows_batches(version: &str) -> bool {
    version < "2025-06-18"
}

/// A JSON-RPC error response object.
pub(crate) fn error_response(id: Option<&Value>, code: i64, message: impl Into<String>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message.into()},
    })
}

/// A JSON-RPC error response object from an rmcp [`ErrorData`] (code, message, data).
pub(crate) fn error_data_response(id: Option<&Value>, error: &ErrorData) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": error,
    })
}

/// What one inbound message is, after the envelope checks.
#[derive(Debug)]
pub(crate) enum Checked {
    /// A request rmcp can dispatch. `initialize` is flagged for lifecycle tracking.
    Request {
        /// The request id.
        id: Value,
        /// The method name.
        method: String,
        /// The (possibly rewritten) message to forward.
        message: Value,
    },
    /// A notification, or a response to a server-to-client request, that rmcp can parse.
    Notification {
        /// The message to forward.
        message: Value,
    },
    /// A message without an id that rmcp cannot parse: drop it (never answer a notification).
    Drop {
        /// Why, for the log.
        reason: String,
    },
    /// A request (or malformed message) to answer with this error response right away.
    Reject {
        /// The error response.
        response: Value,
        /// The request is a 2026-07-28 request: over HTTP its status follows the error code
        /// ([`stateless::http_status`]).
        stateless: bool,
    },
}

/// Checks one message (not a batch) and applies the `tools/call` arguments rewrite.
/// `version_header`: the HTTP request's `MCP-Protocol-Version` (`None` on stdio), which with
/// the `_meta` decides whether the 2026-07-28 rules apply ([`stateless::applies`]).
pub(crate) fn check_message(mut value: Value, version_header: Option<&str>) -> Checked {
    let Some(obj) = value.as_object_mut() else {
        return reject(
            None,
            code::INVALID_REQUEST,
            "Invalid Request: a message must be a JSON object",
        );
    };
    let id = match obj.get("id") {
        None => None,
        // MCP's RequestId is a string or an integer (schema `RequestId`); a fractional or
        // out-of-range number would come back changed (rmcp keeps an i64), so it is refused.
        Some(id @ Value::String(_)) => Some(id.clone()),
        Some(id @ Value::Number(n)) if n.is_i64() => Some(id.clone()),
        // The id is readable, so the error carries it back unchanged.
        Some(id @ Value::Number(_)) => {
            return reject(
                Some(id),
                code::INVALID_REQUEST,
                "Invalid Request: id must be a string or an integer (-2^63 to 2^63-1)",
            );
        }
        Some(_) => {
            return reject(
                None,
                code::INVALID_REQUEST,
                "Invalid Request: id must be a string or an integer (-2^63 to 2^63-1)",
            );
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return match id {
            None if obj.contains_key("method") => Checked::Drop {
                reason: "notification without jsonrpc: \"2.0\"".into(),
            },
            _ => reject(
                id.as_ref(),
                code::INVALID_REQUEST,
                "Invalid Request: jsonrpc must be \"2.0\"",
            ),
        };
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => {
            return match id {
                None => Checked::Drop {
                    reason: "method is not a string".into(),
                },
                Some(id) => reject(
                    Some(&id),
                    code::INVALID_REQUEST,
                    "Invalid Request: method must be a string",
                ),
            };
        }
        None => None,
    };
    if let (Some(id), Some(method)) = (&id, &method)
        && stateless::applies(version_header, &value)
        && let Some(error) = stateless::check(version_header, method, &value, &SUPPORTED_VERSIONS)
    {
        return Checked::Reject {
            response: error_data_response(Some(id), &error),
            stateless: true,
        };
    }
    let Some(obj) = value.as_object_mut() else {
        return reject(None, code::INVALID_REQUEST, "Invalid Request");
    };
    if let Some("tools/call") = method.as_deref() {
        rewrite_call_arguments(obj);
    }
    // Deserialized from a borrow: cloning every message first showed in the profiles.
    let parsed = <ClientJsonRpcMessage as serde::Deserialize>::deserialize(&value);
    match (id, method) {
        (Some(id), Some(method)) => match parsed {
            _ if !KNOWN_METHODS.contains(&method.as_str()) => reject(
                Some(&id),
                code::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            ),
            // A 2026-07-28-only method without that revision's request `_meta` comes from a
            // client of an earlier revision probing for it: "Method not found" is the answer
            // such clients expect before they fall back to `initialize` (WIRE-14).
            _ if STATELESS_ONLY_METHODS.contains(&method.as_str())
                && value.pointer(PROTOCOL_VERSION_META_POINTER).is_none() =>
            {
                reject(
                    Some(&id),
                    code::METHOD_NOT_FOUND,
                    format!(
                        "Method not found: {method} exists only in protocol revision 2026-07-28, \
                         whose requests carry _meta.\"io.modelcontextprotocol/protocolVersion\"; \
                         clients of earlier revisions start with initialize"
                    ),
                )
            }
            Ok(ClientJsonRpcMessage::Request(req))
                if !matches!(req.request, ClientRequest::CustomRequest(_)) =>
            {
                Checked::Request {
                    id,
                    method,
                    message: value,
                }
            }
            Ok(_) | Err(_) => reject(
                Some(&id),
                code::INVALID_PARAMS,
                format!(
                    "Invalid params for {method}: {}",
                    parse_error_text(parsed.err())
                ),
            ),
        },
        (None, Some(method)) => match parsed {
            Ok(ClientJsonRpcMessage::Notification(_)) => Checked::Notification { message: value },
            _ => Checked::Drop {
                reason: format!("unparsable notification {method}"),
            },
        },
        (id, None) => {
            let is_response = obj_has(&value, "result") || obj_has(&value, "error");
            match parsed {
                Ok(ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_))
                    if is_response =>
                {
                    Checked::Notification { message: value }
                }
                _ if is_response => Checked::Drop {
                    reason: "unparsable response".into(),
                },
                _ => reject(
                    id.as_ref(),
                    code::INVALID_REQUEST,
                    "Invalid Request: no method",
                ),
            }
        }
    }
}

fn obj_has(value: &Value, key: &str) -> bool {
    value.get(key).is_some()
}

fn parse_error_text(err: Option<serde_json::Error>) -> String {
    err.map_or_else(|| "unexpected message shape".to_owned(), |e| e.to_string())
}

fn reject(id: Option<&Value>, code: i64, message: impl Into<String>) -> Checked {
    Checked::Reject {
        response: error_response(id, code, message),
        stateless: false,
    }
}

/// `arguments: null` or a non-object becomes absent plus the [`INVALID_ARGUMENTS_META`] marker.
fn rewrite_call_arguments(obj: &mut Map<String, Value>) {
    let Some(Value::Object(params)) = obj.get_mut("params") else {
        return;
    };
    let bad = match params.get("arguments") {
        None | Some(Value::Object(_)) => return,
        Some(other) => json_type(other),
    };
    params.remove("arguments");
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(INVALID_ARGUMENTS_META.into(), Value::String(bad.into()));
    }
}

/// The JSON type name of a value, for error texts.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Checked {
        check_message(serde_json::from_str(text).unwrap(), None)
    }

    fn rejected_code(c: Checked) -> (Value, i64) {
        match c {
            Checked::Reject { response, .. } => (
                response["id"].clone(),
                response["error"]["code"].as_i64().unwrap(),
            ),
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn envelope_errors() {
        assert_eq!(
            rejected_code(check("42")),
            (Value::Null, code::INVALID_REQUEST)
        );
        assert_eq!(
            rejected_code(check(r#"{"id":1,"method":"ping"}"#)),
            (json!(1), code::INVALID_REQUEST)
        );
        assert_eq!(
            rejected_code(check(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#)),
            (Value::Null, code::INVALID_REQUEST)
        );
        for id in ["1.0", "1e2", "1E-400", "18446744073709551616"] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let expected: Value = serde_json::from_str(id).unwrap();
            assert_eq!(
                rejected_code(check(&text)),
                (expected, code::INVALID_REQUEST),
                "{id}"
            );
        }
        assert_eq!(
            rejected_code(check(r#"{"jsonrpc":"2.0","id":"x","method":"no/such"}"#)),
            (json!("x"), code::METHOD_NOT_FOUND)
        );
        assert_eq!(
            rejected_code(check(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#
            )),
            (json!(3), code::INVALID_PARAMS)
        );
    }

    #[test]
    fn stateless_methods_need_their_meta() {
        assert_eq!(
            rejected_code(check(
                r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#
            )),
            (json!(1), code::METHOD_NOT_FOUND)
        );
        let with_meta = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{
            "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        assert!(matches!(check(with_meta), Checked::Request { .. }));
    }

    #[test]
    fn notifications_are_never_answered() {
        assert!(matches!(
            check(r#"{"jsonrpc":"2.0","method":"no/such"}"#),
            Checked::Notification { .. }
        ));
        assert!(matches!(
            check(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":"bad"}"#),
            Checked::Drop { .. }
        ));
        assert!(matches!(
            check(r#"{"method":"notifications/initialized"}"#),
            Checked::Drop { .. }
        ));
    }

    #[test]
    fn bad_arguments_reach_the_handler() {
        for args in ["null", "[1]", "\"s\"", "7"] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{args}}}}}"#
            );
            let Checked::Request { message, .. } = check(&text) else {
                panic!("{args}")
            };
            assert!(message["params"].get("arguments").is_none());
            assert!(message["params"]["_meta"][INVALID_ARGUMENTS_META].is_string());
        }
    }

    #[test]
    fn negotiation_never_fails() {
        assert_eq!(negotiated_version(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiated_version(Some("2024-11-05")), "2024-11-05");
        assert_eq!(
            negotiated_version(Some("2099-01-01")),
            NEWEST_WITH_HANDSHAKE
        );
        assert_eq!(
            negotiated_version(Some("2026-07-28")),
            NEWEST_WITH_HANDSHAKE
        );
        assert_eq!(negotiated_version(None), NEWEST_WITH_HANDSHAKE);
        assert!(allows_batches("2025-03-26") && !allows_batches("2025-06-18"));
    }
}
