//! The stored data: tools and their versions, call records, secrets, resources, resource
//! templates and prompts, the change feed's changes, and the name rules. Plain data with no
//! database or MCP types; every backend reads and writes these.

mod call;
mod change;
mod content;
mod names;
mod secret;
mod tool;

pub use call::{CallOutcome, CallRecord, MAX_CALL_ERROR_BYTES};
pub use change::{Change, ChangeKind, ChangeSet};
pub use content::{
    ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate, PromptArgumentSpec,
    ResourceBody, ResourceInfo, RowState, ScriptSpec, StoredPrompt, StoredResource, StoredTemplate,
    TemplateBody, WriteMode,
};
pub use names::{MAX_NAME_LEN, validate_secret_name, validate_tool_name};
pub use secret::{SecretInfo, SecretValue};
pub use tool::{Annotations, Limits, NewVersion, Runtime, StoredTool, Tool, ToolVersion};

/// A JSON object, as tool input and output schemas are.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
