//! A `tools/call` whose task starts in its script (issue 13, `taskStart: "script"`, the
//! script's `omniforge.start_task()`), called by a client that declared the Tasks extension.
//!
//! The call runs apart from the request from the start (on a copy of the request's context
//! whose cancellation this module owns, with a [`TaskStarter`]), and the request waits:
//! - the call ends before its script starts a task: the request answers its result inline,
//!   an `input_required` result included (its questions are rounds of the request, replayed
//!   as for any call);
//! - the script calls `start_task()`: the task is created in the store, the request answers
//!   the `CreateTaskResult` at once (no `requestState`, no `inputRequests`), and the call goes
//!   on as that task: its end is the task's result, its later questions go through the task
//!   (`tasks/update`), `tasks/cancel`, the TTL and the lease apply as to every task;
//! - the request is cancelled (or dropped) before a task exists: the run is stopped.

use std::sync::Arc;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use omniforge_store::{StoredTask, TaskEnd};
use rmcp::model::{CallToolRequestParams, CreateTaskResult};
use rmcp::service::{RequestContext, RoleServer};
use tokio::sync::oneshot;

use crate::catalog::call::CallResult;
use crate::catalog::entry::Tasking;
use crate::catalog::snapshot::Snapshot;
use crate::context::actor::Via;
use crate::context::client::InputRound;
use crate::context::request::RequestCx;
use crate::context::stream::StreamLink;
use crate::context::task::{CreateTask, TaskStarter};
use crate::error::CallError;
use crate::mcp::tasks::{end_of, wire_task};
use crate::tasks::{TaskCall, Tasks};

/// How a call whose script may start its task was answered.
pub(crate) enum Answered {
    /// The call ended as an ordinary request.
    Inline(CallResult),
    /// The script started its task: the call goes on as it.
    Task(CreateTaskResult),
}

/// Stops the run if the request ends (answered, cancelled, or its future dropped) while no
/// task runs it.
struct AbandonOnDrop(Arc<TaskStarter>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Runs `request` (a tool with `tasking`) until it ends or its script starts its task (see
/// the module docs).
pub(crate) async fn call(
    tasks: &Arc<Tasks>,
    snapshot: Arc<Snapshot>,
    tasking: Tasking,
    request: CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Answered {
    let Some(owner) = RequestCx::of(ctx, None).principal().cloned() else {
        return Answered::Inline(Err(CallError::UnknownTool));
    };
    let call = TaskCall {
        owner,
        source: tasking.source,
        tool: request.name.to_string(),
        version: tasking.version,
        timeout: tasking.timeout,
    };
    let run_ct = tasks.run_token();
    let (started_tx, mut started) = oneshot::channel();
    let create: CreateTask = {
        let tasks = tasks.clone();
        Box::new(move || async move { tasks.create(call).await }.boxed())
    };
    let starter = TaskStarter::new(create, started_tx, run_ct.clone());
    let _abandon = AbandonOnDrop(starter.clone());
    // As for a task: no stream or progress token of the request (both end with its answer).
    let mut detached = ctx.clone();
    detached.extensions.remove::<StreamLink>();
    detached.meta.remove("progressToken");
    detached.ct = run_ct.clone();
    detached.extensions.insert(starter.clone());
    let round = InputRound {
        responses: request.input_responses.clone().unwrap_or_default(),
        state: request.request_state.clone(),
    };
    let name = request.name.to_string();
    let arguments = request.arguments.unwrap_or_default();
    let mut running = tokio::spawn(async move {
        let cx = RequestCx::of(&detached, None).with_input(&round);
        snapshot.call(&name, arguments, &cx, Via::Client).await
    });
    // Waits for the call apart from the request, so that a task started in the instant the
    // request goes away is still driven to its end.
    let tasks = tasks.clone();
    let mut waiting = tokio::spawn(async move {
        let adopt = |task: &StoredTask, running: BoxFuture<'static, TaskEnd>| {
            tasks.adopt(task.task_id.clone(), run_ct.clone(), running);
            Answered::Task(CreateTaskResult::new(wire_task(task)))
        };
        tokio::select! {
            biased;
            Ok(task) = &mut started => {
                adopt(&task, async move { end_of(joined(running.await)) }.boxed())
            }
            result = &mut running => {
                let result = joined(result);
                // The script started its task and ended in the same instant (the run answers
                // every script request before it ends, so the task was sent).
                match started.try_recv() {
                    Ok(task) => adopt(&task, std::future::ready(end_of(result)).boxed()),
                    Err(_) => Answered::Inline(result),
                }
            }
        }
    });
    tokio::select! {
        answered = &mut waiting => answered.unwrap_or_else(|e| Answered::Inline(joined(Err(e)))),
        () = ctx.ct.cancelled() => {
            // No task yet: the run stops. A task already started goes on (its id was not
            // answered, but it ends, is cancelled or expires as every task does).
            starter.abandon();
            Answered::Inline(Err(CallError::Cancelled))
        }
    }
}

/// The call's result, or -32603 for a run that panicked.
fn joined(result: Result<CallResult, tokio::task::JoinError>) -> CallResult {
    result.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "a call whose script may start its task");
        Err(CallError::Protocol {
            code: -32603,
            message: "the call ended unexpectedly".into(),
            data: None,
        })
    })
}
