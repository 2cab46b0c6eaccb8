//! [`StoreError`], the one error type of this crate, and the opaque [`DatabaseError`] it wraps.

use std::fmt;
use std::path::PathBuf;

/// What kind of name an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NameKind {
    /// A tool name: 1 to 64 characters from `[a-zA-Z0-9_-]`.
    Tool,
    /// A secret name: 1 to 64 characters from `[a-zA-Z0-9_]`, not starting with a digit (so it
    /// can be an environment variable name).
    Secret,
    /// A stored resource, named by its URI.
    Resource,
    /// A stored resource template, named by its URI template.
    ResourceTemplate,
    /// A stored prompt: 1 to 64 characters from `[a-zA-Z0-9_-]`, like a tool name.
    Prompt,
    /// A grant of a secret to one tool version, named `SECRET for TOOL` (with its version).
    Grant,
    /// A kept output, named by its run id.
    Output,
    /// A durable task, named by its task id.
    Task,
}

impl NameKind {
    /// The rule a valid name of this kind follows, for error messages.
    pub fn rule(self) -> &'static str {
        match self {
            NameKind::Tool => "1 to 64 characters from [a-zA-Z0-9_-]",
            NameKind::Secret => "1 to 64 characters from [a-zA-Z0-9_], not starting with a digit",
            NameKind::Resource => "an absolute URI (scheme:...) of at most 4096 bytes",
            NameKind::ResourceTemplate => "an RFC 6570 URI template of at most 4096 bytes",
            NameKind::Prompt => "1 to 64 characters from [a-zA-Z0-9_-]",
            NameKind::Grant => "a secret name, a tool name and a version",
            NameKind::Output => "1 to 128 characters from [a-zA-Z0-9_.:-]",
            NameKind::Task => "1 to 128 characters from [a-zA-Z0-9_.:-]",
        }
    }
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Tool => "tool",
            NameKind::Secret => "secret",
            NameKind::Resource => "resource",
            NameKind::ResourceTemplate => "resource template",
            NameKind::Prompt => "prompt",
            NameKind::Grant => "secret grant",
            NameKind::Output => "kept output",
            NameKind::Task => "task",
        })
    }
}

/// Everything that can go wrong in a store operation.
///
/// Callers usually match [`NotFound`](StoreError::NotFound),
/// [`AlreadyExists`](StoreError::AlreadyExists) and the validation variants, which a client
/// caused, and treat the rest as internal faults (log them, answer with a generic message).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The tool, the version of a tool, or the secret does not exist.
    #[error("{kind} {name:?}{} not found", version.map(|n| format!(" version {n}")).unwrap_or_default())]
    NotFound {
        /// Whether a tool (or one of its versions) or a secret is missing.
        kind: NameKind,
        /// The name that was looked up.
        name: String,
        /// The version number, when a specific version of an existing or missing tool was asked for.
        version: Option<u32>,
    },
    /// A tool with this name exists already (enabled or not).
    #[error("tool {name:?} already exists")]
    AlreadyExists {
        /// The tool name.
        name: String,
    },
    /// A resource, resource template or prompt with this key exists already.
    #[error("{kind} {name:?} already exists")]
    Duplicate {
        /// What kind of thing.
        kind: NameKind,
        /// Its key: URI, URI template or name.
        name: String,
    },
    /// A tool or secret name breaks its rule (see [`NameKind::rule`]).
    #[error("invalid {kind} name {name:?}: expected {}", kind.rule())]
    InvalidName {
        /// Which rule applies.
        kind: NameKind,
        /// The rejected name.
        name: String,
    },
    /// A field of a [`NewVersion`](crate::NewVersion), a [`CallRecord`](crate::CallRecord) or a
    /// setting is out of range (for example a number that does not fit a signed 64-bit
    /// database integer).
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The field, as `dependencies[2]` or `limits.memory_bytes`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The operation contradicts the current state: a uniqueness constraint failed (another
    /// writer got there first), or a backup destination exists already.
    #[error("conflict: {reason}")]
    Conflict {
        /// What conflicted.
        reason: String,
    },
    /// A stored row cannot be read back (edited by hand, or written by a newer OmniForge).
    #[error("corrupt store row: {reason}")]
    Corrupt {
        /// What could not be decoded.
        reason: String,
    },
    /// A file operation outside SQLite failed (creating the database or backup file).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store was opened without a secret keyring
    /// ([`StoreConfig::keyring`](crate::StoreConfig::keyring)), so secret values can be neither
    /// written nor read. Names, grants and deletions still work.
    #[error("secret values are unavailable: this store has no secret key")]
    NoSecretKey,
    /// A stored secret is encrypted under a key the keyring lacks (the key file of another
    /// replica, or an old key removed too early).
    #[error("secret {name:?} is encrypted with key {key_id:?}, which is not in the keyring")]
    SecretKeyMissing {
        /// The secret's name.
        name: String,
        /// The id stored with its value.
        key_id: String,
    },
    /// A stored secret failed to decrypt: its sealed bytes were altered, or copied from another
    /// secret's row or key id.
    #[error(
        "secret {name:?} cannot be decrypted: its stored value was altered or belongs elsewhere"
    )]
    SecretUnreadable {
        /// The secret's name.
        name: String,
    },
    /// Encrypting failed (the operating system's random source failed).
    #[error("encrypting a secret: {reason}")]
    Crypto {
        /// What failed.
        reason: String,
    },
    /// The database failed: the file cannot be opened or the server reached, the write lock was not granted within
    /// the busy timeout, the disk is full, a migration failed, the store was closed.
    #[error("database error: {0}")]
    Database(#[source] DatabaseError),
}

/// An error from the database layer, kept opaque so that callers need not depend on `sqlx`.
///
/// Its `Display` is the underlying message; [`std::error::Error::source`] reaches the cause.
#[derive(Debug)]
pub struct DatabaseError(Inner);

#[derive(Debug)]
enum Inner {
    Sqlx(sqlx::Error),
    Migrate(sqlx::migrate::MigrateError),
}

impl DatabaseError {
    /// Wraps an error of `sqlx` (any backend).
    pub(crate) fn sqlx(e: sqlx::Error) -> DatabaseError {
        DatabaseError(Inner::Sqlx(e))
    }

    /// Wraps a migration error of `sqlx`.
    pub(crate) fn migrate(e: sqlx::migrate::MigrateError) -> DatabaseError {
        DatabaseError(Inner::Migrate(e))
    }

    /// True if the database gave up waiting for a lock another writer held, or refused a
    /// transaction that raced with another, so that retrying later may succeed: SQLite's
    /// `SQLITE_BUSY` after the busy timeout; PostgreSQL's `lock_not_available` (55P03, the
    /// `lock_timeout` ran out), `serialization_failure` (40001) and `deadlock_detected`
    /// (40P01); or no connection of the pool came free in time.
    pub fn is_busy(&self) -> bool {
        match &self.0 {
            Inner::Sqlx(sqlx::Error::Database(e)) => {
                let code = e.code();
                if e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .is_some()
                {
                    matches!(code.as_deref(), Some("55P03" | "40001" | "40P01"))
                } else {
                    // SQLITE_BUSY is 5; extended codes (BUSY_SNAPSHOT, ...) keep it in the
                    // low byte.
                    code.and_then(|c| c.parse::<i32>().ok())
                        .is_some_and(|c| c & 0xff == 5)
                }
            }
            Inner::Sqlx(sqlx::Error::PoolTimedOut) => true,
            _ => false,
        }
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Inner::Sqlx(e) => e.fmt(f),
            Inner::Migrate(e) => write!(f, "migration: {e}"),
        }
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            Inner::Sqlx(e) => e.source(),
            Inner::Migrate(e) => e.source(),
        }
    }
}
