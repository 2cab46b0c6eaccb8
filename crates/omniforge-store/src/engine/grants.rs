//! Secret grants: the `secret_grant` table. A grant names a secret and one exact tool version;
//! it goes with either (foreign keys with `ON DELETE CASCADE`, and explicit deletes in
//! `delete_secret` and `purge`). Granting and revoking are changes of kind `grant` keyed by the
//! tool name, and audit records of the tool version.

use std::collections::HashMap;

use super::exec::{Conn, Row, q};
use super::rows::{get_u32, now_ms};
use super::tool_rows::existing_version;
use super::{Engine, Write};
use crate::error::{NameKind, StoreError};
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, Grant, SecretRequest, ToolVersion,
};
use crate::validate::invalid;

/// The columns [`grant_from_row`] reads.
macro_rules! grant_columns {
    () => {
        "secret, tool, version, granted_by, granted_at_ms"
    };
}
pub(super) use grant_columns;

/// A `secret_grant` row.
pub(super) fn grant_from_row(row: &mut Row) -> Result<Grant, StoreError> {
    Ok(Grant {
        secret: row.get("secret")?,
        tool: row.get("tool")?,
        version: get_u32(row, "version")?,
        granted_by: row.get("granted_by")?,
        granted_at_ms: row.get("granted_at_ms")?,
    })
}

/// Whether secret `name` is set.
pub(super) async fn secret_exists(conn: &mut dyn Conn, name: &str) -> Result<bool, StoreError> {
    Ok(q("SELECT name FROM secret WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await?
        .is_some())
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
    if !secret_exists(w.conn(), secret).await? {
        return Err(StoreError::NotFound {
            kind: NameKind::Secret,
            name: secret.to_owned(),
            version: None,
        });
    }
    Ok(())
}

/// Inserts a grant row unless it exists; returns whether it did.
pub(super) async fn insert_grant_row(
    conn: &mut dyn Conn,
    grant: &Grant,
) -> Result<bool, StoreError> {
    let done = q(
        "INSERT INTO secret_grant (secret, tool, version, granted_by, granted_at_ms) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (secret, tool, version) DO NOTHING",
    )
    .bind(&grant.secret)
    .bind(&grant.tool)
    .bind(grant.version)
    .bind(&grant.granted_by)
    .bind(grant.granted_at_ms)
    .execute(conn)
    .await?;
    Ok(done > 0)
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
    let grant = Grant {
        secret: secret.to_owned(),
        tool: tool.to_owned(),
        version,
        granted_by: actor.principal.clone(),
        granted_at_ms: now,
    };
    if !insert_grant_row(w.conn(), &grant).await? {
        return Ok(false);
    }
    let entry = AuditEntry::new(AuditAction::Grant, AuditObject::Tool, tool)
        .version(version)
        .detail("secret", secret);
    w.audit(actor, entry).await?;
    Ok(true)
}

/// [`SecretStore::grant_secret`](crate::SecretStore::grant_secret).
pub(crate) async fn grant(
    core: &Engine,
    actor: &Actor,
    secret: &str,
    tool: &str,
    version: u32,
) -> Result<bool, StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let target = existing_version(w.conn(), tool, version).await?;
    check_grantable(&mut w, &target, secret).await?;
    let granted = insert_grant(&mut w, actor, secret, tool, version, now_ms()).await?;
    if granted {
        w.change(ChangeKind::Grant, tool).await?;
        w.commit().await?;
    }
    Ok(granted)
}

/// [`SecretStore::revoke_secret`](crate::SecretStore::revoke_secret).
pub(crate) async fn revoke(
    core: &Engine,
    actor: &Actor,
    secret: &str,
    tool: &str,
    version: u32,
) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let done = q("DELETE FROM secret_grant WHERE secret = $1 AND tool = $2 AND version = $3")
        .bind(secret)
        .bind(tool)
        .bind(version)
        .execute(w.conn())
        .await?;
    if done == 0 {
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
    let rows = q("SELECT tool, version FROM secret_grant WHERE secret = $1 \
         ORDER BY tool, version")
    .bind(secret)
    .fetch_all(w.conn())
    .await?;
    rows.into_iter()
        .map(|mut row| Ok((row.get("tool")?, get_u32(&mut row, "version")?)))
        .collect()
}

/// [`SecretStore::grants`](crate::SecretStore::grants).
pub(crate) async fn list(
    core: &Engine,
    secret: Option<&str>,
    tool: Option<&str>,
) -> Result<Vec<Grant>, StoreError> {
    let rows = q(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM secret_grant WHERE ($1 IS NULL OR secret = $1) AND ($2 IS NULL OR tool = $2) \
         ORDER BY secret, tool, version"
    ))
    .bind(secret)
    .bind(tool)
    .fetch_all(&mut *core.db.read().await?)
    .await?;
    rows.into_iter()
        .map(|mut row| grant_from_row(&mut row))
        .collect()
}

/// [`SecretStore::secret_requests`](crate::SecretStore::secret_requests): one snapshot.
pub(crate) async fn requests(
    core: &Engine,
    tool: &str,
    version: u32,
) -> Result<Vec<SecretRequest>, StoreError> {
    let mut tx = core.db.snapshot().await?;
    let target = existing_version(&mut *tx, tool, version).await?;
    let rows = q(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM secret_grant WHERE tool = $1 AND version = $2"
    ))
    .bind(tool)
    .bind(version)
    .fetch_all(&mut *tx)
    .await?;
    let mut grants: HashMap<String, Grant> = rows
        .into_iter()
        .map(|mut row| grant_from_row(&mut row).map(|g| (g.secret.clone(), g)))
        .collect::<Result<_, _>>()?;
    let mut requests = Vec::with_capacity(target.spec.secrets.len());
    for secret in &target.spec.secrets {
        requests.push(SecretRequest {
            secret: secret.clone(),
            exists: secret_exists(&mut *tx, secret).await?,
            grant: grants.remove(secret),
        });
    }
    Ok(requests)
}
