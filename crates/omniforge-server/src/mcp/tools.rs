//! `tools/list` and `tools/call`: the caller's view of the catalog, and the call routed
//! through it.

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve.
#![allow(deprecated)]
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, JsonObject, ListToolsResult, LoggingLevel,
    PaginatedRequestParams,
};
use rmcp::service::{RequestContext, RoleServer};

use crate::catalog::call::{CallResult, log_record};
use crate::catalog::entry::ToolSource;
use crate::context::actor::Via;
use crate::context::client::InputRound;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::mcp::pagination::{encode_cursor, offset};
use crate::mcp::script_task::{self, Answered};
use crate::mcp::state::Shared;
use crate::mcp::tasks::{self, Route};
use crate::mcp::to_wire;
use crate::telemetry::metrics::{self, Source};
use crate::telemetry::spans;

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
    let Some(page) = snapshot.page(
        cx.principal().map(|p| p.as_str()),
        |scope| cx.allows(scope),
        offset,
        shared.page_size,
    ) else {
        return Err(ErrorData::invalid_params(
            "invalid cursor: past the end of the list",
            None,
        ));
    };
    let mut result = ListToolsResult::with_all_items(page.tools.clone());
    result.next_cursor = page.more.then(|| encode_cursor(offset + page.tools.len()));
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
    let round = InputRound {
        responses: request.input_responses.clone().unwrap_or_default(),
        state: request.request_state.clone(),
    };
    let cx = RequestCx::of(ctx, Some(log_level)).with_input(&round);
    let clock = Instant::now();
    // The metrics count against the catalog the call started with.
    let snapshot = shared.catalog.snapshot();
    if !cx.arguments_not_object()
        && let Some(entry) = snapshot
            .get_for(&request.name, cx.principal().map(|p| p.as_str()))
            .filter(|e| cx.allows(e.scope))
    {
        match tasks::route(shared, entry, ctx)? {
            Route::Inline => {}
            Route::Task(tasks) => {
                let _in_flight = shared.calls.token();
                let log = shared.stored.as_ref().map(|s| s.call_log.clone());
                return tasks::start(&tasks, snapshot.clone(), log, request, ctx).await;
            }
            Route::ScriptStart(tasks) => {
                let _in_flight = shared.calls.token();
                let name = request.name.clone();
                let tasking = entry.tasking;
                return match script_task::call(&tasks, snapshot.clone(), tasking, request, ctx)
                    .await
                {
                    Answered::Task(task) => Ok(CallToolResponse::Task(task)),
                    Answered::Inline(result) => {
                        count(shared, &name, &snapshot, &cx, &result, clock);
                        to_wire::call_response(result)
                    }
                };
            }
        }
    }
    let arguments = if cx.arguments_not_object() {
        Err(CallError::ArgumentsNotObject)
    } else {
        Ok(request.arguments.unwrap_or_default())
    };
    let result = run(shared, &request.name, arguments, &cx, Via::Client).await;
    count(shared, &request.name, &snapshot, &cx, &result, clock);
    to_wire::call_response(result)
}

/// One call as `cx`'s principal, come through `via`, the way `tools/call` makes it: counted in flight, routed
/// through the catalog (visibility, scope, inputSchema; a stored tool's secrets redaction and
/// size cap), and recorded in the call log. Also the console's try-it form's path (which counts
/// its calls with [`count_tool_call`]; [`call`] counts a client's, with the request).
pub(crate) async fn run(
    shared: &Shared,
    name: &str,
    arguments: Result<JsonObject, CallError>,
    cx: &RequestCx<'_>,
    via: Via<'_>,
) -> CallResult {
    let _in_flight = shared.calls.token();
    let started = SystemTime::now();
    let snapshot = shared.catalog.snapshot();
    let result = match arguments {
        Ok(arguments) => snapshot.call(name, arguments, cx, via).await,
        Err(error) => Err(error),
    };
    // A stored tool's call records itself (with its version); built-ins and manifest tools
    // are recorded here. Both only queue the row (the call log's writer commits it, off the
    // answer's path). Unknown or hidden tools are not recorded.
    if let Some(stored) = shared.stored.as_ref()
        && let Some(entry) = snapshot.get(name).filter(|e| cx.allows(e.scope))
        && let Some(source) = entry.source.logged_as()
    {
        let record = log_record(source, name, started, &result, cx.author());
        stored.call_log.record(record);
    }
    result
}

/// Counts a `tools/call` request in the metrics: the tool call ([`count_tool_call`]) and the
/// request.
fn count(
    shared: &Shared,
    name: &str,
    snapshot: &crate::catalog::snapshot::Snapshot,
    cx: &RequestCx<'_>,
    result: &CallResult,
    clock: Instant,
) {
    let elapsed = count_tool_call(shared, name, snapshot, cx, result, clock);
    let error = match result {
        Ok(r) if r.is_error != Some(true) => None,
        Err(CallError::Cancelled) => Some(metrics::error_type(-32800)),
        Err(CallError::Protocol { code, .. }) => Some(metrics::error_type(*code)),
        _ => Some("tool_error"),
    };
    shared.metrics.request("tools/call", error, elapsed);
    if let Some(error) = error {
        spans::failed(&tracing::Span::current(), error);
    }
}

/// Counts one tool call in the metrics, from a client or the console's try-it form: its tool
/// (the label capped; `other` for names that are no tool the caller may use), source and
/// outcome. Returns the time since `clock`.
pub(crate) fn count_tool_call(
    shared: &Shared,
    name: &str,
    snapshot: &crate::catalog::snapshot::Snapshot,
    cx: &RequestCx<'_>,
    result: &CallResult,
    clock: Instant,
) -> std::time::Duration {
    let elapsed = clock.elapsed();
    let entry = snapshot.get(name).filter(|e| cx.allows(e.scope));
    let source = match entry.map(|e| e.source) {
        Some(ToolSource::Builtin) => Source::Builtin,
        Some(ToolSource::Manifest) => Source::Manifest,
        // Unknown names are asked of the stored tools last, so they count there.
        Some(ToolSource::Stored) | None => Source::Stored,
    };
    let outcome = match result {
        Ok(r) if r.is_error != Some(true) => metrics::CallOutcome::Ok,
        Err(CallError::Cancelled) => metrics::CallOutcome::Cancelled,
        Err(CallError::Busy) => metrics::CallOutcome::Busy,
        _ => metrics::CallOutcome::ToolError,
    };
    let tool = shared.metrics.tool_label(name, entry.is_some());
    shared.metrics.tool_call(tool, source, outcome, elapsed);
    elapsed
}
