//! The one place the server's own errors become MCP wire types: a [`CallError`] is a
//! tool-level `isError` result (the model can correct itself), except a cancelled call and a
//! script's `protocol_error` (a JSON-RPC error with the script's code); a [`ContentError`] is a JSON-RPC error with its code.

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData, InputRequest,
    InputRequests, InputRequiredResult,
};
use serde_json::json;

use crate::content::run::NoContent;
use crate::error::{CallError, ContentError, InputRequired};
use crate::tools::ops::mcp::error_result;

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
        Err(CallError::InputRequired(input)) => input_required(*input).map(Into::into),
        Err(error) => Ok(call_error(&error).into()),
    }
}

/// A request that ends with a JSON-RPC error rather than its result (a script's
/// `protocol_error`, a refused `requestState`; anything else is -32603 with its text).
pub(crate) fn request_error(error: CallError) -> ErrorData {
    match error {
        CallError::Protocol {
            code,
            message,
            data,
        } => ErrorData::new(ErrorCode(code), message, data),
        other => ErrorData::internal_error(other.to_string(), None),
    }
}

/// The answer to a `resources/read` or `prompts/get` that got no content: an
/// `input_required` result, or a JSON-RPC error.
///
/// # Errors
/// Content's own errors with their codes; a script's `protocol_error` or a refused
/// `requestState` ([`request_error`]).
pub(crate) fn no_content<T: From<InputRequiredResult>>(
    no_content: NoContent,
) -> Result<T, ErrorData> {
    match no_content {
        NoContent::Content(error) => Err(content_error(error)),
        NoContent::Answer(CallError::InputRequired(input)) => {
            input_required(*input).map(Into::into)
        }
        NoContent::Answer(error) => Err(request_error(error)),
    }
}

/// The `input_required` result of a call that waits for the client's input.
///
/// # Errors
/// -32603 when a question is not a valid MCP request (checked when the script asked).
pub(crate) fn input_required(input: InputRequired) -> Result<InputRequiredResult, ErrorData> {
    let mut requests = InputRequests::new();
    for (key, request) in input.requests {
        let request = serde_json::from_value::<InputRequest>(request)
            .map_err(|e| ErrorData::internal_error(format!("input request {key:?}: {e}"), None))?;
        requests.insert(key, request);
    }
    Ok(InputRequiredResult::new(Some(requests), Some(input.state)))
}

/// A call error as the `isError` result a client sees (also what the command line prints):
/// the built-ins' adapter's rendering, so a script's `call_builtin` gets the same.
pub(crate) fn call_error(error: &CallError) -> CallToolResult {
    error_result(error)
}

/// What the console's try-it form shows for a call that waits for the client's input (an
/// `input_required` result), which only an MCP client can answer.
pub(crate) fn unanswerable_input() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        "The tool asked the client for input (an input_required result); the console cannot answer that: call it from an MCP client.",
    )])
}

/// A content error as a JSON-RPC error.
pub(crate) fn content_error(error: ContentError) -> ErrorData {
    let message = error.to_string();
    match error {
        ContentError::ResourceNotFound { uri } | ContentError::OutputNotFound { uri, .. } => {
            ErrorData::resource_not_found(message, Some(json!({"uri": uri})))
        }
        ContentError::InvalidParams(_) => ErrorData::invalid_params(message, None),
        ContentError::TemplateFailed { .. }
        | ContentError::PromptFailed { .. }
        | ContentError::PromptOutput { .. }
        | ContentError::CompletionFailed(_)
        | ContentError::CompletionOutput(_)
        | ContentError::Unreadable(_)
        | ContentError::Store(_) => ErrorData::internal_error(message, None),
    }
}
