//! Persistence for script tools: tools that agents forge at run time (Python code plus
//! dependencies), their immutable versions, a bounded call log, and secrets; and for stored
//! resources, resource templates and prompts ([`ContentStore`]).
//!
//! This crate knows nothing of MCP and nothing of running scripts. The server turns a
//! [`StoredTool`] into an MCP tool and hands a [`ToolVersion`] to the script runner; both see
//! only the [`ToolStore`] trait, never SQL.
//!
//! # Model
//! - A **tool** ([`Tool`]) has a unique name, an enabled switch and a current version.
//! - A **version** ([`ToolVersion`]) is immutable once written (a database trigger refuses
//!   updates): description, schemas, annotations, code, dependencies and their lock, the
//!   environment id, limits, the secret names it needs, author. New code means a new version;
//!   [`ToolStore::rollback`] moves the current pointer back (or forward).
//! - The **call log** ([`CallRecord`]: when, who, which version, how long, how it ended, why it
//!   failed) keeps the last N calls ([`StoreConfig::call_log_max_rows`]), pruned in the same
//!   transaction as each insert; [`ToolStore::recent_calls`] reads a tool's history.
//! - **Secrets** are name → value; listing returns names only, and values come out only through
//!   [`ToolStore::secret_values`], wrapped in a [`SecretValue`] whose `Debug` is redacted. They
//!   are stored in plain text in the database file, which is created with mode 0600 on Unix;
//!   backups contain them too. `secure_delete` zeroes deleted values in the database file, but
//!   the WAL may hold old page images until a checkpoint reuses it.
//!
//! Times are unix milliseconds (UTC) in `i64` fields named `*_at_ms`.
//!
//! # Durability and concurrency
//! [`SqliteStore`] uses WAL with `synchronous=FULL`: every write is one transaction, and a write
//! returns only after its commit is synced, so an acknowledged write survives `kill -9` of the
//! process and power loss. Writes take the write lock up front (`BEGIN IMMEDIATE`) and wait up to
//! the busy timeout for another process holding it. Several processes may open the same file: the
//! server and the CLI do.
//!
//! # Change feed
//! Every committed change to a tool, secret, resource, resource template or prompt gets the next
//! number (`seq`) of one change counter and a row naming its [`ChangeKind`] and key (tool name,
//! URI, URI template, prompt name, secret name), in the writer's own transaction. A reader
//! remembers the `seq` it has seen and asks [`ToolStore::changes_since`] what came after it:
//! the new high-water mark and the changed keys, one per key, or, for a reader further behind
//! than the store keeps ([`StoreConfig::change_log_max_rows`]), the kinds to reload whole
//! ([`ChangeSet::reload`]). Numbers follow commit order, so polling by `seq` misses nothing,
//! whichever process wrote. [`ToolStore::wait_for_change`] only wakes a reader (at once for
//! this instance's own writes, else after its `max_wait`: the polling interval); it never says
//! what changed, so a backend with notifications (PostgreSQL `LISTEN`) can feed the same
//! interface without any risk of losing a change. [`ToolStore::current_seq`] is the cheap
//! high-water read (one primary-key read). Call log writes are not changes, so that tool calls
//! do not make servers reload. (SQLite's `PRAGMA data_version` was not used: it is per
//! connection, ignores the connection's own writes, and a pool hands out a different connection
//! each time.)
//!
//! # Layout
//! - [`store`] holds the traits, the API boundary: [`ToolStore`] (tools, versions, the call
//!   log, secrets, the change feed, backups) and [`ContentStore`] (resources, resource
//!   templates, prompts, pack imports). They name only model types and [`StoreError`].
//! - [`model`] holds the plain data types and the name rules ([`validate_tool_name`],
//!   [`validate_secret_name`]).
//! - [`error`] holds [`StoreError`].
//! - [`sqlite`] holds [`SqliteStore`] and its [`StoreConfig`], the only module with SQL: its
//!   `mod.rs` opens pools, migrates, runs transactions and backups, and one file per table
//!   family implements the traits' methods (`tools.rs`, `content.rs`, `calls.rs`,
//!   `secrets.rs`, `changes.rs`). A PostgreSQL backend is meant to sit beside it.
//! - `migrations/` holds the schema, embedded at compile time with `sqlx::migrate!` and applied when a
//!   store opens (inside one `BEGIN IMMEDIATE` transaction, so migrations that need to run
//!   outside a transaction are not supported). A database migrated by a newer build is refused.
//!
//! # Example
//! ```
//! # async fn demo() -> Result<(), omniforge_store::StoreError> {
//! use omniforge_store::{Annotations, Limits, NewVersion, Runtime, SqliteStore, ToolStore};
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
//! };
//! let v1 = store.create_tool("hello", spec).await?;
//! assert_eq!(v1.number, 1);
//! assert_eq!(store.list_enabled().await?.len(), 1);
//! # Ok(())
//! # }
//! # tokio::runtime::Runtime::new().unwrap().block_on(demo()).unwrap();
//! ```

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod error;
pub mod keyring;
pub mod model;
pub mod sqlite;
pub mod store;

pub use error::{DatabaseError, NameKind, StoreError};
pub use keyring::{KEY_BYTES, Keyring, KeyringError};
pub use model::{
    Annotations, CallOutcome, CallRecord, Change, ChangeKind, ChangeSet, ImportBatch, ImportReport,
    JsonObject, Limits, MAX_CALL_ERROR_BYTES, MAX_NAME_LEN, NewPrompt, NewResource, NewTemplate,
    NewVersion, PromptArgumentSpec, ResourceBody, ResourceInfo, RowState, Runtime, ScriptSpec,
    SecretInfo, SecretValue, StoredPrompt, StoredResource, StoredTemplate, StoredTool,
    TemplateBody, Tool, ToolVersion, WriteMode, validate_secret_name, validate_tool_name,
};
pub use sqlite::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_LOG_MAX_ROWS, DEFAULT_CHANGE_LOG_MAX_ROWS,
    DEFAULT_MAX_READERS, SqliteStore, StoreConfig,
};
pub use store::{ContentStore, ToolStore};
