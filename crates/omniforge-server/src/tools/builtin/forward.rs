//! `omniforge_call_tool {name, arguments}`: for clients that cannot see tools forged
//! mid-session, calls the named tool under the caller's own scopes, as if it had been called
//! directly (routed again in the same catalog snapshot).

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, ToolCall, ready, running};
use crate::catalog::entry::Entry;
use crate::context::actor::Via;
use crate::error::{CallError, parse_arguments};
use crate::tools::ops::mcp::builtin;
use crate::tools::ops::{Hints, ToolDef};

/// The built-in's name.
pub(crate) const CALL_TOOL: &str = "omniforge_call_tool";

/// The arguments of `omniforge_call_tool`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallToolArgs {
    name: String,
    arguments: Option<JsonObject>,
}

/// How it is listed: it may call anything, so only its open world is hinted.
const TOOL: ToolDef = ToolDef {
    name: CALL_TOOL,
    title: None,
    description: "Call any enabled tool by name with arguments, under your own permissions. For clients that cannot see tools forged during the session.",
    scope: Scope::Call,
    hints: Hints {
        read_only: None,
        destructive: None,
        idempotent: None,
        open_world: Some(true),
    },
};

/// The forwarding built-in: answers with the routed tool's own result.
struct Forward;

impl ToolCall for Forward {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        if call.via == Via::Forwarded {
            return ready(Err(CallError::NestedForward));
        }
        let args: CallToolArgs = match parse_arguments(call.arguments) {
            Ok(args) => args,
            Err(e) => return ready(Err(e.into())),
        };
        let inner = args.arguments.unwrap_or_default();
        running(async move {
            call.catalog
                .route(&args.name, inner, call.cx, Via::Forwarded)
                .await
        })
    }
}

/// Its catalog entry.
pub(crate) fn entry() -> Entry {
    builtin::<CallToolArgs>(&TOOL, Arc::new(Forward))
}
