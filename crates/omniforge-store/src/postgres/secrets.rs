//! Secrets on PostgreSQL: the `secret` table (name → the value's UTF-8 bytes, `BYTEA`, since
//! PostgreSQL text cannot hold a NUL character). Setting or deleting one is a change of the feed
//! keyed by its name, never its value.

use std::collections::HashMap;

use sqlx::postgres::PgRow;

use super::PgStore;
use super::rows::{col, corrupt, db, now_ms};
use crate::error::{NameKind, StoreError};
use crate::model::{ChangeKind, SecretInfo, SecretValue, validate_secret_name};

/// [`ToolStore::set_secret`](crate::ToolStore::set_secret).
pub(super) async fn set(store: &PgStore, name: &str, value: &str) -> Result<(), StoreError> {
    validate_secret_name(name)?;
    let mut w = store.write().await?;
    w.change(ChangeKind::Secret, name).await?;
    sqlx::query(
        "INSERT INTO secret (name, value, updated_at_ms) VALUES ($1, $2, $3) \
         ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
    )
    .bind(name)
    .bind(value.as_bytes())
    .bind(now_ms())
    .execute(w.conn())
    .await
    .map_err(db)?;
    w.commit().await
}

/// [`ToolStore::delete_secret`](crate::ToolStore::delete_secret).
pub(super) async fn delete(store: &PgStore, name: &str) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let done = sqlx::query("DELETE FROM secret WHERE name = $1")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound {
            kind: NameKind::Secret,
            name: name.to_owned(),
            version: None,
        });
    }
    w.change(ChangeKind::Secret, name).await?;
    w.commit().await
}

/// [`ToolStore::secret_names`](crate::ToolStore::secret_names).
pub(super) async fn names(store: &PgStore) -> Result<Vec<String>, StoreError> {
    sqlx::query_scalar("SELECT name FROM secret ORDER BY name COLLATE \"C\"")
        .fetch_all(&store.pool)
        .await
        .map_err(db)
}

/// [`ToolStore::secrets`](crate::ToolStore::secrets).
pub(super) async fn infos(store: &PgStore) -> Result<Vec<SecretInfo>, StoreError> {
    let rows = sqlx::query("SELECT name, updated_at_ms FROM secret ORDER BY name COLLATE \"C\"")
        .fetch_all(&store.pool)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(SecretInfo {
                name: col(row, "name")?,
                updated_at_ms: col(row, "updated_at_ms")?,
            })
        })
        .collect()
}

/// [`ToolStore::secret_values`](crate::ToolStore::secret_values).
pub(super) async fn values(
    store: &PgStore,
    names: &[String],
) -> Result<HashMap<String, SecretValue>, StoreError> {
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    // The names travel as one array parameter: a fixed statement for any count.
    let rows = sqlx::query("SELECT name, value FROM secret WHERE name = ANY($1)")
        .bind(names)
        .fetch_all(&store.pool)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| Ok((col(row, "name")?, secret_value(row)?)))
        .collect()
}

/// The `value` column as a [`SecretValue`].
pub(super) fn secret_value(row: &PgRow) -> Result<SecretValue, StoreError> {
    let bytes: Vec<u8> = col(row, "value")?;
    String::from_utf8(bytes)
        .map(SecretValue::new)
        .map_err(|_| corrupt("secret value is not UTF-8"))
}
