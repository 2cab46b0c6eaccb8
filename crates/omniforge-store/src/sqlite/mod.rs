//! [`SqliteStore`]: every [`Store`](crate::Store) trait on one SQLite file (or in memory),
//! through `sqlx`.
//!
//! The logic is the engine's (`engine/`, shared with PostgreSQL); this module
//! holds what only SQLite has: the pools and the transactions (`SqliteDb`, the engine's
//! `Db`), the migrations (`migrate.rs`, `migrations/`) and backups (`backup.rs`).
//!
//! Two pools: one writer connection, so this process's writes queue in FIFO order instead of
//! spinning in SQLite's busy handler against each other, and a few `query_only` reader
//! connections that WAL lets read while the writer commits. The busy timeout is then only
//! spent waiting for *other processes* (the CLI) that hold the write lock.
//!
//! Every write runs in `BEGIN IMMEDIATE`, which takes the write lock up front (waiting up to the
//! busy timeout), so a transaction never fails half-way to upgrade a read lock, and existence
//! checks inside it cannot race with another writer. SQLite has one write lock, so every
//! `Lock` is that lock. Queries are plain runtime strings with bound parameters; there are no
//! compile-time-checked macros, so building needs no database.

mod backup;
mod migrate;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::watch;

use crate::config::StoreConfig;
use crate::engine::exec::{Conn, db};
use crate::engine::{Db, Engine, Lock, seal_plain_values};
use crate::error::StoreError;
use crate::validate::invalid;

/// Opens an [`Engine`] on one SQLite file (or in memory): every [`Store`](crate::Store) trait.
///
/// Opening applies pending migrations, then, with a keyring, seals the secret values an older
/// build stored in plain text. Connections use WAL, `synchronous=FULL` (each commit is
/// synced to disk before the write returns), foreign keys, `secure_delete` and the busy
/// timeout. Several engines, in one process or several, may share a file.
#[derive(Debug)]
pub enum SqliteStore {}

/// The engine's [`Db`] on SQLite: the writer and reader pools.
#[derive(Debug)]
pub(crate) struct SqliteDb {
    /// The single writer connection; all writes of this instance queue for it (fair FIFO).
    writer: SqlitePool,
    /// `query_only` connections for reads. For in-memory stores, the writer pool itself.
    reader: SqlitePool,
    /// Options of a file-backed store, to open a dedicated backup connection; `None` in memory.
    file_options: Option<SqliteConnectOptions>,
}

#[async_trait]
impl Db for SqliteDb {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    async fn read(&self) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(self.reader.acquire().await.map_err(db)?))
    }

    async fn snapshot(&self) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(self.reader.begin().await.map_err(db)?))
    }

    async fn write(&self, _lock: Lock) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(
            self.writer
                .begin_with("BEGIN IMMEDIATE")
                .await
                .map_err(db)?,
        ))
    }

    fn notify_sql(&self) -> Option<&'static str> {
        None
    }

    fn after_import(&self) -> &'static [&'static str] {
        // AUTOINCREMENT keeps `sqlite_sequence` past every inserted id by itself.
        &[]
    }

    /// Checkpoints and truncates the WAL so that the old page images with plain values leave
    /// it (best effort: a reader in another process can hold the checkpoint back;
    /// `secure_delete` zeroes the old cells in the database file).
    async fn after_sealing(&self) {
        if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.writer)
            .await
        {
            tracing::warn!(%error, "checkpointing the WAL after sealing secrets failed");
        }
    }

    /// This instance's own commits wake it at once; other processes' writes are found when
    /// `max_wait` runs out.
    async fn wait_for_change(&self, committed: &watch::Sender<u64>, seq: u64, max_wait: Duration) {
        let mut committed = committed.subscribe();
        // `Err` only if the sender is gone, which `&self` rules out; a timeout is the poll.
        let _ = tokio::time::timeout(max_wait, committed.wait_for(|&newest| newest > seq)).await;
    }

    async fn backup(&self, _engine: &Engine, dest: &Path) -> Result<(), StoreError> {
        backup::backup(self, dest).await
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the store at `path` with the `DEFAULT_*` settings and no
    /// keyring (secret values refused; see [`StoreConfig::keyring`]).
    ///
    /// # Errors
    /// As [`open_with`](SqliteStore::open_with).
    pub async fn open(path: impl AsRef<Path>) -> Result<Engine, StoreError> {
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
    ) -> Result<Engine, StoreError> {
        let (db, path) = SqliteDb::open(path.as_ref(), config).await?;
        let store = Engine::new(Box::new(db), config, Arc::new(watch::Sender::new(0)))?;
        seal_plain_values(&store).await?;
        tracing::debug!(path = %path.display(), "tool store opened");
        Ok(store)
    }

    /// Opens a new, empty store in memory with the `DEFAULT_*` settings. It lives as long as the
    /// store value; for tests and throwaway servers.
    ///
    /// # Errors
    /// As [`open_in_memory_with`](SqliteStore::open_in_memory_with).
    pub async fn open_in_memory() -> Result<Engine, StoreError> {
        SqliteStore::open_in_memory_with(&StoreConfig::defaults()).await
    }

    /// Opens a new, empty store in memory. It has one connection that reads and writes (no WAL,
    /// nothing to sync) and is never recycled, since closing it would lose the data.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an out-of-range setting; [`StoreError::Database`].
    pub async fn open_in_memory_with(config: &StoreConfig) -> Result<Engine, StoreError> {
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
        let db = SqliteDb {
            writer: pool.clone(),
            reader: pool,
            file_options: None,
        };
        Engine::new(Box::new(db), config, Arc::new(watch::Sender::new(0)))
    }
}

impl SqliteDb {
    /// Opens the pools of the file at `path` (made absolute, also returned) and migrates it.
    async fn open(path: &Path, config: &StoreConfig) -> Result<(SqliteDb, PathBuf), StoreError> {
        // Absolute, so SQLite (which sqlx opens with SQLITE_OPEN_URI) never reads it as a
        // `file:` URI.
        let path = std::path::absolute(path).map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })?;
        if config.max_readers == 0 {
            return Err(invalid("max_readers", "must be at least 1"));
        }
        create_private_file(&path).await?;

        let base = common_options(SqliteConnectOptions::new().filename(&path), config);
        let writer_options = base
            .clone()
            .create_if_missing(true)
            // Persistent in the file; readers inherit it.
            .journal_mode(SqliteJournalMode::Wal);
        let writer = connect_writer(writer_options, config).await?;
        migrate::migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(config.max_readers)
            .acquire_timeout(config.busy_timeout)
            .connect_with(base.clone().pragma("query_only", "ON"))
            .await
            .map_err(db)?;
        let db = SqliteDb {
            writer,
            reader,
            file_options: Some(base),
        };
        Ok((db, path))
    }
}

/// Opens the one-connection writer pool, which switches a new file to WAL.
///
/// On a new file in rollback-journal mode that switch upgrades a read lock to an exclusive one,
/// and when several processes open the file at once SQLite refuses the upgrade with
/// `SQLITE_BUSY` at once rather than calling the busy handler (waiting could deadlock). Such
/// a refusal is retried, with a short pause, until `busy_timeout` has passed; any other error
/// is returned as is.
async fn connect_writer(
    options: SqliteConnectOptions,
    config: &StoreConfig,
) -> Result<SqlitePool, StoreError> {
    let deadline = tokio::time::Instant::now() + config.busy_timeout;
    loop {
        let connected = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(config.busy_timeout)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
            .await;
        match connected {
            Err(error) if is_busy(&error) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            connected => return connected.map_err(db),
        }
    }
}

/// Whether SQLite answered `SQLITE_BUSY` (primary result code 5, any extended code).
fn is_busy(error: &sqlx::Error) -> bool {
    let code = match error {
        sqlx::Error::Database(e) => e.code().and_then(|c| c.parse::<i32>().ok()),
        _ => None,
    };
    code.is_some_and(|c| c & 0xff == 5)
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

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use super::*;
    use crate::keyring::Keyring;
    use crate::model::Actor;
    use crate::store::{SecretStore as _, ToolStore as _};

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
        let (store, _) = SqliteDb::open(&dir.path().join("s.db"), &config)
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
