//! [`SqliteStore`]: the [`ToolStore`] and [`ContentStore`](crate::ContentStore) on one SQLite
//! file (or in memory), through `sqlx`.
//!
//! This module holds the pools, the migrations, the transactions and backups; each table family
//! has its own file: `tools.rs` (tools and versions), `content.rs` (resources, templates,
//! prompts, pack imports), `calls.rs` (the call log), `secrets.rs`, and `changes.rs` (the change
//! feed every write appends to). `rows.rs` holds the column helpers they share.
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

mod calls;
mod changes;
mod content;
mod dump;
mod rows;
mod secrets;
mod tools;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::Connection;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use tokio::sync::watch;

use self::rows::{checked_i64, db, invalid};
use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::model::{
    CallRecord, ChangeSet, NewVersion, SecretInfo, SecretValue, StoredTool, ToolVersion,
};
use crate::store::ToolStore;

/// The schema migrations, embedded at compile time from `migrations/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The SQLite implementation of [`ToolStore`].
///
/// Opening applies pending migrations. Connections use WAL, `synchronous=FULL` (each commit is
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
    /// The `seq` of the newest change this instance committed: wakes
    /// [`ToolStore::wait_for_change`] at once for this process's own writes.
    committed: watch::Sender<u64>,
}

impl SqliteStore {
    /// Opens (creating if missing) the store at `path` with the `DEFAULT_*` settings.
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
    /// migrations this build does not know).
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
        let (call_log_max_rows, change_log_max_rows) = checked_limits(config)?;
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
        migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(config.max_readers)
            .acquire_timeout(config.busy_timeout)
            .connect_with(base.clone().pragma("query_only", "ON"))
            .await
            .map_err(db)?;
        tracing::debug!(path = %path.display(), "tool store opened");
        Ok(SqliteStore {
            writer,
            reader,
            file_options: Some(base),
            call_log_max_rows,
            change_log_max_rows,
            committed: watch::Sender::new(0),
        })
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
        let (call_log_max_rows, change_log_max_rows) = checked_limits(config)?;
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
        migrate(&pool).await?;
        Ok(SqliteStore {
            writer: pool.clone(),
            reader: pool,
            file_options: None,
            call_log_max_rows,
            change_log_max_rows,
            committed: watch::Sender::new(0),
        })
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

/// [`StoreConfig`]'s row counts, checked to fit SQLite's integers.
fn checked_limits(config: &StoreConfig) -> Result<(i64, i64), StoreError> {
    Ok((
        checked_i64("call_log_max_rows", config.call_log_max_rows)?,
        checked_i64("change_log_max_rows", config.change_log_max_rows)?,
    ))
}

/// A write transaction: it holds SQLite's write lock from `BEGIN IMMEDIATE` until it commits,
/// or rolls back when dropped. Every change it makes goes through [`Write::change`] (in
/// `changes.rs`), which numbers the change and appends it to the feed in this transaction.
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

/// The table where sqlx records applied migrations (its default name).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// Runs pending migrations inside one `BEGIN IMMEDIATE` transaction, so that two processes
/// opening a new file at once cannot both apply the same migration: the second waits, then
/// finds it applied. (sqlx nests each migration's own transaction as a savepoint.)
///
/// This is `Migrator::run` spelled out with the public `Migrate` trait, because `run`'s
/// `Acquire` bound makes the future not `Send` (sqlx's "not general enough" error), and the
/// store must open inside `tokio::spawn`ed tasks.
async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    use sqlx::migrate::{Migrate, MigrateError};

    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
    let conn: &mut SqliteConnection = &mut tx;
    conn.ensure_migrations_table(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?;
    if let Some(version) = conn
        .dirty_version(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?
    {
        return Err(rows::migrate(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    // A migration this build does not know: a newer OmniForge wrote this database.
    if let Some(&unknown) = applied.keys().find(|v| !MIGRATOR.version_exists(**v)) {
        return Err(rows::migrate(MigrateError::VersionMissing(unknown)));
    }
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != *migration.checksum => {
                return Err(rows::migrate(MigrateError::VersionMismatch(
                    migration.version,
                )));
            }
            Some(_) => {}
            None => {
                tracing::info!(version = migration.version, description = %migration.description, "applying store migration");
                conn.apply(MIGRATIONS_TABLE, migration)
                    .await
                    .map_err(rows::migrate)?;
            }
        }
    }
    tx.commit().await.map_err(db)
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

async fn private_create_new(path: &Path) -> std::io::Result<()> {
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path).await.map(drop)
}

/// Each method is in the file of its table family; this is the table of contents.
#[async_trait]
impl ToolStore for SqliteStore {
    async fn create_tool(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError> {
        tools::create_tool(self, name, spec).await
    }

    async fn add_version(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError> {
        tools::add_version(self, name, spec).await
    }

    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError> {
        tools::get(self, name).await
    }

    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        tools::versions(self, name).await
    }

    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        tools::version(self, name, number).await
    }

    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError> {
        tools::list_enabled(self).await
    }

    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        tools::set_enabled(self, name, enabled).await
    }

    async fn rollback(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        tools::rollback(self, name, number).await
    }

    async fn purge(&self, name: &str) -> Result<(), StoreError> {
        tools::purge(self, name).await
    }

    async fn record_call(&self, call: CallRecord) -> Result<(), StoreError> {
        calls::record(self, call).await
    }

    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError> {
        calls::recent(self, name, limit).await
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

    async fn set_secret(&self, name: &str, value: &str) -> Result<(), StoreError> {
        secrets::set(self, name, value).await
    }

    async fn delete_secret(&self, name: &str) -> Result<(), StoreError> {
        secrets::delete(self, name).await
    }

    async fn secret_names(&self) -> Result<Vec<String>, StoreError> {
        secrets::names(self).await
    }

    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError> {
        secrets::infos(self).await
    }

    async fn secret_values(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, SecretValue>, StoreError> {
        secrets::values(self, names).await
    }

    async fn backup(&self, dest: &Path) -> Result<(), StoreError> {
        backup(self, dest).await
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

#[async_trait]
impl crate::dump::Backend for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn export(&self) -> Result<crate::dump::StoreDump, StoreError> {
        dump::export(self).await
    }

    async fn import_dump(&self, dump: &crate::dump::StoreDump) -> Result<(), StoreError> {
        dump::import(self, dump).await
    }
}

/// [`ToolStore::backup`]: creates `dest` (0600, failing if it exists), fills it with `VACUUM
/// INTO`, syncs it and its directory; removes it again on failure.
async fn backup(store: &SqliteStore, dest: &Path) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: dest.to_owned(),
        source,
    };
    // Absolute, so SQLite can never read it as a `file:` URI.
    let dest_abs = std::path::absolute(dest).map_err(io)?;
    let dest_str = dest_abs
        .to_str()
        .ok_or_else(|| invalid("backup destination", "path is not valid UTF-8"))?
        .to_owned();
    match private_create_new(&dest_abs).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StoreError::Conflict {
                reason: format!("backup destination {} exists", dest.display()),
            });
        }
        Err(e) => return Err(io(e)),
    }
    let result = vacuum_into(store, &dest_str).await;
    if let Err(e) = result {
        // Best effort: do not leave a half-written copy behind.
        let _ = tokio::fs::remove_file(&dest_abs).await;
        return Err(e);
    }
    sync_file_and_dir(&dest_abs).await.map_err(io)
}

/// `VACUUM INTO` reads one snapshot (a read transaction, so writers go on) and writes a compact
/// copy. It cannot run on the `query_only` readers, and should not occupy the writer, so a file
/// store opens a dedicated connection for it.
async fn vacuum_into(store: &SqliteStore, dest: &str) -> Result<(), StoreError> {
    const Q: &str = "VACUUM INTO ?";
    match &store.file_options {
        Some(options) => {
            let mut conn = SqliteConnection::connect_with(options).await.map_err(db)?;
            let result = sqlx::query(Q)
                .bind(dest)
                .execute(&mut conn)
                .await
                .map_err(db);
            let _ = conn.close().await;
            result.map(drop)
        }
        None => sqlx::query(Q)
            .bind(dest)
            .execute(&store.writer)
            .await
            .map(drop)
            .map_err(db),
    }
}

async fn sync_file_and_dir(path: &Path) -> std::io::Result<()> {
    tokio::fs::File::open(path).await?.sync_all().await?;
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        // The new directory entry must be durable too.
        tokio::fs::File::open(dir).await?.sync_all().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::*;

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
        let store = SqliteStore::open(&path).await.unwrap();
        store.set_secret("TOKEN", "x").await.unwrap();
        for p in [path.clone(), dir.path().join("s.db-wal")] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        store.close().await;
    }
}
