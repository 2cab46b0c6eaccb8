//! [`ToolStore`] for the [`Engine`]: tools and their immutable versions (their rows are in
//! `tool_rows.rs`, status changes in `review.rs`, example results in `examples.rs`, the change
//! feed in `changes.rs`).

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;

use super::Engine;
use super::exec::q;
use super::rows::{corrupt, now_ms, tool_not_found};
use super::tool_rows::{
    current_version, encode_spec, existing_version, insert_tool, insert_version,
    next_version_number, set_current_version, set_enabled_row, stored_from_row, tool_columns,
    tool_exists, tool_from_row, touch_tool, version_columns, version_from_row,
};
use crate::digest::version_sha256;
use crate::error::StoreError;
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, ChangeSet, ExampleResult, JsonObject,
    NewStatus, NewVersion, StoredTool, Tool, ToolVersion, VersionStatus, validate_tool_name,
};
use crate::store::ToolStore;

#[async_trait]
impl ToolStore for Engine {
    async fn create_tool(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError> {
        let core = self;
        actor.validate()?;
        validate_tool_name(name)?;
        let enc = encode_spec(&spec)?;
        let hash = version_sha256(&spec);
        let mut w = core.write().await?;
        if tool_exists(w.conn(), name).await? {
            return Err(StoreError::AlreadyExists {
                name: name.to_owned(),
            });
        }
        let seq = w.change(ChangeKind::Tool, name).await?;
        let now = now_ms();
        insert_tool(w.conn(), name, now, seq).await?;
        let state = insert_version(w.conn(), name, 1, now, &enc, &status).await?;
        if state.status == VersionStatus::Live {
            set_current_version(w.conn(), name, 1, now, seq).await?;
        }
        let entry = AuditEntry::new(AuditAction::Create, AuditObject::Tool, name)
            .version(1)
            .hash(hash)
            .detail("status", state.status.as_str());
        w.audit(actor, entry).await?;
        w.commit().await?;
        Ok(ToolVersion {
            tool: name.to_owned(),
            number: 1,
            created_at_ms: now,
            spec,
            state,
        })
    }

    async fn add_version(
        &self,
        actor: &Actor,
        name: &str,
        spec: NewVersion,
        status: NewStatus,
    ) -> Result<ToolVersion, StoreError> {
        let core = self;
        actor.validate()?;
        let enc = encode_spec(&spec)?;
        let hash = version_sha256(&spec);
        let mut w = core.write().await?;
        let Some(number) = next_version_number(w.conn(), name).await? else {
            return Err(tool_not_found(name));
        };
        let previous = current_version(w.conn(), name).await?.and_then(|(n, _)| n);
        let seq = w.change(ChangeKind::Tool, name).await?;
        let now = now_ms();
        let state = insert_version(w.conn(), name, number, now, &enc, &status).await?;
        let mut entry = AuditEntry::new(AuditAction::Update, AuditObject::Tool, name)
            .version(number)
            .hash(hash)
            .detail("status", state.status.as_str());
        if state.status == VersionStatus::Live {
            set_current_version(w.conn(), name, number, now, seq).await?;
            entry = entry.detail("previous_version", previous);
        } else {
            touch_tool(w.conn(), name, now, seq).await?;
        }
        w.audit(actor, entry).await?;
        if state.status == VersionStatus::Pending {
            super::review::supersede(&mut w, actor, name, &spec.author, number, now).await?;
        }
        w.commit().await?;
        Ok(ToolVersion {
            tool: name.to_owned(),
            number,
            created_at_ms: now,
            spec,
            state,
        })
    }

    async fn get(&self, name: &str) -> Result<Option<StoredTool>, StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            tool_columns!(),
            ", ",
            version_columns!(),
            " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
             WHERE t.name = $1"
        );
        let row = q(Q)
            .bind(name)
            .fetch_optional(&mut *self.db.read().await?)
            .await?;
        row.map(|mut row| stored_from_row(&mut row)).transpose()
    }

    async fn tool(&self, name: &str) -> Result<Option<Tool>, StoreError> {
        let core = self;
        const Q: &str = concat!("SELECT ", tool_columns!(), " FROM tool t WHERE t.name = $1");
        let row = q(Q)
            .bind(name)
            .fetch_optional(&mut *core.db.read().await?)
            .await?;
        row.map(|mut row| tool_from_row(&mut row)).transpose()
    }

    async fn tools(&self) -> Result<Vec<Tool>, StoreError> {
        let core = self;
        const Q: &str = concat!("SELECT ", tool_columns!(), " FROM tool t ORDER BY t.name");
        let mut tools = Vec::new();
        q(Q).for_each(&mut *core.db.read().await?, &mut |mut row| {
            tools.push(tool_from_row(&mut row)?);
            Ok(())
        })
        .await?;
        Ok(tools)
    }

    async fn versions(&self, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
        let core = self;
        const Q: &str = concat!(
            "SELECT ",
            version_columns!(),
            " FROM tool_version v WHERE v.tool = $1 ORDER BY v.number"
        );
        // One statement: a tool always has at least one version, so no rows means no tool.
        let rows = q(Q)
            .bind(name)
            .fetch_all(&mut *core.db.read().await?)
            .await?;
        if rows.is_empty() {
            return Err(tool_not_found(name));
        }
        rows.into_iter()
            .map(|mut row| version_from_row(&mut row))
            .collect()
    }

    async fn version(&self, name: &str, number: u32) -> Result<ToolVersion, StoreError> {
        existing_version(&mut *self.db.read().await?, name, number).await
    }

    async fn versions_with_status(
        &self,
        status: VersionStatus,
        author: Option<&str>,
    ) -> Result<Vec<ToolVersion>, StoreError> {
        let core = self;
        const Q: &str = concat!(
            "SELECT ",
            version_columns!(),
            " FROM tool_version v WHERE v.status = $1 AND ($2 IS NULL OR v.author = $2) \
             ORDER BY v.tool, v.number"
        );
        let rows = q(Q)
            .bind(status.as_str())
            .bind(author)
            .fetch_all(&mut *core.db.read().await?)
            .await?;
        rows.into_iter()
            .map(|mut row| version_from_row(&mut row))
            .collect()
    }

    async fn list_enabled(&self) -> Result<Vec<StoredTool>, StoreError> {
        let mut tools = Vec::new();
        self.for_each_enabled(&mut |t| tools.push(t)).await?;
        Ok(tools)
    }

    async fn for_each_enabled(
        &self,
        each: &mut (dyn FnMut(StoredTool) + Send),
    ) -> Result<(), StoreError> {
        const Q: &str = concat!(
            "SELECT ",
            tool_columns!(),
            ", ",
            version_columns!(),
            " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
             WHERE t.enabled ORDER BY t.updated_seq DESC"
        );
        // Row by row: with all rows held next to their decoded copies, 10,000 tools doubled the
        // server's peak memory at start-up; a caller that keeps a compact form of each tool
        // (the server's catalog) never holds them all decoded either.
        q(Q).for_each(&mut *self.db.read().await?, &mut |mut row| {
            each(stored_from_row(&mut row)?);
            Ok(())
        })
        .await
    }

    async fn set_enabled(
        &self,
        actor: &Actor,
        name: &str,
        enabled: bool,
    ) -> Result<(), StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let Some((current, _)) = current_version(w.conn(), name).await? else {
            return Err(tool_not_found(name));
        };
        let seq = w.change(ChangeKind::Tool, name).await?;
        set_enabled_row(w.conn(), name, enabled, now_ms(), seq).await?;
        let action = if enabled {
            AuditAction::Enable
        } else {
            AuditAction::Disable
        };
        let mut entry = AuditEntry::new(action, AuditObject::Tool, name);
        if let Some(current) = current {
            entry = entry.version(current);
        }
        w.audit(actor, entry).await?;
        w.commit().await
    }

    async fn rollback(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
    ) -> Result<ToolVersion, StoreError> {
        super::review::rollback(self, actor, name, number).await
    }

    async fn approve(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        grants: &[String],
    ) -> Result<ToolVersion, StoreError> {
        super::review::approve(self, actor, name, number, grants).await
    }

    async fn reject(
        &self,
        actor: &Actor,
        name: &str,
        number: u32,
        reason: &str,
    ) -> Result<ToolVersion, StoreError> {
        super::review::reject(self, actor, name, number, reason).await
    }

    async fn purge(&self, actor: &Actor, name: &str) -> Result<(), StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let versions: i64 = q("SELECT count(*) FROM tool_version WHERE tool = $1")
            .bind(name)
            .scalar(w.conn())
            .await?;
        let grants: i64 = q("SELECT count(*) FROM secret_grant WHERE tool = $1")
            .bind(name)
            .scalar(w.conn())
            .await?;
        // Foreign keys cascade from `tool` to its versions, and from them to their grants and
        // example results; the explicit deletes keep purge complete even where foreign keys were
        // off. Stored calls and their hours have no foreign key (the log holds every source's
        // calls).
        for sql in [
            "DELETE FROM call_log WHERE source = 'stored' AND tool = $1",
            "DELETE FROM call_hour WHERE source = 'stored' AND tool = $1",
            "DELETE FROM secret_grant WHERE tool = $1",
            "DELETE FROM example_result WHERE tool = $1",
        ] {
            q(sql).bind(name).execute(w.conn()).await?;
        }
        let done = q("DELETE FROM tool WHERE name = $1")
            .bind(name)
            .execute(w.conn())
            .await?;
        if done == 0 {
            return Err(tool_not_found(name));
        }
        q("DELETE FROM tool_version WHERE tool = $1")
            .bind(name)
            .execute(w.conn())
            .await?;
        w.change(ChangeKind::Tool, name).await?;
        if grants > 0 {
            w.change(ChangeKind::Grant, name).await?;
        }
        let entry = AuditEntry::new(AuditAction::Delete, AuditObject::Tool, name)
            .detail("versions", versions);
        w.audit(actor, entry).await?;
        w.commit().await
    }

    async fn record_example_results(
        &self,
        name: &str,
        number: u32,
        results: Vec<ExampleResult>,
    ) -> Result<(), StoreError> {
        super::examples::record(self, name, number, results).await
    }

    async fn example_results(
        &self,
        name: &str,
        number: u32,
    ) -> Result<Vec<ExampleResult>, StoreError> {
        super::examples::read(self, name, number).await
    }

    /// [`ToolStore::env_ids_in_use`](crate::ToolStore::env_ids_in_use): tool versions' ids, and
    /// the scripts' of resource templates and prompts (stored as JSON, read here).
    async fn env_ids_in_use(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        let core = self;
        let mut tx = core.db.snapshot().await?;
        let mut ids: HashSet<String> = q("SELECT DISTINCT env_id FROM tool_version")
            .scalars::<String>(&mut *tx)
            .await?
            .into_iter()
            .collect();
        for sql in [
            "SELECT script FROM resource_template WHERE script IS NOT NULL",
            "SELECT completion_script FROM resource_template WHERE completion_script IS NOT NULL",
            "SELECT completion_script FROM prompt WHERE completion_script IS NOT NULL",
            "SELECT script FROM prompt WHERE script IS NOT NULL",
        ] {
            for text in q(sql).scalars::<String>(&mut *tx).await? {
                let script: JsonObject = serde_json::from_str(&text)
                    .map_err(|e| corrupt(format!("stored script: {e}")))?;
                if let Some(id) = script.get("env_id").and_then(|v| v.as_str()) {
                    ids.insert(id.to_owned());
                }
            }
        }
        Ok(ids)
    }

    async fn current_seq(&self) -> Result<u64, StoreError> {
        super::changes::current_seq(self).await
    }

    async fn changes_since(&self, seq: u64) -> Result<ChangeSet, StoreError> {
        super::changes::since(self, seq).await
    }

    async fn wait_for_change(&self, seq: u64, max_wait: Duration) {
        self.db
            .wait_for_change(&self.committed, seq, max_wait)
            .await
    }

    async fn backup(&self, dest: &Path) -> Result<(), StoreError> {
        self.db.backup(self, dest).await
    }

    async fn close(&self) {
        self.db.close().await
    }
}
