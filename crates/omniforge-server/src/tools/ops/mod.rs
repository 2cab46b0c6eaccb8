//! The built-ins as typed operations, mini-redis style: each is its arguments type (an
//! [`Operation`]: `Deserialize` + `JsonSchema`, doc comments as the schema's descriptions)
//! with an [`apply`](Operation::apply) that answers in plain data ([`Outcome`]). Three front
//! ends build the arguments and run them through [`run`], which checks the scope first:
//! - MCP: [`mcp`], the one adapter, parses `tools/call` arguments into the type and renders
//!   the outcome as a `CallToolResult` (also for a running script's `call_builtin`, routed
//!   through the catalog with its [`Actor`]);
//! - the command line (`commands.rs`) and the console (`console/actions.rs`) build the type
//!   directly and render the outcome themselves.
//!
//! [`schema`] derives each inputSchema from the type. The two built-ins that answer with
//! another tool's result (`omniforge_test_tool`, a script run; `omniforge_call_tool`, a routed
//! call) have argument types for their schemas, and pass that result on unchanged.

pub(crate) mod mcp;
pub(crate) mod schema;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::auth::Scope;
use crate::context::actor::Actor;
use crate::error::AuthoringError;

/// What a built-in operation answered: plain data each front end renders its own way.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// It did what was asked. `false`: it ran and refused (an example failed, a version was
    /// kept as a draft); over MCP an `isError` result.
    pub ok: bool,
    /// What happened, in words.
    pub text: String,
    /// The same as data (a tool's view, a list), when there is more than words; over MCP the
    /// `structuredContent`.
    pub data: Option<Value>,
}

impl Outcome {
    /// Done, as `text` says.
    pub(crate) fn done(text: impl Into<String>) -> Outcome {
        Outcome {
            ok: true,
            text: text.into(),
            data: None,
        }
    }

    /// Refused, as `text` says.
    pub(crate) fn refused(text: impl Into<String>) -> Outcome {
        Outcome {
            ok: false,
            text: text.into(),
            data: None,
        }
    }

    /// This outcome, with `data`.
    pub(crate) fn with_data(mut self, data: Value) -> Outcome {
        self.data = Some(data);
        self
    }

    /// An operation that failed, as the refusal its error's text says (what the command line
    /// and the console show).
    pub(crate) fn of(result: Result<Outcome, AuthoringError>) -> Outcome {
        result.unwrap_or_else(|e| Outcome::refused(e.to_string()))
    }
}

/// A built-in's behaviour hints (MCP tool annotations), as plain data; `None` leaves a hint
/// out (its default then applies).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hints {
    /// It changes nothing.
    pub(crate) read_only: Option<bool>,
    /// It may destroy or replace what exists.
    pub(crate) destructive: Option<bool>,
    /// Calling it again with the same arguments does nothing more.
    pub(crate) idempotent: Option<bool>,
    /// It reaches beyond this server.
    pub(crate) open_world: Option<bool>,
}

impl Hints {
    /// Every hint given, none of them open-world.
    pub(crate) const fn closed(read_only: bool, destructive: bool, idempotent: bool) -> Hints {
        Hints {
            read_only: Some(read_only),
            destructive: Some(destructive),
            idempotent: Some(idempotent),
            open_world: Some(false),
        }
    }

    /// Reads only.
    pub(crate) const READ: Hints = Hints::closed(true, false, true);
    /// Adds or changes, each call anew.
    pub(crate) const WRITE: Hints = Hints::closed(false, false, false);
}

/// How a built-in is listed: name, title, description, the scope a caller needs, hints.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ToolDef {
    /// The tool's name (`omniforge_*`).
    pub(crate) name: &'static str,
    /// Its title, if any.
    pub(crate) title: Option<&'static str>,
    /// What it does, for the model.
    pub(crate) description: &'static str,
    /// The scope a caller needs to see and call it.
    pub(crate) scope: Scope,
    /// Its behaviour hints.
    pub(crate) hints: Hints,
}

/// One built-in operation: its arguments type, with what it works on and how it is listed.
pub(crate) trait Operation: DeserializeOwned + JsonSchema + Send + 'static {
    /// What it works on: a part of [`Authoring`](crate::tools::Authoring)
    /// ([`Part`](crate::tools::Part)).
    type Service: ?Sized + Send + Sync + 'static;

    /// How it is listed.
    const TOOL: ToolDef;

    /// Runs it for `actor` (whose scope [`run`] checked).
    ///
    /// # Errors
    /// A refused definition or request, naming the field; the store failed.
    fn apply<'a>(
        self,
        service: &'a Self::Service,
        actor: Actor<'a>,
    ) -> impl Future<Output = Result<Outcome, AuthoringError>> + Send + 'a;
}

/// Runs `op` for `actor`: the one way every front end runs an operation.
///
/// # Errors
/// `scope: ...` when the actor lacks the operation's scope (catalog routing hides it from
/// MCP callers already; this holds for every caller); what the operation ends in.
pub(crate) async fn run<O: Operation>(
    op: O,
    service: &O::Service,
    actor: Actor<'_>,
) -> Result<Outcome, AuthoringError> {
    let scope = O::TOOL.scope;
    if !actor.allows(scope) {
        return Err(AuthoringError::invalid(
            "scope",
            format!("{} needs the {} scope", O::TOOL.name, scope.as_str()),
        ));
    }
    op.apply(service, actor).await
}
