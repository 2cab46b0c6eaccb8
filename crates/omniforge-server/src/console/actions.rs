//! The console's changes run the built-ins an MCP client would call, routed through the
//! catalog as the signed-in principal: the same scope checks, validation, examples and audit
//! records, so the console can never do more than that principal's token does over MCP.

use rmcp::model::JsonObject;
use serde_json::Value;

use crate::console::Console;
use crate::console::guard::Viewer;
use crate::context::request::RequestCx;
use crate::mcp::to_wire;

/// What a built-in answered: whether it worked, and its text.
pub(crate) struct Outcome {
    /// Not an `isError` result.
    pub(crate) ok: bool,
    /// The result's text blocks, joined by newlines.
    pub(crate) text: String,
}

/// Calls built-in `name` with `arguments` as `viewer`.
pub(crate) async fn call(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    arguments: Value,
) -> Outcome {
    let arguments = match arguments {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    let snapshot = console.shared.catalog.snapshot();
    let cx = RequestCx::local(&viewer.principal, None);
    let result = snapshot
        .call(name, arguments, &cx, false)
        .await
        .unwrap_or_else(|e| to_wire::call_error(&e));
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
