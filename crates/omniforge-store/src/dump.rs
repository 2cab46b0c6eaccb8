//! [`Backend`], everything a store backend implements, and whole-store copies between backends
//! ([`copy_store`]): what `omniforge migrate --from sqlite:PATH --to postgres://...` and
//! [`PgStore::backup`](crate::PgStore) use.
//!
//! A copy is row for row, not a replay through the traits: every tool with all its versions,
//! its enabled state and times; the call log with its ids; secrets with their times; resources,
//! templates and prompts with their row state; the change counter, the kept changes and the
//! floors. So the copy answers every trait method exactly as the original did, `seq`s and
//! `updated_seq`s included, and a reader of the change feed may move from one to the other.
//!
//! The source is read in one snapshot and the target written in one transaction, into an empty
//! store. The whole store passes through memory ([`StoreDump`]): fine for the stores this
//! serves today (thousands of tools); a streaming copy is future work for very large ones.

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{
    CallRecord, Change, ChangeKind, SecretValue, StoredPrompt, StoredResource, StoredTemplate,
    Tool, ToolVersion,
};
use crate::store::ContentStore;

/// A whole store backend: [`ContentStore`] (and so [`ToolStore`](crate::ToolStore)), plus
/// whole-store reads and writes for copies. What [`open`](crate::open) returns;
/// `Arc<dyn Backend>` upcasts to `Arc<dyn ContentStore>` and `Arc<dyn ToolStore>`.
#[async_trait]
pub trait Backend: ContentStore {
    /// `"sqlite"` or `"postgres"`, for logs.
    fn kind(&self) -> &'static str;

    /// Every row of the store, read in one snapshot.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn export(&self) -> Result<StoreDump, StoreError>;

    /// Writes `dump` into this store, which must be empty (no tools, secrets, resources,
    /// templates or prompts, and a change counter at 0), in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] if the store is not empty; [`StoreError::Invalid`] for a row
    /// this backend cannot hold; [`StoreError::Database`].
    async fn import_dump(&self, dump: &StoreDump) -> Result<(), StoreError>;
}

/// Every row of a store, in the model's types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreDump {
    /// The change counter (`seq` of the newest change).
    pub data_version: u64,
    /// Every tool, enabled or not, with all its versions, by name.
    pub tools: Vec<DumpedTool>,
    /// The call log, oldest first, with each row's id.
    pub calls: Vec<(i64, CallRecord)>,
    /// Every secret, by name.
    pub secrets: Vec<DumpedSecret>,
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

/// One secret's row.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpedSecret {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: SecretValue,
    /// When it was last set, unix milliseconds.
    pub updated_at_ms: i64,
}

/// What [`copy_store`] copied, for a report line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyReport {
    /// Tools.
    pub tools: usize,
    /// Tool versions.
    pub versions: usize,
    /// Call log rows.
    pub calls: usize,
    /// Secrets.
    pub secrets: usize,
    /// Resources, resource templates and prompts.
    pub content: usize,
}

/// Copies the whole store `from` into the empty store `to` (see the module docs).
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
        calls: dump.calls.len(),
        secrets: dump.secrets.len(),
        content: dump.resources.len() + dump.templates.len() + dump.prompts.len(),
    })
}

/// The error of an import into a store that is not empty.
pub(crate) fn not_empty() -> StoreError {
    StoreError::Conflict {
        reason: "the target store is not empty (a copy goes into a new database)".into(),
    }
}

/// The `seq`s of `dump` as database integers.
pub(crate) fn seq_i64(seq: u64) -> Result<i64, StoreError> {
    crate::rules::checked_i64("seq", seq)
}
