//! Applying embedded migrations, for both backends: the loop of sqlx's `Migrator::run`, spelled
//! out with the public `Migrate` trait on a connection the backend has already put in a
//! transaction under its lock (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's advisory lock), so that
//! concurrent openers apply each migration once and a failure leaves nothing half-applied.
//! (`run` itself takes a session lock that an error leaves held on a pooled PostgreSQL
//! connection, and its `Acquire` bound makes the future not `Send`.)

use std::collections::HashMap;

use sqlx::migrate::{Migrate, MigrateError, Migrator};

use super::exec::migrate_error;
use crate::error::StoreError;

/// The table where sqlx records applied migrations (its default name).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// Applies `migrator`'s pending migrations on `conn`; returns whether it applied any.
///
/// # Errors
/// [`StoreError::Database`] for a dirty database, a migration this build does not know (a
/// newer OmniForge migrated it), a changed migration, or a failing one.
pub(crate) async fn apply_pending<C>(
    conn: &mut C,
    migrator: &Migrator,
    backend: &'static str,
) -> Result<bool, StoreError>
where
    C: Migrate + Send + ?Sized,
{
    conn.ensure_migrations_table(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?;
    if let Some(version) = conn
        .dirty_version(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?
    {
        return Err(migrate_error(MigrateError::Dirty(version)));
    }
    let applied: HashMap<i64, Vec<u8>> = conn
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await
        .map_err(migrate_error)?
        .into_iter()
        .map(|m| (m.version, m.checksum.into_owned()))
        .collect();
    // A migration this build does not know: a newer OmniForge wrote this database.
    if let Some(&unknown) = applied.keys().find(|v| !migrator.version_exists(**v)) {
        return Err(migrate_error(MigrateError::VersionMissing(unknown)));
    }
    let mut applied_any = false;
    for migration in migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied.get(&migration.version) {
            Some(checksum) if *checksum != *migration.checksum => {
                return Err(migrate_error(MigrateError::VersionMismatch(
                    migration.version,
                )));
            }
            Some(_) => {}
            None => {
                tracing::debug!(
                    backend,
                    version = migration.version,
                    description = %migration.description,
                    "applying store migration"
                );
                conn.apply(MIGRATIONS_TABLE, migration)
                    .await
                    .map_err(migrate_error)?;
                applied_any = true;
            }
        }
    }
    Ok(applied_any)
}
