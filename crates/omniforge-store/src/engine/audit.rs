//! The audit log: the `audit_log` table. Records are appended by [`Write::audit`] inside the
//! action's own transaction; the schema (triggers) refuses updates, and deletes of records newer
//! than the retention cut (`meta.audit_pruned_before_ms`) that [`prune`] raises.

use async_trait::async_trait;

use super::exec::{Row, q};
use super::rows::{corrupt, get_u64, now_ms, opt_u32, to_json};
use super::{Engine, Lock, Write};
use crate::error::StoreError;
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditFilter, AuditObject, AuditRecord, JsonObject,
};
use crate::store::AuditLog;
use crate::validate::checked_i64;

/// The columns [`record_from_row`] reads.
macro_rules! audit_columns {
    () => {
        "id, at_ms, principal, action, object_kind, object_name, version, definition_sha256, \
         detail"
    };
}
pub(super) use audit_columns;

impl Write<'_> {
    /// Appends the record of an action by `actor` in this transaction: if the insert fails, the
    /// whole write fails, and if the write fails later, the record is rolled back with it.
    pub(crate) async fn audit(
        &mut self,
        actor: &Actor,
        entry: AuditEntry,
    ) -> Result<(), StoreError> {
        let detail = to_json("detail", &entry.detail_for(actor))?;
        q(
            "INSERT INTO audit_log (at_ms, principal, action, object_kind, object_name, version, \
           definition_sha256, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(now_ms())
        .bind(&actor.principal)
        .bind(entry.action.as_str())
        .bind(entry.object.as_str())
        .bind(&entry.name)
        .bind(entry.version)
        .bind(entry.definition_sha256.clone())
        .bind(detail)
        .execute(self.conn())
        .await?;
        self.audited.push(Logged {
            principal: actor.principal.clone(),
            action: entry.action.as_str(),
            object: entry.object.as_str(),
            name: entry.name,
            version: entry.version,
            definition_sha256: entry.definition_sha256,
        });
        Ok(())
    }
}

/// An audit record as written to the log once its transaction commits (the detail stays in
/// the store: it can be long; no record holds a secret value).
pub(crate) struct Logged {
    principal: String,
    action: &'static str,
    object: &'static str,
    name: String,
    version: Option<u32>,
    definition_sha256: Option<String>,
}

impl Logged {
    /// One `info` line, target `omniforge_store::audit`.
    pub(crate) fn log(&self) {
        tracing::info!(
            target: "omniforge_store::audit",
            principal = %self.principal,
            action = self.action,
            object = self.object,
            name = %self.name,
            version = self.version,
            sha256 = self.definition_sha256.as_deref(),
            "audit"
        );
    }
}

/// An `audit_log` row.
pub(super) fn record_from_row(row: &mut Row) -> Result<AuditRecord, StoreError> {
    let action: String = row.get("action")?;
    let object: String = row.get("object_kind")?;
    let detail: String = row.get("detail")?;
    Ok(AuditRecord {
        id: get_u64(row, "id")?,
        at_ms: row.get("at_ms")?,
        principal: row.get("principal")?,
        action: AuditAction::parse(&action)
            .ok_or_else(|| corrupt(format!("unknown audit action {action:?}")))?,
        object: AuditObject::parse(&object)
            .ok_or_else(|| corrupt(format!("unknown audit object {object:?}")))?,
        name: row.get("object_name")?,
        version: opt_u32(row, "version")?,
        definition_sha256: row.get("definition_sha256")?,
        detail: serde_json::from_str::<JsonObject>(&detail)
            .map_err(|e| corrupt(format!("audit detail: {e}")))?,
    })
}

/// [`AuditLog::audit`](crate::AuditLog::audit).
pub(crate) async fn audit(
    core: &Engine,
    filter: &AuditFilter,
) -> Result<Vec<AuditRecord>, StoreError> {
    if filter.limit == 0 {
        return Ok(Vec::new());
    }
    let before_id = filter
        .before_id
        .map(|id| checked_i64("before_id", id))
        .transpose()?;
    let (kind, name) = match &filter.object {
        Some((kind, name)) => (Some(kind.as_str()), Some(name.as_str())),
        None => (None, None),
    };
    // One statement for every combination: an absent condition is a NULL parameter.
    let rows = q(concat!(
        "SELECT ",
        audit_columns!(),
        " FROM audit_log \
         WHERE ($1 IS NULL OR at_ms >= $1) AND ($2 IS NULL OR principal = $2) \
         AND ($3 IS NULL OR (object_kind = $3 AND object_name = $4)) \
         AND ($5 IS NULL OR id < $5) \
         ORDER BY id DESC LIMIT $6"
    ))
    .bind(filter.since_ms)
    .bind(filter.principal.as_deref())
    .bind(kind)
    .bind(name)
    .bind(before_id)
    .bind(i64::from(filter.limit))
    .fetch_all(&mut *core.db.read().await?)
    .await?;
    rows.into_iter()
        .map(|mut r| record_from_row(&mut r))
        .collect()
}

#[async_trait]
impl AuditLog for Engine {
    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
        audit(self, filter).await
    }

    async fn prune_audit(&self, actor: &Actor, before_ms: i64) -> Result<u64, StoreError> {
        actor.validate()?;
        let mut w = self.write_with(Lock::AuditPrune).await?;
        // Raise the cut first (the schema lets only older records go), never lower it.
        q(
            "UPDATE meta SET value = CASE WHEN $1 > value THEN $1 ELSE value END \
           WHERE key = 'audit_pruned_before_ms'",
        )
        .bind(before_ms)
        .execute(w.conn())
        .await?;
        let removed = q("DELETE FROM audit_log WHERE at_ms < $1")
            .bind(before_ms)
            .execute(w.conn())
            .await?;
        // A prune that removed nothing changes nothing, so it leaves no record either: running
        // it again, or on another replica just after, is a no-op.
        if removed > 0 {
            w.audit(
                actor,
                AuditEntry::new(AuditAction::Prune, AuditObject::AuditLog, "audit_log")
                    .detail("before_ms", before_ms)
                    .detail("removed", removed),
            )
            .await?;
        }
        w.commit().await?;
        Ok(removed)
    }
}
