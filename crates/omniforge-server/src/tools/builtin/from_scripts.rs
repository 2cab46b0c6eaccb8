//! Which built-ins `omniforge.call_builtin(name, arguments)` may run: a stored tool runs one
//! authoring built-in, e.g. to change the tool or prompt list (the conformance pack's
//! list-changed triggers). The call loop answers the request
//! ([`call_builtin`](crate::runs::call_builtin)); this is its policy.
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
//! [`ScriptCaller`](crate::context::actor::ScriptCaller)'s: the caller's principal with its
//! scope capped at `tools:write`, come through
//! [`Via::Script`](crate::context::actor::Via::Script); an admin calling a writer's
//! tool never lends it admin authority (an admin's tool write is granted the secrets it
//! declares; a script-made write never is). Only the authoring built-ins of
//! [`CALLABLE`] can be named: never the secret built-ins (`admin`), `omniforge_call_tool`,
//! `omniforge_test_tool`, or another stored tool.

use omniforge_script::pep723_tool_table;
use serde_json::Value;

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
