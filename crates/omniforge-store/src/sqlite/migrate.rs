//! Schema migrations on SQLite: the embedded `migrations/` applied in one transaction when a
//! store opens.

use std::collections::HashMap;

use sqlx::sqlite::{SqliteConnection, SqlitePool};
use sqlx::{Connection as _, Row as _};

use super::rows::{self, db};
use crate::error::StoreError;

/// The schema migrations, embedded at compile time from `migrations/`.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The table where sqlx records applied migrations (its default name).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

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
///
/// This is `Migrator::run` spelled out with the public `Migrate` trait, because `run`'s
/// `Acquire` bound makes the future not `Send` (sqlx's "not general enough" error), and the
/// store must open inside `tokio::spawn`ed tasks.
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
    use sqlx::migrate::{Migrate, MigrateError};

    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await.map_err(db)?;
    let conn: &mut SqliteConnection = &mut tx;
    conn.ensure_migrations_table(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?;
    if let Some(version) = conn
        .dirty_version(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?
    {
        return Err(rows::migrate(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await
        .map_err(rows::migrate)?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    // A migration this build does not know: a newer OmniForge wrote this database.
    if let Some(&unknown) = applied.keys().find(|v| !MIGRATOR.version_exists(**v)) {
        return Err(rows::migrate(MigrateError::VersionMissing(unknown)));
    }
    let mut applied_any = false;
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != *migration.checksum => {
                return Err(rows::migrate(MigrateError::VersionMismatch(
                    migration.version,
                )));
            }
            Some(_) => {}
            None => {
                tracing::info!(version = migration.version, description = %migration.description, "applying store migration");
                conn.apply(MIGRATIONS_TABLE, migration)
                    .await
                    .map_err(rows::migrate)?;
                applied_any = true;
            }
        }
    }
    if applied_any {
        let violations = sqlx::query("PRAGMA foreign_key_check")
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
        if let Some(first) = violations.first() {
            let table: String = first.try_get(0).unwrap_or_default();
            return Err(rows::corrupt(format!(
                "after migrating, {} rows break a foreign key (the first in table {table})",
                violations.len()
            )));
        }
    }
    tx.commit().await.map_err(db)
}
