//! Persistence for script tools: tools that agents forge at run time (Python code plus
//! dependencies), their immutable versions and their approval status, a bounded call log of
//! every tool with hourly statistics, secrets encrypted at rest and granted per tool version, an
//! append-only audit log, kept outputs; and stored resources, resource templates and prompts
//! ([`ContentStore`]).
//!
//! This crate knows nothing of MCP and nothing of running scripts. The server turns a
//! [`StoredTool`] into an MCP tool and hands a [`ToolVersion`] to the script runner; both see
//! only the [`Store`] traits, never SQL.
//!
//! # Model
//! - A **tool** ([`Tool`]) has a unique name, an enabled switch and a current version, which
//!   is always a live one (none while its only versions await approval).
//! - A **version** ([`ToolVersion`]) is immutable once written (a database trigger refuses
//!   updates): description, schemas, annotations, code, dependencies and their lock, the
//!   environment id, limits, the secret names it needs, its example calls, author. Only its
//!   [`VersionState`] changes, along `pending → live | rejected` and `draft → rejected`
//!   ([`ToolStore::approve`], [`ToolStore::reject`]). New code means a new version;
//!   [`ToolStore::rollback`] moves the current pointer among live versions.
//! - **Secrets** are name → value, sealed with a [`Keyring`] (XChaCha20-Poly1305, bound to the
//!   name); listing returns names only. A run of a tool version gets a secret only if an admin
//!   granted it to that exact version ([`SecretStore::granted_secrets`]); values come wrapped in
//!   a [`SecretValue`] whose `Debug` is redacted. The key never enters the database or its
//!   backups. The database file is created with mode 0600 on Unix; `secure_delete` zeroes
//!   deleted values in it, but the WAL may hold old page images until a checkpoint reuses it.
//! - The **audit log** ([`AuditRecord`]) gets one record per authoring or admin action, in the
//!   action's own transaction: every such write takes the [`Actor`] who acts.
//! - The **call log** ([`CallRecord`]: tool and source, when, who, which version, how long,
//!   how it ended, why it failed, an arguments digest, the redacted arguments and result) keeps
//!   the last N calls ([`StoreConfig::call_log_max_rows`]); hourly statistics per tool
//!   ([`HourStats`]) outlive that limit. The server writes it in batches, one transaction each
//!   ([`CallLog::record_calls`]).
//! - **Kept outputs** ([`KeptOutput`]) hold the whole output of a cut result, readable by the
//!   principal that made the call, until they expire.
//!
//! Times are unix milliseconds (UTC) in `i64` fields named `*_at_ms`.
//!
//! # Durability and concurrency
//! [`SqliteStore`] uses WAL with `synchronous=FULL`: every write is one transaction, and a write
//! returns only after its commit is synced, so an acknowledged write survives `kill -9` of the
//! process and power loss. Writes take the write lock up front (`BEGIN IMMEDIATE`) and wait up to
//! the busy timeout for another process holding it. Several processes may open the same file: the
//! server and the CLI do. The same holds for a call-log batch, but nobody waits for one: the
//! server queues its calls' rows and commits them a batch at a time, off the answers' path, so
//! a `kill -9` loses the rows not yet committed (`omniforge-server`'s call-log writer says how
//! many at most). Every other write (tools, versions, secrets, grants, tasks, content) is
//! acknowledged only once durable.
//!
//! # Change feed
//! Every committed change to a tool, secret, grant, resource, resource template, prompt or task gets
//! the next number (`seq`) of one change counter and a row naming its [`ChangeKind`] and key
//! (tool name, URI, URI template, prompt name, secret name), in the writer's own transaction. A
//! reader remembers the `seq` it has seen and asks [`ToolStore::changes_since`] what came after
//! it: the new high-water mark and the changed keys, one per key, or, for a reader further
//! behind than the store keeps ([`StoreConfig::change_log_max_rows`]), the kinds to reload whole
//! ([`ChangeSet::reload`]). Numbers follow commit order, so polling by `seq` misses nothing,
//! whichever process wrote. [`ToolStore::wait_for_change`] only wakes a reader (at once for
//! this instance's own writes, else after its `max_wait`: the polling interval); it never says
//! what changed, so a backend with notifications (PostgreSQL `LISTEN`) can feed the same
//! interface without any risk of losing a change. [`ToolStore::current_seq`] is the cheap
//! high-water read (one primary-key read). Call log, audit, kept output and example result
//! writes are not changes, so that tool calls do not make servers reload; neither is a write
//! that changes nothing. (SQLite's `PRAGMA data_version` was not used: it is per connection,
//! ignores the connection's own writes, and a pool hands out a different connection each time.)
//!
//! # Layout
//! - [`store`] holds the traits, the API boundary, one file per family: [`ToolStore`],
//!   [`SecretStore`], [`CallLog`], [`AuditLog`], [`OutputStore`], [`TaskStore`], [`ContentStore`], and
//!   [`Store`], all of them. They name only model types and [`StoreError`].
//! - [`model`] holds the plain data types and the name rules.
//! - Backend-neutral logic every backend shares: [`keyring`] (keys, the key file, sealing
//!   secrets), [`digest`] (canonical JSON and the SHA-256 of definitions and arguments),
//!   [`stats`] (the duration histogram), and the crate-private checks every write applies
//!   (`validate.rs`) and the clock (`clock.rs`).
//! - [`error`] holds [`StoreError`].
//! - `engine/` holds [`Engine`], the one type that implements every trait, and its SQL, once
//!   for both backends, one file per table family; `engine/exec.rs` binds and decodes for both
//!   `sqlx` drivers. Text with a NUL character is refused there, on both backends alike.
//! - [`sqlite`] holds [`SqliteStore`], which opens an [`Engine`] on SQLite (pools, `BEGIN
//!   IMMEDIATE`, migrations, `VACUUM INTO` backups), and [`postgres`] holds [`PgStore`], which
//!   opens one on PostgreSQL (pool, the change counter's row lock, advisory locks, migrations,
//!   `LISTEN`/`NOTIFY`, backups as SQLite files): what differs per backend, behind the engine's
//!   crate-private `Db` trait.
//! - [`config`] holds [`StoreConfig`]; [`open`](mod@open) the store URLs; [`dump`] the
//!   [`Backend`] trait and [`copy_store`], the whole-store copy `omniforge migrate` uses.
//! - `migrations/` (SQLite) and `migrations-postgres/` hold the schemas, embedded at compile
//!   time with `sqlx::migrate!` and applied when a store opens (SQLite: inside one `BEGIN
//!   IMMEDIATE` transaction, with foreign keys checked before it commits; PostgreSQL: in one
//!   transaction under an advisory lock). A database migrated by a newer build is refused.
//!
//! # Example
//! ```
//! # async fn demo() -> Result<(), omniforge_store::StoreError> {
//! use omniforge_store::{
//!     Actor, Annotations, Limits, NewStatus, NewVersion, Runtime, SqliteStore, ToolStore,
//! };
//!
//! let store = SqliteStore::open_in_memory().await?;
//! let spec = NewVersion {
//!     title: None,
//!     description: "Says hello".into(),
//!     input_schema: serde_json::json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
//!     output_schema: None,
//!     annotations: Annotations { read_only_hint: Some(true), ..Annotations::default() },
//!     runtime: Runtime::Python,
//!     code: "print('hello')".into(),
//!     dependencies: vec![],
//!     limits: Limits { timeout_ms: 10_000, memory_bytes: 256 << 20, network: false },
//!     lock: String::new(),
//!     env_id: "env-empty".into(),
//!     secrets: vec![],
//!     author: "stdio".into(),
//!     examples: vec![],
//!     execution: Default::default(),
//! };
//! let v1 = store.create_tool(&Actor::new("stdio"), "hello", spec, NewStatus::Live).await?;
//! assert_eq!(v1.number, 1);
//! assert_eq!(store.list_enabled().await?.len(), 1);
//! # Ok(())
//! # }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod clock;
pub mod config;
pub mod digest;
pub mod dump;
mod engine;
pub mod error;
pub mod keyring;
pub mod model;
pub mod open;
pub mod postgres;
pub mod sqlite;
pub mod stats;
pub mod store;
mod validate;

pub use config::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_LOG_MAX_ROWS, DEFAULT_CALL_STATS_MAX_AGE,
    DEFAULT_CHANGE_LOG_MAX_ROWS, DEFAULT_MAX_READERS, StoreConfig,
};
pub use dump::{
    Backend, CopyReport, DumpedExampleResult, DumpedHour, DumpedSecret, DumpedTool, DumpedValue,
    StoreDump, copy_store,
};
pub use engine::Engine;
pub use error::{DatabaseError, NameKind, StoreError};
pub use keyring::{KEY_BYTES, KeyMaterial, Keyring, KeyringError};
pub use model::{
    Actor, Annotations, ArgumentsDigest, AuditAction, AuditFilter, AuditObject, AuditRecord,
    CallFilter, CallOutcome, CallRecord, CallSource, CapturedText, Change, ChangeKind, ChangeSet,
    ExampleResult, ExampleTrigger, Execution, Grant, HourStats, ImportBatch, ImportReport,
    JsonObject, KeptOutput, Limits, LoggedCall, MAX_CALL_ERROR_BYTES, MAX_CALL_TEXT_BYTES,
    MAX_CALL_TOOL_BYTES, MAX_EXAMPLE_TEXT_BYTES, MAX_KEPT_STREAM_BYTES, MAX_NAME_LEN,
    MAX_PRINCIPAL_BYTES, MAX_REPLICA_ID_LEN, MAX_RUN_ID_LEN, MAX_STATUS_REASON_BYTES,
    MAX_TASK_ID_LEN, MAX_TASK_MESSAGE_BYTES, NewKeptOutput, NewPrompt, NewResource, NewStatus,
    NewTask, NewTemplate, NewVersion, OutputReader, PromptArgumentSpec, ResourceBody, ResourceInfo,
    RowState, Runtime, STORE_PRINCIPAL, ScriptSpec, SecretInfo, SecretRequest, SecretValue,
    StoredPrompt, StoredResource, StoredTask, StoredTemplate, StoredTool, TaskEnd, TaskStart,
    TaskStatus, TaskSupport, TemplateBody, Tool, ToolActivity, ToolVersion, VersionState,
    VersionStatus, WriteMode, validate_principal, validate_run_id, validate_secret_name,
    validate_task_id, validate_tool_name,
};
pub use open::{StoreUrl, open};
pub use postgres::{LISTENER_APPLICATION_NAME, PgEnv, PgStore};
pub use sqlite::SqliteStore;
pub use store::{
    AuditLog, CallLog, ContentStore, OutputStore, SecretStore, Store, TaskStore, ToolStore,
};
