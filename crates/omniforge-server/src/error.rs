//! The errors of the server's own domain, each a `thiserror` enum. They carry no wire shape:
//! [`crate::mcp::to_wire`] maps them once to an `isError` result or a JSON-RPC error, and the
//! command line prints their text.
//!
//! - [`CallError`]: a `tools/call` that produced no tool result (unknown tool, bad
//!   arguments, a script that could not start, an authoring built-in that refused, ...).
//!   Always a tool-level `isError` result, except [`CallError::Cancelled`].
//! - [`AuthoringError`]: a definition (tool, secret, resource, template, prompt, pack entry)
//!   that cannot be stored; its text names the field (`code: does not compile: ...`).
//! - [`ContentError`]: `resources/read`, `prompts/get` and `completion/complete` failures,
//!   each with its JSON-RPC code.
//! - [`ScriptError`]: a template or completion script that produced no output.
//! - [`InstallError`]: an environment made elsewhere that could not be installed here.

use std::borrow::Cow;
use std::sync::Arc;

use omniforge_script::{EnvError, RunError};
use omniforge_store::StoreError;

use crate::schema::SchemaError;

/// A `tools/call` that produced no tool result of its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CallError {
    /// No such tool, or the caller may not see it.
    #[error("Unknown or inactive tool")]
    UnknownTool,
    /// `arguments` was `null` or not an object.
    #[error("arguments must be a JSON object")]
    ArgumentsNotObject,
    /// The arguments do not match the tool's inputSchema.
    #[error("Arguments do not match inputSchema\n{0}")]
    InvalidArguments(#[source] SchemaError),
    /// `omniforge_call_tool` named itself.
    #[error("omniforge_call_tool cannot call omniforge_call_tool")]
    NestedForward,
    /// A streaming RPC of a manifest, reserved by name but not callable.
    #[error(
        "{name} is a streaming RPC: streaming RPCs are not supported (MCP tool calls are unary)"
    )]
    Streaming {
        /// The tool.
        name: String,
    },
    /// The request was cancelled: no result is sent (a JSON-RPC error, which rmcp drops).
    #[error("cancelled")]
    Cancelled,
    /// Every run slot and queue place is taken.
    #[error("busy: too many tool calls are running; try again shortly")]
    Busy,
    /// The sandbox could not start the script.
    #[error("the script could not be started: {0}")]
    NotStarted(#[source] RunError),
    /// The version's environment (made through another replica) could not be installed here.
    #[error("the tool's environment could not be installed on this server: {0}")]
    Environment(#[source] InstallError),
    /// The version's secrets could not be read.
    #[error("secrets: {0}")]
    Secrets(#[source] StoreError),
    /// The script's result is not what the tool promised (outputSchema, content items).
    #[error(transparent)]
    Result(#[from] ResultError),
    /// A stored tool run from the command line does not exist or is disabled.
    #[error("{0}")]
    NotRunnable(String),
    /// The store failed.
    #[error("{0}")]
    Store(#[source] StoreError),
    /// An authoring built-in refused.
    #[error(transparent)]
    Authoring(#[from] AuthoringError),
    /// The script ended the call with a JSON-RPC error (`omniforge.protocol_error`); its
    /// message and data are already redacted.
    #[error("JSON-RPC error {code}: {message}")]
    Protocol {
        /// One of the codes a script may use.
        code: i32,
        /// The script's message.
        message: String,
        /// The script's `data`.
        data: Option<serde_json::Value>,
    },
    /// The script asked for a JSON-RPC error it may not send.
    #[error("protocol_error: {0}")]
    ProtocolRefused(String),
    /// Not an error: the call needs the client's input first (2026-07-28 input-required
    /// result). The answer is an `input_required` result, never `isError`.
    #[error("input required: {}", .0.requests.keys().cloned().collect::<Vec<_>>().join(", "))]
    InputRequired(Box<InputRequired>),
}

/// The questions a call waits for, and the sealed state its retry echoes.
#[derive(Debug)]
pub(crate) struct InputRequired {
    /// Key → `{method, params}`: the `inputRequests`.
    pub(crate) requests: serde_json::Map<String, serde_json::Value>,
    /// The sealed `requestState`.
    pub(crate) state: String,
}

/// A tool's result that breaks its own contract.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ResultError {
    /// The structured result does not match the tool's outputSchema.
    #[error("the result does not match the tool's outputSchema\n{0}")]
    OutputSchema(#[source] SchemaError),
    /// A tool with an outputSchema printed something that is not one JSON object.
    #[error("the tool declares an outputSchema, so its stdout must be one JSON object; got: {got}")]
    NotAnObject {
        /// The start of what it printed.
        got: String,
    },
    /// One item of the script's `content` list is not MCP content.
    #[error("the script's result content item {index} is not valid MCP content: {reason}")]
    ContentItem {
        /// Its position.
        index: usize,
        /// What is wrong.
        reason: InvalidContent,
    },
    /// The script's single `content` item is not MCP content.
    #[error("the script's result content is not valid MCP content: {reason}")]
    Content {
        /// What is wrong.
        reason: InvalidContent,
    },
    /// `content` is neither a list, an item nor a string.
    #[error(
        "the script's result content must be a list of content items, one item or a string; got {kind}"
    )]
    ContentShape {
        /// What it was (`a number`, ...).
        kind: &'static str,
    },
    /// Another of these errors, its text with exact secret values replaced by `[redacted]`.
    #[error("{0}")]
    Redacted(String),
    /// A manifest upstream's reply does not match the tool's outputSchema.
    #[error("the upstream reply does not match the tool's outputSchema\n{problems}\n{reply}")]
    UpstreamReply {
        /// The violations.
        problems: SchemaError,
        /// The reply, as JSON text.
        reply: String,
    },
}

/// Why a script's content item is not MCP content.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct InvalidContent(pub(crate) String);

/// A definition that cannot be stored. The text starts with the field at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthoringError {
    /// The arguments do not have the built-in's shape.
    #[error("arguments: {0}")]
    Arguments(#[source] serde_json::Error),
    /// A field breaks a rule.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field (`name`, `inputSchema`, `messages[2].content.data`, ...).
        field: Cow<'static, str>,
        /// The rule, and what was given.
        reason: String,
    },
    /// The pinned interpreter or uv cannot be set up.
    #[error("environment: {0}")]
    Environment(#[source] EnvError),
    /// The dependencies cannot be resolved.
    #[error("dependencies: {0}")]
    Dependencies(#[source] EnvError),
    /// The dependencies cannot be installed.
    #[error("dependencies: install failed: {0}")]
    Install(#[source] EnvError),
    /// The store refused or failed.
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl AuthoringError {
    /// `field: reason`.
    pub(crate) fn invalid(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        AuthoringError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// A template or completion script that produced no output.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ScriptError {
    /// Every run slot and queue place is taken.
    #[error("busy: too many scripts are running; try again shortly")]
    Busy,
    /// The sandbox could not start it.
    #[error("the script could not be started: {0}")]
    NotStarted(#[source] RunError),
    /// It failed: its output, `[stderr] ...`, `[exit N]` or `[timeout]`.
    #[error("{0}")]
    Failed(String),
    /// Its environment (made through another replica) could not be installed here.
    #[error("the script's environment could not be installed on this server: {0}")]
    Environment(#[source] InstallError),
}

/// Why an environment made through another replica could not be installed on this server
/// (shared by every run waiting for the same install, hence `Clone`).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum InstallError {
    /// The version's lock could not be read from the store.
    #[error("reading the lock: {0}")]
    Lock(#[source] Arc<StoreError>),
    /// The builder is unavailable (interpreter, uv) or the build failed.
    #[error("{0}")]
    Build(#[source] Arc<EnvError>),
    /// The server is stopping.
    #[error("the server is stopping")]
    Stopped,
}

/// A `resources/*`, `prompts/*` or `completion/complete` request that cannot be answered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ContentError {
    /// No stored resource, template or kept output has this URI (-32002).
    #[error("resource not found: {uri}")]
    ResourceNotFound {
        /// The URI.
        uri: String,
    },
    /// A kept output's URI whose output is gone or was never there (-32002).
    #[error("resource not found: {uri} (outputs of cut results are kept for {kept_for})")]
    OutputNotFound {
        /// The URI.
        uri: String,
        /// How long outputs are kept (`--output-ttl`), as humantime writes it.
        kept_for: String,
    },
    /// A bad request (-32602): unknown prompt, argument or template; missing arguments.
    #[error("{0}")]
    InvalidParams(String),
    /// A template's script failed (-32603).
    #[error("resource template {template} failed for {uri}: {error}")]
    TemplateFailed {
        /// The URI template.
        template: String,
        /// The URI read.
        uri: String,
        /// Why.
        #[source]
        error: ScriptError,
    },
    /// A prompt's script failed (-32603).
    #[error("prompt {prompt} failed: {error}")]
    PromptFailed {
        /// The prompt's name.
        prompt: String,
        /// Why.
        #[source]
        error: ScriptError,
    },
    /// A prompt's script printed something that is not messages (-32603).
    #[error("prompt {prompt}: its script printed no usable messages: {reason}")]
    PromptOutput {
        /// The prompt's name.
        prompt: String,
        /// What is wrong.
        reason: String,
    },
    /// A completion script failed (-32603).
    #[error("completion script failed: {0}")]
    CompletionFailed(#[source] ScriptError),
    /// A completion script printed something unusable (-32603).
    #[error("completion script: {0}")]
    CompletionOutput(String),
    /// A stored prompt message cannot be read back (-32603).
    #[error("stored prompt message unreadable: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// The store failed (-32603, without details for the client).
    #[error("the store could not be read")]
    Store(#[source] StoreError),
}

/// Parses a built-in's (or a pack entry's) arguments into its argument type.
///
/// # Errors
/// [`AuthoringError::Arguments`] with serde's message.
pub(crate) fn parse_arguments<T: serde::de::DeserializeOwned>(
    arguments: rmcp::model::JsonObject,
) -> Result<T, AuthoringError> {
    serde_json::from_value(serde_json::Value::Object(arguments)).map_err(AuthoringError::Arguments)
}
