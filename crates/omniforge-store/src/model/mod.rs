//! The stored data: tools and their versions, call records, secrets and their grants, audit
//! records, kept outputs, durable tasks, example results, resources, resource templates and prompts, the
//! change feed's changes, and the name rules. Plain data with no database or MCP types; every
//! backend reads and writes these.

mod audit;
mod call;
mod change;
mod content;
mod example;
mod names;
mod output;
mod secret;
mod task;
mod tool;

pub(crate) use audit::AuditEntry;
pub use audit::{
    Actor, AuditAction, AuditFilter, AuditObject, AuditRecord, MAX_PRINCIPAL_BYTES,
    STORE_PRINCIPAL, validate_principal,
};
pub use call::{
    ArgumentsDigest, CallFilter, CallOutcome, CallRecord, CallSource, CapturedText, HourStats,
    LoggedCall, MAX_CALL_ERROR_BYTES, MAX_CALL_TEXT_BYTES, MAX_CALL_TOOL_BYTES, ToolActivity,
};
pub use change::{Change, ChangeKind, ChangeSet};
pub use content::{
    ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate, PromptArgumentSpec,
    ResourceBody, ResourceInfo, RowState, ScriptSpec, StoredPrompt, StoredResource, StoredTemplate,
    TemplateBody, WriteMode,
};
pub use example::{ExampleResult, ExampleTrigger, MAX_EXAMPLE_TEXT_BYTES};
pub use names::{MAX_NAME_LEN, validate_secret_name, validate_tool_name};
pub use output::{
    KeptOutput, MAX_KEPT_STREAM_BYTES, MAX_RUN_ID_LEN, NewKeptOutput, OutputReader, validate_run_id,
};
pub use secret::{Grant, SecretInfo, SecretRequest, SecretValue};
pub use task::{
    MAX_REPLICA_ID_LEN, MAX_TASK_ID_LEN, MAX_TASK_MESSAGE_BYTES, NewTask, StoredTask, TaskEnd,
    TaskStatus, validate_task_id,
};
pub use tool::{
    Annotations, Execution, Limits, MAX_STATUS_REASON_BYTES, NewStatus, NewVersion, Runtime,
    StoredTool, TaskStart, TaskSupport, Tool, ToolVersion, VersionState, VersionStatus,
};

/// A JSON object, as tool input and output schemas are.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
