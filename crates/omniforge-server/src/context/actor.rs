//! [`Actor`]: who runs an operation or a call, with what authority, and where it came from.
//!
//! The principal and its scope are the request's ([`RequestCx`]): one source of truth for
//! authority, read by every check (catalog visibility, an operation's scope, the approval
//! gate, the store's audit records). [`Via`] says where the call came from. A running script
//! acting for the principal that called its tool is a caller like the others
//! ([`ScriptCaller`]): the same principal, its scope capped at [`SCRIPT_SCOPE`], and the tool
//! version the script is, so a tool never lends its caller's `admin` authority to code a
//! writer wrote.

use crate::auth::{Principal, Scope};
use crate::context::request::RequestCx;

/// The most authority a running script acts with for its caller (`tools:write`): an admin
/// calling a writer's tool never lends it admin powers.
pub(crate) const SCRIPT_SCOPE: Scope = Scope::Write;

/// Where a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via<'a> {
    /// A client's `tools/call` (inline or as a task).
    Client,
    /// A client's call through `omniforge_call_tool` (which cannot call itself again).
    Forwarded,
    /// The web console, for its signed-in principal.
    Console,
    /// The command line's one-shot actions.
    CommandLine,
    /// A running script of a stored tool version, for the principal that called that tool
    /// (`omniforge.call_builtin`).
    Script {
        /// The stored tool whose script calls.
        tool: &'a str,
        /// Its version.
        version: u32,
    },
}

/// Who runs an operation: the request (principal and scope, progress, cancellation, the
/// client) and where it came from. Cheap to copy.
#[derive(Clone, Copy)]
pub(crate) struct Actor<'a> {
    /// The request; for a script, already acting with its capped principal.
    pub(crate) cx: &'a RequestCx<'a>,
    /// Where the call came from.
    pub(crate) via: Via<'a>,
}

impl<'a> Actor<'a> {
    /// The actor of `cx`, come through `via`.
    pub(crate) fn new(cx: &'a RequestCx<'a>, via: Via<'a>) -> Actor<'a> {
        Actor { cx, via }
    }

    /// Whether the actor holds `scope`.
    pub(crate) fn allows(&self, scope: Scope) -> bool {
        self.cx.allows(scope)
    }
}

/// A running script acting for the principal that called its tool: that principal with its
/// scope capped at [`SCRIPT_SCOPE`], and the tool version the script is.
pub(crate) struct ScriptCaller<'a> {
    principal: Principal,
    tool: &'a str,
    version: u32,
}

impl<'a> ScriptCaller<'a> {
    /// The script of `version` of `tool`, running for `cx`'s principal; `None` when the call
    /// has no principal (it may do nothing).
    pub(crate) fn new(cx: &RequestCx<'_>, tool: &'a str, version: u32) -> Option<Self> {
        Some(ScriptCaller {
            principal: cx.principal_capped(SCRIPT_SCOPE)?,
            tool,
            version,
        })
    }

    /// `outer` (the tool call the script runs in) as the script makes it: the same peer,
    /// stream and cancellation, the capped principal.
    pub(crate) fn cx<'b>(&'b self, outer: &'b RequestCx<'b>) -> RequestCx<'b> {
        outer.acting_as(&self.principal)
    }

    /// Where its calls come from.
    pub(crate) fn via(&self) -> Via<'a> {
        Via::Script {
            tool: self.tool,
            version: self.version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::PrincipalId;

    #[test]
    fn a_script_acts_with_its_callers_principal_capped_at_tools_write() {
        let admin = Principal::new(PrincipalId::token("root"), Scope::Admin);
        let outer = RequestCx::local(&admin, None);
        let script = ScriptCaller::new(&outer, "t", 3).unwrap();
        let cx = script.cx(&outer);
        let actor = Actor::new(&cx, script.via());
        assert_eq!(cx.author(), "token:root");
        assert!(actor.allows(Scope::Write) && !actor.allows(Scope::Admin));
        assert_eq!(
            actor.via,
            Via::Script {
                tool: "t",
                version: 3
            }
        );
        let caller = Principal::new(PrincipalId::token("reader"), Scope::Call);
        let outer = RequestCx::local(&caller, None);
        let script = ScriptCaller::new(&outer, "t", 1).unwrap();
        let cx = script.cx(&outer);
        assert!(cx.allows(Scope::Call) && !cx.allows(Scope::Write));
    }
}
