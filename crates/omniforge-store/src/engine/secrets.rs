//! Secrets: the `secret` table, each value sealed with the store's keyring (see
//! [`keyring`](crate::keyring)): `sealed` holds the bytes and `key_id` the key that sealed
//! them. `value` holds a plain-text value written by a build before encryption at rest;
//! [`seal_plain_values`] seals those when a store opens with a keyring. Setting or deleting a
//! secret is a change of the feed keyed by its name, never its value, and an audit record
//! without the value.

use std::collections::{BTreeSet, HashMap};

use async_trait::async_trait;

use super::exec::{Conn, Row, q};
use super::grants::of_secret;
use super::rows::{corrupt, now_ms};
use super::tool_rows::existing_version;
use super::{Engine, Lock};
use crate::error::{NameKind, StoreError};
use crate::keyring::{Keyring, Sealed};
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, SecretInfo, SecretValue,
    VersionStatus, validate_secret_name,
};
use crate::model::{Grant, SecretRequest};
use crate::store::SecretStore;

/// Opens a `secret` row read with its `name`, `value`, `sealed` and `key_id` columns.
pub(super) fn open_row(core: &Engine, row: &mut Row) -> Result<(String, SecretValue), StoreError> {
    let name: String = row.get("name")?;
    open_row_named(core, name, row)
}

/// Writes secret `name`'s sealed value (inserting or replacing the row; grants are kept).
pub(super) async fn upsert_sealed(
    conn: &mut dyn Conn,
    name: &str,
    sealed: &Sealed,
    updated_at_ms: i64,
) -> Result<(), StoreError> {
    q(
        "INSERT INTO secret (name, value, sealed, key_id, updated_at_ms) \
       VALUES ($1, NULL, $2, $3, $4) \
       ON CONFLICT (name) DO UPDATE SET value = NULL, sealed = excluded.sealed, \
       key_id = excluded.key_id, updated_at_ms = excluded.updated_at_ms",
    )
    .bind(name)
    .bind(&sealed.bytes)
    .bind(&sealed.key_id)
    .bind(updated_at_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// Replaces the value of existing secret `name` with `sealed` (its time unchanged).
async fn reseal(conn: &mut dyn Conn, name: &str, sealed: &Sealed) -> Result<(), StoreError> {
    q("UPDATE secret SET value = NULL, sealed = $1, key_id = $2 WHERE name = $3")
        .bind(&sealed.bytes)
        .bind(&sealed.key_id)
        .bind(name)
        .execute(conn)
        .await?;
    Ok(())
}

/// Seals every value stored in plain text under the keyring's current key, in one transaction
/// (a no-op, with no write transaction, when there is none), then lets the backend drop old
/// copies of the plain values ([`Db::after_sealing`](super::Db::after_sealing)).
pub(crate) async fn seal_plain_values(core: &Engine) -> Result<(), StoreError> {
    let Some(keyring) = &core.keyring else {
        return Ok(());
    };
    // A read first, so that opening a store with nothing to seal never waits for the lock.
    let any = q("SELECT name FROM secret WHERE value IS NOT NULL LIMIT 1")
        .fetch_optional(&mut *core.db.read().await?)
        .await?;
    if any.is_none() {
        return Ok(());
    }
    let mut w = core.write().await?;
    let rows = q("SELECT name, value FROM secret WHERE value IS NOT NULL ORDER BY name")
        .fetch_all(w.conn())
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let count = rows.len();
    for mut row in rows {
        let name: String = row.get("name")?;
        let value: String = row.get("value")?;
        reseal(w.conn(), &name, &keyring.seal(&name, &value)?).await?;
    }
    let entry = AuditEntry::new(
        AuditAction::Encrypt,
        AuditObject::Keyring,
        &keyring.current_key_id(),
    )
    .detail("secrets", count);
    w.audit(&Actor::store(), entry).await?;
    w.commit().await?;
    tracing::info!(
        secrets = count,
        key_id = &keyring.current_key_id(),
        "sealed secrets stored in plain text"
    );
    core.db.after_sealing().await;
    Ok(())
}

/// [`open_row`] for a row whose `name` column was read already: the value sealed under its
/// key id and bound to that name, or (written before encryption at rest, not sealed yet) its
/// plain text.
fn open_row_named(
    core: &Engine,
    name: String,
    row: &mut Row,
) -> Result<(String, SecretValue), StoreError> {
    let keyring = core.keyring()?;
    let value: Option<String> = row.get("value")?;
    let sealed: Option<Vec<u8>> = row.get("sealed")?;
    let key_id: Option<String> = row.get("key_id")?;
    let value = match (value, sealed, key_id) {
        (None, Some(bytes), Some(key_id)) => keyring.open(&name, &key_id, &bytes)?,
        (Some(plain), None, None) => SecretValue::new(plain),
        _ => {
            return Err(corrupt(format!(
                "secret {name:?} has neither one value nor one sealed value"
            )));
        }
    };
    Ok((name, value))
}

#[async_trait]
impl SecretStore for Engine {
    async fn set_secret(&self, actor: &Actor, name: &str, value: &str) -> Result<(), StoreError> {
        let core = self;
        actor.validate()?;
        validate_secret_name(name)?;
        let sealed = core.keyring()?.seal(name, value)?;
        let mut w = core.write().await?;
        let existed = super::grants::secret_exists(w.conn(), name).await?;
        w.change(ChangeKind::Secret, name).await?;
        upsert_sealed(w.conn(), name, &sealed, now_ms()).await?;
        let entry = AuditEntry::new(AuditAction::Set, AuditObject::Secret, name)
            .detail("created", !existed)
            .detail("key_id", sealed.key_id.as_str());
        w.audit(actor, entry).await?;
        w.commit().await
    }

    async fn delete_secret(&self, actor: &Actor, name: &str) -> Result<(), StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let removed = of_secret(&mut w, name).await?;
        // The foreign key cascades too; explicit, so that the grants go even without it.
        q("DELETE FROM secret_grant WHERE secret = $1")
            .bind(name)
            .execute(w.conn())
            .await?;
        let done = q("DELETE FROM secret WHERE name = $1")
            .bind(name)
            .execute(w.conn())
            .await?;
        if done == 0 {
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

    async fn secret_names(&self) -> Result<Vec<String>, StoreError> {
        let core = self;
        q("SELECT name FROM secret ORDER BY name")
            .scalars(&mut *core.db.read().await?)
            .await
    }

    async fn secrets(&self) -> Result<Vec<SecretInfo>, StoreError> {
        let core = self;
        let rows = q("SELECT name, updated_at_ms, key_id FROM secret ORDER BY name")
            .fetch_all(&mut *core.db.read().await?)
            .await?;
        rows.into_iter()
            .map(|mut row| {
                Ok(SecretInfo {
                    name: row.get("name")?,
                    updated_at_ms: row.get("updated_at_ms")?,
                    key_id: row.get("key_id")?,
                })
            })
            .collect()
    }

    /// [`SecretStore::granted_secrets`](crate::SecretStore::granted_secrets): the sealed rows of
    /// the declared and granted secrets of a live version, opened with the keyring.
    async fn granted_secrets(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<std::collections::HashMap<String, SecretValue>, StoreError> {
        let core = self;
        let mut tx = core.db.snapshot().await?;
        let target = existing_version(&mut *tx, tool, version).await?;
        if target.state.status != VersionStatus::Live || target.spec.secrets.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = q(
            "SELECT s.name AS name, s.value AS value, s.sealed AS sealed, \
             s.key_id AS key_id FROM secret s JOIN secret_grant g ON g.secret = s.name \
             WHERE g.tool = $1 AND g.version = $2 ORDER BY s.name",
        )
        .bind(tool)
        .bind(version)
        .fetch_all(&mut *tx)
        .await?;
        let mut values = HashMap::new();
        for mut row in rows {
            let name: String = row.get("name")?;
            if !target.spec.secrets.contains(&name) {
                continue;
            }
            let (name, value) = open_row_named(core, name, &mut row)?;
            values.insert(name, value);
        }
        Ok(values)
    }

    async fn secret_requests(
        &self,
        tool: &str,
        version: u32,
    ) -> Result<Vec<SecretRequest>, StoreError> {
        super::grants::requests(self, tool, version).await
    }

    async fn grant_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<bool, StoreError> {
        super::grants::grant(self, actor, secret, tool, version).await
    }

    async fn revoke_secret(
        &self,
        actor: &Actor,
        secret: &str,
        tool: &str,
        version: u32,
    ) -> Result<(), StoreError> {
        super::grants::revoke(self, actor, secret, tool, version).await
    }

    async fn grants(
        &self,
        secret: Option<&str>,
        tool: Option<&str>,
    ) -> Result<Vec<Grant>, StoreError> {
        super::grants::list(self, secret, tool).await
    }

    async fn rotate_key(&self, actor: &Actor) -> Result<u64, StoreError> {
        let core = self;
        actor.validate()?;
        let keyring: &Keyring = core.keyring()?;
        keyring.refresh();
        let current = keyring.current_key_id();
        // The feed's lock, though no change is made: a secret set meanwhile must not be overwritten
        // with the value read here.
        let mut w = core.write_with(Lock::Feed).await?;
        let rows = q(
            "SELECT name, value, sealed, key_id, key_id AS from_key FROM secret \
             WHERE key_id IS NULL OR key_id <> $1 ORDER BY name",
        )
        .bind(&current)
        .fetch_all(w.conn())
        .await?;
        let count = rows.len();
        let mut from_keys = BTreeSet::new();
        for mut row in rows {
            let key_id: Option<String> = row.get("from_key")?;
            from_keys.insert(key_id.unwrap_or_else(|| "(plain text)".to_owned()));
            let (name, value) = open_row(core, &mut row)?;
            reseal(w.conn(), &name, &keyring.seal(&name, value.expose())?).await?;
        }
        let entry = AuditEntry::new(AuditAction::RotateKey, AuditObject::Keyring, &current)
            .detail("resealed", count)
            .detail("from_keys", from_keys.into_iter().collect::<Vec<_>>());
        w.audit(actor, entry).await?;
        w.commit().await?;
        Ok(count as u64)
    }
}
