//! The store traits, the API boundary: [`ToolStore`] (tools, versions, the call log, secrets,
//! the change feed, backups) and [`ContentStore`] (resources, resource templates, prompts, pack
//! imports). They name only [`model`](crate::model) types and [`StoreError`]: no SQL and no
//! backend's types, so that another backend (PostgreSQL) can sit beside [`SqliteStore`](crate::SqliteStore).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{
    CallRecord, ChangeSet, ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate,
    NewVersion, ResourceInfo, SecretInfo, SecretValue, StoredPrompt, StoredResource,
    StoredTemplate, StoredTool, ToolVersion, WriteMode,
};

/// Persistence for script tools, their versions, their call log and secrets.
///
/// Every method that changes something runs in one transaction and returns only after it is
/// durable (committed and synced), so an acknowledged write survives a crash of the process.
/// Reads see a consistent snapshot per call.
///
/// Names given to writes that create something are validated
/// ([`validate_tool_name`](crate::validate_tool_name), [`validate_secret_name`](crate::validate_secret_name));
/// reads and writes of existing things take any string and answer `None`/`NotFound` for names
/// that cannot exist.
///
/// Object-safe (through `async-trait`): the server holds an `Arc<dyn ToolStore>`.
#[async_trait]
pub trait ToolStore: Send + Sync {
    /// Creates tool `name`, enabled, with `spec` as version 1.
    ///
    /// # Errors
    /// [`StoreError::InvalidName`] for a bad tool name or secret name in `spec.secrets`;
    /// [`StoreError::Invalid`] for an out-of-range field of `spec`;
    /// [`StoreError::AlreadyExists`] if a tool with this name exists, enabled or not (purge it
    /// first to reuse the name); [`StoreError::Database`].
    async fn create_tool(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError>;

    /// Adds a version to tool `name` and makes it current. Its number is one more than the
    /// highest existing number (not the current one, which a rollback may have lowered). The
    /// tool's `updated_at_ms` moves to now; its enabled state is kept as it is (adding a version
    /// to a disabled tool does not enable it).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the tool does not exist; [`StoreError::InvalidName`],
    /// [`StoreError::Invalid`] as for [`create_tool`](ToolStore::create_tool);
    /// [`StoreError::Database`].
    async fn add_version(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError>;

    /// The tool and its current version, enabled or not; `None` if there is no such tool.
    ///
    /// This is how a reader of the change feed updates one catalog entry: a changed tool name
    /// is served as the returned current version when `tool.enabled`, and removed otherwise
    /// (disabled, or `None`: purged).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError>;

    /// All versions of a tool, oldest (number 1) first.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the tool does not exist; [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError>;

    /// Version `number` of a tool.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if the tool or that version does not
    /// exist; [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError>;

    /// Every enabled tool with its current version, most recently updated first (by commit
    /// order of the last change, so ties within a millisecond are still ordered).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError>;

    /// Enables or disables a tool. Every call counts as an update: `updated_at_ms` moves to now
    /// and the tool moves to the front of [`list_enabled`](ToolStore::list_enabled), even if the
    /// state was already the requested one.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError>;

    /// Makes version `number` current (it may also be newer than the current one, which rolls
    /// forward). `updated_at_ms` moves to now; the enabled state is kept. Returns that version.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if the tool or that version does not
    /// exist; [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn rollback(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError>;

    /// Removes a tool, all its versions and all its call log rows. The name can then be
    /// created again, starting over at version 1.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn purge(&self, name: &str) -> Result<(), StoreError>;

    /// Appends a finished call to the call log, pruning the oldest rows in the same transaction
    /// (see [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows)). Does not
    /// change [`current_seq`](ToolStore::current_seq). An [`error`](CallRecord::error) longer
    /// than [`MAX_CALL_ERROR_BYTES`](crate::MAX_CALL_ERROR_BYTES) is cut to it.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if that version of the tool does not exist
    /// (for example, the tool was purged while the call ran); [`StoreError::Invalid`] if a count
    /// exceeds `i64::MAX`; [`StoreError::Database`].
    async fn record_call(&self, call: CallRecord) -> Result<(), StoreError>;

    /// The last `limit` calls of a tool, newest first (by the order they were recorded): the
    /// call history that `omniforge tool calls` and `omniforge_get_tool` show. At most
    /// [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) calls are kept
    /// over all tools, so fewer may come back. `limit` 0 returns none.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the tool does not exist; [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError>;

    /// The environment ids of every version of every existing tool (not only current ones,
    /// since a rollback may need an older environment). An environment not in this set can be
    /// deleted.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn env_ids_in_use(&self) -> Result<HashSet<String>, StoreError>;

    /// The change counter as an `i64`: the same number as
    /// [`current_seq`](ToolStore::current_seq), kept for callers written before the change feed.
    /// New code uses `current_seq` and [`changes_since`](ToolStore::changes_since).
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn data_version(&self) -> Result<i64, StoreError>;

    /// The change feed's high-water mark: the `seq` of the newest committed change to tools,
    /// versions, secrets, resources, resource templates or prompts, made through any store
    /// instance or process on the same database (0 before the first). Call log writes are not
    /// changes. Cheap (one primary-key read).
    ///
    /// A reader that loads everything reads this *before* it loads, then follows with
    /// [`changes_since`](ToolStore::changes_since) from it: a change that lands in between is
    /// then seen twice (harmless: re-reading a key is idempotent) rather than never.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn current_seq(&self) -> Result<u64, StoreError>;

    /// What changed after `seq`, as of one consistent moment: the new high-water mark, and per
    /// changed thing its kind and key (tool name, resource URI, URI template, prompt name,
    /// secret name), one entry per key. A reader re-reads each key (gone means deleted) and
    /// remembers [`ChangeSet::seq`] for the next call.
    ///
    /// Changes are numbered in commit order: once a reader has seen `seq` N, no change numbered
    /// N or lower can commit later, so polling by `seq` never misses a change. Only the newest
    /// changes are kept (see [`StoreConfig::change_log_max_rows`](crate::StoreConfig::change_log_max_rows));
    /// a reader further behind than that gets the affected kinds in [`ChangeSet::reload`] and
    /// re-reads them whole. So does a reader whose `seq` is ahead of the store (a database
    /// restored from a backup): then every kind is reloaded.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn changes_since(&self, seq: u64) -> Result<ChangeSet, StoreError>;

    /// Waits until a change after `seq` may have been committed, at most `max_wait`; then the
    /// caller asks [`changes_since`](ToolStore::changes_since). It only wakes the reader and
    /// says nothing of what changed, so a lost or spurious wake-up costs at most one
    /// `max_wait` of delay, never a change.
    ///
    /// [`SqliteStore`](crate::SqliteStore) returns as soon as a write through this same instance
    /// commits a change after `seq`; other processes' writes are found when `max_wait` runs out
    /// (SQLite cannot signal across processes), so `max_wait` is the polling interval. A
    /// backend with notifications (PostgreSQL `LISTEN`) returns on any writer's commit.
    async fn wait_for_change(&self, seq: u64, max_wait: Duration);

    /// Sets a secret, replacing any previous value.
    ///
    /// # Errors
    /// [`StoreError::InvalidName`], [`StoreError::Database`].
    async fn set_secret(&self, name: &str, value: &str) -> Result<(), StoreError>;

    /// Deletes a secret.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_secret(&self, name: &str) -> Result<(), StoreError>;

    /// The names of all secrets, sorted; never their values.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn secret_names(&self) -> Result<Vec<String>, StoreError>;

    /// The names of all secrets with when each was last set, sorted by name; never values.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError>;

    /// The values of the named secrets that exist; a name with no secret is simply absent from
    /// the map (the caller decides whether that is an error).
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn secret_values(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, SecretValue>, StoreError>;

    /// Writes a consistent copy of the whole database (secrets included) to `dest`, which must
    /// not exist; its parent directory must. Safe while other connections and processes write:
    /// the copy is the state of one moment. The new file is created with mode 0600 on Unix and
    /// synced before this returns.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] if `dest` exists; [`StoreError::Io`] if it cannot be created or
    /// synced; [`StoreError::Database`].
    async fn backup(&self, dest: &Path) -> Result<(), StoreError>;

    /// Closes all connections, waiting for operations in progress. Later calls fail with
    /// [`StoreError::Database`]. Dropping the store without closing is safe too (nothing
    /// acknowledged is lost); closing just makes the shutdown orderly.
    async fn close(&self);
}

/// Persistence for resources, resource templates and prompts, on the same database (and change
/// feed) as the tools.
///
/// Every write that changes something is one change of the feed
/// ([`ToolStore::changes_since`]), keyed by the URI, URI template or prompt name; a write that
/// changes nothing (same content, already enabled) is none.
///
/// Writes take the same write lock as tool writes and are durable when they return. Keys are
/// checked for length and, for prompts, [`validate_tool_name`](crate::validate_tool_name)'s rule; everything else is the
/// server's job to validate. Writing a row enables it.
#[async_trait]
pub trait ContentStore: ToolStore {
    /// Every resource without its body, enabled or not, by URI.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError>;

    /// One resource with its body.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_resource(&self, uri: &str) -> Result<Option<StoredResource>, StoreError>;

    /// Writes a resource; returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] / [`StoreError::NotFound`] as `mode` says;
    /// [`StoreError::InvalidName`] for an empty or too long URI; [`StoreError::Database`].
    async fn put_resource(
        &self,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_resource(&self, uri: &str) -> Result<(), StoreError>;

    /// Every resource template, enabled or not, by URI template.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError>;

    /// Writes a resource template; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource).
    async fn put_template(
        &self,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource template.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_template(&self, uri_template: &str) -> Result<(), StoreError>;

    /// One resource template, enabled or not.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_template(&self, uri_template: &str) -> Result<Option<StoredTemplate>, StoreError>;

    /// Every prompt, enabled or not, by name.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError>;

    /// Writes a prompt; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource); [`StoreError::InvalidName`] for a bad name.
    async fn put_prompt(&self, prompt: NewPrompt, mode: WriteMode) -> Result<bool, StoreError>;

    /// Removes a prompt.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_prompt(&self, name: &str) -> Result<(), StoreError>;

    /// One prompt, enabled or not.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_prompt(&self, name: &str) -> Result<Option<StoredPrompt>, StoreError>;

    /// Writes a whole pack in one transaction: every entry is upserted (a tool whose current
    /// version equals the given one, author aside, gets no new version; a disabled one is
    /// enabled). Either everything is written or, on any error, nothing. Each entry that
    /// changed is one change of the feed; an import that changes nothing leaves the counter.
    ///
    /// # Errors
    /// The first failing entry's error (names validated, [`StoreError::Invalid`] fields);
    /// [`StoreError::Database`].
    async fn import(&self, batch: ImportBatch) -> Result<ImportReport, StoreError>;
}
