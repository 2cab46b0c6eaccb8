//! [`PgStore`]: the [`ToolStore`] and [`ContentStore`](crate::ContentStore) on a PostgreSQL
//! database, through `sqlx`, for several replicas on one database.
//!
//! This module holds the pool, the migrations, the transactions and the `ToolStore` impl as a
//! table of contents; each table family has its own file, as in `sqlite/`: `tools.rs`,
//! `content.rs`, `calls.rs`, `secrets.rs`, `changes.rs` (the change feed), and `listen.rs` (the
//! `LISTEN` connection that wakes [`ToolStore::wait_for_change`]). `options.rs` turns a
//! `postgres://` URL and the caller's `PG*` values into connection options; `dump.rs` reads and
//! writes whole stores for copies and backups.
//!
//! **Writes are serialized across replicas.** Every write transaction that may change something
//! begins by locking the change counter's row (`SELECT ... FROM meta ... FOR UPDATE`) and holds
//! that lock to its commit, as SQLite's `BEGIN IMMEDIATE` holds the file's write lock: the
//! existence checks inside it cannot race with another replica's writer, and the change numbers
//! it takes follow commit order. The wait for the lock is bounded by `lock_timeout`
//! ([`StoreConfig::busy_timeout`]). Call log writes, which are not changes, do not take it.
//!
//! Reads that need one moment (the change feed, a tool's call history) run in a `REPEATABLE
//! READ, READ ONLY` transaction; single-statement reads use the pool directly.

mod calls;
mod changes;
mod content;
mod counter;
mod dump;
mod listen;
mod options;
mod rows;
mod secrets;
mod tools;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::model::{
    CallRecord, ChangeSet, NewVersion, SecretInfo, SecretValue, StoredTool, ToolVersion,
};
use crate::rules::{checked_i64, invalid};
use crate::sql::{db, migrate as migrate_error};
use crate::store::ToolStore;
pub use listen::LISTENER_APPLICATION_NAME;
pub use options::PgEnv;
pub(crate) use options::is_postgres_url;

/// The schema migrations for PostgreSQL, embedded at compile time from `migrations-postgres/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations-postgres");

/// The table where sqlx records applied migrations (its default name).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// The key of the transaction-level advisory lock that serializes migrations of one database
/// (`pg_advisory_xact_lock`; advisory locks are per database). Any fixed number works: only
/// OmniForge replicas take it. ASCII "omnimigr".
const MIGRATION_LOCK: i64 = 0x6f6d_6e69_6d69_6772;

/// The PostgreSQL implementation of [`ToolStore`] and [`ContentStore`](crate::ContentStore).
///
/// Opening applies pending migrations under an advisory lock, so replicas starting together
/// against a new database migrate it once. Every write commits before it returns; PostgreSQL's
/// own `synchronous_commit` (on by default) makes the commit durable. Any number of instances,
/// in any number of processes and machines, may share a database: the change feed numbers their
/// changes in commit order, and [`ToolStore::wait_for_change`] wakes on any of them through
/// `LISTEN`/`NOTIFY`.
#[derive(Debug)]
pub struct PgStore {
    /// Reads and writes: `max_readers + 1` connections.
    pool: PgPool,
    /// The connection options, for the `LISTEN` connection.
    options: PgConnectOptions,
    /// [`StoreConfig::call_log_max_rows`], checked to fit a BIGINT.
    call_log_max_rows: i64,
    /// [`StoreConfig::change_log_max_rows`], checked to fit a BIGINT.
    change_log_max_rows: i64,
    /// The change feed's wake-up: the highest `seq` this instance knows committed (its own
    /// commits, `NOTIFY`s heard, re-reads after a lost `LISTEN` connection).
    feed: listen::Feed,
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
    /// (including a database migrated by a newer OmniForge).
    pub async fn open(url: &str, env: &PgEnv, config: &StoreConfig) -> Result<PgStore, StoreError> {
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
    ) -> Result<PgStore, StoreError> {
        let call_log_max_rows = checked_i64("call_log_max_rows", config.call_log_max_rows)?;
        let change_log_max_rows = checked_i64("change_log_max_rows", config.change_log_max_rows)?;
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
        tracing::debug!(
            host = options.get_host(),
            database = options.get_database(),
            "tool store opened (PostgreSQL)"
        );
        Ok(PgStore {
            pool,
            options,
            call_log_max_rows,
            change_log_max_rows,
            feed: listen::Feed::new(),
        })
    }

    /// Begins a write transaction holding the change counter's row lock (see the module docs).
    async fn write(&self) -> Result<Write<'_>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        sqlx::query("SELECT value FROM meta WHERE key = 'data_version' FOR UPDATE")
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        Ok(Write {
            tx,
            store: self,
            last_seq: None,
        })
    }

    /// Begins a read transaction: one snapshot for several statements.
    async fn read(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, StoreError> {
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(db)
    }
}

/// A write transaction: it holds the change counter's row lock from its start until it commits,
/// or rolls back when dropped. Every change it makes goes through [`Write::change`] (in
/// `changes.rs`), which numbers the change and appends it to the feed in this transaction.
struct Write<'s> {
    tx: sqlx::Transaction<'static, sqlx::Postgres>,
    store: &'s PgStore,
    /// The `seq` of the newest change made in this transaction, notified at the commit.
    last_seq: Option<u64>,
}

impl Write<'_> {
    /// The transaction's connection, for statements.
    fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// Commits. If a change was made, the transaction first queues a `NOTIFY` with its last
    /// `seq`, which PostgreSQL delivers to every listening replica when (and only if) the
    /// commit succeeds; this instance's waiters are woken at once after the commit.
    async fn commit(mut self) -> Result<(), StoreError> {
        if let Some(seq) = self.last_seq {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(listen::CHANNEL)
                .bind(seq.to_string())
                .execute(self.conn())
                .await
                .map_err(db)?;
        }
        self.tx.commit().await.map_err(db)?;
        if let Some(seq) = self.last_seq {
            self.store.feed.committed(seq);
        }
        Ok(())
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
/// its own transaction; this is the same loop with the public `Migrate` trait (each migration's
/// own transaction nests as a savepoint).
async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    use sqlx::migrate::{Migrate, MigrateError};

    let mut tx = pool.begin().await.map_err(db)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let conn: &mut PgConnection = &mut tx;
    conn.ensure_migrations_table(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?;
    if let Some(version) = conn
        .dirty_version(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?
    {
        return Err(migrate_error(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    // A migration this build does not know: a newer OmniForge wrote this database.
    if let Some(&unknown) = applied.keys().find(|v| !MIGRATOR.version_exists(**v)) {
        return Err(migrate_error(MigrateError::VersionMissing(unknown)));
    }
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != *migration.checksum => {
                return Err(migrate_error(MigrateError::VersionMismatch(
                    migration.version,
                )));
            }
            Some(_) => {}
            None => {
                tracing::info!(version = migration.version, description = %migration.description, "applying store migration (PostgreSQL)");
                conn.apply(MIGRATIONS_TABLE, migration)
                    .await
                    .map_err(migrate_error)?;
            }
        }
    }
    tx.commit().await.map_err(db)
}

/// Each method is in the file of its table family; this is the table of contents.
#[async_trait]
impl ToolStore for PgStore {
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
        counter::data_version(&self.pool).await
    }

    async fn current_seq(&self) -> Result<u64, StoreError> {
        counter::current_seq(&self.pool).await
    }

    async fn changes_since(&self, seq: u64) -> Result<ChangeSet, StoreError> {
        changes::since(self, seq).await
    }

    async fn wait_for_change(&self, seq: u64, max_wait: Duration) {
        self.feed
            .wait(&self.pool, &self.options, seq, max_wait)
            .await;
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
        dump::backup(self, dest).await
    }

    async fn close(&self) {
        self.feed.stop();
        self.pool.close().await;
    }
}

#[async_trait]
impl crate::dump::Backend for PgStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn export(&self) -> Result<crate::dump::StoreDump, StoreError> {
        dump::export(self).await
    }

    async fn import_dump(&self, dump: &crate::dump::StoreDump) -> Result<(), StoreError> {
        dump::import(self, dump).await
    }
}
