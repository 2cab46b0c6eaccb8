//! The [`ToolStore`] trait: what the server may ask of persistence, with no SQL in sight.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{CallRecord, NewVersion, SecretInfo, SecretValue, StoredTool, ToolVersion};

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
    /// change [`data_version`](ToolStore::data_version).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if that version of the tool does not exist
    /// (for example, the tool was purged while the call ran); [`StoreError::Invalid`] if a count
    /// exceeds `i64::MAX`; [`StoreError::Database`].
    async fn record_call(&self, call: CallRecord) -> Result<(), StoreError>;

    /// The last `limit` calls of a tool, newest first.
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

    /// A change counter: it increases with every committed change to tools, versions,
    /// secrets, resources, resource templates or prompts, made through any store instance or
    /// process on the same database. Call log
    /// writes do not change it. Cheap (one primary-key read); meant to be polled about once a
    /// second to notice changes made by another process (the CLI).
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn data_version(&self) -> Result<i64, StoreError>;

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
