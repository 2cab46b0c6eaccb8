//! The console's changes run the same operations as the authoring built-ins (and the command
//! line), as the signed-in principal: the same validation, examples, audit records and
//! change feed. The console checks the scope the built-in needs before it calls one
//! (`tools:write` for rollback and checks, `admin` for grants), as catalog routing does for
//! MCP, so the console never does more than that principal's token does over MCP.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::console::Console;
use crate::console::guard::Viewer;
use crate::context::progress::ProgressSink;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::mcp::{to_wire, tools};
use crate::tools::authoring::approval::{approved_sentence, rejected_sentence};
use crate::tools::authoring::secret::change_grant;

/// What an operation answered: whether it worked, and its text.
pub(crate) struct Outcome {
    /// Not an `isError` result.
    pub(crate) ok: bool,
    /// What happened, in words (the result's text blocks, joined by newlines).
    pub(crate) text: String,
}

impl Outcome {
    fn of(result: Result<CallToolResult, CallError>) -> Outcome {
        let result = result.unwrap_or_else(|e| to_wire::call_error(&e));
        let text = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        Outcome {
            ok: result.is_error != Some(true),
            text,
        }
    }

    fn refused(text: &str) -> Outcome {
        Outcome {
            ok: false,
            text: text.to_owned(),
        }
    }
}

fn arguments(pairs: &[(&str, Option<Value>)]) -> JsonObject {
    pairs
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| ((*k).to_owned(), v)))
        .collect()
}

/// Makes live `version` of `name` current after its examples pass (the caller checked
/// `tools:write`).
pub(crate) async fn rollback(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
) -> Outcome {
    let authoring = &console.stored.authoring.tools;
    let cx = RequestCx::local(&viewer.principal, None);
    let args = arguments(&[
        ("name", Some(name.into())),
        ("version", Some(version.into())),
    ]);
    Outcome::of(authoring.rollback(args, &cx).await)
}

/// Disables `name` (the delete built-in without `purge`: versions kept), or enables it again
/// by making its current version current (a rollback to it, examples first) (the caller
/// checked `tools:write`).
pub(crate) async fn set_enabled(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    enabled: bool,
) -> Outcome {
    let authoring = &console.stored.authoring.tools;
    let cx = RequestCx::local(&viewer.principal, None);
    if !enabled {
        return Outcome::of(
            authoring
                .delete(arguments(&[("name", Some(name.into()))]), &cx)
                .await,
        );
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
/// results (the caller checked `tools:write`).
pub(crate) async fn check(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: Option<u32>,
) -> Outcome {
    let authoring = &console.stored.authoring.tools;
    let cx = RequestCx::local(&viewer.principal, None);
    let args = arguments(&[
        ("name", Some(name.into())),
        ("version", version.map(Value::from)),
    ]);
    Outcome::of(authoring.check(args, &cx).await)
}

/// Grants `secret` to `version` of `tool` (its current one if `None`) (the caller checked
/// `admin`).
pub(crate) async fn grant(
    console: &Console,
    viewer: &Viewer,
    secret: &str,
    tool: &str,
    version: Option<u32>,
) -> Outcome {
    let cx = RequestCx::local(&viewer.principal, None);
    match change_grant(
        &*console.stored.store,
        &cx.actor(),
        secret,
        tool,
        version,
        true,
    )
    .await
    {
        Ok(text) => Outcome { ok: true, text },
        Err(e) => Outcome::of(Err(CallError::from(e))),
    }
}

/// Approves pending `version` of `name`, granting only the secrets in `grants` (the caller
/// checked `admin`; the gate checks it again).
pub(crate) async fn approve(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
    grants: &[String],
) -> Outcome {
    let approval = &console.stored.authoring.approval;
    let cx = RequestCx::local(&viewer.principal, None);
    match approval.approve(&cx, name, version, grants).await {
        Ok(approved) => Outcome {
            ok: true,
            text: approved_sentence(&console.stored.store, &approved, grants).await,
        },
        Err(e) => Outcome::of(Err(CallError::from(e))),
    }
}

/// Rejects pending `version` of `name` with `reason` (the caller checked `admin`; the gate
/// checks it again).
pub(crate) async fn reject(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    version: u32,
    reason: &str,
) -> Outcome {
    let approval = &console.stored.authoring.approval;
    let cx = RequestCx::local(&viewer.principal, None);
    match approval.reject(&cx, name, version, reason).await {
        Ok(rejected) => Outcome {
            ok: true,
            text: rejected_sentence(&rejected),
        },
        Err(e) => Outcome::of(Err(CallError::from(e))),
    }
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
    let called = tools::run(&console.shared, name, Ok(arguments), &cx).await;
    // A call from the console is a tool call like a client's (not an MCP request).
    tools::count_tool_call(&console.shared, name, &snapshot, &cx, &called, clock);
    let result = match called {
        Ok(result) => result,
        Err(CallError::InputRequired(_)) => CallToolResult::error(vec![ContentBlock::text(
            "The tool asked the client for input (an input_required result); the console cannot answer that: call it from an MCP client.",
        )]),
        Err(error) => to_wire::call_error(&error),
    };
    let progress = std::mem::take(&mut *messages.lock().unwrap_or_else(|e| e.into_inner()));
    Tried { result, progress }
}
