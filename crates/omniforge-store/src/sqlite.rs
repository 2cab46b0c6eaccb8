//! [`SqliteStore`]: the [`ToolStore`] on one SQLite file (or in memory), through `sqlx`.
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

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::TryStreamExt as _;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{Connection, Row};

use crate::error::{self, NameKind, StoreError};
use crate::model::{
    Annotations, CallOutcome, CallRecord, JsonObject, Limits, NewVersion, Runtime, SecretInfo,
    SecretValue, StoredTool, Tool, ToolVersion, validate_secret_name, validate_tool_name,
};
use crate::store::ToolStore;

/// The schema migrations, embedded at compile time from `migrations/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Default for [`StoreConfig::busy_timeout`]: 5 seconds.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Default for [`StoreConfig::call_log_max_rows`]: 10,000 rows.
pub const DEFAULT_CALL_LOG_MAX_ROWS: u64 = 10_000;

/// Default for [`StoreConfig::max_readers`]: 4 connections.
pub const DEFAULT_MAX_READERS: u32 = 4;

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
    /// How many call log rows to keep: [`ToolStore::record_call`] deletes, in the same
    /// transaction as its insert, every row older than the last `call_log_max_rows` calls
    /// recorded (rows of purged tools leave gaps, so fewer may remain). `0` keeps no log at all.
    /// Lowering it takes effect at the next recorded call. Default [`DEFAULT_CALL_LOG_MAX_ROWS`].
    pub call_log_max_rows: u64,
    /// Most reader connections open at once (at least 1). Unused for in-memory stores, which
    /// have a single connection. Default [`DEFAULT_MAX_READERS`].
    pub max_readers: u32,
}

impl StoreConfig {
    fn defaults() -> StoreConfig {
        StoreConfig {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            call_log_max_rows: DEFAULT_CALL_LOG_MAX_ROWS,
            max_readers: DEFAULT_MAX_READERS,
        }
    }
}

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
        let call_log_max_rows = checked_i64("call_log_max_rows", config.call_log_max_rows)?;
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
            .map_err(error::db)?;
        migrate(&writer).await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(config.max_readers)
            .acquire_timeout(config.busy_timeout)
            .connect_with(base.clone().pragma("query_only", "ON"))
            .await
            .map_err(error::db)?;
        tracing::debug!(path = %path.display(), "tool store opened");
        Ok(SqliteStore {
            writer,
            reader,
            file_options: Some(base),
            call_log_max_rows,
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
        let call_log_max_rows = checked_i64("call_log_max_rows", config.call_log_max_rows)?;
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
            .map_err(error::db)?;
        migrate(&pool).await?;
        Ok(SqliteStore {
            writer: pool.clone(),
            reader: pool,
            file_options: None,
            call_log_max_rows,
        })
    }

    /// Begins a write transaction holding SQLite's write lock.
    pub(crate) async fn write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(error::db)
    }

    /// The reader pool (the single connection for in-memory stores).
    pub(crate) fn reader_pool(&self) -> SqlitePool {
        self.reader.clone()
    }

    /// Begins a read transaction: one snapshot for several statements.
    pub(crate) async fn read(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.reader.begin().await.map_err(error::db)
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

    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(error::db)?;
    let conn: &mut SqliteConnection = &mut tx;
    conn.ensure_migrations_table(MIGRATIONS_TABLE)
        .await
        .map_err(error::migrate)?;
    if let Some(version) = conn
        .dirty_version(MIGRATIONS_TABLE)
        .await
        .map_err(error::migrate)?
    {
        return Err(error::migrate(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await
        .map_err(error::migrate)?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    // A migration this build does not know: a newer OmniForge wrote this database.
    if let Some(&unknown) = applied.keys().find(|v| !MIGRATOR.version_exists(**v)) {
        return Err(error::migrate(MigrateError::VersionMissing(unknown)));
    }
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != *migration.checksum => {
                return Err(error::migrate(MigrateError::VersionMismatch(
                    migration.version,
                )));
            }
            Some(_) => {}
            None => {
                tracing::info!(version = migration.version, description = %migration.description, "applying store migration");
                conn.apply(MIGRATIONS_TABLE, migration)
                    .await
                    .map_err(error::migrate)?;
            }
        }
    }
    tx.commit().await.map_err(error::db)
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

/// The current time, unix milliseconds. A clock before 1970 reads as 0.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

pub(crate) fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        reason: reason.into(),
    }
}

pub(crate) fn checked_i64(field: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| invalid(field, format!("{value} exceeds {}", i64::MAX)))
}

fn tool_not_found(name: &str) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: None,
    }
}

fn version_not_found(name: &str, number: u32) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: Some(number),
    }
}

/// A [`NewVersion`] checked and turned into column values, before any transaction begins.
pub(crate) struct EncodedSpec<'a> {
    spec: &'a NewVersion,
    input_schema: String,
    output_schema: Option<String>,
    dependencies: String,
    secrets: String,
    timeout_ms: i64,
    memory_bytes: i64,
}

pub(crate) fn encode_spec(spec: &NewVersion) -> Result<EncodedSpec<'_>, StoreError> {
    for (i, dep) in spec.dependencies.iter().enumerate() {
        if dep.trim().is_empty() || dep.contains(['\n', '\r']) {
            return Err(invalid(
                format!("dependencies[{i}]"),
                "must be one non-empty line",
            ));
        }
    }
    for name in &spec.secrets {
        validate_secret_name(name)?;
    }
    if spec.env_id.is_empty() {
        return Err(invalid("env_id", "must not be empty"));
    }
    Ok(EncodedSpec {
        spec,
        input_schema: to_json("input_schema", &spec.input_schema)?,
        output_schema: spec
            .output_schema
            .as_ref()
            .map(|s| to_json("output_schema", s))
            .transpose()?,
        dependencies: to_json("dependencies", &spec.dependencies)?,
        secrets: to_json("secrets", &spec.secrets)?,
        timeout_ms: checked_i64("limits.timeout_ms", spec.limits.timeout_ms)?,
        memory_bytes: checked_i64("limits.memory_bytes", spec.limits.memory_bytes)?,
    })
}

pub(crate) fn to_json(field: &str, value: &impl serde::Serialize) -> Result<String, StoreError> {
    // Cannot fail for JSON values and strings; mapped anyway rather than unwrapped.
    serde_json::to_string(value).map_err(|e| invalid(field, e.to_string()))
}

/// Bumps the change counter; returns its new value. Part of every write transaction except call
/// logging.
pub(crate) async fn bump(conn: &mut SqliteConnection) -> Result<i64, StoreError> {
    sqlx::query_scalar(
        "UPDATE meta SET value = value + 1 WHERE key = 'data_version' RETURNING value",
    )
    .fetch_one(conn)
    .await
    .map_err(error::db)
}

/// Inserts `name` as a new, enabled tool whose version 1 is `enc`.
pub(crate) async fn insert_tool(
    conn: &mut SqliteConnection,
    name: &str,
    now: i64,
    seq: i64,
    enc: &EncodedSpec<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq) \
         VALUES (?, 1, 1, ?, ?, ?)",
    )
    .bind(name)
    .bind(now)
    .bind(now)
    .bind(seq)
    .execute(&mut *conn)
    .await
    .map_err(error::db)?;
    insert_version(conn, name, 1, now, enc).await
}

/// The number the next version of `name` gets; `None` when it has no versions (no such tool).
pub(crate) async fn next_version_number(
    conn: &mut SqliteConnection,
    name: &str,
) -> Result<Option<u32>, StoreError> {
    let highest: Option<i64> =
        sqlx::query_scalar("SELECT max(number) FROM tool_version WHERE tool = ?")
            .bind(name)
            .fetch_one(conn)
            .await
            .map_err(error::db)?;
    highest
        .map(|highest| {
            u32::try_from(highest + 1).map_err(|_| StoreError::Conflict {
                reason: format!("tool {name:?} has no version numbers left"),
            })
        })
        .transpose()
}

/// Points `name` at version `number` (enabled state unchanged).
async fn set_current_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tool SET current_version = ?, updated_at_ms = ?, updated_seq = ? WHERE name = ?",
    )
    .bind(i64::from(number))
    .bind(now)
    .bind(seq)
    .bind(name)
    .execute(conn)
    .await
    .map_err(error::db)?;
    Ok(())
}

pub(crate) async fn insert_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
    now: i64,
    enc: &EncodedSpec<'_>,
) -> Result<(), StoreError> {
    let s = enc.spec;
    sqlx::query(
        "INSERT INTO tool_version (tool, number, title, description, input_schema, output_schema, \
         read_only_hint, destructive_hint, idempotent_hint, open_world_hint, runtime, code, \
         dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, author, created_at_ms) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(name)
    .bind(i64::from(number))
    .bind(s.title.as_deref())
    .bind(&s.description)
    .bind(&enc.input_schema)
    .bind(enc.output_schema.as_deref())
    .bind(s.annotations.read_only_hint)
    .bind(s.annotations.destructive_hint)
    .bind(s.annotations.idempotent_hint)
    .bind(s.annotations.open_world_hint)
    .bind(s.runtime.as_str())
    .bind(&s.code)
    .bind(&enc.dependencies)
    .bind(enc.timeout_ms)
    .bind(enc.memory_bytes)
    .bind(s.limits.network)
    .bind(&s.lock)
    .bind(&s.env_id)
    .bind(&enc.secrets)
    .bind(&s.author)
    .bind(now)
    .execute(conn)
    .await
    .map_err(error::db)?;
    Ok(())
}

/// The columns [`version_from_row`] reads, from a `tool_version` aliased `v`. A macro so that
/// queries stay `&'static str` literals built with `concat!`.
macro_rules! version_columns {
    () => {
        "v.tool AS v_tool, v.number AS v_number, v.title AS v_title, \
         v.description AS v_description, v.input_schema AS v_input_schema, \
         v.output_schema AS v_output_schema, v.read_only_hint AS v_read_only_hint, \
         v.destructive_hint AS v_destructive_hint, v.idempotent_hint AS v_idempotent_hint, \
         v.open_world_hint AS v_open_world_hint, v.runtime AS v_runtime, v.code AS v_code, \
         v.dependencies AS v_dependencies, v.timeout_ms AS v_timeout_ms, \
         v.memory_bytes AS v_memory_bytes, v.network AS v_network, v.lock AS v_lock, \
         v.env_id AS v_env_id, v.secrets AS v_secrets, v.author AS v_author, \
         v.created_at_ms AS v_created_at_ms"
    };
}

/// The columns [`tool_from_row`] reads, from a `tool` aliased `t`.
macro_rules! tool_columns {
    () => {
        "t.name AS t_name, t.enabled AS t_enabled, t.current_version AS t_current_version, \
         t.created_at_ms AS t_created_at_ms, t.updated_at_ms AS t_updated_at_ms"
    };
}

pub(crate) fn col<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(column)
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}

fn get_u32(row: &SqliteRow, column: &str) -> Result<u32, StoreError> {
    let v: i64 = col(row, column)?;
    u32::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is not a u32")))
}

fn get_u64(row: &SqliteRow, column: &str) -> Result<u64, StoreError> {
    let v: i64 = col(row, column)?;
    u64::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is negative")))
}

pub(crate) fn get_json<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    column: &str,
) -> Result<T, StoreError> {
    let text: String = col(row, column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
}

fn version_from_row(row: &SqliteRow) -> Result<ToolVersion, StoreError> {
    let output_schema: Option<String> = col(row, "v_output_schema")?;
    let output_schema = output_schema
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| corrupt(format!("column v_output_schema: {e}")))?;
    let runtime: String = col(row, "v_runtime")?;
    let spec = NewVersion {
        title: col(row, "v_title")?,
        description: col(row, "v_description")?,
        input_schema: get_json::<JsonObject>(row, "v_input_schema")?,
        output_schema,
        annotations: Annotations {
            read_only_hint: col(row, "v_read_only_hint")?,
            destructive_hint: col(row, "v_destructive_hint")?,
            idempotent_hint: col(row, "v_idempotent_hint")?,
            open_world_hint: col(row, "v_open_world_hint")?,
        },
        runtime: Runtime::parse(&runtime)
            .ok_or_else(|| corrupt(format!("unknown runtime {runtime:?}")))?,
        code: col(row, "v_code")?,
        dependencies: get_json(row, "v_dependencies")?,
        limits: Limits {
            timeout_ms: get_u64(row, "v_timeout_ms")?,
            memory_bytes: get_u64(row, "v_memory_bytes")?,
            network: col(row, "v_network")?,
        },
        lock: col(row, "v_lock")?,
        env_id: col(row, "v_env_id")?,
        secrets: get_json(row, "v_secrets")?,
        author: col(row, "v_author")?,
    };
    Ok(ToolVersion {
        tool: col(row, "v_tool")?,
        number: get_u32(row, "v_number")?,
        created_at_ms: col(row, "v_created_at_ms")?,
        spec,
    })
}

fn tool_from_row(row: &SqliteRow) -> Result<Tool, StoreError> {
    Ok(Tool {
        name: col(row, "t_name")?,
        enabled: col(row, "t_enabled")?,
        current_version: get_u32(row, "t_current_version")?,
        created_at_ms: col(row, "t_created_at_ms")?,
        updated_at_ms: col(row, "t_updated_at_ms")?,
    })
}

fn stored_from_row(row: &SqliteRow) -> Result<StoredTool, StoreError> {
    Ok(StoredTool {
        tool: tool_from_row(row)?,
        current: version_from_row(row)?,
    })
}

fn encode_outcome(outcome: CallOutcome) -> (&'static str, Option<i64>) {
    match outcome {
        CallOutcome::Ok => ("ok", None),
        CallOutcome::Error => ("error", None),
        CallOutcome::Exit(code) => ("exit", Some(i64::from(code))),
        CallOutcome::Timeout => ("timeout", None),
        CallOutcome::Cancelled => ("cancelled", None),
    }
}

fn call_from_row(row: &SqliteRow) -> Result<CallRecord, StoreError> {
    let outcome: String = col(row, "outcome")?;
    let exit_code: Option<i64> = col(row, "exit_code")?;
    let outcome = match (outcome.as_str(), exit_code) {
        ("ok", None) => CallOutcome::Ok,
        ("error", None) => CallOutcome::Error,
        ("timeout", None) => CallOutcome::Timeout,
        ("cancelled", None) => CallOutcome::Cancelled,
        ("exit", Some(code)) => CallOutcome::Exit(
            i32::try_from(code).map_err(|_| corrupt(format!("exit code {code} is not an i32")))?,
        ),
        (o, c) => {
            return Err(corrupt(format!(
                "unknown call outcome {o:?} (exit code {c:?})"
            )));
        }
    };
    Ok(CallRecord {
        tool: col(row, "tool")?,
        version: get_u32(row, "version")?,
        started_at_ms: col(row, "started_at_ms")?,
        duration_ms: get_u64(row, "duration_ms")?,
        outcome,
        bytes_out: get_u64(row, "bytes_out")?,
    })
}

const SELECT_VERSION: &str = concat!(
    "SELECT ",
    version_columns!(),
    " FROM tool_version v WHERE v.tool = ? AND v.number = ?"
);

pub(crate) async fn fetch_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
) -> Result<Option<ToolVersion>, StoreError> {
    let row = sqlx::query(SELECT_VERSION)
        .bind(name)
        .bind(i64::from(number))
        .fetch_optional(conn)
        .await
        .map_err(error::db)?;
    row.as_ref().map(version_from_row).transpose()
}

async fn tool_exists(conn: &mut SqliteConnection, name: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT 1 FROM tool WHERE name = ?")
        .bind(name)
        .fetch_optional(conn)
        .await
        .map_err(error::db)?;
    Ok(row.is_some())
}

#[async_trait]
impl ToolStore for SqliteStore {
    async fn create_tool(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError> {
        validate_tool_name(name)?;
        let enc = encode_spec(&spec)?;
        let mut tx = self.write().await?;
        if tool_exists(&mut tx, name).await? {
            return Err(StoreError::AlreadyExists {
                name: name.to_owned(),
            });
        }
        let seq = bump(&mut tx).await?;
        let now = now_ms();
        insert_tool(&mut tx, name, now, seq, &enc).await?;
        tx.commit().await.map_err(error::db)?;
        Ok(ToolVersion {
            tool: name.to_owned(),
            number: 1,
            created_at_ms: now,
            spec,
        })
    }

    async fn add_version(&self, name: &str, spec: NewVersion) -> Result<ToolVersion, StoreError> {
        let enc = encode_spec(&spec)?;
        let mut tx = self.write().await?;
        let Some(number) = next_version_number(&mut tx, name).await? else {
            return Err(tool_not_found(name));
        };
        let seq = bump(&mut tx).await?;
        let now = now_ms();
        insert_version(&mut tx, name, number, now, &enc).await?;
        set_current_version(&mut tx, name, number, now, seq).await?;
        tx.commit().await.map_err(error::db)?;
        Ok(ToolVersion {
            tool: name.to_owned(),
            number,
            created_at_ms: now,
            spec,
        })
    }

    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            tool_columns!(),
            ", ",
            version_columns!(),
            " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
             WHERE t.name = ?"
        );
        let row = sqlx::query(Q)
            .bind(name)
            .fetch_optional(&self.reader)
            .await
            .map_err(error::db)?;
        row.as_ref().map(stored_from_row).transpose()
    }

    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            version_columns!(),
            " FROM tool_version v WHERE v.tool = ? ORDER BY v.number"
        );
        // One statement: a tool always has at least one version, so no rows means no tool.
        let rows = sqlx::query(Q)
            .bind(name)
            .fetch_all(&self.reader)
            .await
            .map_err(error::db)?;
        if rows.is_empty() {
            return Err(tool_not_found(name));
        }
        rows.iter().map(version_from_row).collect()
    }

    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        let mut conn = self.reader.acquire().await.map_err(error::db)?;
        fetch_version(&mut conn, name, number)
            .await?
            .ok_or_else(|| version_not_found(name, number))
    }

    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            tool_columns!(),
            ", ",
            version_columns!(),
            " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
             WHERE t.enabled = 1 ORDER BY t.updated_seq DESC"
        );
        // Row by row: with `fetch_all`, 10,000 rows held as SQLite values next to their
        // decoded copies doubled the server's peak memory at start-up.
        let mut rows = sqlx::query(Q).fetch(&self.reader);
        let mut tools = Vec::new();
        while let Some(row) = rows.try_next().await.map_err(error::db)? {
            tools.push(stored_from_row(&row)?);
        }
        Ok(tools)
    }

    async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let seq = bump(&mut tx).await?;
        let done = sqlx::query(
            "UPDATE tool SET enabled = ?, updated_at_ms = ?, updated_seq = ? WHERE name = ?",
        )
        .bind(enabled)
        .bind(now_ms())
        .bind(seq)
        .bind(name)
        .execute(&mut *tx)
        .await
        .map_err(error::db)?;
        if done.rows_affected() == 0 {
            // Dropping the transaction rolls the counter bump back.
            return Err(tool_not_found(name));
        }
        tx.commit().await.map_err(error::db)
    }

    async fn rollback(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        let mut tx = self.write().await?;
        let version = fetch_version(&mut tx, name, number)
            .await?
            .ok_or_else(|| version_not_found(name, number))?;
        let seq = bump(&mut tx).await?;
        set_current_version(&mut tx, name, number, now_ms(), seq).await?;
        tx.commit().await.map_err(error::db)?;
        Ok(version)
    }

    async fn purge(&self, name: &str) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        // Foreign keys cascade from `tool` to its versions and their call log rows; the explicit
        // deletes keep purge complete even on a connection where foreign keys were off.
        sqlx::query("DELETE FROM call_log WHERE tool = ?")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        let done = sqlx::query("DELETE FROM tool WHERE name = ?")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        if done.rows_affected() == 0 {
            return Err(tool_not_found(name));
        }
        sqlx::query("DELETE FROM tool_version WHERE tool = ?")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        bump(&mut tx).await?;
        tx.commit().await.map_err(error::db)
    }

    async fn record_call(&self, call: CallRecord) -> Result<(), StoreError> {
        let duration_ms = checked_i64("duration_ms", call.duration_ms)?;
        let bytes_out = checked_i64("bytes_out", call.bytes_out)?;
        if self.call_log_max_rows == 0 {
            return Ok(());
        }
        let (outcome, exit_code) = encode_outcome(call.outcome);
        let mut tx = self.write().await?;
        let exists = sqlx::query("SELECT 1 FROM tool_version WHERE tool = ? AND number = ?")
            .bind(&call.tool)
            .bind(i64::from(call.version))
            .fetch_optional(&mut *tx)
            .await
            .map_err(error::db)?;
        if exists.is_none() {
            return Err(version_not_found(&call.tool, call.version));
        }
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO call_log (tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out) \
             VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&call.tool)
        .bind(i64::from(call.version))
        .bind(call.started_at_ms)
        .bind(duration_ms)
        .bind(outcome)
        .bind(exit_code)
        .bind(bytes_out)
        .fetch_one(&mut *tx)
        .await
        .map_err(error::db)?;
        // Ids only grow (rows are removed from the old end, or by purge), so the last
        // `max` recorded calls are exactly the ids above `id - max`: an index range, no count.
        sqlx::query("DELETE FROM call_log WHERE id <= ?")
            .bind(id.saturating_sub(self.call_log_max_rows))
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        tx.commit().await.map_err(error::db)
    }

    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError> {
        let mut tx = self.read().await?;
        if !tool_exists(&mut tx, name).await? {
            return Err(tool_not_found(name));
        }
        let rows = sqlx::query(
            "SELECT tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out \
             FROM call_log WHERE tool = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(name)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await
        .map_err(error::db)?;
        rows.iter().map(call_from_row).collect()
    }

    async fn env_ids_in_use(&self) -> Result<HashSet<String>, StoreError> {
        // Tool versions, and the scripts of resource templates and prompts (stored as JSON).
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT env_id FROM tool_version \
             UNION SELECT json_extract(script, '$.env_id') FROM resource_template WHERE script IS NOT NULL \
             UNION SELECT json_extract(completion_script, '$.env_id') FROM resource_template WHERE completion_script IS NOT NULL \
             UNION SELECT json_extract(completion_script, '$.env_id') FROM prompt WHERE completion_script IS NOT NULL",
        )
            .fetch_all(&self.reader)
            .await
            .map_err(error::db)?;
        Ok(ids.into_iter().collect())
    }

    async fn data_version(&self) -> Result<i64, StoreError> {
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'data_version'")
            .fetch_one(&self.reader)
            .await
            .map_err(error::db)
    }

    async fn set_secret(&self, name: &str, value: &str) -> Result<(), StoreError> {
        validate_secret_name(name)?;
        let mut tx = self.write().await?;
        bump(&mut tx).await?;
        sqlx::query(
            "INSERT INTO secret (name, value, updated_at_ms) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
        )
        .bind(name)
        .bind(value)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(error::db)?;
        tx.commit().await.map_err(error::db)
    }

    async fn delete_secret(&self, name: &str) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let done = sqlx::query("DELETE FROM secret WHERE name = ?")
            .bind(name)
            .execute(&mut *tx)
            .await
            .map_err(error::db)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                kind: NameKind::Secret,
                name: name.to_owned(),
                version: None,
            });
        }
        bump(&mut tx).await?;
        tx.commit().await.map_err(error::db)
    }

    async fn secret_names(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar("SELECT name FROM secret ORDER BY name")
            .fetch_all(&self.reader)
            .await
            .map_err(error::db)
    }

    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError> {
        let rows = sqlx::query("SELECT name, updated_at_ms FROM secret ORDER BY name")
            .fetch_all(&self.reader)
            .await
            .map_err(error::db)?;
        rows.iter()
            .map(|row| {
                Ok(SecretInfo {
                    name: col(row, "name")?,
                    updated_at_ms: col(row, "updated_at_ms")?,
                })
            })
            .collect()
    }

    async fn secret_values(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, SecretValue>, StoreError> {
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        // The names travel as one JSON array parameter: a fixed statement for any count.
        let rows = sqlx::query(
            "SELECT name, value FROM secret WHERE name IN (SELECT value FROM json_each(?))",
        )
        .bind(serde_json::Value::from(names.to_vec()).to_string())
        .fetch_all(&self.reader)
        .await
        .map_err(error::db)?;
        rows.iter()
            .map(|row| {
                Ok((
                    col(row, "name")?,
                    SecretValue::new(col::<String>(row, "value")?),
                ))
            })
            .collect()
    }

    async fn backup(&self, dest: &Path) -> Result<(), StoreError> {
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
        let result = vacuum_into(self, &dest_str).await;
        if let Err(e) = result {
            // Best effort: do not leave a half-written copy behind.
            let _ = tokio::fs::remove_file(&dest_abs).await;
            return Err(e);
        }
        sync_file_and_dir(&dest_abs).await.map_err(io)
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

/// `VACUUM INTO` reads one snapshot (a read transaction, so writers go on) and writes a compact
/// copy. It cannot run on the `query_only` readers, and should not occupy the writer, so a file
/// store opens a dedicated connection for it.
async fn vacuum_into(store: &SqliteStore, dest: &str) -> Result<(), StoreError> {
    const Q: &str = "VACUUM INTO ?";
    match &store.file_options {
        Some(options) => {
            let mut conn = SqliteConnection::connect_with(options)
                .await
                .map_err(error::db)?;
            let result = sqlx::query(Q)
                .bind(dest)
                .execute(&mut conn)
                .await
                .map_err(error::db);
            let _ = conn.close().await;
            result.map(drop)
        }
        None => sqlx::query(Q)
            .bind(dest)
            .execute(&store.writer)
            .await
            .map(drop)
            .map_err(error::db),
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
