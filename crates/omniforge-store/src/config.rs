//! [`StoreConfig`], the settings every backend takes, and their defaults.

use std::time::Duration;

use crate::keyring::Keyring;

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

/// Settings of a store, whatever its backend ([`SqliteStore`](crate::SqliteStore),
/// [`PgStore`](crate::PgStore), or [`open`](fn@crate::open) of a URL). No `Default`: the `open`
/// functions without a config use the `DEFAULT_*` constants, and callers of the others spell
/// every field out.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How long a write waits for the write lock when another writer holds it, and, separately,
    /// how long it waits for a free connection. On SQLite the first is the busy timeout (another
    /// process holds the file's write lock) and the second covers this process's earlier writes
    /// (its one writer connection); on PostgreSQL the first is the write transaction's
    /// `lock_timeout` (another replica holds the change counter's row lock). Reads wait for a
    /// free connection as long. Past it the
    /// operation fails with [`StoreError::Database`](crate::StoreError::Database), where
    /// [`DatabaseError::is_busy`](crate::DatabaseError::is_busy) is true.
    /// Default [`DEFAULT_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
    /// How many call log rows to keep: each call-log write
    /// ([`CallLog::record_calls`](crate::CallLog::record_calls)) deletes, in the same transaction as
    /// its inserts, every row older than the last `call_log_max_rows` calls recorded (rows of
    /// purged tools leave gaps, so fewer may remain). `0` keeps no log at all. Lowering it
    /// takes effect at the next recorded call. Default [`DEFAULT_CALL_LOG_MAX_ROWS`].
    pub call_log_max_rows: u64,
    /// Most reader connections open at once (at least 1); PostgreSQL opens one more for writes.
    /// Unused for in-memory stores, which have a single connection. Default [`DEFAULT_MAX_READERS`].
    pub max_readers: u32,
    /// How many changes the change feed keeps: each change deletes, in the transaction that
    /// makes it, the changes older than the last `change_log_max_rows`. A reader further behind reloads
    /// the kinds it may have missed ([`ChangeSet::reload`](crate::ChangeSet::reload)); one that far behind would
    /// re-read about as much key by key anyway. `0` keeps none, so every reader reloads every
    /// kind that changed. Applies from the next change. Default [`DEFAULT_CHANGE_LOG_MAX_ROWS`].
    pub change_log_max_rows: u64,
    /// How long the hourly call statistics are kept: each call-log write deletes, in its
    /// transaction, the hours that ended longer ago than this, whatever
    /// `call_log_max_rows` is. Default [`DEFAULT_CALL_STATS_MAX_AGE`].
    pub call_stats_max_age: Duration,
    /// The keyring that seals secret values ([`Keyring`]); it never enters the database.
    /// Without one (`None`, the default of the `open` functions without a config), every read or write of a
    /// secret value fails with [`StoreError::NoSecretKey`](crate::StoreError::NoSecretKey), and values stored in plain text by
    /// an older build stay so. With one, such values are sealed under its current key when the
    /// store opens, in one transaction.
    pub keyring: Option<Keyring>,
}

impl StoreConfig {
    /// The `DEFAULT_*` settings, without a keyring.
    pub(crate) fn defaults() -> StoreConfig {
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
