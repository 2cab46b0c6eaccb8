//! `resources/list`, `resources/templates/list`, `resources/read`, `resources/subscribe` and
//! `resources/unsubscribe`: stored content, plus the kept outputs behind cut results' links.

use rmcp::model::{
    ErrorData, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
};
use rmcp::service::{Peer, RequestContext, RoleServer};

use crate::context::request::RequestCx;
use crate::error::ContentError;
use crate::mcp::pagination::paginate;
use crate::mcp::state::Shared;
use crate::mcp::to_wire::content_error;
use crate::tools::stored::kept::RUN_OUTPUT_PREFIX;

/// `resources/list`. The outputs behind resource links of cut results are not listed: each is
/// reachable from the result that links to it, for an hour.
///
/// # Errors
/// -32602 for a bad cursor.
pub(crate) fn list(
    shared: &Shared,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let resources = shared
        .content
        .as_ref()
        .map(|c| c.list_resources())
        .unwrap_or_default();
    let (page, next) = paginate(resources, request, shared.page_size)?;
    let mut result = ListResourcesResult::with_all_items(page);
    result.next_cursor = next;
    Ok(result)
}

/// `resources/templates/list`.
///
/// # Errors
/// -32602 for a bad cursor.
pub(crate) fn list_templates(
    shared: &Shared,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourceTemplatesResult, ErrorData> {
    let templates = shared
        .content
        .as_ref()
        .map(|c| c.list_templates())
        .unwrap_or_default();
    let (page, next) = paginate(templates, request, shared.page_size)?;
    let mut result = ListResourceTemplatesResult::with_all_items(page);
    result.next_cursor = next;
    Ok(result)
}

/// `resources/read`.
///
/// # Errors
/// -32002 for an unknown URI, -32603 when a template script fails.
pub(crate) async fn read(
    shared: &Shared,
    request: ReadResourceRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<ReadResourceResponse, ErrorData> {
    let ct = ctx.ct.clone();
    let uri = request.uri;
    if uri.starts_with(RUN_OUTPUT_PREFIX) {
        let cx = RequestCx::of(ctx, None);
        let text = match &shared.kept {
            Some(kept) => kept.read(&uri, &cx).await,
            None => None,
        };
        return match text {
            Some(text) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("text/plain"),
            ])
            .into()),
            None => Err(content_error(ContentError::OutputNotFound { uri })),
        };
    }
    if let Some(content) = &shared.content
        && let Some(contents) = content.read(&uri, ct).await.map_err(content_error)?
    {
        return Ok(ReadResourceResult::new(vec![contents]).into());
    }
    Err(content_error(ContentError::ResourceNotFound { uri }))
}

/// `resources/subscribe` from handler `handler`: the URI must be a stored resource or match a
/// template.
///
/// # Errors
/// -32002 for an unknown URI.
pub(crate) fn subscribe(
    shared: &Shared,
    handler: u64,
    uri: String,
    peer: Peer<RoleServer>,
) -> Result<(), ErrorData> {
    match &shared.content {
        Some(content) if content.is_known(&uri) => {
            content.subscriptions.subscribe(handler, &uri, peer);
            Ok(())
        }
        _ => Err(content_error(ContentError::ResourceNotFound { uri })),
    }
}

/// `resources/unsubscribe`: forgets the subscription (unknown ones are fine).
pub(crate) fn unsubscribe(shared: &Shared, handler: u64, uri: &str) {
    if let Some(content) = &shared.content {
        content.subscriptions.unsubscribe(handler, uri);
    }
}
