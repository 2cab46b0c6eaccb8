//! Schema migrations on SQLite: the embedded `migrations/` applied in one transaction when a
//! store opens.

use sqlx::sqlite::{SqliteConnection, SqlitePool};
use sqlx::{Connection as _, Row as _};

use crate::engine::exec::db;
use crate::engine::migrate::apply_pending;
use crate::error::StoreError;

/// The schema migrations, embedded at compile time from `migrations/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs pending migrations inside one `BEGIN IMMEDIATE` transaction, so that two processes
/// opening a new file at once cannot both apply the same migration: the second waits, then
/// finds it applied. (sqlx nests each migration's own transaction as a savepoint.)
///
/// Foreign key enforcement is off on the migrating connection (it can only be switched outside
/// a transaction), so that a migration can rebuild a table that others reference, as SQLite's
/// documented procedure for schema changes does: with enforcement on, dropping the old table
/// would cascade its deletes into the referencing tables. Before committing, when a migration
/// was applied, `PRAGMA foreign_key_check` must find no violation, or nothing is committed.
/// Enforcement is switched back on afterwards (the connection is closed if that fails).
/// The loop itself is the engine's (`engine/migrate.rs`), shared with PostgreSQL.
pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await.map_err(db)?;
    sqlx::query("PRAGMA foreign_keys = OFF")
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let result = migrate_on(&mut conn).await;
    let restored = sqlx::query("PRAGMA foreign_keys = ON")
        .execute(&mut *conn)
        .await;
    if restored.is_err() {
        // Never hand a connection without foreign keys back to the pool.
        conn.close_on_drop();
    }
    result?;
    restored.map(drop).map_err(db)
}

async fn migrate_on(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
    let conn: &mut SqliteConnection = &mut tx;
    let applied_any = apply_pending(conn, &MIGRATOR, "sqlite").await?;
    if applied_any {
        let violations = sqlx::query("PRAGMA foreign_key_check")
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
        if let Some(first) = violations.first() {
            let table: String = first.try_get(0).unwrap_or_default();
            return Err(crate::validate::corrupt(format!(
                "after migrating, {} rows break a foreign key (the first in table {table})",
                violations.len()
            )));
        }
    }
    tx.commit().await.map_err(db)
}
