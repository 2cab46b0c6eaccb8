//! Secrets on SQLite: the `secret` table (name → value, in plain text; see the crate docs).
//! Setting or deleting one is a change of the feed keyed by its name, never its value.

use std::collections::HashMap;

use super::SqliteStore;
use super::rows::{col, db, now_ms};
use crate::error::{NameKind, StoreError};
use crate::model::{ChangeKind, SecretInfo, SecretValue, validate_secret_name};

/// [`ToolStore::set_secret`](crate::ToolStore::set_secret).
pub(super) async fn set(store: &SqliteStore, name: &str, value: &str) -> Result<(), StoreError> {
    validate_secret_name(name)?;
    let mut w = store.write().await?;
    w.change(ChangeKind::Secret, name).await?;
    sqlx::query(
        "INSERT INTO secret (name, value, updated_at_ms) VALUES (?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at_ms = excluded.updated_at_ms",
    )
    .bind(name)
    .bind(value)
    .bind(now_ms())
    .execute(w.conn())
    .await
    .map_err(db)?;
    w.commit().await
}

/// [`ToolStore::delete_secret`](crate::ToolStore::delete_secret).
pub(super) async fn delete(store: &SqliteStore, name: &str) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let done = sqlx::query("DELETE FROM secret WHERE name = ?")
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
pub(super) async fn names(store: &SqliteStore) -> Result<Vec<String>, StoreError> {
    sqlx::query_scalar("SELECT name FROM secret ORDER BY name")
        .fetch_all(&store.reader)
        .await
        .map_err(db)
}

/// [`ToolStore::secrets`](crate::ToolStore::secrets).
pub(super) async fn infos(store: &SqliteStore) -> Result<Vec<SecretInfo>, StoreError> {
    let rows = sqlx::query("SELECT name, updated_at_ms FROM secret ORDER BY name")
        .fetch_all(&store.reader)
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
    store: &SqliteStore,
    names: &[String],
) -> Result<HashMap<String, SecretValue>, StoreError> {
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    // The names travel as one JSON array parameter: a fixed statement for any count.
    let rows = sqlx::query(
        "SELECT name, value FROM secret WHERE name IN (SELECT value FROM json_each(?))",
    )
    .bind(serde_json::Value::from(names.to_vec()).to_string())
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok((
                col(row, "name")?,
                SecretValue::new(col::<String, _>(row, "value")?),
            ))
        })
        .collect()
}
