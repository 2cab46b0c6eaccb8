//! `omniforge.call_builtin(name, arguments)`: a stored tool runs one authoring built-in, e.g.
//! to change the tool or prompt list (the conformance pack's list-changed triggers).
//!
//! **Authority.** A stored tool runs for whoever calls it, so the built-in runs under the
//! **caller's** principal and scopes (routed in the call's own catalog snapshot, exactly as
//! `omniforge_call_tool` routes: the built-in checks the caller's scope), **and only** if the
//! tool's code declares it in its PEP 723 block:
//!
//! ```python
//! # /// script
//! # [tool.omniforge]
//! # builtins = ["omniforge_update_tool"]
//! # ///
//! ```
//!
//! so a tool never uses a caller's authority for something its author did not write down in
//! the reviewed, versioned code (confused deputy). The call is a
//! [`ScriptCaller`]'s: the caller's principal with its scope capped at `tools:write`, come
//! through [`Via::Script`](crate::context::actor::Via::Script); an admin calling a writer's
//! tool never lends it admin authority (an admin's tool write is granted the secrets it
//! declares; a script-made write never is). Only the authoring built-ins of
//! [`CALLABLE`] can be named: never the secret built-ins (`admin`), `omniforge_call_tool`,
//! `omniforge_test_tool`, or another stored tool.

use omniforge_script::{RpcError, ScriptRequest, pep723_tool_table};
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::catalog::call::Router;
use crate::context::actor::ScriptCaller;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::tools::ops::mcp::error_result;
use crate::tools::stored::questions::code;
use crate::tools::stored::redact::scrub_value;

/// The built-ins a stored tool may declare and call.
pub(crate) const CALLABLE: [&str; 15] = [
    "omniforge_create_tool",
    "omniforge_update_tool",
    "omniforge_delete_tool",
    "omniforge_get_tool",
    "omniforge_rollback_tool",
    "omniforge_create_resource",
    "omniforge_update_resource",
    "omniforge_delete_resource",
    "omniforge_create_resource_template",
    "omniforge_update_resource_template",
    "omniforge_delete_resource_template",
    "omniforge_create_prompt",
    "omniforge_update_prompt",
    "omniforge_delete_prompt",
    "omniforge_get_definition",
];

/// What a run may call: the call's catalog and request, and what the code declared.
pub(crate) struct BuiltinAccess<'a> {
    /// The catalog snapshot the tool call was routed in.
    pub(crate) router: &'a dyn Router,
    /// The tool call's request (its principal decides the scope).
    pub(crate) cx: &'a RequestCx<'a>,
    /// The stored tool whose script runs.
    pub(crate) tool: &'a str,
    /// Its version.
    pub(crate) version: u32,
    /// The built-ins the version's code declares (`[tool.omniforge] builtins`).
    pub(crate) declared: Vec<String>,
}

/// The built-ins `code` declares in `[tool.omniforge] builtins`; empty without the table or
/// when it is unreadable (authoring reports PEP 723 errors).
pub(crate) fn declared(code: &str) -> Vec<String> {
    let table = pep723_tool_table(code, "omniforge").ok().flatten();
    table
        .as_ref()
        .and_then(|t| t.get("builtins"))
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Answers one `call_builtin` request: the built-in's result as MCP `CallToolResult` JSON
/// (an `isError` result is an answer too), or a JSON-RPC error when it may not be called.
pub(crate) async fn answer(
    request: ScriptRequest,
    access: Option<&BuiltinAccess<'_>>,
    secrets: &[String],
) {
    let params = request.params();
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Some(JsonObject::new()),
        Some(Value::Object(arguments)) => Some(arguments.clone()),
        Some(_) => None,
    };
    let refuse = |code, message: String| {
        Err(RpcError {
            code,
            message,
            data: None,
        })
    };
    let answer = match (access, arguments) {
        (None, _) => refuse(
            code::INVALID_REQUEST,
            "call_builtin is not available here (omniforge_test_tool runs)".to_owned(),
        ),
        (_, None) => refuse(
            code::INVALID_PARAMS,
            "call_builtin: arguments must be a JSON object".to_owned(),
        ),
        (Some(_), _) if !CALLABLE.contains(&name) => refuse(
            code::INVALID_PARAMS,
            format!(
                "call_builtin: {name:?} cannot be called from a tool (callable: {})",
                CALLABLE.join(", ")
            ),
        ),
        (Some(access), _) if !access.declared.iter().any(|d| d == name) => refuse(
            code::INVALID_PARAMS,
            format!(
                "call_builtin: the tool's code does not declare {name:?}; list it in its \
                 PEP 723 block: [tool.omniforge] builtins = [\"{name}\"]"
            ),
        ),
        (Some(access), Some(arguments)) => {
            // Never with `admin` authority: the code is a writer's, and an admin calling it
            // must not lend it admin powers (e.g. the grant an admin's own tool write gets
            // for the secrets it declares).
            let Some(script) = ScriptCaller::new(access.cx, access.tool, access.version) else {
                return request.respond(refuse(
                    code::INVALID_REQUEST,
                    "call_builtin: the call has no principal".to_owned(),
                ));
            };
            let cx = script.cx(access.cx);
            let result = match access
                .router
                .route(name, arguments, &cx, script.via())
                .await
            {
                Ok(result) => Ok(result),
                Err(CallError::Cancelled) => {
                    return request.respond(refuse(
                        code::INTERNAL_ERROR,
                        "the tool call was cancelled".into(),
                    ));
                }
                Err(error) => Ok(error_result(&error)),
            };
            result.map(|result| {
                scrub_value(serde_json::to_value(result).unwrap_or(Value::Null), secrets)
            })
        }
    };
    request.respond(answer);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_come_from_the_pep723_block() {
        let code = "# /// script\n# [tool.omniforge]\n# builtins = [\"omniforge_update_tool\"]\n# ///\nprint(1)\n";
        assert_eq!(declared(code), ["omniforge_update_tool"]);
        assert!(declared("print(1)\n").is_empty());
        assert!(declared("# /// script\n# builtins = [\"x\"]\n# ///\n").is_empty());
    }
}
