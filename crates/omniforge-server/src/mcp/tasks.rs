//! The Tasks extension on the wire (issue 13; `io.modelcontextprotocol/tasks`, SEP-2663):
//! a `tools/call` that becomes a task, and `tasks/get`, `tasks/update`, `tasks/cancel`.
//!
//! - A tool whose definition allows tasks (`taskSupport` optional or required) runs as a task
//!   whenever the request declared the extension (its `_meta` client capabilities, or the
//!   session's): the task is created in the store first, the client gets the flat
//!   `CreateTaskResult` at once, and the call runs on this replica apart from the request
//!   (see `crate::tasks`). A `required` tool called without the extension gets -32021. A tool
//!   whose task starts in its script (`taskStart: "script"`) runs as an ordinary request until
//!   the script calls `omniforge.start_task()` (`script_task.rs`).
//! - `tasks/get` reads the store (any replica answers): the status, and the result inlined
//!   once completed or the error once failed. `tasks/update` delivers input responses through
//!   the store; `tasks/cancel` sets `cancelled` in the store, and the replica running the call
//!   hears it and kills the process tree. Another principal's task reads as unknown: -32602.
//!   rmcp answers -32021 itself when the request did not declare the extension, and -32601
//!   for `tasks/list` and `tasks/result`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use omniforge_store::{StoreError, StoredTask, TaskEnd, TaskStart, TaskSupport};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, DetailedTask, ErrorCode, ErrorData, GetTaskParams, GetTaskResult,
    InputRequests, JsonObject, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use crate::catalog::call::log_record;
use crate::catalog::entry::Entry;
use crate::catalog::snapshot::Snapshot;
use crate::context::actor::Via;
use crate::context::request::RequestCx;
use crate::context::stream::StreamLink;
use crate::error::CallError;
use crate::mcp::state::Shared;
use crate::mcp::to_wire;
use crate::tasks::{TaskCall, Tasks};
use crate::telemetry::call_log::CallLogWriter;

/// The JSON-RPC code of a task whose call could not finish (internal error).
const INTERNAL_ERROR: i64 = -32603;

/// How a `tools/call` of `entry` runs.
pub(crate) enum Route {
    /// As an ordinary request.
    Inline,
    /// As a task of this replica.
    Task(Arc<Tasks>),
    /// As an ordinary request until its script starts its task (`taskStart: "script"`,
    /// `mcp/script_task.rs`).
    ScriptStart(Arc<Tasks>),
}

/// Whether the request declared the Tasks extension (in its `_meta` or its session).
pub(crate) fn declared(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.client_capabilities()
        .is_some_and(|caps| caps.supports_tasks())
}

/// How a call of `entry` runs: as a task when the tool allows it and the request declared
/// the extension (and this server keeps tasks: it has a store).
///
/// # Errors
/// -32021 for a tool that requires tasks called without the extension.
pub(crate) fn route(
    shared: &Shared,
    entry: &Entry,
    ctx: &RequestContext<RoleServer>,
) -> Result<Route, ErrorData> {
    let support = entry.tasking.support;
    if support == TaskSupport::Forbidden {
        return Ok(Route::Inline);
    }
    match (shared.stored.as_ref().map(|s| &s.tasks), declared(ctx)) {
        (Some(tasks), true) if entry.tasking.start == TaskStart::Script => {
            Ok(Route::ScriptStart(tasks.clone()))
        }
        (Some(tasks), true) => Ok(Route::Task(tasks.clone())),
        (_, false) if support == TaskSupport::Required => {
            Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))
        }
        _ => Ok(Route::Inline),
    }
}

/// Starts `request` as a task of `tasks` and answers its `CreateTaskResult`. Arguments that
/// do not match the tool's inputSchema are refused inline (an `isError` result), before any
/// task exists. A manifest tool's call is written to `call_log` when it ends, as an inline
/// one is (a stored call records itself).
///
/// # Errors
/// -32603 when the store cannot create the task.
pub(crate) async fn start(
    tasks: &Arc<Tasks>,
    snapshot: Arc<Snapshot>,
    call_log: Option<Arc<CallLogWriter>>,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let cx = RequestCx::of(ctx, None);
    let Some(entry) = snapshot
        .get_for(&request.name, cx.principal().map(|p| p.as_str()))
        .filter(|e| cx.allows(e.scope))
    else {
        return to_wire::call_response(Err(CallError::UnknownTool));
    };
    let arguments = match entry
        .check_arguments(request.arguments.unwrap_or_default())
        .await
    {
        Ok(arguments) => arguments,
        Err(e) => return to_wire::call_response(Err(e)),
    };
    let Some(owner) = cx.principal().cloned() else {
        return to_wire::call_response(Err(CallError::UnknownTool));
    };
    let tasking = entry.tasking;
    let logged_as = entry.source.logged_as().filter(|_| call_log.is_some());
    let call = TaskCall {
        owner,
        source: tasking.source,
        tool: request.name.to_string(),
        version: tasking.version,
        timeout: tasking.timeout,
    };
    // The call outlives the request: it runs on a copy of the request's context whose
    // cancellation is the task's, without the request's stream or progress token (both end
    // with the answer).
    let mut detached = ctx.clone();
    detached.extensions.remove::<StreamLink>();
    detached.meta.remove("progressToken");
    let name = request.name.to_string();
    let task = tasks
        .start(call, move |ct, link| {
            detached.ct = ct;
            detached.extensions.insert(link);
            async move {
                let cx = RequestCx::of(&detached, None);
                let started = SystemTime::now();
                let result = snapshot.call(&name, arguments, &cx, Via::Client).await;
                if let (Some(call_log), Some(source)) = (call_log, logged_as) {
                    call_log.record(log_record(source, &name, started, &result, cx.author()));
                }
                end_of(result)
            }
        })
        .await
        .map_err(store_error)?;
    Ok(CallToolResponse::Task(CreateTaskResult::new(wire_task(
        &task,
    ))))
}

/// How a task's call ended, as the store keeps it: a tool result (also one with `isError`)
/// completes the task; a JSON-RPC error (a script's `protocol_error`) or a cancelled call
/// fails it.
pub(super) fn end_of(result: Result<rmcp::model::CallToolResult, CallError>) -> TaskEnd {
    let failed = |code: i64, message: String, data: Option<Value>| {
        let mut error = JsonObject::new();
        error.insert("code".into(), json!(code));
        error.insert("message".into(), json!(message));
        if let Some(data) = data {
            error.insert("data".into(), data);
        }
        TaskEnd::Failed(error)
    };
    let result = match result {
        Ok(result) => result,
        Err(CallError::Protocol {
            code,
            message,
            data,
        }) => return failed(i64::from(code), message, data),
        Err(CallError::Cancelled) => {
            return failed(INTERNAL_ERROR, "the task's call was cancelled".into(), None);
        }
        Err(error) => to_wire::call_error(&error),
    };
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => TaskEnd::Completed(map),
        _ => failed(
            INTERNAL_ERROR,
            "the task's result could not be encoded".into(),
            None,
        ),
    }
}

/// `tasks/get`: the caller's task, with its result, error or input requests.
///
/// # Errors
/// -32602 for an unknown id or another principal's task; -32603 for a store failure.
pub(crate) async fn get(
    shared: &Shared,
    request: GetTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<GetTaskResult, ErrorData> {
    let tasks = tasks_of(shared)?;
    let owner = owner(ctx, &request.task_id)?;
    let task = tasks
        .store()
        .task(&request.task_id, &owner)
        .await
        .map_err(store_error)?
        .ok_or_else(|| unknown(&request.task_id))?;
    Ok(GetTaskResult::new(detailed(task)))
}

/// `tasks/update`: delivers `inputResponses` to the caller's task (answers to keys it did not
/// ask are ignored).
///
/// # Errors
/// -32602 for an unknown id or another principal's task; -32603 for a store failure.
pub(crate) async fn update(
    shared: &Shared,
    request: UpdateTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    let tasks = tasks_of(shared)?;
    let owner = owner(ctx, &request.task_id)?;
    let responses: JsonObject = request.input_responses.into_iter().collect();
    tasks
        .store()
        .update_task(&request.task_id, &owner, responses)
        .await
        .map(drop)
        .map_err(|e| not_found_or(e, &request.task_id))
}

/// `tasks/cancel`: an unfinished task of the caller becomes `cancelled` (its replica kills
/// the call's process tree); a finished one stays as it is.
///
/// # Errors
/// -32602 for an unknown id or another principal's task; -32603 for a store failure.
pub(crate) async fn cancel(
    shared: &Shared,
    request: CancelTaskParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<(), ErrorData> {
    let tasks = tasks_of(shared)?;
    let owner = owner(ctx, &request.task_id)?;
    tasks
        .store()
        .cancel_task(&request.task_id, &owner)
        .await
        .map(drop)
        .map_err(|e| not_found_or(e, &request.task_id))
}

/// This server's tasks (a server without a store advertises none, so rmcp never calls).
fn tasks_of(shared: &Shared) -> Result<&Arc<Tasks>, ErrorData> {
    shared.stored.as_ref().map(|s| &s.tasks).ok_or_else(|| {
        ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            "this server keeps no tasks",
            None,
        )
    })
}

/// The caller's principal id as the store names a task's owner; a request without one owns
/// nothing.
fn owner(ctx: &RequestContext<RoleServer>, task_id: &str) -> Result<String, ErrorData> {
    RequestCx::of(ctx, None)
        .principal()
        .map(|p| p.as_str().to_owned())
        .ok_or_else(|| unknown(task_id))
}

/// The one answer for an unknown id and another principal's task.
fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(
        "unknown task id",
        Some(json!({"taskId": task_id.chars().take(128).collect::<String>()})),
    )
}

/// A store error of `tasks/update` or `tasks/cancel`: not found (or an id the store refuses
/// to name) is an unknown id.
fn not_found_or(error: StoreError, task_id: &str) -> ErrorData {
    match error {
        StoreError::NotFound { .. } | StoreError::InvalidName { .. } => unknown(task_id),
        other => store_error(other),
    }
}

/// A store failure as -32603, its text logged rather than sent.
pub(super) fn store_error(error: StoreError) -> ErrorData {
    tracing::warn!(%error, "task store");
    ErrorData::internal_error("the task store failed", None)
}

/// A stored task as the wire's `Task` (no payload).
pub(super) fn wire_task(task: &StoredTask) -> Task {
    let mut wire = Task::new(
        task.task_id.clone(),
        status(task.status),
        iso8601(task.created_at_ms),
        iso8601(task.updated_at_ms),
    )
    .with_poll_interval_ms(u64::try_from(task.poll_interval_ms).unwrap_or(1).max(1));
    if let Some(ttl) = task.ttl_ms.and_then(|t| u64::try_from(t).ok()) {
        wire = wire.with_ttl_ms(ttl);
    }
    if let Some(message) = &task.status_message {
        wire = wire.with_status_message(message.clone());
    }
    wire
}

/// A stored task with its payload, as `tasks/get` answers it.
fn detailed(task: StoredTask) -> DetailedTask {
    let wire = wire_task(&task);
    let payload = match task.status {
        omniforge_store::TaskStatus::Working => TaskPayload::Working,
        omniforge_store::TaskStatus::InputRequired => TaskPayload::InputRequired {
            input_requests: input_requests(task.input_requests.unwrap_or_default()),
        },
        omniforge_store::TaskStatus::Completed => TaskPayload::Completed {
            result: task.result.unwrap_or_default(),
        },
        omniforge_store::TaskStatus::Failed => TaskPayload::Failed {
            error: task.error.unwrap_or_default(),
        },
        omniforge_store::TaskStatus::Cancelled => TaskPayload::Cancelled,
    };
    DetailedTask::new(wire, payload)
}

/// The stored pending requests (`{key: {method, params}}`) as the wire's map; an entry that
/// does not parse as one is left out (the store only holds what this server wrote).
fn input_requests(stored: JsonObject) -> InputRequests {
    stored
        .into_iter()
        .filter_map(|(key, request)| Some((key, serde_json::from_value(request).ok()?)))
        .collect()
}

/// The store's status as the wire's.
fn status(status: omniforge_store::TaskStatus) -> TaskStatus {
    match status {
        omniforge_store::TaskStatus::Working => TaskStatus::Working,
        omniforge_store::TaskStatus::InputRequired => TaskStatus::InputRequired,
        omniforge_store::TaskStatus::Completed => TaskStatus::Completed,
        omniforge_store::TaskStatus::Failed => TaskStatus::Failed,
        omniforge_store::TaskStatus::Cancelled => TaskStatus::Cancelled,
    }
}

/// Unix milliseconds as an ISO-8601 UTC time with milliseconds (`2026-07-28T12:00:00.000Z`).
fn iso8601(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at.max(UNIX_EPOCH)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_iso8601_utc() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_764_603_302_123), "2025-12-01T15:35:02.123Z");
    }
}
