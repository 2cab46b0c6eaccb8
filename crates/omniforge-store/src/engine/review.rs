//! Version status (the status columns of `tool_version`): approving, rejecting (also of the
//! pending versions a newer one supersedes) and rollback,
//! which may only point a tool at a live version. The schema refuses any other status change
//! and a current version that is not live; the checks here come first so that callers get a
//! typed error rather than the schema's.

use super::exec::q;
use super::rows::{corrupt, now_ms};
use super::tool_rows::{
    current_version, existing_version, fetch_version, set_current_version, touch_tool,
};
use super::{Engine, Write};
use crate::digest::version_sha256;
use crate::error::StoreError;
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, ToolVersion, VersionState,
    VersionStatus,
};
use crate::validate::cut;

/// The version, which must exist, and be in a status that may become `next`.
async fn version_for(
    w: &mut Write<'_>,
    name: &str,
    number: u32,
    next: VersionStatus,
) -> Result<ToolVersion, StoreError> {
    let version = existing_version(w.conn(), name, number).await?;
    let status = version.state.status;
    if !status.can_become(next) {
        return Err(StoreError::Conflict {
            reason: format!(
                "version {number} of tool {name:?} is {status}: it cannot become {next}"
            ),
        });
    }
    Ok(version)
}

/// Sets a version's status columns (the only update a version takes).
async fn set_status(
    w: &mut Write<'_>,
    name: &str,
    number: u32,
    state: &VersionState,
) -> Result<(), StoreError> {
    q(
        "UPDATE tool_version SET status = $1, status_reason = $2, status_by = $3, \
       status_at_ms = $4 WHERE tool = $5 AND number = $6",
    )
    .bind(state.status.as_str())
    .bind(state.reason.as_deref())
    .bind(state.decided_by.as_deref())
    .bind(state.decided_at_ms)
    .bind(name)
    .bind(number)
    .execute(w.conn())
    .await?;
    Ok(())
}

/// [`ToolStore::rollback`](crate::ToolStore::rollback).
pub(crate) async fn rollback(
    core: &Engine,
    actor: &Actor,
    name: &str,
    number: u32,
) -> Result<ToolVersion, StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let version = existing_version(w.conn(), name, number).await?;
    if version.state.status != VersionStatus::Live {
        return Err(StoreError::Conflict {
            reason: format!(
                "version {number} of tool {name:?} is {}: only a live version can be current",
                version.state.status
            ),
        });
    }
    let from = current_version(w.conn(), name).await?.and_then(|(n, _)| n);
    let seq = w.change(ChangeKind::Tool, name).await?;
    set_current_version(w.conn(), name, number, now_ms(), seq).await?;
    let entry = AuditEntry::new(AuditAction::Rollback, AuditObject::Tool, name)
        .version(number)
        .hash(version_sha256(&version.spec))
        .detail("from", from);
    w.audit(actor, entry).await?;
    w.commit().await?;
    Ok(version)
}

/// [`ToolStore::approve`](crate::ToolStore::approve).
pub(crate) async fn approve(
    core: &Engine,
    actor: &Actor,
    name: &str,
    number: u32,
    grants: &[String],
) -> Result<ToolVersion, StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let mut version = version_for(&mut w, name, number, VersionStatus::Live).await?;
    let mut secrets: Vec<&str> = grants.iter().map(String::as_str).collect();
    secrets.sort_unstable();
    secrets.dedup();
    for secret in &secrets {
        super::grants::check_grantable(&mut w, &version, secret).await?;
    }
    let now = now_ms();
    let seq = w.change(ChangeKind::Tool, name).await?;
    version.state = VersionState {
        status: VersionStatus::Live,
        reason: None,
        decided_by: Some(actor.principal.clone()),
        decided_at_ms: Some(now),
    };
    set_status(&mut w, name, number, &version.state).await?;
    set_current_version(w.conn(), name, number, now, seq).await?;
    let entry = AuditEntry::new(AuditAction::Approve, AuditObject::Tool, name)
        .version(number)
        .hash(version_sha256(&version.spec))
        .detail("grants", secrets.clone());
    w.audit(actor, entry).await?;
    let mut granted = false;
    for secret in secrets {
        granted |= super::grants::insert_grant(&mut w, actor, secret, name, number, now).await?;
    }
    if granted {
        w.change(ChangeKind::Grant, name).await?;
    }
    w.commit().await?;
    Ok(version)
}

/// [`ToolStore::reject`](crate::ToolStore::reject).
pub(crate) async fn reject(
    core: &Engine,
    actor: &Actor,
    name: &str,
    number: u32,
    reason: &str,
) -> Result<ToolVersion, StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let mut version = version_for(&mut w, name, number, VersionStatus::Rejected).await?;
    let now = now_ms();
    let seq = w.change(ChangeKind::Tool, name).await?;
    version.state = VersionState {
        status: VersionStatus::Rejected,
        reason: Some(cut(reason, crate::MAX_STATUS_REASON_BYTES).to_owned()),
        decided_by: Some(actor.principal.clone()),
        decided_at_ms: Some(now),
    };
    set_status(&mut w, name, number, &version.state).await?;
    touch_tool(w.conn(), name, now, seq).await?;
    let entry = AuditEntry::new(AuditAction::Reject, AuditObject::Tool, name)
        .version(number)
        .hash(version_sha256(&version.spec))
        .detail("reason", version.state.reason.clone());
    w.audit(actor, entry).await?;
    w.commit().await?;
    Ok(version)
}

/// Rejects `author`'s pending versions of `name` other than `newer`, as superseded by it; part
/// of the write that added `newer` (whose change of the feed covers these too).
pub(super) async fn supersede(
    w: &mut Write<'_>,
    actor: &Actor,
    name: &str,
    author: &str,
    newer: u32,
    now: i64,
) -> Result<(), StoreError> {
    let reason = format!("superseded by version {newer}");
    let older: Vec<i64> = q(
        "UPDATE tool_version SET status = 'rejected', status_reason = $1, \
         status_by = $2, status_at_ms = $3 WHERE tool = $4 AND author = $5 \
         AND status = 'pending' AND number <> $6 RETURNING number",
    )
    .bind(&reason)
    .bind(&actor.principal)
    .bind(now)
    .bind(name)
    .bind(author)
    .bind(newer)
    .scalars(w.conn())
    .await?;
    let mut older = older;
    older.sort_unstable();
    for number in older {
        let number =
            u32::try_from(number).map_err(|_| corrupt(format!("version number {number}")))?;
        let mut entry = AuditEntry::new(AuditAction::Reject, AuditObject::Tool, name)
            .version(number)
            .detail("reason", reason.as_str())
            .detail("superseded_by", newer);
        if let Some(old) = fetch_version(w.conn(), name, number).await? {
            entry = entry.hash(version_sha256(&old.spec));
        }
        w.audit(actor, entry).await?;
    }
    Ok(())
}
