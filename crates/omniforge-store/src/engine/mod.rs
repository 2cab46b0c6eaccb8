//! The store's logic, written once for both backends: [`Engine`], the one type that implements
//! every [`store`](crate::store) trait, each `impl` in the file of its table family (`tools.rs`:
//! [`ToolStore`](crate::ToolStore), `secrets.rs`, `calls.rs`, `audit.rs`, `outputs.rs`,
//! `tasks.rs`, `content.rs`, `dump.rs`: [`Backend`](crate::Backend)), with the helpers of the
//! families they span (`review.rs`, `examples.rs`, `changes.rs`, `hours.rs`, `grants.rs`).
//!
//! What a function does around its SQL (validation, existence checks, the order of a write:
//! check, change of the feed, rows, audit record, commit; decoding rows into model types) is
//! here once. A backend supplies only what differs: its connections and transactions ([`Db`]:
//! SQLite's `BEGIN IMMEDIATE` on one writer connection, PostgreSQL's row lock on the change
//! counter), its schema (its own migrations, so that the statements here mean the same on both),
//! and a few statements of its own (`NOTIFY` at commit, a WAL checkpoint, moving identity
//! sequences after a copy). Statements run through [`exec`], which binds and decodes the same
//! way on both.

pub(crate) mod audit;
pub(crate) mod calls;
pub(crate) mod changes;
pub(crate) mod content;
pub(crate) mod dump;
pub(crate) mod examples;
pub(crate) mod exec;
pub(crate) mod grants;
pub(crate) mod hours;
pub(crate) mod migrate;
pub(crate) mod outputs;
pub(crate) mod review;
mod rows;
pub(crate) mod secrets;
pub(crate) mod tasks;
#[cfg(feature = "test-support")]
mod test_support;
pub(crate) mod tool_rows;
pub(crate) mod tools;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use self::exec::{Conn, q};
use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::keyring::Keyring;
use crate::validate::checked_i64;

pub(crate) use secrets::seal_plain_values;

/// Which lock a write transaction takes before its first statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// The write lock of the change feed: every write that may make a change, or that must not
    /// interleave with one (key rotation). SQLite: the file's write lock; PostgreSQL: the change
    /// counter's row.
    Feed,
    /// Writes that read and rewrite shared rows but are not changes (the call log's hours,
    /// example results): serialized among themselves, not with the feed. PostgreSQL: a
    /// transaction-level advisory lock; SQLite: the write lock (it has only one).
    Side,
    /// Audit-log prunes: one at a time across replicas. PostgreSQL: a transaction-level
    /// advisory lock of its own; SQLite: the file's write lock, which every process that
    /// opens the file shares.
    AuditPrune,
    /// Single-statement or insert-only writes (kept outputs).
    None,
}

/// A backend's connections, transactions and the few statements of its own.
#[async_trait]
pub(crate) trait Db: Send + Sync + std::fmt::Debug {
    /// `"sqlite"` or `"postgres"`.
    fn kind(&self) -> &'static str;

    /// A connection for reads of one statement each.
    async fn read(&self) -> Result<Box<dyn Conn>, StoreError>;

    /// A read-only transaction: one snapshot for several statements.
    async fn snapshot(&self) -> Result<Box<dyn Conn>, StoreError>;

    /// A write transaction holding `lock` from its start.
    async fn write(&self, lock: Lock) -> Result<Box<dyn Conn>, StoreError>;

    /// A statement that a transaction with changes runs just before it commits, with its last
    /// `seq` as text in `$1` (PostgreSQL's `NOTIFY`).
    fn notify_sql(&self) -> Option<&'static str>;

    /// Statements a copy runs after inserting every row, in its transaction (moving identity
    /// sequences past the copied ids).
    fn after_import(&self) -> &'static [&'static str];

    /// Called after plain-text secrets were sealed (SQLite checkpoints its WAL so that old page
    /// images with the plain values leave it).
    async fn after_sealing(&self);

    /// [`ToolStore::wait_for_change`](crate::ToolStore::wait_for_change) past `seq`;
    /// `committed` is the engine's own high-water mark.
    async fn wait_for_change(&self, committed: &watch::Sender<u64>, seq: u64, max_wait: Duration);

    /// [`ToolStore::backup`](crate::ToolStore::backup) of `engine` (this backend's) to `dest`.
    async fn backup(&self, engine: &Engine, dest: &Path) -> Result<(), StoreError>;

    async fn close(&self);
}

/// A store: every [`store`](crate::store) trait over one SQLite file or PostgreSQL database,
/// opened by [`SqliteStore`](crate::SqliteStore) or [`PgStore`](crate::PgStore) (or
/// [`open`](crate::open())). It holds its backend's connections and the settings the logic needs.
#[derive(Debug)]
pub struct Engine {
    /// The backend.
    pub(crate) db: Box<dyn Db>,
    /// [`StoreConfig::call_log_max_rows`], checked to fit a database integer.
    pub(crate) call_log_max_rows: i64,
    /// [`StoreConfig::change_log_max_rows`], checked to fit a database integer.
    pub(crate) change_log_max_rows: i64,
    /// [`StoreConfig::call_stats_max_age`] in milliseconds.
    pub(crate) call_stats_max_age_ms: i64,
    /// [`StoreConfig::keyring`].
    pub(crate) keyring: Option<Keyring>,
    /// The `seq` of the newest change this instance knows committed: raised after each of its
    /// own commits (and, on PostgreSQL, by notifications), it wakes
    /// [`wait_for_change`](crate::ToolStore::wait_for_change).
    pub(crate) committed: Arc<watch::Sender<u64>>,
}

impl Engine {
    /// A core for `db` with `config`'s settings, checked.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for a number that does not fit a database integer.
    pub(crate) fn new(
        db: Box<dyn Db>,
        config: &StoreConfig,
        committed: Arc<watch::Sender<u64>>,
    ) -> Result<Engine, StoreError> {
        let age_ms = u64::try_from(config.call_stats_max_age.as_millis()).unwrap_or(u64::MAX);
        Ok(Engine {
            db,
            call_log_max_rows: checked_i64("call_log_max_rows", config.call_log_max_rows)?,
            change_log_max_rows: checked_i64("change_log_max_rows", config.change_log_max_rows)?,
            call_stats_max_age_ms: checked_i64("call_stats_max_age", age_ms)?,
            keyring: config.keyring.clone(),
            committed,
        })
    }

    /// Begins a write that may make changes ([`Lock::Feed`]).
    pub(crate) async fn write(&self) -> Result<Write<'_>, StoreError> {
        self.write_with(Lock::Feed).await
    }

    /// Begins a write holding `lock`.
    pub(crate) async fn write_with(&self, lock: Lock) -> Result<Write<'_>, StoreError> {
        Ok(Write {
            conn: self.db.write(lock).await?,
            core: self,
            last_seq: None,
            audited: Vec::new(),
        })
    }

    /// The keyring, or [`StoreError::NoSecretKey`].
    pub(crate) fn keyring(&self) -> Result<&Keyring, StoreError> {
        self.keyring.as_ref().ok_or(StoreError::NoSecretKey)
    }

    /// Raises [`Engine::committed`] to `seq`.
    pub(crate) fn raise(&self, seq: u64) {
        self.committed.send_if_modified(|newest| {
            let newer = seq > *newest;
            if newer {
                *newest = seq;
            }
            newer
        });
    }
}

/// A write transaction: it holds its [`Lock`] from its start until it commits, or rolls back
/// when dropped. Every change it makes goes through [`Write::change`] (in `changes.rs`), which
/// numbers the change and appends it to the feed in this transaction, and every action it
/// performs through [`Write::audit`] (in `audit.rs`), which appends its audit record in this
/// transaction.
pub(crate) struct Write<'c> {
    conn: Box<dyn Conn>,
    core: &'c Engine,
    /// The `seq` of the newest change made in this transaction, announced at the commit.
    last_seq: Option<u64>,
    /// The audit records appended in this transaction, written to the log once it commits.
    audited: Vec<audit::Logged>,
}

impl Write<'_> {
    /// The transaction, for statements.
    pub(crate) fn conn(&mut self) -> &mut dyn Conn {
        &mut *self.conn
    }

    /// Commits. A transaction with changes first runs the backend's notification (delivered
    /// by PostgreSQL only if the commit succeeds); this instance's waiters are woken after.
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        if let (Some(seq), Some(sql)) = (self.last_seq, self.core.db.notify_sql()) {
            q(sql).bind(seq.to_string()).execute(self.conn()).await?;
        }
        self.conn.commit().await?;
        if let Some(seq) = self.last_seq {
            self.core.raise(seq);
        }
        for record in &self.audited {
            record.log();
        }
        Ok(())
    }
}
