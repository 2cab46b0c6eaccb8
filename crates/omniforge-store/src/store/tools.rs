//! [`ToolStore`]: tools, their immutable versions and their status, example results, the change
//! feed and backups. The root of the store traits.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;
use crate::model::{
    Actor, ChangeSet, ExampleResult, NewStatus, NewVersion, StoredTool, Tool, ToolVersion,
    VersionStatus,
};

/// Persistence for script tools and their versions, and what every store has: the change feed,
/// backups, closing.
///
/// Names given to writes that create something are validated
/// ([`validate_tool_name`](crate::validate_tool_name), [`validate_secret_name`](crate::validate_secret_name));
/// reads and writes of existing things take any string and answer `None`/`NotFound` for names
/// that cannot exist.
///
/// **Version status** (issue 17): a version is written [`Live`](NewStatus::Live),
/// [`Pending`](NewStatus::Pending) or as a [`Draft`](NewStatus::Draft). Only live versions can
/// be current; a pending one goes live by [`approve`](ToolStore::approve) or is
/// [`reject`](ToolStore::reject)ed, a draft can only be rejected. A tool whose versions are all
/// pending or drafts has no current version: [`get`](ToolStore::get) and
/// [`list_enabled`](ToolStore::list_enabled) leave it out, so it is served to nobody until the
/// server shows it to its author or an admin ([`versions`](ToolStore::versions),
/// [`versions_with_status`](ToolStore::versions_with_status)).
///
/// Object-safe (through `async-trait`): the server holds an `Arc<dyn Store>`.
#[async_trait]
pub trait ToolStore: Send + Sync {
    /// Creates tool `name`, enabled, with `spec` as version 1 in the given status. A live
    /// version 1 is current; otherwise the tool has no current version yet.
    ///
    /// Audit: `create` of the tool, version 1, with the definition's hash and `status` in the
    /// detail. A change of the feed (kind `tool`).
    ///
    /// # Errors
    /// [`StoreError::InvalidName`] for a bad tool name or secret name in `spec.secrets`;
    /// [`StoreError::Invalid`] for an out-of-range field of `spec` or a bad actor;
    /// [`StoreError::AlreadyExists`] if a tool with this name exists, enabled or not, live or
    /// not (purge it first to reuse the name); [`StoreError::Database`].
    async fn create_tool(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError>;

    /// Adds a version to tool `name`. Its number is one more than the highest existing number
    /// (not the current one, which a rollback may have lowered). A live version becomes current;
    /// a pending one or a draft leaves the current version as it is, and a pending one rejects
    /// the same author's older pending versions of the tool (reason `superseded by version N`,
    /// decided by the actor). The tool's `updated_at_ms` moves to now; its enabled state is kept
    /// (adding a version to a disabled tool does not enable it). The new version has no grants.
    ///
    /// Audit: `update`, with the version, the definition's hash, `status` and (when it changes)
    /// `previous_version` in the detail; a `reject` per superseded version. A change (`tool`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the tool does not exist; [`StoreError::InvalidName`],
    /// [`StoreError::Invalid`] as for [`create_tool`](ToolStore::create_tool);
    /// [`StoreError::Database`].
    async fn add_version(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError>;

    /// The tool and its current version, enabled or not; `None` if there is no such tool, or it
    /// has no current version (all its versions are pending, drafts or rejected).
    ///
    /// This is how a reader of the change feed updates one catalog entry: a changed tool name
    /// is served as the returned current version when `tool.enabled`, and removed otherwise
    /// (disabled, no live version, or `None`: purged).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError>;

    /// The tool itself, with or without a current version; `None` if there is no such tool.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn tool(&self, name: &str) -> Result<Option<Tool>, StoreError>;

    /// Every tool, enabled or not, with or without a current version, by name: the console's
    /// catalog (with [`versions_with_status`](ToolStore::versions_with_status) for pending ones).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn tools(&self) -> Result<Vec<Tool>, StoreError>;

    /// All versions of a tool, whatever their status, oldest (number 1) first.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the tool does not exist; [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError>;

    /// Version `number` of a tool, whatever its status.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if the tool or that version does not
    /// exist; [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError>;

    /// Every version in `status`, of every tool, written by `author` if given; by tool name,
    /// then number. With [`VersionStatus::Pending`]: the console's approvals page (all
    /// authors) and an author's own pending versions.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn versions_with_status(
        &self,
        status: VersionStatus,
        author: Option<&str>,
    ) -> Result<Vec<ToolVersion>, StoreError>;

    /// Every enabled tool with its current version, most recently updated first (by commit
    /// order of the last change, so ties within a millisecond are still ordered). Tools without
    /// a current version are not listed.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError>;

    /// [`list_enabled`](ToolStore::list_enabled), each tool handed to `each` as its row is
    /// read, so that a caller keeping a compact form of each (the server's catalog, 100,000
    /// tools) never holds them all decoded at once.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn for_each_enabled(
        &self,
        each: &mut (dyn FnMut(StoredTool) + Send),
    ) -> Result<(), StoreError>;

    /// Enables or disables a tool. Every call counts as an update: `updated_at_ms` moves to now
    /// and the tool moves to the front of [`list_enabled`](ToolStore::list_enabled), even if the
    /// state was already the requested one.
    ///
    /// Audit: `enable` or `disable`, with the current version. A change (`tool`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn set_enabled(&self, actor: &Actor, name: &str, enabled: bool)
    -> Result<(), StoreError>;

    /// Makes live version `number` current (it may also be newer than the current one, which
    /// rolls forward). `updated_at_ms` moves to now; the enabled state is kept. Returns that
    /// version. The version's own grants apply from then on.
    ///
    /// Audit: `rollback`, with the version, its definition's hash and `from` (the previous
    /// current version) in the detail. A change (`tool`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set) if the tool or that version does not
    /// exist; [`StoreError::Conflict`] if the version is not live; [`StoreError::Invalid`]
    /// (actor); [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn rollback(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
    ) -> Result<ToolVersion, StoreError>;

    /// Approves pending version `number`: it goes live and becomes current (for a new tool, its
    /// first current version), and each secret in `grants` is granted to it, all in one
    /// transaction. Every name in `grants` must be declared by the version and set.
    ///
    /// Audit: `approve` (version, hash, `grants` in the detail) and one `grant` per secret.
    /// Changes: `tool`, and `grant` if `grants` is not empty.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for a missing tool, version or secret;
    /// [`StoreError::Conflict`] if the version is not pending; [`StoreError::Invalid`] for a
    /// secret the version does not declare, or the actor; [`StoreError::Database`].
    async fn approve(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        grants: &[String],
    ) -> Result<ToolVersion, StoreError>;

    /// Rejects pending or draft version `number`, keeping it (and the history) with `reason`
    /// (cut to [`MAX_STATUS_REASON_BYTES`](crate::MAX_STATUS_REASON_BYTES)).
    ///
    /// Audit: `reject`, with the version, hash and `reason`. A change (`tool`).
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::Conflict`] if the version is live or already
    /// rejected; [`StoreError::Invalid`] (actor); [`StoreError::Database`].
    async fn reject(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        reason: &str,
    ) -> Result<ToolVersion, StoreError>;

    /// Removes a tool, all its versions, their grants and example results, its call log rows
    /// and its hourly statistics. The name can then be created again, starting over at
    /// version 1. Its audit records stay.
    ///
    /// Audit: `delete` of the tool, with `versions` (how many) in the detail. Changes: `tool`,
    /// and `grant` if it had grants.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn purge(&self, actor: &Actor, name: &str) -> Result<(), StoreError>;

    /// Replaces the stored results of version `number`'s examples with `results` (one per
    /// example that ran; indexes unique and below the number of examples). Texts longer than
    /// [`MAX_EXAMPLE_TEXT_BYTES`](crate::MAX_EXAMPLE_TEXT_BYTES) are cut. Not an action (no
    /// audit record) and not a change of the feed.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set); [`StoreError::Invalid`] for an index out
    /// of range or repeated; [`StoreError::Database`].
    async fn record_example_results(
        &self,
        name: &str,
        number: u32,
        results: Vec<ExampleResult>,
    ) -> Result<(), StoreError>;

    /// The stored results of version `number`'s examples, by index; empty if they never ran.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] (with `version` set); [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn example_results(
        &self,
        name: &str,
        number: u32,
    ) -> Result<Vec<ExampleResult>, StoreError>;

    /// The environment ids of every version of every existing tool (not only current ones,
    /// since a rollback may need an older environment) and of script templates and prompts. An
    /// environment not in this set can be deleted.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn env_ids_in_use(&self) -> Result<HashSet<String>, StoreError>;

    /// The change feed's high-water mark: the `seq` of the newest committed change to tools,
    /// versions, secrets, grants, resources, resource templates or prompts, made through any
    /// store instance or process on the same database (0 before the first). Call log, audit
    /// log, kept output and example result writes are not changes. Cheap (one primary-key
    /// read).
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
    /// secret name, the tool name of a grant), one entry per key. A reader re-reads each key
    /// (gone means deleted) and remembers [`ChangeSet::seq`] for the next call.
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

    /// Writes a consistent copy of the whole database to `dest`, which must not exist; its
    /// parent directory must. Secrets are in it sealed (or, if no keyring has opened the store
    /// since an older build wrote them, still in plain text), never with the key, which lives
    /// outside the database: keep the key file apart from backups. Safe while other connections and
    /// processes write: the copy is the state of one moment. The new file is created with mode
    /// 0600 on Unix and synced before this returns.
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
