//! [`Backend`], everything a store backend implements, and whole-store copies between backends
//! ([`copy_store`]): what `omniforge migrate --from sqlite:PATH --to postgres://...` and
//! [`PgStore::backup`](crate::PgStore) use.
//!
//! A copy is row for row, not a replay through the traits: every tool with all its versions
//! (status included), their example results, its enabled state and times; the call log with its
//! ids and the hourly statistics; secrets with their times, **opened with the source's keyring
//! and sealed again with the target's** (a sealed value is bound to its key id, so the bytes
//! are not copied between keyrings; a PostgreSQL backup, same keyring, copies them as stored
//! and so needs no key: [`DumpedValue::Sealed`]); grants; the audit log with its ids and retention cut; kept outputs; tasks;
//! resources, templates and prompts with their row state; the change counter, the kept changes
//! and the floors. So the copy answers every trait method exactly as the original did, `seq`s,
//! `updated_seq`s and ids included, and a reader of the change feed may move from one to the
//! other. Only [`SecretInfo::key_id`](crate::SecretInfo::key_id) differs when the two keyrings
//! do.
//!
//! The source is read in one snapshot and the target written in one transaction, into an empty
//! store. The whole store passes through memory ([`StoreDump`]): fine for the stores this
//! serves today (thousands of tools); a streaming copy is future work for very large ones.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{
    AuditRecord, CallSource, Change, ChangeKind, ExampleResult, Grant, KeptOutput, LoggedCall,
    SecretValue, StoredPrompt, StoredResource, StoredTask, StoredTemplate, Tool, ToolVersion,
};
use crate::store::Store;

/// A whole store backend: every [`Store`] trait, plus whole-store reads and writes for copies.
/// What [`open`](fn@crate::open) returns; `Arc<dyn Backend>` upcasts to `Arc<dyn Store>` and to
/// each trait.
#[async_trait]
pub trait Backend: Store {
    /// `"sqlite"` or `"postgres"`, for logs.
    fn kind(&self) -> &'static str;

    /// Every row of the store, read in one snapshot, secret values opened with this store's
    /// keyring.
    ///
    /// # Errors
    /// [`StoreError::NoSecretKey`] (or another keyring error) if there are secrets this store's
    /// keyring cannot open; [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn export(&self) -> Result<StoreDump, StoreError>;

    /// Writes `dump` into this store, which must be empty (no tools, secrets, resources,
    /// templates, prompts, calls, audit records or kept outputs, and a change counter at 0), in
    /// one transaction, sealing secret values with this store's keyring.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] if the store is not empty; [`StoreError::NoSecretKey`] if the
    /// dump has secrets and this store no keyring; [`StoreError::Invalid`] for a row this
    /// backend cannot hold; [`StoreError::Database`].
    async fn import_dump(&self, dump: &StoreDump) -> Result<(), StoreError>;
}

/// Every row of a store, in the model's types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreDump {
    /// The change counter (`seq` of the newest change).
    pub data_version: u64,
    /// The audit log's retention cut: records older than this may have been pruned.
    pub audit_pruned_before_ms: i64,
    /// Every tool, enabled or not, with all its versions, by name.
    pub tools: Vec<DumpedTool>,
    /// The stored example results, by tool, version and index.
    pub example_results: Vec<DumpedExampleResult>,
    /// The call log, oldest first, with each row's id.
    pub calls: Vec<LoggedCall>,
    /// The hourly call statistics, by hour, source and tool.
    pub hours: Vec<DumpedHour>,
    /// Every secret, by name, with its value in plain text.
    pub secrets: Vec<DumpedSecret>,
    /// Every grant, by secret, tool and version.
    pub grants: Vec<Grant>,
    /// The audit log, oldest first.
    pub audit: Vec<AuditRecord>,
    /// Every kept output (expired ones too, until purged), by run id.
    pub outputs: Vec<KeptOutput>,
    /// Every task (expired ones too, until purged), by task id, with its lease as it was.
    pub tasks: Vec<StoredTask>,
    /// Every resource with its body, by URI.
    pub resources: Vec<StoredResource>,
    /// Every resource template, by URI template.
    pub templates: Vec<StoredTemplate>,
    /// Every prompt, by name.
    pub prompts: Vec<StoredPrompt>,
    /// The kept changes, oldest first.
    pub changes: Vec<Change>,
    /// Per kind, the highest pruned `seq`.
    pub floors: Vec<(ChangeKind, u64)>,
}

/// One tool's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpedTool {
    /// The tool row.
    pub tool: Tool,
    /// The `seq` of its last change (orders `list_enabled`).
    pub updated_seq: i64,
    /// All its versions, oldest first.
    pub versions: Vec<ToolVersion>,
}

/// One stored example result.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpedExampleResult {
    /// The tool.
    pub tool: String,
    /// The version.
    pub version: u32,
    /// The result.
    pub result: ExampleResult,
}

/// One hour of one tool's call statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedHour {
    /// The hour's start, unix milliseconds.
    pub hour_start_ms: i64,
    /// The tool's source.
    pub source: CallSource,
    /// The tool's name.
    pub tool: String,
    /// Calls in the hour.
    pub calls: u64,
    /// Failed calls in the hour.
    pub errors: u64,
    /// The longest call, milliseconds.
    pub max_ms: u64,
    /// The latest call's start.
    pub last_call_ms: i64,
    /// The duration histogram's bucket counts ([`stats`](crate::stats)).
    pub buckets: Vec<u64>,
}

/// One secret's row.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpedSecret {
    /// Its name.
    pub name: String,
    /// Its value: opened ([`Backend::export`]), or sealed as stored (a backup).
    pub value: DumpedValue,
    /// When it was last set, unix milliseconds.
    pub updated_at_ms: i64,
}

/// A secret's value in a dump.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DumpedValue {
    /// Opened with the source's keyring (or stored in plain text by an older build); the
    /// import seals it with the target's keyring.
    Open(SecretValue),
    /// Sealed as stored, under key `key_id` (bound to the secret's name and key id): the import
    /// writes it as it is, so the same keyring opens it and no key is needed to copy it. A
    /// backup copies values so.
    Sealed {
        /// The id of the key that sealed it.
        key_id: String,
        /// The sealed bytes.
        bytes: Vec<u8>,
    },
}

/// What [`copy_store`] copied, for a report line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyReport {
    /// Tools.
    pub tools: usize,
    /// Tool versions.
    pub versions: usize,
    /// Example results.
    pub example_results: usize,
    /// Call log rows.
    pub calls: usize,
    /// Hourly statistics rows.
    pub hours: usize,
    /// Secrets (sealed again under the target's keyring).
    pub secrets: usize,
    /// Grants.
    pub grants: usize,
    /// Audit records.
    pub audit: usize,
    /// Kept outputs.
    pub outputs: usize,
    /// Tasks.
    pub tasks: usize,
    /// Resources, resource templates and prompts.
    pub content: usize,
    /// Kept changes of the feed.
    pub changes: usize,
}

/// Copies the whole store `from` into the empty store `to` (see the module docs): `from`'s
/// keyring opens the secrets, `to`'s seals them.
///
/// # Errors
/// As [`Backend::export`] and [`Backend::import_dump`]: [`StoreError::Conflict`] if `to` is not
/// empty.
pub async fn copy_store(from: &dyn Backend, to: &dyn Backend) -> Result<CopyReport, StoreError> {
    let dump = from.export().await?;
    to.import_dump(&dump).await?;
    Ok(CopyReport {
        tools: dump.tools.len(),
        versions: dump.tools.iter().map(|t| t.versions.len()).sum(),
        example_results: dump.example_results.len(),
        calls: dump.calls.len(),
        hours: dump.hours.len(),
        secrets: dump.secrets.len(),
        grants: dump.grants.len(),
        audit: dump.audit.len(),
        outputs: dump.outputs.len(),
        tasks: dump.tasks.len(),
        content: dump.resources.len() + dump.templates.len() + dump.prompts.len(),
        changes: dump.changes.len(),
    })
}
