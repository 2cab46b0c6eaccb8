//! Secrets on SQLite: the `secret` table (migration 0007), each value sealed with the store's
//! keyring (see [`keyring`](crate::keyring)): `sealed` holds the bytes and `key_id` the key
//! that sealed them. `value` holds a plain-text value written by a build before encryption at
//! rest; [`seal_plain_values`] seals those when a store opens with a keyring. Setting or
//! deleting a secret is a change of the feed keyed by its name, never its value, and an audit
//! record without the value.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;

use super::rows::{col, corrupt, db, now_ms};
use super::tools::{fetch_version, version_not_found};
use super::{SqliteStore, grants};
use crate::error::{NameKind, StoreError};
use crate::keyring::Keyring;
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, Grant, SecretInfo, SecretRequest,
    SecretValue, VersionStatus, validate_secret_name,
};
use crate::store::SecretStore;

/// The keyring, or [`StoreError::NoSecretKey`].
fn keyring(store: &SqliteStore) -> Result<&Keyring, StoreError> {
    store.keyring.as_ref().ok_or(StoreError::NoSecretKey)
}

/// Opens a `secret` row read with its `name`, `value`, `sealed` and `key_id` columns.
pub(super) fn open_row(
    store: &SqliteStore,
    row: &SqliteRow,
) -> Result<(String, SecretValue), StoreError> {
    let name: String = col(row, "name")?;
    let keyring = keyring(store)?;
    let value: Option<String> = col(row, "value")?;
    let sealed: Option<Vec<u8>> = col(row, "sealed")?;
    let key_id: Option<String> = col(row, "key_id")?;
    let value = match (value, sealed, key_id) {
        (None, Some(bytes), Some(key_id)) => keyring.open(&name, &key_id, &bytes)?,
        // Written before encryption at rest and not sealed yet (the store that migrated had no
        // keyring); sealed at the next open with one.
        (Some(plain), None, None) => SecretValue::new(plain),
        _ => {
            return Err(corrupt(format!(
                "secret {name:?} has neither one value nor one sealed value"
            )));
        }
    };
    Ok((name, value))
}

async fn set(
    store: &SqliteStore,
    actor: &Actor,
    name: &str,
    value: &str,
) -> Result<(), StoreError> {
    actor.validate()?;
    validate_secret_name(name)?;
    let sealed = keyring(store)?.seal(name, value)?;
    let mut w = store.write().await?;
    let existed = sqlx::query("SELECT 1 FROM secret WHERE name = ?")
        .bind(name)
        .fetch_optional(w.conn())
        .await
        .map_err(db)?
        .is_some();
    w.change(ChangeKind::Secret, name).await?;
    sqlx::query(
        "INSERT INTO secret (name, value, sealed, key_id, updated_at_ms) VALUES (?, NULL, ?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET value = NULL, sealed = excluded.sealed, \
         key_id = excluded.key_id, updated_at_ms = excluded.updated_at_ms",
    )
    .bind(name)
    .bind(&sealed.bytes)
    .bind(&sealed.key_id)
    .bind(now_ms())
    .execute(w.conn())
    .await
    .map_err(db)?;
    let entry = AuditEntry::new(AuditAction::Set, AuditObject::Secret, name)
        .detail("created", !existed)
        .detail("key_id", sealed.key_id.as_str());
    w.audit(actor, entry).await?;
    w.commit().await
}

async fn delete(store: &SqliteStore, actor: &Actor, name: &str) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = store.write().await?;
    let removed = grants::of_secret(&mut w, name).await?;
    // The foreign key cascades too; explicit, so that the grants go even without it.
    sqlx::query("DELETE FROM secret_grant WHERE secret = ?")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
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
    let tools: BTreeSet<&str> = removed.iter().map(|(tool, _)| tool.as_str()).collect();
    for tool in tools {
        w.change(ChangeKind::Grant, tool).await?;
    }
    let listed: Vec<serde_json::Value> = removed
        .iter()
        .map(|(tool, version)| serde_json::json!({"tool": tool, "version": version}))
        .collect();
    let entry = AuditEntry::new(AuditAction::Delete, AuditObject::Secret, name)
        .detail("grants_removed", listed);
    w.audit(actor, entry).await?;
    w.commit().await
}

async fn infos(store: &SqliteStore) -> Result<Vec<SecretInfo>, StoreError> {
    let rows = sqlx::query("SELECT name, updated_at_ms, key_id FROM secret ORDER BY name")
        .fetch_all(&store.reader)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(SecretInfo {
                name: col(row, "name")?,
                updated_at_ms: col(row, "updated_at_ms")?,
                key_id: col(row, "key_id")?,
            })
        })
        .collect()
}

async fn values(
    store: &SqliteStore,
    names: &[String],
) -> Result<HashMap<String, SecretValue>, StoreError> {
    if names.is_empty() {
        return Ok(HashMap::new());
    }
    // The names travel as one JSON array parameter: a fixed statement for any count.
    let rows = sqlx::query(
        "SELECT name, value, sealed, key_id FROM secret \
         WHERE name IN (SELECT value FROM json_each(?))",
    )
    .bind(serde_json::Value::from(names.to_vec()).to_string())
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    rows.iter().map(|row| open_row(store, row)).collect()
}

/// Seals every value stored in plain text under the keyring's current key, in one transaction
/// (a no-op, with no transaction kept, when there is none), then asks SQLite to checkpoint and
/// truncate the WAL so that the old page images with plain values leave it (best effort: a
/// reader in another process can hold the checkpoint back; `secure_delete` zeroes the old cells
/// in the database file).
pub(super) async fn seal_plain_values(
    store: &SqliteStore,
    keyring: &Keyring,
) -> Result<(), StoreError> {
    // A read first, so that opening a store with nothing to seal never waits for the write lock.
    let any: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM secret WHERE value IS NOT NULL)")
            .fetch_one(&store.reader)
            .await
            .map_err(db)?;
    if !any {
        return Ok(());
    }
    let mut w = store.write().await?;
    let rows = sqlx::query("SELECT name, value FROM secret WHERE value IS NOT NULL")
        .fetch_all(w.conn())
        .await
        .map_err(db)?;
    if rows.is_empty() {
        return Ok(());
    }
    for row in &rows {
        let name: String = col(row, "name")?;
        let value: String = col(row, "value")?;
        let sealed = keyring.seal(&name, &value)?;
        sqlx::query("UPDATE secret SET value = NULL, sealed = ?, key_id = ? WHERE name = ?")
            .bind(&sealed.bytes)
            .bind(&sealed.key_id)
            .bind(&name)
            .execute(w.conn())
            .await
            .map_err(db)?;
    }
    let entry = AuditEntry::new(
        AuditAction::Encrypt,
        AuditObject::Keyring,
        keyring.current_key_id(),
    )
    .detail("secrets", rows.len());
    w.audit(&Actor::store(), entry).await?;
    w.commit().await?;
    tracing::info!(
        secrets = rows.len(),
        key_id = keyring.current_key_id(),
        "sealed secrets stored in plain text"
    );
    if let Err(error) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&store.writer)
        .await
    {
        tracing::warn!(%error, "checkpointing the WAL after sealing secrets failed");
    }
    Ok(())
}

async fn rotate_key(store: &SqliteStore, actor: &Actor) -> Result<u64, StoreError> {
    actor.validate()?;
    let keyring = keyring(store)?;
    let current = keyring.current_key_id();
    let mut w = store.write().await?;
    let rows = sqlx::query(
        "SELECT name, value, sealed, key_id FROM secret \
         WHERE key_id IS NULL OR key_id <> ? ORDER BY name",
    )
    .bind(current)
    .fetch_all(w.conn())
    .await
    .map_err(db)?;
    let mut from_keys = BTreeSet::new();
    for row in &rows {
        let key_id: Option<String> = col(row, "key_id")?;
        from_keys.insert(key_id.unwrap_or_else(|| "(plain text)".to_owned()));
        let (name, value) = open_row(store, row)?;
        let sealed = keyring.seal(&name, value.expose())?;
        sqlx::query("UPDATE secret SET value = NULL, sealed = ?, key_id = ? WHERE name = ?")
            .bind(&sealed.bytes)
            .bind(&sealed.key_id)
            .bind(&name)
            .execute(w.conn())
            .await
            .map_err(db)?;
    }
    let entry = AuditEntry::new(AuditAction::RotateKey, AuditObject::Keyring, current)
        .detail("resealed", rows.len())
        .detail("from_keys", from_keys.into_iter().collect::<Vec<_>>());
    w.audit(actor, entry).await?;
    w.commit().await?;
    Ok(rows.len() as u64)
}

/// [`SecretStore::granted_secrets`](crate::SecretStore::granted_secrets): the sealed rows of
/// the declared and granted secrets of a live version, opened with the keyring.
pub(super) async fn granted_values(
    store: &SqliteStore,
    tool: &str,
    version: u32,
) -> Result<HashMap<String, SecretValue>, StoreError> {
    let mut tx = store.read().await?;
    let target = fetch_version(&mut tx, tool, version)
        .await?
        .ok_or_else(|| version_not_found(tool, version))?;
    if target.state.status != VersionStatus::Live || target.spec.secrets.is_empty() {
        return Ok(HashMap::new());
    }
    let declared = serde_json::Value::from(target.spec.secrets.clone()).to_string();
    let rows = sqlx::query(
        "SELECT s.name, s.value, s.sealed, s.key_id FROM secret s \
         JOIN secret_grant g ON g.secret = s.name \
         WHERE g.tool = ? AND g.version = ? AND s.name IN (SELECT value FROM json_each(?))",
    )
    .bind(tool)
    .bind(i64::from(version))
    .bind(&declared)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    rows.iter().map(|row| open_row(store, row)).collect()
}

/// Each method is in this file or in `grants.rs`.
#[async_trait]
impl SecretStore for SqliteStore {
    async fn set_secret(&self, actor: &Actor, name: &str, value: &str) -> Result<(), StoreError> {
        set(self, actor, name, value).await
    }

    async fn delete_secret(&self, actor: &Actor, name: &str) -> Result<(), StoreError> {
        delete(self, actor, name).await
    }

    async fn secret_names(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar("SELECT name FROM secret ORDER BY name")
            .fetch_all(&self.reader)
            .await
            .map_err(db)
    }

    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError> {
        infos(self).await
    }

    async fn secret_values(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, SecretValue>, StoreError> {
        values(self, names).await
    }

    async fn granted_secrets(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<HashMap<String, SecretValue>, StoreError> {
        granted_values(self, tool, version).await
    }

    async fn secret_requests(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<Vec<SecretRequest>, StoreError> {
        grants::requests(self, tool, version).await
    }

    async fn grant_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<bool, StoreError> {
        grants::grant(self, actor, secret, tool, version).await
    }

    async fn revoke_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<(), StoreError> {
        grants::revoke(self, actor, secret, tool, version).await
    }

    async fn grants(
        &self,
        secret: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<Grant>, StoreError> {
        grants::list(self, secret, tool).await
    }

    async fn rotate_key(&self, actor: &Actor) -> Result<u64, StoreError> {
        rotate_key(self, actor).await
    }
}
