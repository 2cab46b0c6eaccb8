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
//! - The **call log** ([`CallRecord`]) keeps the last N calls
//!   ([`StoreConfig::call_log_max_rows`]), pruned in the same transaction as each insert.
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
//! server and the CLI do. [`ToolStore::data_version`] is a counter in the `meta` table that every
//! change to tools, versions or secrets increments inside its own transaction, so the server can
//! poll it (one primary-key read) to notice the CLI's changes. (SQLite's `PRAGMA data_version`
//! was not used: it is per connection, ignores the connection's own writes, and a pool hands out
//! a different connection each time.) Call log writes do not increment it, so that tool calls do
//! not trigger catalog reloads.
//!
//! # Layout
//! - [`store`] holds the [`ToolStore`] trait, the API boundary.
//! - [`content`] holds the [`ContentStore`] trait (resources, resource templates, prompts, pack
//!   imports) and its SQLite implementation.
//! - [`model`] holds the data types and the name rules ([`validate_tool_name`],
//!   [`validate_secret_name`]).
//! - [`sqlite`] holds [`SqliteStore`] and its [`StoreConfig`]; the only module with SQL.
//! - [`error`] holds [`StoreError`].
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

pub mod content;
pub mod error;
pub mod model;
pub mod sqlite;
pub mod store;

pub use content::{
    ContentStore, ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate,
    PromptArgumentSpec, ResourceBody, ResourceInfo, RowState, ScriptSpec, StoredPrompt,
    StoredResource, StoredTemplate, TemplateBody, WriteMode,
};
pub use error::{DatabaseError, NameKind, StoreError};
pub use model::{
    Annotations, CallOutcome, CallRecord, JsonObject, Limits, MAX_NAME_LEN, NewVersion, Runtime,
    SecretInfo, SecretValue, StoredTool, Tool, ToolVersion, validate_secret_name,
    validate_tool_name,
};
pub use sqlite::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_LOG_MAX_ROWS, DEFAULT_MAX_READERS, SqliteStore, StoreConfig,
};
pub use store::ToolStore;
