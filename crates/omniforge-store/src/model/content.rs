//! Stored resources, resource templates and prompts, and what a pack import writes.
//!
//! Unlike tools they are not versioned: a write replaces the row. Prompt messages are kept as
//! JSON values the server validated; template and completion scripts as [`ScriptSpec`]s the
//! server built. Nothing here is an MCP type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::NewVersion;

/// A script that runs in the tools' sandbox: the code of a script-backed resource template or
/// prompt, or of a completion provider. Its environment was built from `lock` before it was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptSpec {
    /// Python source.
    pub code: String,
    /// PEP 508 requirements as written.
    pub dependencies: Vec<String>,
    /// The resolved, hash-pinned requirements text.
    pub lock: String,
    /// The built environment's id (shared with tools of the same lock).
    pub env_id: String,
    /// Wall-clock limit of one run, milliseconds.
    pub timeout_ms: u64,
    /// Address-space limit of one run, bytes.
    pub memory_bytes: u64,
    /// Whether the script may use the network.
    pub network: bool,
}

/// The content of a stored resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceBody {
    /// UTF-8 text (MCP `text`).
    Text(String),
    /// Bytes (MCP `blob`, base64 on the wire).
    Blob(Vec<u8>),
}

impl ResourceBody {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            ResourceBody::Text(t) => t.len(),
            ResourceBody::Blob(b) => b.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A resource as written: its URI is its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewResource {
    /// Absolute URI, unique.
    pub uri: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType`.
    pub mime_type: Option<String>,
    /// Text or bytes.
    pub body: ResourceBody,
}

/// Bookkeeping every stored resource, template and prompt has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowState {
    /// Disabled rows are kept but not served.
    pub enabled: bool,
    /// Unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// Unix milliseconds (UTC) of the last change.
    pub updated_at_ms: i64,
    /// The change feed `seq` of the last change to the row ([`Change::seq`](crate::Change::seq)).
    pub updated_seq: i64,
}

/// A stored resource without its body, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// URI.
    pub uri: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType`.
    pub mime_type: Option<String>,
    /// Bytes of the body.
    pub size: u64,
    /// Whether the body is text (else a blob).
    pub is_text: bool,
    /// Row state.
    pub state: RowState,
}

/// A stored resource with its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResource {
    /// What was written.
    pub spec: NewResource,
    /// Row state.
    pub state: RowState,
}

/// How a resource template produces the contents of a matching URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateBody {
    /// A text pattern in which each `{variable}` of the URI template is replaced.
    Text(String),
    /// A script that gets the variables as JSON on stdin and prints the text.
    Script(ScriptSpec),
}

/// A resource template as written: its URI template is its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplate {
    /// RFC 6570 URI template, unique.
    pub uri_template: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType` of the contents it produces.
    pub mime_type: Option<String>,
    /// Text pattern or script.
    pub body: TemplateBody,
    /// Declared values per variable, for `completion/complete`.
    pub completions: BTreeMap<String, Vec<String>>,
    /// A script that completes variables (instead of, or besides, declared values).
    pub completion_script: Option<ScriptSpec>,
}

/// A stored resource template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTemplate {
    /// What was written.
    pub spec: NewTemplate,
    /// Row state.
    pub state: RowState,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgumentSpec {
    /// Argument name, used as `{name}` in the messages.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether prompts/get must receive it.
    #[serde(default)]
    pub required: bool,
    /// Declared values, for `completion/complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A prompt as written: its name is its key.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPrompt {
    /// 1 to 64 characters from `[a-zA-Z0-9_-]`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentSpec>,
    /// MCP `PromptMessage` objects with `{argument}` placeholders (empty for a script prompt).
    pub messages: Vec<Value>,
    /// A script that gets the arguments as JSON on stdin and prints the messages (instead of
    /// `messages`).
    pub script: Option<ScriptSpec>,
    /// A script that completes arguments.
    pub completion_script: Option<ScriptSpec>,
}

/// A stored prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPrompt {
    /// What was written.
    pub spec: NewPrompt,
    /// Row state.
    pub state: RowState,
}

/// Whether a write may create, replace, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// The key must be new ([`StoreError::Duplicate`](crate::StoreError::Duplicate) otherwise).
    Create,
    /// The key must exist ([`StoreError::NotFound`](crate::StoreError::NotFound) otherwise).
    Update,
    /// Either.
    Upsert,
}

/// What a pack import writes, all in one transaction.
#[derive(Debug, Clone, Default)]
pub struct ImportBatch {
    /// Tools by name, with the version to store when it differs from the current one.
    pub tools: Vec<(String, NewVersion)>,
    /// Resources.
    pub resources: Vec<NewResource>,
    /// Resource templates.
    pub templates: Vec<NewTemplate>,
    /// Prompts.
    pub prompts: Vec<NewPrompt>,
}

/// What an import did: one line per entry that changed, e.g. `tool add_vat: version 2`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The entries created or changed.
    pub changed: Vec<String>,
    /// How many entries were already exactly as in the pack.
    pub unchanged: usize,
}
