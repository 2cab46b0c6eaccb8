//! A script's `omniforge.call_builtin(name, arguments)`, answered in the call loop: the
//! built-in is routed in the call's own catalog snapshot as a
//! [`ScriptCaller`]'s call (the caller's principal, its scope capped at `tools:write`), and only
//! when the tool may call it ([`BuiltinAccess`]: the tool source says which built-ins are
//! callable, the version's code which it declares). Its result goes back to the script as MCP
//! `CallToolResult` JSON, secrets scrubbed.

use omniforge_script::{RpcError, ScriptRequest};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::catalog::call::Router;
use crate::context::actor::ScriptCaller;
use crate::context::request::RequestCx;
use crate::error::CallError;
use crate::runs::questions::code;
use crate::runs::redact::scrub_value;

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
    /// The built-ins a tool may call at all (declared or not).
    pub(crate) callable: &'a [&'a str],
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
        (Some(access), _) if !access.callable.contains(&name) => refuse(
            code::INVALID_PARAMS,
            format!(
                "call_builtin: {name:?} cannot be called from a tool (callable: {})",
                access.callable.join(", ")
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
                Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(
                    error.to_string(),
                )])),
            };
            result.map(|result| {
                scrub_value(serde_json::to_value(result).unwrap_or(Value::Null), secrets)
            })
        }
    };
    request.respond(answer);
}
