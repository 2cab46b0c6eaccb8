//! The one MCP adapter of the built-ins: an operation's catalog entry (its listing, with the
//! inputSchema derived from its arguments type), the call that parses `tools/call` arguments
//! into that type and runs it, and the rendering of its [`Outcome`] (or a call's error) as
//! the `CallToolResult` a client gets.

use std::marker::PhantomData;
use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use schemars::JsonSchema;

use crate::catalog::call::{Call, CallFuture, ToolCall, running};
use crate::catalog::entry::{Entry, ToolSource};
use crate::context::actor::Actor;
use crate::error::{CallError, parse_arguments};
use crate::tools::ops::schema::input_schema;
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef, run};

/// `outcome` as the result a client gets: its text, its data as `structuredContent`, and
/// `isError` when it refused.
pub(crate) fn render(outcome: Outcome) -> CallToolResult {
    let content = vec![ContentBlock::text(outcome.text)];
    let mut result = if outcome.ok {
        CallToolResult::success(content)
    } else {
        CallToolResult::error(content)
    };
    result.structured_content = outcome.data;
    result
}

/// A call that produced no result of its own, as the `isError` result a client (or a script's
/// `call_builtin`) gets: its text.
pub(crate) fn error_result(error: &CallError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_string())])
}

/// The catalog entry of operation `O` working on `service`.
pub(crate) fn entry<O: Operation>(service: &Arc<O::Service>) -> Entry {
    let call = OperationCall::<O> {
        service: service.clone(),
        op: PhantomData,
    };
    builtin::<O>(&O::TOOL, Arc::new(call))
}

/// The catalog entry of a built-in listed as `tool`, arguments of type `A`, called by `call`
/// (also for the built-ins that are not operations).
pub(crate) fn builtin<A: JsonSchema>(tool: &ToolDef, call: Arc<dyn ToolCall>) -> Entry {
    let mut listing = Tool::new(tool.name, tool.description, input_schema::<A>())
        .with_annotations(annotations(tool.hints));
    if let Some(title) = tool.title {
        listing = listing.with_title(title);
    }
    Entry::new(listing, ToolSource::Builtin, tool.scope, call)
}

fn annotations(hints: Hints) -> ToolAnnotations {
    let mut annotations = ToolAnnotations::new();
    annotations.read_only_hint = hints.read_only;
    annotations.destructive_hint = hints.destructive;
    annotations.idempotent_hint = hints.idempotent;
    annotations.open_world_hint = hints.open_world;
    annotations
}

/// A `tools/call` of operation `O`.
struct OperationCall<O: Operation> {
    service: Arc<O::Service>,
    op: PhantomData<fn() -> O>,
}

impl<O: Operation> ToolCall for OperationCall<O> {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            let op: O = parse_arguments(call.arguments)?;
            let actor = Actor::new(call.cx, call.via);
            Ok(render(run(op, &self.service, actor).await?))
        })
    }
}
