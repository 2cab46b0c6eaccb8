//! `prompts/list`, `prompts/get` and `completion/complete`.

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve (a prompt script's log messages follow it).
#![allow(deprecated)]
use std::sync::Mutex;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, LoggingLevel, PaginatedRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::context::client::InputRound;
use crate::context::request::RequestCx;
use crate::mcp::pagination::paginate;
use crate::mcp::state::Shared;
use crate::mcp::to_wire::{self, content_error};

/// `prompts/list`.
///
/// # Errors
/// -32602 for a bad cursor.
pub(crate) fn list(
    shared: &Shared,
    request: Option<PaginatedRequestParams>,
) -> Result<ListPromptsResult, ErrorData> {
    let prompts = shared
        .stored
        .as_ref()
        .map(|s| s.content().list_prompts())
        .unwrap_or_default();
    let (page, next) = paginate(prompts, request, shared.page_size)?;
    let mut result = ListPromptsResult::with_all_items(page);
    result.next_cursor = next;
    Ok(result)
}

/// `prompts/get`. A script prompt's questions are asked as a tool's are: under 2026-07-28 as
/// an `input_required` result (the retry's `inputResponses` and `requestState` answer them),
/// before it as requests to the client.
///
/// # Errors
/// -32602 for an unknown prompt, a missing required argument, an undeclared one or a
/// `requestState` that does not open; -32603 when a prompt script fails.
pub(crate) async fn get(
    shared: &Shared,
    mut request: GetPromptRequestParams,
    ctx: &RequestContext<RoleServer>,
    log_level: &Mutex<Option<LoggingLevel>>,
) -> Result<GetPromptResponse, ErrorData> {
    let Some(stored) = &shared.stored else {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt {:?}", request.name),
            None,
        ));
    };
    let round = InputRound {
        responses: request.input_responses.take().unwrap_or_default(),
        state: request.request_state.take(),
    };
    let cx = RequestCx::of(ctx, Some(log_level)).with_input(&round);
    match stored.content().get_prompt(&request, &cx).await {
        Ok(result) => Ok(result.into()),
        Err(no_content) => to_wire::no_content(no_content),
    }
}

/// `completion/complete`.
///
/// # Errors
/// -32602 for an unknown prompt, template or argument; -32603 when the script fails.
pub(crate) async fn complete(
    shared: &Shared,
    request: CompleteRequestParams,
    ct: CancellationToken,
) -> Result<CompleteResult, ErrorData> {
    match &shared.stored {
        Some(stored) => stored
            .content()
            .complete(&request, ct)
            .await
            .map_err(content_error),
        None => Err(ErrorData::invalid_params("nothing to complete", None)),
    }
}
