//! The audit log on SQLite: the `audit_log` table (migration 0008). Records are appended by
//! [`Write::audit`] inside the action's own transaction; triggers refuse updates, and deletes
//! of records newer than the retention cut (`meta.audit_pruned_before_ms`) that
//! [`AuditLog::prune_audit`] raises.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;

use super::rows::{col, corrupt, db, get_u64, now_ms, to_json};
use super::{SqliteStore, Write};
use crate::error::StoreError;
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditFilter, AuditObject, AuditRecord, JsonObject,
};
use crate::store::AuditLog;
use crate::validate::checked_i64;

impl Write<'_> {
    /// Appends the record of an action by `actor` in this transaction: if the insert fails, the
    /// whole write fails, and if the write fails later, the record is rolled back with it.
    pub(super) async fn audit(
        &mut self,
        actor: &Actor,
        entry: AuditEntry,
    ) -> Result<(), StoreError> {
        let detail = to_json("detail", &entry.detail_for(actor))?;
        sqlx::query(
            "INSERT INTO audit_log (at_ms, principal, action, object_kind, object_name, version, \
             definition_sha256, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(now_ms())
        .bind(&actor.principal)
        .bind(entry.action.as_str())
        .bind(entry.object.as_str())
        .bind(&entry.name)
        .bind(entry.version.map(i64::from))
        .bind(entry.definition_sha256.as_deref())
        .bind(detail)
        .execute(self.conn())
        .await
        .map_err(db)?;
        Ok(())
    }
}

fn record_from_row(row: &SqliteRow) -> Result<AuditRecord, StoreError> {
    let action: String = col(row, "action")?;
    let object: String = col(row, "object_kind")?;
    let version: Option<i64> = col(row, "version")?;
    let detail: String = col(row, "detail")?;
    Ok(AuditRecord {
        id: get_u64(row, "id")?,
        at_ms: col(row, "at_ms")?,
        principal: col(row, "principal")?,
        action: AuditAction::parse(&action)
            .ok_or_else(|| corrupt(format!("unknown audit action {action:?}")))?,
        object: AuditObject::parse(&object)
            .ok_or_else(|| corrupt(format!("unknown audit object {object:?}")))?,
        name: col(row, "object_name")?,
        version: version
            .map(|v| u32::try_from(v).map_err(|_| corrupt(format!("audit version {v}"))))
            .transpose()?,
        definition_sha256: col(row, "definition_sha256")?,
        detail: serde_json::from_str::<JsonObject>(&detail)
            .map_err(|e| corrupt(format!("audit detail: {e}")))?,
    })
}

#[async_trait]
impl AuditLog for SqliteStore {
    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError> {
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
        let rows = sqlx::query(
            "SELECT id, at_ms, principal, action, object_kind, object_name, version, \
             definition_sha256, detail FROM audit_log \
             WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR principal = ?2) \
             AND (?3 IS NULL OR (object_kind = ?3 AND object_name = ?4)) \
             AND (?5 IS NULL OR id < ?5) \
             ORDER BY id DESC LIMIT ?6",
        )
        .bind(filter.since_ms)
        .bind(filter.principal.as_deref())
        .bind(kind)
        .bind(name)
        .bind(before_id)
        .bind(i64::from(filter.limit))
        .fetch_all(&self.reader)
        .await
        .map_err(db)?;
        rows.iter().map(record_from_row).collect()
    }

    async fn prune_audit(&self, actor: &Actor, before_ms: i64) -> Result<u64, StoreError> {
        actor.validate()?;
        let mut w = self.write().await?;
        // Raise the cut first (the trigger lets only older records go), never lower it.
        sqlx::query("UPDATE meta SET value = max(value, ?) WHERE key = 'audit_pruned_before_ms'")
            .bind(before_ms)
            .execute(w.conn())
            .await
            .map_err(db)?;
        let removed = sqlx::query("DELETE FROM audit_log WHERE at_ms < ?")
            .bind(before_ms)
            .execute(w.conn())
            .await
            .map_err(db)?
            .rows_affected();
        w.audit(
            actor,
            AuditEntry::new(AuditAction::Prune, AuditObject::AuditLog, "audit_log")
                .detail("before_ms", before_ms)
                .detail("removed", removed),
        )
        .await?;
        w.commit().await?;
        Ok(removed)
    }
}
