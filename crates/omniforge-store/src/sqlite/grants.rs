//! Secret grants on SQLite: the `secret_grant` table (migration 0007). A grant names a secret
//! and one exact tool version; it goes with either (foreign keys with `ON DELETE CASCADE`, and
//! explicit deletes in `delete_secret` and `purge`). Granting and revoking are changes of kind
//! `grant` keyed by the tool name, and audit records of the tool version.

use std::collections::HashMap;

use sqlx::sqlite::SqliteRow;

use super::rows::{col, db, get_u32, now_ms};
use super::tools::{fetch_version, version_not_found};
use super::{SqliteStore, Write};
use crate::error::{NameKind, StoreError};
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, Grant, SecretRequest, ToolVersion,
};
use crate::validate::invalid;

/// The columns [`grant_from_row`] reads; a macro so that queries stay `&'static str` literals.
macro_rules! grant_columns {
    () => {
        "secret, tool, version, granted_by, granted_at_ms"
    };
}

fn grant_from_row(row: &SqliteRow) -> Result<Grant, StoreError> {
    Ok(Grant {
        secret: col(row, "secret")?,
        tool: col(row, "tool")?,
        version: get_u32(row, "version")?,
        granted_by: col(row, "granted_by")?,
        granted_at_ms: col(row, "granted_at_ms")?,
    })
}

/// Checks that `version` declares `secret` and that the secret is set.
pub(super) async fn check_grantable(
    w: &mut Write<'_>,
    version: &ToolVersion,
    secret: &str,
) -> Result<(), StoreError> {
    if !version.spec.secrets.iter().any(|s| s == secret) {
        return Err(invalid(
            "secret",
            format!(
                "version {} of tool {:?} does not declare secret {secret:?}",
                version.number, version.tool
            ),
        ));
    }
    let exists = sqlx::query("SELECT 1 FROM secret WHERE name = ?")
        .bind(secret)
        .fetch_optional(w.conn())
        .await
        .map_err(db)?;
    if exists.is_none() {
        return Err(StoreError::NotFound {
            kind: NameKind::Secret,
            name: secret.to_owned(),
            version: None,
        });
    }
    Ok(())
}

/// Inserts a grant checked by [`check_grantable`] and its audit record; `false` (and no
/// record) if it existed. The caller records the change of the feed.
pub(super) async fn insert_grant(
    w: &mut Write<'_>,
    actor: &Actor,
    secret: &str,
    tool: &str,
    version: u32,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO secret_grant (secret, tool, version, granted_by, granted_at_ms) \
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (secret, tool, version) DO NOTHING",
    )
    .bind(secret)
    .bind(tool)
    .bind(i64::from(version))
    .bind(&actor.principal)
    .bind(now)
    .execute(w.conn())
    .await
    .map_err(db)?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    let entry = AuditEntry::new(AuditAction::Grant, AuditObject::Tool, tool)
        .version(version)
        .detail("secret", secret);
    w.audit(actor, entry).await?;
    Ok(true)
}

/// [`SecretStore::grant_secret`](crate::SecretStore::grant_secret).
pub(super) async fn grant(
    store: &SqliteStore,
    actor: &Actor,
    secret: &str,
    tool: &str,
    version: u32,
) -> Result<bool, StoreError> {
    actor.validate()?;
    let mut w = store.write().await?;
    let target = fetch_version(w.conn(), tool, version)
        .await?
        .ok_or_else(|| version_not_found(tool, version))?;
    check_grantable(&mut w, &target, secret).await?;
    let granted = insert_grant(&mut w, actor, secret, tool, version, now_ms()).await?;
    if granted {
        w.change(ChangeKind::Grant, tool).await?;
        w.commit().await?;
    }
    Ok(granted)
}

/// [`SecretStore::revoke_secret`](crate::SecretStore::revoke_secret).
pub(super) async fn revoke(
    store: &SqliteStore,
    actor: &Actor,
    secret: &str,
    tool: &str,
    version: u32,
) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = store.write().await?;
    let done =
        sqlx::query("DELETE FROM secret_grant WHERE secret = ? AND tool = ? AND version = ?")
            .bind(secret)
            .bind(tool)
            .bind(i64::from(version))
            .execute(w.conn())
            .await
            .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound {
            kind: NameKind::Grant,
            name: format!("{secret} for {tool}"),
            version: Some(version),
        });
    }
    w.change(ChangeKind::Grant, tool).await?;
    let entry = AuditEntry::new(AuditAction::Revoke, AuditObject::Tool, tool)
        .version(version)
        .detail("secret", secret);
    w.audit(actor, entry).await?;
    w.commit().await
}

/// The grants of `secret`, each as (tool, version), for `delete_secret`'s record and changes.
pub(super) async fn of_secret(
    w: &mut Write<'_>,
    secret: &str,
) -> Result<Vec<(String, u32)>, StoreError> {
    let rows = sqlx::query(
        "SELECT tool, version FROM secret_grant WHERE secret = ? ORDER BY tool, version",
    )
    .bind(secret)
    .fetch_all(w.conn())
    .await
    .map_err(db)?;
    rows.iter()
        .map(|row| Ok((col(row, "tool")?, get_u32(row, "version")?)))
        .collect()
}

/// [`SecretStore::grants`](crate::SecretStore::grants).
pub(super) async fn list(
    store: &SqliteStore,
    secret: Option<&str>,
    tool: Option<&str>,
) -> Result<Vec<Grant>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM secret_grant WHERE (?1 IS NULL OR secret = ?1) AND (?2 IS NULL OR tool = ?2) \
         ORDER BY secret, tool, version"
    ))
    .bind(secret)
    .bind(tool)
    .fetch_all(&store.reader)
    .await
    .map_err(db)?;
    rows.iter().map(grant_from_row).collect()
}

/// [`SecretStore::secret_requests`](crate::SecretStore::secret_requests): one snapshot.
pub(super) async fn requests(
    store: &SqliteStore,
    tool: &str,
    version: u32,
) -> Result<Vec<SecretRequest>, StoreError> {
    let mut tx = store.read().await?;
    let target = fetch_version(&mut tx, tool, version)
        .await?
        .ok_or_else(|| version_not_found(tool, version))?;
    let declared = serde_json::Value::from(target.spec.secrets.clone()).to_string();
    let existing: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM secret WHERE name IN (SELECT value FROM json_each(?))",
    )
    .bind(&declared)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let rows = sqlx::query(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM secret_grant WHERE tool = ? AND version = ?"
    ))
    .bind(tool)
    .bind(i64::from(version))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut grants: HashMap<String, Grant> = rows
        .iter()
        .map(|row| grant_from_row(row).map(|g| (g.secret.clone(), g)))
        .collect::<Result<_, _>>()?;
    Ok(target
        .spec
        .secrets
        .iter()
        .map(|secret| SecretRequest {
            secret: secret.clone(),
            exists: existing.contains(secret),
            grant: grants.remove(secret),
        })
        .collect())
}
