//! The console's changes run the same operations as the authoring built-ins (and the command
//! line), as the signed-in principal come [`Via::Console`]: the same validation, examples,
//! audit records and change feed. The pages check the scope the built-in needs before they
//! offer a change (`tools:write` for rollback and checks, `admin` for grants and approvals),
//! and every operation checks it again ([`ops::run`]), as catalog routing does for MCP, so
//! the console never does more than that principal's token does over MCP.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::{CallToolResult, JsonObject};

use crate::console::Console;
use crate::console::guard::Viewer;
use crate::context::actor::{Actor, Via};
use crate::context::progress::ProgressSink;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::mcp::{to_wire, tools};
use crate::tools::Part;
use crate::tools::authoring::approval::{ApproveTool, RejectTool};
use crate::tools::authoring::secret::GrantSecret;
use crate::tools::authoring::tool::{CheckTool, DeleteTool, RollbackTool};
use crate::tools::ops::{self, Operation, Outcome};

/// Runs `op` as the viewer.
async fn apply<O: Operation<Service: Part>>(console: &Console, viewer: &Viewer, op: O) -> Outcome {
    let cx = RequestCx::local(&viewer.principal, None);
    let actor = Actor::new(&cx, Via::Console);
    let service = O::Service::of(&console.stored.authoring);
    Outcome::of(ops::run(op, service, actor).await)
}

/// Makes live `version` of `name` current after its examples pass.
pub(crate) async fn rollback(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
) -> Outcome {
    apply(console, viewer, RollbackTool::new(name, version, false)).await
}

/// Disables `name` (the delete built-in without `purge`: versions kept), or enables it again
/// by making its current version current (a rollback to it, examples first).
pub(crate) async fn set_enabled(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    enabled: bool,
) -> Outcome {
    if !enabled {
        return apply(console, viewer, DeleteTool::disable(name)).await;
    }
    let current = match console.stored.store.tool(name).await {
        Ok(Some(tool)) => tool.current_version,
        _ => None,
    };
    let Some(version) = current else {
        return Outcome::refused("This tool has no current version to enable.");
    };
    rollback(console, viewer, name, version).await
}

/// Runs the examples of `version` of `name` (the current one if `None`) and records the
/// results.
pub(crate) async fn check(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: Option<u32>,
) -> Outcome {
    apply(console, viewer, CheckTool::new(name, version)).await
}

/// Grants `secret` to `version` of `tool` (its current one if `None`).
pub(crate) async fn grant(
    console: &Console,
    viewer: &Viewer,
    secret: &str,
    tool: &str,
    version: Option<u32>,
) -> Outcome {
    apply(console, viewer, GrantSecret::new(secret, tool, version)).await
}

/// Approves pending `version` of `name`, granting only the secrets in `grants`.
pub(crate) async fn approve(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
    grants: &[String],
) -> Outcome {
    apply(console, viewer, ApproveTool::new(name, version, grants)).await
}

/// Rejects pending `version` of `name` with `reason`.
pub(crate) async fn reject(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
    reason: &str,
) -> Outcome {
    apply(console, viewer, RejectTool::new(name, version, reason)).await
}

/// What a try-it call answered, as the client would get it.
pub(crate) struct Tried {
    /// The result (a failure as the `isError` result a client sees).
    pub(crate) result: CallToolResult,
    /// The progress messages the call sent, in order (at most [`PROGRESS_KEPT`]).
    pub(crate) progress: Vec<String>,
}

/// How many progress messages a try-it call keeps.
const PROGRESS_KEPT: usize = 200;

/// Calls tool `name` with `arguments` as the viewer, through `tools/call`'s own path
/// ([`tools::run`]: visibility, scope, inputSchema, secrets redaction, size cap, call log),
/// collecting the progress messages it sends.
pub(crate) async fn try_call(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    arguments: JsonObject,
) -> Tried {
    let messages = Arc::new(Mutex::new(Vec::new()));
    let sink: ProgressSink = {
        let messages = messages.clone();
        Arc::new(move |text: &str| {
            let mut m = messages.lock().unwrap_or_else(|e| e.into_inner());
            if m.len() < PROGRESS_KEPT {
                m.push(text.to_owned());
            }
        })
    };
    let cx = RequestCx::local(&viewer.principal, Some(sink));
    let (clock, snapshot) = (Instant::now(), console.shared.catalog.snapshot());
    let called = tools::run(&console.shared, name, Ok(arguments), &cx, Via::Console).await;
    // A call from the console is a tool call like a client's (not an MCP request).
    tools::count_tool_call(&console.shared, name, &snapshot, &cx, &called, clock);
    let result = match called {
        Ok(result) => result,
        Err(CallError::InputRequired(_)) => to_wire::unanswerable_input(),
        Err(error) => to_wire::call_error(&error),
    };
    let progress = std::mem::take(&mut *messages.lock().unwrap_or_else(|e| e.into_inner()));
    Tried { result, progress }
}
