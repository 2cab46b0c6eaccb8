//! [`PgStore`]: every [`Store`](crate::Store) trait on a PostgreSQL database, through `sqlx`,
//! for several replicas on one database.
//!
//! The logic is the engine's (`engine/`, shared with SQLite); this module holds
//! what only PostgreSQL has: the pool and the transactions (`PgDb`, the engine's `Db`), the
//! migrations (`migrations-postgres/`, applied under an advisory lock), `listen.rs` (the
//! `LISTEN` connection that wakes [`ToolStore::wait_for_change`](crate::ToolStore::wait_for_change)),
//! `options.rs` (a `postgres://` URL and the caller's `PG*` values as connection options) and
//! `backup.rs` (backups as SQLite files).
//!
//! **Writes are serialized across replicas.** Every write transaction that may change something
//! (`Lock::Feed`) begins by locking the change counter's row (`SELECT ... FROM meta ... FOR
//! UPDATE`) and holds that lock to its commit, as SQLite's `BEGIN IMMEDIATE` holds the file's
//! write lock: the existence checks inside it cannot race with another replica's writer, and the
//! change numbers it takes follow commit order. Writes that are not changes but rewrite shared
//! rows (a call's hour, example results: `Lock::Side`) take a transaction-level advisory lock
//! instead, so that they neither race each other nor queue behind catalog writes; the others
//! (`Lock::None`) take none. The wait for a lock is bounded by `lock_timeout`
//! ([`StoreConfig::busy_timeout`]).
//!
//! Reads that need one moment run in a `REPEATABLE READ, READ ONLY` transaction;
//! single-statement reads use a pooled connection.

mod backup;
mod listen;
mod options;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use tokio::sync::watch;

use crate::config::StoreConfig;
use crate::engine::exec::{Conn, db};
use crate::engine::migrate::apply_pending;
use crate::engine::{Db, Engine, Lock, seal_plain_values};
use crate::error::StoreError;
use crate::validate::invalid;
pub use listen::LISTENER_APPLICATION_NAME;
pub use options::PgEnv;
pub(crate) use options::is_postgres_url;

/// The schema migrations for PostgreSQL, embedded at compile time from `migrations-postgres/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// The key of the transaction-level advisory lock that serializes migrations of one database
/// (`pg_advisory_xact_lock`; advisory locks are per database). Any fixed number works: only
/// OmniForge replicas take it. ASCII "omnimigr".
const MIGRATION_LOCK: i64 = 0x6f6d_6e69_6d69_6772;

/// The key of the advisory lock of `Lock::Side` writes. ASCII "omniside".
const SIDE_LOCK: i64 = 0x6f6d_6e69_7369_6465;

/// The transaction-level advisory lock key of audit prunes ([`Lock::AuditPrune`]): replicas
/// that prune at the same moment take turns, and the later one finds nothing left to remove.
const AUDIT_PRUNE_LOCK: i64 = 0x6f6d_6e69_6175_6474;

/// Opens an [`Engine`] on a PostgreSQL database: every [`Store`](crate::Store) trait.
///
/// Opening applies pending migrations under an advisory lock, so replicas starting together
/// against a new database migrate it once; then, with a keyring, seals any secret values stored
/// in plain text. Every write commits before it returns; PostgreSQL's own `synchronous_commit`
/// (on by default) makes the commit durable. Any number of instances, in any number of
/// processes and machines, may share a database: the change feed numbers their changes in
/// commit order, and [`ToolStore::wait_for_change`](crate::ToolStore::wait_for_change) wakes on
/// any of them through `LISTEN`/`NOTIFY`.
#[derive(Debug)]
pub enum PgStore {}

/// The engine's [`Db`] on PostgreSQL: one pool for reads and writes.
#[derive(Debug)]
pub(crate) struct PgDb {
    /// The pool, for reads, writes, the `LISTEN` task's re-reads and closing.
    pool: PgPool,
    /// The connection options, for the `LISTEN` connection.
    options: PgConnectOptions,
    /// The change feed's wake-up, fed by `NOTIFY`.
    feed: listen::Feed,
    /// `SET LOCAL lock_timeout` for write transactions, from [`StoreConfig::busy_timeout`].
    lock_timeout: &'static str,
}

#[async_trait]
impl Db for PgDb {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn read(&self) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(self.pool.acquire().await.map_err(db)?))
    }

    async fn snapshot(&self) -> Result<Box<dyn Conn>, StoreError> {
        Ok(Box::new(
            self.pool
                .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await
                .map_err(db)?,
        ))
    }

    async fn write(&self, lock: Lock) -> Result<Box<dyn Conn>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query(self.lock_timeout)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        match lock {
            Lock::Feed => {
                sqlx::query("SELECT value FROM meta WHERE key = 'data_version' FOR UPDATE")
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
            }
            Lock::Side => {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(SIDE_LOCK)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
            }
            Lock::AuditPrune => {
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(AUDIT_PRUNE_LOCK)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
            }
            Lock::None => {}
        }
        Ok(Box::new(tx))
    }

    fn notify_sql(&self) -> Option<&'static str> {
        Some("SELECT pg_notify('omniforge_changes', $1)")
    }

    fn after_import(&self) -> &'static [&'static str] {
        &[
            "SELECT setval(pg_get_serial_sequence('call_log', 'id'), \
             (SELECT COALESCE(max(id), 0) + 1 FROM call_log), false)",
            "SELECT setval(pg_get_serial_sequence('audit_log', 'id'), \
             (SELECT COALESCE(max(id), 0) + 1 FROM audit_log), false)",
        ]
    }

    async fn after_sealing(&self) {}

    /// Wakes on any replica's commit.
    async fn wait_for_change(&self, _committed: &watch::Sender<u64>, seq: u64, max_wait: Duration) {
        self.feed
            .wait(&self.pool, &self.options, seq, max_wait)
            .await;
    }

    /// A SQLite file of one snapshot.
    async fn backup(&self, engine: &Engine, dest: &Path) -> Result<(), StoreError> {
        backup::backup(engine, dest).await
    }

    async fn close(&self) {
        self.feed.stop();
        self.pool.close().await;
    }
}

/// `SET LOCAL lock_timeout` for `timeout`, as a statement of its own (`SET` takes no
/// parameters). Leaked once per store: a few bytes.
fn lock_timeout_sql(timeout: Duration) -> &'static str {
    let ms = timeout.as_millis().max(1);
    Box::leak(format!("SET LOCAL lock_timeout = {ms}").into_boxed_str())
}

impl PgStore {
    /// Connects to the database `url` names (`postgres://` or `postgresql://`, as libpq takes
    /// it: `postgres://user:password@host:port/dbname?sslmode=require`), where what the URL
    /// leaves out comes from `env`, the `PG*` environment variables the caller read
    /// ([`PgEnv`]), and applies pending migrations.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a malformed URL or an out-of-range setting;
    /// [`StoreError::Database`] if the database cannot be reached or a migration fails
    /// (including a database migrated by a newer OmniForge); with a keyring,
    /// [`StoreError::Crypto`] if sealing plain-text values fails.
    pub async fn open(url: &str, env: &PgEnv, config: &StoreConfig) -> Result<Engine, StoreError> {
        let options = options::connect_options(url, env, config)?;
        PgStore::open_with(options, config).await
    }

    /// Connects with ready-made options and applies pending migrations.
    ///
    /// # Errors
    /// As [`open`](PgStore::open).
    pub async fn open_with(
        options: PgConnectOptions,
        config: &StoreConfig,
    ) -> Result<Engine, StoreError> {
        if config.max_readers == 0 {
            return Err(invalid("max_readers", "must be at least 1"));
        }
        let pool = PgPoolOptions::new()
            .max_connections(config.max_readers.saturating_add(1))
            .acquire_timeout(config.busy_timeout)
            .connect_with(options.clone())
            .await
            .map_err(db)?;
        migrate(&pool).await?;
        let newest = Arc::new(watch::Sender::new(0));
        tracing::debug!(
            host = options.get_host(),
            database = options.get_database(),
            "tool store opened (PostgreSQL)"
        );
        let db = PgDb {
            pool,
            options,
            lock_timeout: lock_timeout_sql(config.busy_timeout),
            feed: listen::Feed::new(newest.clone()),
        };
        let store = Engine::new(Box::new(db), config, newest)?;
        seal_plain_values(&store).await?;
        Ok(store)
    }
}

/// Runs pending migrations in one transaction that first takes the migration advisory lock
/// (`pg_advisory_xact_lock`), so replicas starting together against a new database cannot both
/// apply one migration: the second waits, then finds it applied. PostgreSQL's DDL is
/// transactional, so a failed migration leaves nothing half-applied, and the lock ends with
/// the transaction whatever happens (even if the connection dies).
///
/// sqlx's own `Migrator::run` takes a session-level advisory lock instead, which an error
/// between lock and unlock leaves held on a pooled connection, and applies each migration in
/// its own transaction; the engine's loop (`engine/migrate.rs`) applies them here (each migration's
/// own transaction nests as a savepoint).
async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let conn: &mut PgConnection = &mut tx;
    apply_pending(conn, &MIGRATOR, "postgres").await?;
    tx.commit().await.map_err(db)
}
