//! `resources/list`, `resources/templates/list`, `resources/read`, `resources/subscribe` and
//! `resources/unsubscribe`: stored content, plus the kept outputs behind cut results' links.

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve (a template script's log messages follow it).
#![allow(deprecated)]
use std::sync::Mutex;

use rmcp::model::{
    ErrorData, ListResourceTemplatesResult, ListResourcesResult, LoggingLevel,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents,
};
use rmcp::service::{Peer, RequestContext, RoleServer};

use crate::context::client::InputRound;
use crate::context::request::RequestCx;
use crate::error::ContentError;
use crate::mcp::pagination::paginate;
use crate::mcp::state::Shared;
use crate::mcp::to_wire::{self, content_error};
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
        .stored
        .as_ref()
        .map(|s| s.content().list_resources())
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
        .stored
        .as_ref()
        .map(|s| s.content().list_templates())
        .unwrap_or_default();
    let (page, next) = paginate(templates, request, shared.page_size)?;
    let mut result = ListResourceTemplatesResult::with_all_items(page);
    result.next_cursor = next;
    Ok(result)
}

/// `resources/read`. A script template's questions are asked as a tool's are: under
/// 2026-07-28 as an `input_required` result (the retry's `inputResponses` and `requestState`
/// answer them), before it as requests to the client.
///
/// # Errors
/// -32002 for an unknown URI, -32603 when a template script fails, -32602 for a
/// `requestState` that does not open.
pub(crate) async fn read(
    shared: &Shared,
    request: ReadResourceRequestParams,
    ctx: &RequestContext<RoleServer>,
    log_level: &Mutex<Option<LoggingLevel>>,
) -> Result<ReadResourceResponse, ErrorData> {
    let uri = request.uri;
    if uri.starts_with(RUN_OUTPUT_PREFIX) {
        let cx = RequestCx::of(ctx, None);
        let Some(kept) = shared.stored.as_ref().map(|s| &s.kept) else {
            return Err(content_error(ContentError::ResourceNotFound { uri }));
        };
        return match kept.read(&uri, &cx).await {
            Some(text) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("text/plain"),
            ])
            .into()),
            None => Err(content_error(ContentError::OutputNotFound {
                uri,
                kept_for: humantime::format_duration(kept.ttl()).to_string(),
            })),
        };
    }
    let Some(stored) = &shared.stored else {
        return Err(content_error(ContentError::ResourceNotFound { uri }));
    };
    let round = InputRound {
        responses: request.input_responses.unwrap_or_default(),
        state: request.request_state,
    };
    let cx = RequestCx::of(ctx, Some(log_level)).with_input(&round);
    match stored.content().read(&uri, &cx).await {
        Ok(Some(contents)) => Ok(ReadResourceResult::new(vec![contents]).into()),
        Ok(None) => Err(content_error(ContentError::ResourceNotFound { uri })),
        Err(no_content) => to_wire::no_content(no_content),
    }
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
    match shared.stored.as_ref().map(|s| s.content()) {
        Some(content) if content.is_known(&uri) => {
            content.subscriptions.subscribe(handler, &uri, peer);
            Ok(())
        }
        _ => Err(content_error(ContentError::ResourceNotFound { uri })),
    }
}

/// `resources/unsubscribe`: forgets the subscription (unknown ones are fine).
pub(crate) fn unsubscribe(shared: &Shared, handler: u64, uri: &str) {
    if let Some(stored) = &shared.stored {
        stored.content().subscriptions.unsubscribe(handler, uri);
    }
}
