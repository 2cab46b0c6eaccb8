//! The one place the server's own errors become MCP wire types: a [`CallError`] is a
//! tool-level `isError` result (the model can correct itself), except a cancelled call and a
//! script's `protocol_error` (a JSON-RPC error with the script's code); a [`ContentError`] is a JSON-RPC error with its code.

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData};
use serde_json::json;

use crate::error::{CallError, ContentError};

/// The answer to a `tools/call`.
///
/// # Errors
/// A cancelled call (rmcp drops the response of a cancelled request).
pub(crate) fn call_response(
    result: Result<CallToolResult, CallError>,
) -> Result<CallToolResponse, ErrorData> {
    match result {
        Ok(result) => Ok(result.into()),
        Err(CallError::Cancelled) => Err(ErrorData::internal_error("cancelled", None)),
        Err(CallError::Protocol {
            code,
            message,
            data,
        }) => Err(ErrorData::new(ErrorCode(code), message, data)),
        Err(error) => Ok(call_error(&error).into()),
    }
}

/// A call error as the `isError` result a client sees (also what the command line prints).
pub(crate) fn call_error(error: &CallError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_string())])
}

/// A content error as a JSON-RPC error.
pub(crate) fn content_error(error: ContentError) -> ErrorData {
    let message = error.to_string();
    match error {
        ContentError::ResourceNotFound { uri } | ContentError::OutputNotFound { uri } => {
            ErrorData::resource_not_found(message, Some(json!({"uri": uri})))
        }
        ContentError::InvalidParams(_) => ErrorData::invalid_params(message, None),
        ContentError::TemplateFailed { .. }
        | ContentError::CompletionFailed(_)
        | ContentError::CompletionOutput(_)
        | ContentError::Unreadable(_)
        | ContentError::Store(_) => ErrorData::internal_error(message, None),
    }
}
