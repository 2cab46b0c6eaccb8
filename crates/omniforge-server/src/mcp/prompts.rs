//! `prompts/list`, `prompts/get` and `completion/complete`.

use rmcp::model::{
    CompleteRequestParams, CompleteResult, ErrorData, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, PaginatedRequestParams,
};
use tokio_util::sync::CancellationToken;

use crate::mcp::pagination::paginate;
use crate::mcp::state::Shared;
use crate::mcp::to_wire::content_error;

/// `prompts/list`.
///
/// # Errors
/// -32602 for a bad cursor.
pub(crate) fn list(
    shared: &Shared,
    request: Option<PaginatedRequestParams>,
) -> Result<ListPromptsResult, ErrorData> {
    let prompts = shared
        .content
        .as_ref()
        .map(|c| c.list_prompts())
        .unwrap_or_default();
    let (page, next) = paginate(prompts, request, shared.page_size)?;
    let mut result = ListPromptsResult::with_all_items(page);
    result.next_cursor = next;
    Ok(result)
}

/// `prompts/get`.
///
/// # Errors
/// -32602 for an unknown prompt, a missing required argument or an undeclared one.
pub(crate) fn get(
    shared: &Shared,
    request: GetPromptRequestParams,
) -> Result<GetPromptResponse, ErrorData> {
    match &shared.content {
        Some(content) => Ok(content.get_prompt(&request).map_err(content_error)?.into()),
        None => Err(ErrorData::invalid_params(
            format!("unknown prompt {:?}", request.name),
            None,
        )),
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
    match &shared.content {
        Some(content) => content.complete(&request, ct).await.map_err(content_error),
        None => Err(ErrorData::invalid_params("nothing to complete", None)),
    }
}
