//! One catalog entry: a tool as served, where it comes from, who may see it, and its call.

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{CallSource, TaskStart, TaskSupport};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use crate::auth::Scope;
use crate::catalog::call::ToolCall;
use crate::error::CallError;
use crate::schema::LazySchema;

/// Where a tool comes from. The order of the variants is the merge order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ToolSource {
    /// Compiled into the server (`omniforge_*`).
    Builtin,
    /// Declared in an operator-configured forge manifest and proxied to a Connect service.
    Manifest,
    /// Forged by an agent and kept in the store.
    Stored,
}

impl ToolSource {
    /// The lower-case name used in logs and in `/healthz`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ToolSource::Builtin => "builtin",
            ToolSource::Manifest => "manifest",
            ToolSource::Stored => "stored",
        }
    }

    /// How the catalog's callers log a call of this source (`log_record`); `None` for a stored
    /// tool, whose call records itself with its version.
    pub(crate) fn logged_as(self) -> Option<CallSource> {
        match self {
            ToolSource::Builtin => Some(CallSource::BuiltIn),
            ToolSource::Manifest => Some(CallSource::Manifest),
            ToolSource::Stored => None,
        }
    }
}

/// How an entry's calls may run as tasks (issue 13): what its definition says, and what a
/// task of it records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Tasking {
    /// Whether a call may or must be a task.
    pub(crate) support: TaskSupport,
    /// When a task call becomes a task.
    pub(crate) start: TaskStart,
    /// The kind of tool a task of it runs (stored or manifest).
    pub(crate) source: CallSource,
    /// The stored tool's version.
    pub(crate) version: Option<u32>,
    /// The call's timeout (a task's TTL is never shorter).
    pub(crate) timeout: Duration,
}

impl Default for Tasking {
    fn default() -> Tasking {
        Tasking {
            support: TaskSupport::Forbidden,
            start: TaskStart::Call,
            source: CallSource::BuiltIn,
            version: None,
            timeout: Duration::ZERO,
        }
    }
}

/// One tool as the catalog serves it.
pub(crate) struct Entry {
    /// The MCP tool definition sent in `tools/list` (in the served schema profile).
    pub(crate) tool: Tool,
    /// Its name, shared with the catalog's index.
    pub(crate) name: Arc<str>,
    /// Where it comes from.
    pub(crate) source: ToolSource,
    /// The scope a caller needs to see and call it.
    pub(crate) scope: Scope,
    /// Whether `tools/list` shows it (a streaming RPC is reserved but unlisted).
    pub(crate) listed: bool,
    /// How `tools/call` runs it.
    pub(crate) call: Arc<dyn ToolCall>,
    /// Whether its calls may run as tasks (never, by default).
    pub(crate) tasking: Tasking,
    /// The inputSchema as authored (the served one may be rewritten by a schema profile).
    input: LazySchema,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("scope", &self.scope)
            .field("listed", &self.listed)
            .finish_non_exhaustive()
    }
}

impl Entry {
    /// A listed entry.
    pub(crate) fn new(
        tool: Tool,
        source: ToolSource,
        scope: Scope,
        call: Arc<dyn ToolCall>,
    ) -> Entry {
        Entry {
            name: Arc::from(&*tool.name),
            input: LazySchema::new("the tool's inputSchema", tool.input_schema.clone()),
            tool,
            source,
            scope,
            listed: true,
            call,
            tasking: Tasking::default(),
        }
    }

    /// This entry, its calls running as tasks as `tasking` says.
    pub(crate) fn with_tasking(mut self, tasking: Tasking) -> Entry {
        self.tasking = tasking;
        self
    }

    /// A built-in needing `scope`.
    pub(crate) fn builtin(
        name: &'static str,
        description: &'static str,
        input_schema: Arc<JsonObject>,
        annotations: ToolAnnotations,
        scope: Scope,
        call: Arc<dyn ToolCall>,
    ) -> Entry {
        Entry::new(
            Tool::new(name, description, input_schema).with_annotations(annotations),
            ToolSource::Builtin,
            scope,
            call,
        )
    }

    /// This entry, left out of `tools/list` (still callable by name).
    pub(crate) fn unlisted(mut self) -> Entry {
        self.listed = false;
        self
    }

    /// Checks call arguments against the authored inputSchema, handing them back.
    ///
    /// # Errors
    /// [`CallError::InvalidArguments`] with each violation, or a note that the schema does
    /// not compile.
    pub(crate) fn check_arguments(&self, arguments: JsonObject) -> Result<JsonObject, CallError> {
        let value = Value::Object(arguments);
        self.input
            .check(&value)
            .map_err(CallError::InvalidArguments)?;
        match value {
            Value::Object(arguments) => Ok(arguments),
            _ => Ok(JsonObject::new()),
        }
    }
}

/// A JSON object schema written as a `json!` value (anything else reads as `{}`).
pub(crate) fn object_schema(schema: Value) -> Arc<JsonObject> {
    Arc::new(match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}
