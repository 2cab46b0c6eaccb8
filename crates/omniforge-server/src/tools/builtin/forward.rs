//! `omniforge_call_tool {name, arguments}`: for clients that cannot see tools forged
//! mid-session, calls the named tool under the caller's own scopes, as if it had been called
//! directly (routed again in the same catalog snapshot).

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, ToolCall, ready, running};
use crate::catalog::entry::{Entry, ToolSource, object_schema};
use crate::error::CallError;

/// The built-in's name.
pub(crate) const CALL_TOOL: &str = "omniforge_call_tool";

/// The forwarding built-in.
struct Forward;

impl ToolCall for Forward {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        if call.forwarded {
            return ready(Err(CallError::NestedForward));
        }
        let mut arguments = call.arguments;
        let name = match arguments.remove("name") {
            Some(Value::String(name)) => name,
            _ => String::new(),
        };
        let inner = match arguments.remove("arguments") {
            Some(Value::Object(inner)) => inner,
            None => JsonObject::new(),
            Some(_) => return ready(Err(CallError::ArgumentsNotObject)),
        };
        running(async move { call.catalog.route(&name, inner, call.cx).await })
    }
}

/// Its catalog entry.
pub(crate) fn entry() -> Entry {
    Entry::new(
        Tool::new(
            CALL_TOOL,
            "Call any enabled tool by name with arguments, under your own permissions. For clients that cannot see tools forged during the session.",
            object_schema(json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["name"], "additionalProperties": false})),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
        ToolSource::Builtin,
        Scope::Call,
        Arc::new(Forward),
    )
}
