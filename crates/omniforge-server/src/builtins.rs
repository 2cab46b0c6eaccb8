//! The built-in tools, compiled into the server and listed first.
//!
//! Today: `omniforge_instructions`. The authoring tools (`omniforge_create_tool`, …) join
//! this list with the script-tools store.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::json;

use crate::auth::Scope;
use crate::catalog::{CatalogTool, Route, ToolSource};

/// Name of the built-in that explains how to use this server.
pub const INSTRUCTIONS: &str = "omniforge_instructions";

/// The server-level `instructions` sent in the InitializeResult.
pub const SERVER_INSTRUCTIONS: &str = "OmniForge hosts tools for AI agents. Its tools come from \
three sources, listed in this order: built-in tools (names start with `omniforge_`), manifest \
tools (RPCs of a Connect service configured by the operator) and stored tools (forged by agents \
and kept in OmniForge's database). Call `omniforge_instructions` for how to use and extend it.";

/// The text `omniforge_instructions` answers with.
const GUIDE: &str = "\
# OmniForge

OmniForge is an MCP server whose tool list can grow while you work.

## Tool sources (tools/list order)
1. Built-in tools: names start with `omniforge_`. They are always present.
2. Manifest tools: RPCs declared in a forge manifest (gen/mcp/manifest.json) that the operator
   configured; each call is proxied to the running Connect service.
3. Stored tools: tools forged by agents, kept in OmniForge's database, newest first.
When two sources offer the same name, the earlier source wins.

## Calling tools
- `arguments` must be a JSON object matching the tool's `inputSchema`; leave it out for `{}`.
- Problems with a call (unknown tool, arguments that do not match) come back as a normal result
  with `isError: true` and a text that says what is wrong, so you can correct the call.
- The tool list can change during a session. The server sends
  `notifications/tools/list_changed`; call tools/list again when you receive it.
";

fn empty_object_schema() -> Arc<JsonObject> {
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// The built-in tools, in catalog order.
pub fn tools() -> Vec<CatalogTool> {
    vec![CatalogTool::new(
        Tool::new(
            INSTRUCTIONS,
            "How to use this OmniForge server: its tool sources, how calls and errors work, \
             and how to forge new tools. Takes no arguments.",
            empty_object_schema(),
        )
        .with_title("OmniForge instructions")
        .with_annotations(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        ToolSource::Builtin,
        Route::Builtin,
        Scope::Call,
    )]
}

/// Runs the built-in `name`. Arguments were already validated against its inputSchema.
pub fn call(name: &str) -> CallToolResult {
    match name {
        INSTRUCTIONS => CallToolResult::success(vec![ContentBlock::text(GUIDE)]),
        // The catalog only routes built-in names here; keep a clear answer regardless.
        _ => CallToolResult::error(vec![ContentBlock::text("Unknown or inactive tool")]),
    }
}
