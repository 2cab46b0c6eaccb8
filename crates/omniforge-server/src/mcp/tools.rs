//! `tools/list` and `tools/call`: the caller's view of the catalog, and the call routed
//! through it.

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve.
#![allow(deprecated)]
use std::sync::Mutex;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, ListToolsResult, LoggingLevel,
    PaginatedRequestParams, Tool,
};
use rmcp::service::{RequestContext, RoleServer};

use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::mcp::pagination::{encode_cursor, offset};
use crate::mcp::state::Shared;
use crate::mcp::to_wire;

/// `tools/list`: the listed tools the caller may use, one page.
///
/// # Errors
/// -32602 for a bad cursor.
pub(crate) fn list(
    shared: &Shared,
    request: Option<PaginatedRequestParams>,
    ctx: &RequestContext<RoleServer>,
) -> Result<ListToolsResult, ErrorData> {
    let cx = RequestCx::of(ctx, None);
    let snapshot = shared.catalog.snapshot();
    let offset = offset(request)?;
    let visible: Vec<&Tool> = snapshot
        .entries()
        .iter()
        .filter(|t| t.listed && cx.allows(t.scope))
        .map(|t| &t.tool)
        .collect();
    if offset > visible.len() {
        return Err(ErrorData::invalid_params(
            "invalid cursor: past the end of the list",
            None,
        ));
    }
    let end = (offset + shared.page_size).min(visible.len());
    let mut result = ListToolsResult::with_all_items(
        visible[offset..end].iter().map(|t| (*t).clone()).collect(),
    );
    result.next_cursor = (end < visible.len()).then(|| encode_cursor(end));
    Ok(result)
}

/// `tools/call`: routed through the catalog; problems are `isError` results.
///
/// # Errors
/// Only a cancelled call.
pub(crate) async fn call(
    shared: &Shared,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
    log_level: &Mutex<Option<LoggingLevel>>,
) -> Result<CallToolResponse, ErrorData> {
    let _in_flight = shared.calls.token();
    let cx = RequestCx::of(ctx, Some(log_level));
    let result = if cx.arguments_not_object() {
        Err(CallError::ArgumentsNotObject)
    } else {
        let snapshot = shared.catalog.snapshot();
        snapshot
            .call(
                &request.name,
                request.arguments.unwrap_or_default(),
                &cx,
                false,
            )
            .await
    };
    to_wire::call_response(result)
}
