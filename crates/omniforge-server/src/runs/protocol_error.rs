//! `omniforge.protocol_error(code, message, data)`: a script ends its call with a JSON-RPC
//! error instead of a tool result, e.g. -32021 when the request did not declare a client
//! capability the tool needs (2026-07-28, `basic/index.mdx`: "MUST return a
//! MissingRequiredClientCapabilityError"). Over HTTP rmcp gives it its status (-32021: 400).
//!
//! Only request-level codes a tool can honestly own are allowed; a script must not forge the
//! transport's own answers (-32020 header mismatch, -32022 unsupported version, -32601, …).
//! The message and data pass the secret redaction like every result.

use rmcp::model::ErrorCode;
use serde_json::Value;

use crate::error::CallError;
use crate::runs::redact::{scrub, scrub_value};

/// The codes a script may end its call with: a client capability the request did not
/// declare, invalid params, internal error.
pub(crate) const ALLOWED_CODES: [ErrorCode; 3] = [
    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
    ErrorCode::INVALID_PARAMS,
    ErrorCode::INTERNAL_ERROR,
];

/// Longest message kept (a JSON-RPC message is meant to be one short sentence).
const MAX_MESSAGE_CHARS: usize = 1000;

/// The call's error for a script's `protocol_error` request params
/// (`{code, message, data?}`), with `secrets` scrubbed.
pub(crate) fn from_script(params: &Value, secrets: &[String]) -> CallError {
    let code = params
        .get("code")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .map(ErrorCode);
    let Some(code) = code.filter(|c| ALLOWED_CODES.contains(c)) else {
        let allowed: Vec<String> = ALLOWED_CODES.iter().map(|c| c.0.to_string()).collect();
        return CallError::ProtocolRefused(format!(
            "code {} is not allowed (a script may end its call with {})",
            params.get("code").unwrap_or(&Value::Null),
            allowed.join(", ")
        ));
    };
    let message = params
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the tool ended the request with an error");
    let message: String = scrub(message, secrets)
        .chars()
        .take(MAX_MESSAGE_CHARS)
        .collect();
    let data = params
        .get("data")
        .filter(|d| !d.is_null())
        .map(|d| scrub_value(d.clone(), secrets));
    CallError::Protocol {
        code: code.0,
        message,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn allowed_codes_pass_with_their_data_redacted() {
        let secrets = ["hunter2".to_owned()];
        let params = json!({"code": -32021, "message": "needs sampling (hunter2)",
            "data": {"requiredCapabilities": {"sampling": {}}, "k": "hunter2"}});
        let CallError::Protocol {
            code,
            message,
            data,
        } = from_script(&params, &secrets)
        else {
            panic!("refused")
        };
        assert_eq!(code, -32021);
        assert!(!message.contains("hunter2"));
        let data = data.unwrap();
        assert_eq!(data["requiredCapabilities"], json!({"sampling": {}}));
        assert_ne!(data["k"], "hunter2");
    }

    #[test]
    fn transport_codes_are_refused() {
        for code in [
            json!(-32020),
            json!(-32022),
            json!(-32601),
            json!(1),
            json!("x"),
            json!(null),
        ] {
            let params = json!({"code": code, "message": "m"});
            assert!(
                matches!(from_script(&params, &[]), CallError::ProtocolRefused(_)),
                "{code}"
            );
        }
    }
}
