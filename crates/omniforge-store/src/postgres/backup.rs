//! [`ToolStore::backup`](crate::ToolStore::backup) of a PostgreSQL store: the rows of one
//! snapshot copied into a new SQLite file (the format every backup has). Secret values are
//! copied sealed, as stored (each is bound to its name and key id, not to the database), so
//! the same key file opens the backup and making it needs no key: like a SQLite backup, it
//! never holds the key.

use std::path::Path;

use crate::config::StoreConfig;
use crate::dump::Backend as _;
use crate::engine::Engine;
use crate::engine::dump::{SecretsAs, export};
use crate::error::StoreError;
use crate::sqlite::SqliteStore;

/// Writes the backup to `dest` (mode 0600, synced at its commit), removed again on failure.
pub(super) async fn backup(store: &Engine, dest: &Path) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: dest.to_owned(),
        source,
    };
    if tokio::fs::try_exists(dest).await.map_err(io)? {
        return Err(StoreError::Conflict {
            reason: format!("backup destination {} exists", dest.display()),
        });
    }
    let dump = export(store, SecretsAs::Stored).await?;
    // The keyring seals only plain-text values an older build left (none without one).
    let config = StoreConfig {
        keyring: store.keyring.clone(),
        ..StoreConfig::defaults()
    };
    let copy = SqliteStore::open_with(dest, &config).await?;
    let result = copy.import_dump(&dump).await;
    crate::ToolStore::close(&copy).await;
    if result.is_err() {
        // Best effort: do not leave a half-written copy behind.
        for suffix in ["", "-wal", "-shm"] {
            let mut path = dest.as_os_str().to_owned();
            path.push(suffix);
            let _ = tokio::fs::remove_file(path).await;
        }
    }
    result
}
