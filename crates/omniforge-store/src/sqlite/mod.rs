//! [`SqliteStore`]: every [`Store`](crate::Store) trait on one SQLite file (or in memory),
//! through `sqlx`.
//!
//! This module holds the pools and the transactions; `migrate.rs` applies the migrations and
//! `backup.rs` makes backups. Each table family has its own file: `tools.rs` (tools and
//! versions), `review.rs` (version status: approve, reject, rollback), `examples.rs` (example
//! results), `content.rs` (resources, templates, prompts, pack imports), `calls.rs` (the call
//! log), `hours.rs` (hourly call statistics), `secrets.rs` (sealed secrets, key rotation),
//! `grants.rs` (secret grants), `audit.rs` (the audit log every action appends to),
//! `outputs.rs` (kept outputs), and `changes.rs` (the change feed every change appends to).
//! `rows.rs` holds the column helpers they share. Validation, encryption and hashing are not
//! here: they are backend-neutral (`validate.rs`, [`keyring`](crate::keyring),
//! [`digest`](crate::digest)).
//!
//! Two pools: one writer connection, so this process's writes queue in FIFO order instead of
//! spinning in SQLite's busy handler against each other, and a few `query_only` reader
//! connections that WAL lets read while the writer commits. The busy timeout is then only
//! spent waiting for *other processes* (the CLI) that hold the write lock.
//!
//! Every write runs in `BEGIN IMMEDIATE`, which takes the write lock up front (waiting up to the
//! busy timeout), so a transaction never fails half-way to upgrade a read lock, and existence
//! checks inside it cannot race with another writer. Queries are plain runtime strings with
//! bound parameters; there are no compile-time-checked macros, so building needs no database.

mod audit;
mod backup;
mod calls;
mod changes;
mod content;
mod examples;
mod grants;
mod hours;
mod migrate;
mod outputs;
mod review;
mod rows;
mod secrets;
mod tools;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tokio::sync::watch;

use self::rows::db;
use crate::error::StoreError;
use crate::keyring::Keyring;
use crate::model::{
    Actor, ChangeSet, ExampleResult, NewStatus, NewVersion, StoredTool, Tool, ToolVersion,
    VersionStatus,
};
use crate::store::ToolStore;
use crate::validate::{checked_i64, invalid};

/// Default for [`StoreConfig::busy_timeout`]: 5 seconds.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default for [`StoreConfig::call_log_max_rows`]: 10,000 rows.
pub const DEFAULT_CALL_LOG_MAX_ROWS: u64 = 10_000;

/// Default for [`StoreConfig::max_readers`]: 4 connections.
pub const DEFAULT_MAX_READERS: u32 = 4;

/// Default for [`StoreConfig::change_log_max_rows`]: 10,000 changes.
pub const DEFAULT_CHANGE_LOG_MAX_ROWS: u64 = 10_000;

/// Default for [`StoreConfig::call_stats_max_age`]: 8 days (a week of charts, whole).
pub const DEFAULT_CALL_STATS_MAX_AGE: Duration = Duration::from_secs(8 * 24 * 3600);

/// Settings of a [`SqliteStore`]. No `Default`: [`SqliteStore::open`] uses the `DEFAULT_*`
/// constants, and callers of [`SqliteStore::open_with`] spell every field out.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How long a write waits for the write lock when another process holds it (SQLite's busy
    /// timeout), and, separately, how long it waits for this process's earlier writes to finish
    /// (the writer connection). Reads wait for a free reader connection as long. Past it the
    /// operation fails with [`StoreError::Database`], where
    /// [`DatabaseError::is_busy`](crate::DatabaseError::is_busy) is true.
    /// Default [`DEFAULT_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
    /// How many call log rows to keep: [`CallLog::record_call`](crate::CallLog::record_call) deletes, in the same
    /// transaction as its insert, every row older than the last `call_log_max_rows` calls
    /// recorded (rows of purged tools leave gaps, so fewer may remain). `0` keeps no log at all.
    /// Lowering it takes effect at the next recorded call. Default [`DEFAULT_CALL_LOG_MAX_ROWS`].
    pub call_log_max_rows: u64,
    /// Most reader connections open at once (at least 1). Unused for in-memory stores, which
    /// have a single connection. Default [`DEFAULT_MAX_READERS`].
    pub max_readers: u32,
    /// How many changes the change feed keeps: each change deletes, in the transaction that
    /// makes it, the changes older than the last `change_log_max_rows`. A reader further behind reloads
    /// the kinds it may have missed ([`ChangeSet::reload`]); one that far behind would
    /// re-read about as much key by key anyway. `0` keeps none, so every reader reloads every
    /// kind that changed. Applies from the next change. Default [`DEFAULT_CHANGE_LOG_MAX_ROWS`].
    pub change_log_max_rows: u64,
    /// How long the hourly call statistics are kept: each recorded call deletes, in its
    /// transaction, the hours that ended longer ago than this, whatever
    /// `call_log_max_rows` is. Default [`DEFAULT_CALL_STATS_MAX_AGE`].
    pub call_stats_max_age: Duration,
    /// The keyring that seals secret values ([`Keyring`]); it never enters the database.
    /// Without one (`None`, the default of [`SqliteStore::open`]), every read or write of a
    /// secret value fails with [`StoreError::NoSecretKey`], and values stored in plain text by
    /// an older build stay so. With one, such values are sealed under its current key when the
    /// store opens, in one transaction.
    pub keyring: Option<Keyring>,
}

impl StoreConfig {
    fn defaults() -> StoreConfig {
        StoreConfig {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            call_log_max_rows: DEFAULT_CALL_LOG_MAX_ROWS,
            max_readers: DEFAULT_MAX_READERS,
            change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
            call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
            keyring: None,
        }
    }
}

/// The SQLite implementation of every [`Store`](crate::Store) trait.
///
/// Opening applies pending migrations, then, with a keyring, seals the secret values an older
/// build stored in plain text. Connections use WAL, `synchronous=FULL` (each commit is
/// synced to disk before the write returns), foreign keys, `secure_delete` and the busy
/// timeout. Several instances, in one process or several, may share a file.
#[derive(Debug)]
pub struct SqliteStore {
    /// The single writer connection; all writes of this instance queue for it (fair FIFO).
    writer: SqlitePool,
    /// `query_only` connections for reads. For in-memory stores, the writer pool itself.
    reader: SqlitePool,
    /// Options of a file-backed store, to open a dedicated backup connection; `None` in memory.
    file_options: Option<SqliteConnectOptions>,
    /// [`StoreConfig::call_log_max_rows`], checked to fit SQLite's integers.
    call_log_max_rows: i64,
    /// [`StoreConfig::change_log_max_rows`], checked to fit SQLite's integers.
    change_log_max_rows: i64,
    /// [`StoreConfig::call_stats_max_age`] in milliseconds.
    call_stats_max_age_ms: i64,
    /// [`StoreConfig::keyring`].
    keyring: Option<Keyring>,
    /// The `seq` of the newest change this instance committed: wakes
    /// [`ToolStore::wait_for_change`] at once for this process's own writes.
    committed: watch::Sender<u64>,
}

impl SqliteStore {
    /// Opens (creating if missing) the store at `path` with the `DEFAULT_*` settings and no
    /// keyring (secret values refused; see [`StoreConfig::keyring`]).
    ///
    /// # Errors
    /// As [`open_with`](SqliteStore::open_with).
    pub async fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, &StoreConfig::defaults()).await
    }

    /// Opens (creating if missing) the store at `path` and applies pending migrations. The parent
    /// directory must exist. A new file is created with mode 0600 on Unix, since it will hold
    /// secrets; an existing file's mode is left alone.
    ///
    /// # Errors
    /// [`StoreError::Io`] if a new file cannot be created; [`StoreError::Invalid`] for an
    /// out-of-range setting; [`StoreError::Database`] if SQLite cannot open the file, it is not a
    /// database, or a migration fails (including a database written by a newer OmniForge, whose
    /// migrations this build does not know); with a keyring, [`StoreError::Crypto`] if sealing
    /// plain-text values fails.
    pub async fn open_with(
        path: impl AsRef<Path>,
        config: &StoreConfig,
    ) -> Result<SqliteStore, StoreError> {
        // Absolute, so SQLite (which sqlx opens with SQLITE_OPEN_URI) never reads it as a
        // `file:` URI.
        let path = &std::path::absolute(path.as_ref()).map_err(|source| StoreError::Io {
            path: path.as_ref().to_owned(),
            source,
        })?;
        let limits = checked_limits(config)?;
        if config.max_readers == 0 {
            return Err(invalid("max_readers", "must be at least 1"));
        }
        create_private_file(path).await?;

        let base = common_options(SqliteConnectOptions::new().filename(path), config);
        let writer_options = base
            .clone()
            .create_if_missing(true)
            // Persistent in the file; readers inherit it.
            .journal_mode(SqliteJournalMode::Wal);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(config.busy_timeout)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(writer_options)
            .await
            .map_err(db)?;
        migrate::migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(config.max_readers)
            .acquire_timeout(config.busy_timeout)
            .connect_with(base.clone().pragma("query_only", "ON"))
            .await
            .map_err(db)?;
        let store = SqliteStore::assemble(writer, reader, Some(base), limits, config);
        store.seal_plain_secrets().await?;
        tracing::debug!(path = %path.display(), "tool store opened");
        Ok(store)
    }

    fn assemble(
        writer: SqlitePool,
        reader: SqlitePool,
        file_options: Option<SqliteConnectOptions>,
        limits: CheckedLimits,
        config: &StoreConfig,
    ) -> SqliteStore {
        SqliteStore {
            writer,
            reader,
            file_options,
            call_log_max_rows: limits.call_log_max_rows,
            change_log_max_rows: limits.change_log_max_rows,
            call_stats_max_age_ms: limits.call_stats_max_age_ms,
            keyring: config.keyring.clone(),
            committed: watch::Sender::new(0),
        }
    }

    /// Seals the secrets an older build stored in plain text, when this store has a keyring.
    async fn seal_plain_secrets(&self) -> Result<(), StoreError> {
        match &self.keyring {
            Some(keyring) => secrets::seal_plain_values(self, keyring).await,
            None => Ok(()),
        }
    }

    /// Opens a new, empty store in memory with the `DEFAULT_*` settings. It lives as long as the
    /// store value; for tests and throwaway servers.
    ///
    /// # Errors
    /// As [`open_in_memory_with`](SqliteStore::open_in_memory_with).
    pub async fn open_in_memory() -> Result<SqliteStore, StoreError> {
        SqliteStore::open_in_memory_with(&StoreConfig::defaults()).await
    }

    /// Opens a new, empty store in memory. It has one connection that reads and writes (no WAL,
    /// nothing to sync) and is never recycled, since closing it would lose the data.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an out-of-range setting; [`StoreError::Database`].
    pub async fn open_in_memory_with(config: &StoreConfig) -> Result<SqliteStore, StoreError> {
        let limits = checked_limits(config)?;
        // Plain `:memory:`, a private database of the one connection. Not sqlx's
        // `sqlite::memory:`, which sets SQLITE_OPEN_MEMORY: `VACUUM INTO` inherits that flag and
        // would write the backup to memory instead of the file.
        let options = SqliteConnectOptions::new().filename(":memory:");
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(config.busy_timeout)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(common_options(options, config))
            .await
            .map_err(db)?;
        migrate::migrate(&pool).await?;
        Ok(SqliteStore::assemble(
            pool.clone(),
            pool,
            None,
            limits,
            config,
        ))
    }

    /// Begins a write transaction holding SQLite's write lock.
    async fn write(&self) -> Result<Write<'_>, StoreError> {
        let tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db)?;
        Ok(Write {
            tx,
            store: self,
            last_seq: None,
        })
    }

    /// Begins a read transaction: one snapshot for several statements.
    async fn read(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.reader.begin().await.map_err(db)
    }
}

/// [`StoreConfig`]'s numbers, checked to fit SQLite's integers.
struct CheckedLimits {
    call_log_max_rows: i64,
    change_log_max_rows: i64,
    call_stats_max_age_ms: i64,
}

fn checked_limits(config: &StoreConfig) -> Result<CheckedLimits, StoreError> {
    let age_ms = u64::try_from(config.call_stats_max_age.as_millis()).unwrap_or(u64::MAX);
    Ok(CheckedLimits {
        call_log_max_rows: checked_i64("call_log_max_rows", config.call_log_max_rows)?,
        change_log_max_rows: checked_i64("change_log_max_rows", config.change_log_max_rows)?,
        call_stats_max_age_ms: checked_i64("call_stats_max_age", age_ms)?,
    })
}

/// A write transaction: it holds SQLite's write lock from `BEGIN IMMEDIATE` until it commits,
/// or rolls back when dropped. Every change it makes goes through [`Write::change`] (in
/// `changes.rs`), which numbers the change and appends it to the feed in this transaction, and
/// every action it performs through [`Write::audit`] (in `audit.rs`), which appends its audit
/// record in this transaction.
struct Write<'s> {
    tx: sqlx::Transaction<'static, sqlx::Sqlite>,
    store: &'s SqliteStore,
    /// The `seq` of the newest change made in this transaction, announced after the commit.
    last_seq: Option<u64>,
}

impl Write<'_> {
    /// The transaction's connection, for statements.
    fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.tx
    }

    /// Commits (synced to disk when this returns), then wakes this instance's
    /// [`ToolStore::wait_for_change`] callers if a change was made.
    async fn commit(self) -> Result<(), StoreError> {
        self.tx.commit().await.map_err(db)?;
        if let Some(seq) = self.last_seq {
            self.store.committed.send_if_modified(|newest| {
                let newer = seq > *newest;
                if newer {
                    *newest = seq;
                }
                newer
            });
        }
        Ok(())
    }
}

/// Pragmas every connection gets.
fn common_options(options: SqliteConnectOptions, config: &StoreConfig) -> SqliteConnectOptions {
    options
        .busy_timeout(config.busy_timeout)
        .foreign_keys(true)
        // FULL: in WAL mode, every commit syncs the WAL, so a committed write survives power
        // loss, not only a crash of the process.
        .synchronous(SqliteSynchronous::Full)
        // Deleted secrets and purged code are zeroed in the database file rather than left in
        // free pages. (Old page images can remain in the WAL until a checkpoint reuses it.)
        .pragma("secure_delete", "ON")
}

/// Creates `path` empty with mode 0600 if it does not exist (SQLite would create it 0644 minus
/// umask, and its `-wal`/`-shm` files copy the database file's mode).
async fn create_private_file(path: &Path) -> Result<(), StoreError> {
    match private_create_new(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Creates `path` empty with mode 0600, failing if it exists.
async fn private_create_new(path: &Path) -> std::io::Result<()> {
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path).await.map(drop)
}

/// Each method is in the file of its table family; this is the table of contents. The other
/// traits are implemented in their families' files (`secrets.rs`, `calls.rs`, `audit.rs`,
/// `outputs.rs`, `content.rs`).
#[async_trait]
impl ToolStore for SqliteStore {
    async fn create_tool(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError> {
        tools::create_tool(self, actor, name, spec, status).await
    }

    async fn add_version(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError> {
        tools::add_version(self, actor, name, spec, status).await
    }

    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError> {
        tools::get(self, name).await
    }

    async fn tool(&self, name: &str) -> Result<Option<Tool>, StoreError> {
        tools::tool(self, name).await
    }

    async fn tools(&self) -> Result<Vec<Tool>, StoreError> {
        tools::tools(self).await
    }

    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        tools::versions(self, name).await
    }

    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        tools::version(self, name, number).await
    }

    async fn versions_with_status(
        &self,
        status: VersionStatus,
        author: Option<&str>,
    ) -> Result<Vec<ToolVersion>, StoreError> {
        tools::versions_with_status(self, status, author).await
    }

    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError> {
        tools::list_enabled(self).await
    }

    async fn set_enabled(
        &self,
        actor: &Actor,
        name: &str,
        enabled: bool,
    ) -> Result<(), StoreError> {
        tools::set_enabled(self, actor, name, enabled).await
    }

    async fn rollback(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
    ) -> Result<ToolVersion, StoreError> {
        review::rollback(self, actor, name, number).await
    }

    async fn approve(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        grants: &[String],
    ) -> Result<ToolVersion, StoreError> {
        review::approve(self, actor, name, number, grants).await
    }

    async fn reject(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        reason: &str,
    ) -> Result<ToolVersion, StoreError> {
        review::reject(self, actor, name, number, reason).await
    }

    async fn purge(&self, actor: &Actor, name: &str) -> Result<(), StoreError> {
        tools::purge(self, actor, name).await
    }

    async fn record_example_results(
        &self,
        name: &str,
        number: u32,
        results: Vec<ExampleResult>,
    ) -> Result<(), StoreError> {
        examples::record(self, name, number, results).await
    }

    async fn example_results(
        &self,
        name: &str,
        number: u32,
    ) -> Result<Vec<ExampleResult>, StoreError> {
        examples::read(self, name, number).await
    }

    async fn env_ids_in_use(&self) -> Result<HashSet<String>, StoreError> {
        tools::env_ids_in_use(self).await
    }

    async fn data_version(&self) -> Result<i64, StoreError> {
        changes::data_version(self).await
    }

    async fn current_seq(&self) -> Result<u64, StoreError> {
        changes::current_seq(self).await
    }

    async fn changes_since(&self, seq: u64) -> Result<ChangeSet, StoreError> {
        changes::since(self, seq).await
    }

    async fn wait_for_change(&self, seq: u64, max_wait: Duration) {
        let mut committed = self.committed.subscribe();
        // `Err` only if the sender is gone, which `&self` rules out; a timeout is the poll.
        let _ = tokio::time::timeout(max_wait, committed.wait_for(|&newest| newest > seq)).await;
    }

    async fn backup(&self, dest: &Path) -> Result<(), StoreError> {
        backup::backup(self, dest).await
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::*;
    use crate::store::SecretStore as _;

    async fn pragma(pool: &SqlitePool, name: &'static str) -> String {
        let q = match name {
            "journal_mode" => "PRAGMA journal_mode",
            "synchronous" => "PRAGMA synchronous",
            "foreign_keys" => "PRAGMA foreign_keys",
            "busy_timeout" => "PRAGMA busy_timeout",
            "query_only" => "PRAGMA query_only",
            "secure_delete" => "PRAGMA secure_delete",
            _ => unreachable!(),
        };
        let row = sqlx::query(q).fetch_one(pool).await.unwrap();
        match row.try_get::<String, _>(0) {
            Ok(s) => s,
            Err(_) => row.try_get::<i64, _>(0).unwrap().to_string(),
        }
    }

    /// The durability settings are what the docs promise, on both pools.
    #[tokio::test]
    async fn connection_settings() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            busy_timeout: Duration::from_millis(1234),
            ..StoreConfig::defaults()
        };
        let store = SqliteStore::open_with(dir.path().join("s.db"), &config)
            .await
            .unwrap();
        for (pool, query_only) in [(&store.writer, "0"), (&store.reader, "1")] {
            assert_eq!(pragma(pool, "journal_mode").await, "wal");
            assert_eq!(pragma(pool, "synchronous").await, "2", "FULL");
            assert_eq!(pragma(pool, "foreign_keys").await, "1");
            assert_eq!(pragma(pool, "busy_timeout").await, "1234");
            assert_eq!(pragma(pool, "secure_delete").await, "1");
            assert_eq!(pragma(pool, "query_only").await, query_only);
        }
        store.close().await;
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn new_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let config = StoreConfig {
            keyring: Some(Keyring::parse(&format!("k {}", "A".repeat(43) + "=")).unwrap()),
            ..StoreConfig::defaults()
        };
        let store = SqliteStore::open_with(&path, &config).await.unwrap();
        store
            .set_secret(&Actor::new("test"), "TOKEN", "x")
            .await
            .unwrap();
        for p in [path.clone(), dir.path().join("s.db-wal")] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        store.close().await;
    }
}
