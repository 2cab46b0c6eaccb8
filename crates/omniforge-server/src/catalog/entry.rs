//! One catalog entry: a tool as served, where it comes from, who may see it, and its call.

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{CallSource, TaskStart, TaskSupport};
use rmcp::model::{JsonObject, Tool};
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
///
/// Compact, because a catalog may hold 100,000 stored tools (issue 14): the served `Tool` is
/// kept serialized (about 0.6 KB for a small tool, against about 3 KB as an rmcp `Tool` whose
/// schemas are `serde_json` values), and a stored tool's code and schemas stay in the store
/// until a call loads them (`tools/stored/versions.rs`).
pub(crate) struct Entry {
    /// Its name, shared with the catalog's index.
    pub(crate) name: Arc<str>,
    /// The MCP tool definition sent in `tools/list` (in the served schema profile), as JSON.
    listing: Box<str>,
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
    /// Who wrote the version served (a stored tool's author's principal id; empty otherwise).
    pub(crate) author: Arc<str>,
    /// The inputSchema as authored (the served one may be rewritten by a schema profile),
    /// when the entry holds it (built-in and manifest tools). `None`: the call checks the
    /// arguments against what it loads ([`ToolCall::check_arguments`]).
    input: Option<Box<LazySchema>>,
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
    /// A listed entry that holds its inputSchema for the argument check.
    pub(crate) fn new(
        tool: Tool,
        source: ToolSource,
        scope: Scope,
        call: Arc<dyn ToolCall>,
    ) -> Entry {
        let input = LazySchema::new("the tool's inputSchema", tool.input_schema.clone());
        let mut entry = Entry::checked_by_call(&tool, source, scope, call);
        entry.input = Some(Box::new(input));
        entry
    }

    /// A listed entry whose call checks its own arguments (a stored tool: its schema is
    /// loaded with the version at call time, not held by the catalog).
    pub(crate) fn checked_by_call(
        tool: &Tool,
        source: ToolSource,
        scope: Scope,
        call: Arc<dyn ToolCall>,
    ) -> Entry {
        Entry {
            name: Arc::from(&*tool.name),
            listing: serialize(tool),
            source,
            scope,
            listed: true,
            call,
            tasking: Tasking::default(),
            author: Arc::from(""),
            input: None,
        }
    }

    /// This entry, its calls running as tasks as `tasking` says.
    pub(crate) fn with_tasking(mut self, tasking: Tasking) -> Entry {
        self.tasking = tasking;
        self
    }

    /// This entry, its served version written by `author`.
    pub(crate) fn with_author(mut self, author: Arc<str>) -> Entry {
        self.author = author;
        self
    }

    /// This entry, left out of `tools/list` (still callable by name).
    pub(crate) fn unlisted(mut self) -> Entry {
        self.listed = false;
        self
    }

    /// The served tool definition, as JSON (what `tools/list` sends for it).
    pub(crate) fn listing(&self) -> &str {
        &self.listing
    }

    /// The served tool definition, rebuilt from its JSON (a page of `tools/list`, the routing
    /// headers' lookup, the console).
    pub(crate) fn tool(&self) -> Tool {
        serde_json::from_str(&self.listing).unwrap_or_else(|error| {
            // Never expected: the listing is a `Tool` serialized by `serialize`.
            tracing::error!(tool = %self.name, %error, "a catalog listing does not parse");
            Tool::new(self.name.to_string(), "", Arc::new(JsonObject::new()))
        })
    }

    /// Replaces the served definition (a schema profile's rewrite).
    pub(crate) fn set_tool(&mut self, tool: &Tool) {
        self.listing = serialize(tool);
    }

    /// Checks call arguments against the authored inputSchema, handing them back: the one the
    /// entry holds, or the one its call loads.
    ///
    /// # Errors
    /// [`CallError::InvalidArguments`] with each violation, or a note that the schema does
    /// not compile; what loading the call's schema ends in.
    pub(crate) async fn check_arguments(
        &self,
        arguments: JsonObject,
    ) -> Result<JsonObject, CallError> {
        match &self.input {
            Some(input) => check(input, arguments),
            None => self.call.check_arguments(arguments).await,
        }
    }
}

/// Checks `arguments` against `schema`, handing them back.
///
/// # Errors
/// [`CallError::InvalidArguments`] with each violation, or a note that the schema does not
/// compile.
pub(crate) fn check(schema: &LazySchema, arguments: JsonObject) -> Result<JsonObject, CallError> {
    let value = Value::Object(arguments);
    schema.check(&value).map_err(CallError::InvalidArguments)?;
    match value {
        Value::Object(arguments) => Ok(arguments),
        _ => Ok(JsonObject::new()),
    }
}

/// `tool` as the JSON `tools/list` sends.
fn serialize(tool: &Tool) -> Box<str> {
    serde_json::to_string(tool)
        .unwrap_or_else(|error| {
            // Never expected: a `Tool` is maps with string keys, strings and numbers.
            tracing::error!(tool = %tool.name, %error, "a tool definition does not serialize");
            String::from("{}")
        })
        .into_boxed_str()
}
