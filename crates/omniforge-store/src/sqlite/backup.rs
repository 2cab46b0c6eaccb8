//! Backups on SQLite: `VACUUM INTO` a new private file, synced. The copy holds secrets sealed
//! (and any not yet encrypted, see `secrets.rs`), never the key.

use std::path::Path;

use sqlx::Connection as _;
use sqlx::sqlite::SqliteConnection;

use super::{SqliteDb, private_create_new};
use crate::engine::exec::db;
use crate::error::StoreError;
use crate::validate::invalid;

/// [`ToolStore::backup`]: creates `dest` (0600, failing if it exists), fills it with `VACUUM
/// INTO`, syncs it and its directory; removes it again on failure.
pub(super) async fn backup(store: &SqliteDb, dest: &Path) -> Result<(), StoreError> {
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
    let result = vacuum_into(store, &dest_str).await;
    if let Err(e) = result {
        // Best effort: do not leave a half-written copy behind.
        let _ = tokio::fs::remove_file(&dest_abs).await;
        return Err(e);
    }
    sync_file_and_dir(&dest_abs).await.map_err(io)
}

/// `VACUUM INTO` reads one snapshot (a read transaction, so writers go on) and writes a compact
/// copy. It cannot run on the `query_only` readers, and should not occupy the writer, so a file
/// store opens a dedicated connection for it.
async fn vacuum_into(store: &SqliteDb, dest: &str) -> Result<(), StoreError> {
    const Q: &str = "VACUUM INTO ?";
    match &store.file_options {
        Some(options) => {
            let mut conn = SqliteConnection::connect_with(options).await.map_err(db)?;
            let result = sqlx::query(Q)
                .bind(dest)
                .execute(&mut conn)
                .await
                .map_err(db);
            let _ = conn.close().await;
            result.map(drop)
        }
        None => sqlx::query(Q)
            .bind(dest)
            .execute(&store.writer)
            .await
            .map(drop)
            .map_err(db),
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
