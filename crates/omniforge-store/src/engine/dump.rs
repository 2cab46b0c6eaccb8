//! Whole-store export and import ([`Backend`](crate::Backend)), for copies between backends:
//! every table, row for row, in one snapshot and one transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::Engine;
use super::audit::{audit_columns, record_from_row};
use super::calls::{call_columns, call_from_row, insert_call_with_id};
use super::changes::{counter, kind_of};
use super::content::{
    prompt_from_row, prompt_select, resource_from_row, resource_select, template_from_row,
    template_select, upsert_prompt, upsert_resource, upsert_template,
};
use super::examples::{insert_result, result_from_row};
use super::exec::{Conn, q};
use super::grants::{grant_columns, grant_from_row, insert_grant_row};
use super::hours::{HourRow, hour_columns, hour_from_row, upsert_hour};
use super::outputs::{insert_output, output_columns, output_from_row};
use super::rows::{corrupt, get_u32, get_u64};
use super::secrets::{open_row, upsert_sealed};
use super::tasks::{insert_task, task_columns, task_from_row};
use super::tool_rows::{
    encode_spec, insert_version_row, tool_columns, tool_from_row, version_columns, version_from_row,
};
use crate::dump::Backend;
use crate::dump::{
    DumpedExampleResult, DumpedHour, DumpedSecret, DumpedTool, DumpedValue, StoreDump,
};
use crate::error::StoreError;
use crate::keyring::Sealed;
use crate::model::{AuditRecord, Change, SecretValue};
use crate::stats::Histogram;
use crate::validate::checked_i64;

/// How an export gives secret values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretsAs {
    /// Opened with the store's keyring ([`DumpedValue::Open`]): a copy into a store with
    /// another keyring.
    Opened,
    /// Sealed as stored ([`DumpedValue::Sealed`]; plain-text values of an older build opened):
    /// a backup, which needs no key.
    Stored,
}

/// [`Backend::export`](crate::Backend::export): one read snapshot.
pub(crate) async fn export(core: &Engine, secrets_as: SecretsAs) -> Result<StoreDump, StoreError> {
    let mut tx = core.db.snapshot().await?;
    let c: &mut dyn Conn = &mut *tx;
    let data_version = counter(c).await?;
    let audit_pruned_before_ms: i64 =
        q("SELECT value FROM meta WHERE key = 'audit_pruned_before_ms'")
            .scalar(c)
            .await?;
    let mut tools: BTreeMap<String, DumpedTool> = BTreeMap::new();
    for mut row in q(concat!(
        "SELECT ",
        tool_columns!(),
        " FROM tool t ORDER BY t.name"
    ))
    .fetch_all(c)
    .await?
    {
        let updated_seq: i64 = row.get("t_updated_seq")?;
        let tool = tool_from_row(&mut row)?;
        let entry = DumpedTool {
            tool,
            updated_seq,
            versions: Vec::new(),
        };
        tools.insert(entry.tool.name.clone(), entry);
    }
    for mut row in q(concat!(
        "SELECT ",
        version_columns!(),
        " FROM tool_version v ORDER BY v.tool, v.number"
    ))
    .fetch_all(c)
    .await?
    {
        let version = version_from_row(&mut row)?;
        tools
            .get_mut(&version.tool)
            .ok_or_else(|| corrupt(format!("version of unknown tool {:?}", version.tool)))?
            .versions
            .push(version);
    }
    let mut example_results = Vec::new();
    for mut row in q(
        "SELECT tool, version, idx, passed, actual, failure, run_trigger, ran_by, \
         ran_at_ms FROM example_result ORDER BY tool, version, idx",
    )
    .fetch_all(c)
    .await?
    {
        example_results.push(DumpedExampleResult {
            tool: row.get("tool")?,
            version: get_u32(&mut row, "version")?,
            result: result_from_row(&mut row)?,
        });
    }
    let mut calls = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_log ORDER BY id"
    ))
    .fetch_all(c)
    .await?
    {
        calls.push(call_from_row(&mut row)?);
    }
    let mut hours = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        hour_columns!(),
        " FROM call_hour ORDER BY hour_start_ms, source, tool"
    ))
    .fetch_all(c)
    .await?
    {
        let h = hour_from_row(&mut row)?;
        hours.push(DumpedHour {
            hour_start_ms: h.hour_start_ms,
            source: h.source,
            tool: h.tool,
            calls: h.calls,
            errors: h.errors,
            max_ms: h.histogram.max_ms(),
            last_call_ms: h.last_call_ms,
            buckets: h.histogram.counts().to_vec(),
        });
    }
    let mut secrets = Vec::new();
    for mut row in q("SELECT name, value, sealed, key_id, updated_at_ms FROM secret ORDER BY name")
        .fetch_all(c)
        .await?
    {
        let updated_at_ms: i64 = row.get("updated_at_ms")?;
        let (name, value) = match secrets_as {
            SecretsAs::Opened => {
                let (name, value) = open_row(core, &mut row)?;
                (name, DumpedValue::Open(value))
            }
            SecretsAs::Stored => stored_value(&mut row)?,
        };
        secrets.push(DumpedSecret {
            name,
            value,
            updated_at_ms,
        });
    }
    let mut grants = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM secret_grant ORDER BY secret, tool, version"
    ))
    .fetch_all(c)
    .await?
    {
        grants.push(grant_from_row(&mut row)?);
    }
    let mut audit = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        audit_columns!(),
        " FROM audit_log ORDER BY id"
    ))
    .fetch_all(c)
    .await?
    {
        audit.push(record_from_row(&mut row)?);
    }
    let mut outputs = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        output_columns!(),
        " FROM kept_output ORDER BY run_id"
    ))
    .fetch_all(c)
    .await?
    {
        outputs.push(output_from_row(&mut row)?);
    }
    let mut tasks = Vec::new();
    for mut row in q(concat!(
        "SELECT ",
        task_columns!(),
        " FROM task ORDER BY task_id"
    ))
    .fetch_all(c)
    .await?
    {
        tasks.push(task_from_row(&mut row)?);
    }
    let mut resources = Vec::new();
    for mut row in q(concat!(resource_select!(), " ORDER BY uri"))
        .fetch_all(c)
        .await?
    {
        resources.push(resource_from_row(&mut row)?);
    }
    let mut templates = Vec::new();
    for mut row in q(concat!(template_select!(), " ORDER BY uri_template"))
        .fetch_all(c)
        .await?
    {
        templates.push(template_from_row(&mut row)?);
    }
    let mut prompts = Vec::new();
    for mut row in q(concat!(prompt_select!(), " ORDER BY name"))
        .fetch_all(c)
        .await?
    {
        prompts.push(prompt_from_row(&mut row)?);
    }
    let mut changes = Vec::new();
    for mut row in q("SELECT seq, kind, key, at_ms FROM changes ORDER BY seq")
        .fetch_all(c)
        .await?
    {
        changes.push(Change {
            seq: get_u64(&mut row, "seq")?,
            kind: kind_of(&mut row)?,
            key: row.get("key")?,
            at_ms: row.get("at_ms")?,
        });
    }
    let mut floors = Vec::new();
    for mut row in q("SELECT kind, seq FROM change_floor ORDER BY kind")
        .fetch_all(c)
        .await?
    {
        floors.push((kind_of(&mut row)?, get_u64(&mut row, "seq")?));
    }
    Ok(StoreDump {
        data_version: u64::try_from(data_version)
            .map_err(|_| corrupt(format!("negative change counter {data_version}")))?,
        audit_pruned_before_ms,
        tools: tools.into_values().collect(),
        example_results,
        calls,
        hours,
        secrets,
        grants,
        audit,
        outputs,
        tasks,
        resources,
        templates,
        prompts,
        changes,
        floors,
    })
}

/// The error of an import into a store that is not empty.
fn not_empty() -> StoreError {
    StoreError::Conflict {
        reason: "the target store is not empty (a copy goes into a new database)".into(),
    }
}

/// Inserts a tool, its versions as they were, then its current version (the schema wants a
/// tool inserted without one, and a current version that is live).
async fn import_tool(c: &mut dyn Conn, t: &DumpedTool) -> Result<(), StoreError> {
    let tool = &t.tool;
    q(
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, \
       updated_seq) VALUES ($1, $2, NULL, $3, $4, $5)",
    )
    .bind(&tool.name)
    .bind(tool.enabled)
    .bind(tool.created_at_ms)
    .bind(tool.updated_at_ms)
    .bind(t.updated_seq)
    .execute(c)
    .await?;
    for v in &t.versions {
        let enc = encode_spec(&v.spec)?;
        insert_version_row(c, &tool.name, v.number, v.created_at_ms, &enc, &v.state).await?;
    }
    if let Some(current) = tool.current_version {
        q("UPDATE tool SET current_version = $1 WHERE name = $2")
            .bind(current)
            .bind(&tool.name)
            .execute(c)
            .await?;
    }
    Ok(())
}

/// Inserts an audit record with its id and time.
async fn import_audit(c: &mut dyn Conn, r: &AuditRecord) -> Result<(), StoreError> {
    let detail = serde_json::to_string(&r.detail)
        .map_err(|e| crate::validate::invalid("detail", e.to_string()))?;
    q(
        "INSERT INTO audit_log (id, at_ms, principal, action, object_kind, object_name, version, \
       definition_sha256, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(checked_i64("audit id", r.id)?)
    .bind(r.at_ms)
    .bind(&r.principal)
    .bind(r.action.as_str())
    .bind(r.object.as_str())
    .bind(&r.name)
    .bind(r.version)
    .bind(r.definition_sha256.as_deref())
    .bind(detail)
    .execute(c)
    .await?;
    Ok(())
}

/// A `secret` row's value as stored: sealed bytes with their key id, or (an older build's
/// plain text, not sealed yet) the plain value.
fn stored_value(row: &mut super::exec::Row) -> Result<(String, DumpedValue), StoreError> {
    let name: String = row.get("name")?;
    let value: Option<String> = row.get("value")?;
    let sealed: Option<Vec<u8>> = row.get("sealed")?;
    let key_id: Option<String> = row.get("key_id")?;
    let value = match (value, sealed, key_id) {
        (None, Some(bytes), Some(key_id)) => DumpedValue::Sealed { key_id, bytes },
        (Some(plain), None, None) => DumpedValue::Open(SecretValue::new(plain)),
        _ => {
            return Err(corrupt(format!(
                "secret {name:?} has neither one value nor one sealed value"
            )));
        }
    };
    Ok((name, value))
}

#[async_trait]
impl Backend for Engine {
    fn kind(&self) -> &'static str {
        self.db.kind()
    }

    async fn export(&self) -> Result<StoreDump, StoreError> {
        export(self, SecretsAs::Opened).await
    }

    /// [`Backend::import_dump`](crate::Backend::import_dump): one write transaction.
    async fn import_dump(&self, dump: &StoreDump) -> Result<(), StoreError> {
        let core = self;
        // Seal first: a target without a keyring fails before anything is written. A value sealed
        // as stored is written as it is.
        let mut sealed = Vec::with_capacity(dump.secrets.len());
        for s in &dump.secrets {
            let seal = match &s.value {
                DumpedValue::Open(value) => core.keyring()?.seal(&s.name, value.expose())?,
                DumpedValue::Sealed { key_id, bytes } => Sealed {
                    key_id: key_id.clone(),
                    bytes: bytes.clone(),
                },
            };
            sealed.push((s, seal));
        }
        let mut w = core.write().await?;
        let c = w.conn();
        if counter(c).await? != 0 {
            return Err(not_empty());
        }
        for table in [
            "SELECT count(*) FROM tool",
            "SELECT count(*) FROM secret",
            "SELECT count(*) FROM resource",
            "SELECT count(*) FROM resource_template",
            "SELECT count(*) FROM prompt",
            "SELECT count(*) FROM call_log",
            "SELECT count(*) FROM call_hour",
            "SELECT count(*) FROM audit_log",
            "SELECT count(*) FROM kept_output",
            "SELECT count(*) FROM task",
        ] {
            if q(table).scalar::<i64>(c).await? != 0 {
                return Err(not_empty());
            }
        }
        q("UPDATE meta SET value = $1 WHERE key = 'data_version'")
            .bind(checked_i64("data_version", dump.data_version)?)
            .execute(c)
            .await?;
        q("UPDATE meta SET value = $1 WHERE key = 'audit_pruned_before_ms'")
            .bind(dump.audit_pruned_before_ms)
            .execute(c)
            .await?;
        for t in &dump.tools {
            import_tool(c, t).await?;
        }
        for e in &dump.example_results {
            insert_result(c, &e.tool, e.version, &e.result).await?;
        }
        for call in &dump.calls {
            insert_call_with_id(c, checked_i64("call id", call.id)?, &call.call).await?;
        }
        for h in &dump.hours {
            let histogram = Histogram::from_counts(&h.buckets, h.max_ms).ok_or_else(|| {
                crate::validate::invalid("buckets", format!("{} buckets", h.buckets.len()))
            })?;
            let row = HourRow {
                hour_start_ms: h.hour_start_ms,
                source: h.source,
                tool: h.tool.clone(),
                calls: h.calls,
                errors: h.errors,
                last_call_ms: h.last_call_ms,
                histogram,
            };
            upsert_hour(c, &row).await?;
        }
        for (s, seal) in &sealed {
            upsert_sealed(c, &s.name, seal, s.updated_at_ms).await?;
        }
        for g in &dump.grants {
            insert_grant_row(c, g).await?;
        }
        for r in &dump.audit {
            import_audit(c, r).await?;
        }
        for o in &dump.outputs {
            insert_output(c, o).await?;
        }
        for t in &dump.tasks {
            insert_task(c, t).await?;
        }
        for r in &dump.resources {
            upsert_resource(c, &r.spec, &r.state).await?;
        }
        for t in &dump.templates {
            upsert_template(c, &t.spec, &t.state).await?;
        }
        for p in &dump.prompts {
            upsert_prompt(c, &p.spec, &p.state).await?;
        }
        for ch in &dump.changes {
            q("INSERT INTO changes (seq, kind, key, at_ms) VALUES ($1, $2, $3, $4)")
                .bind(checked_i64("seq", ch.seq)?)
                .bind(ch.kind.as_str())
                .bind(&ch.key)
                .bind(ch.at_ms)
                .execute(c)
                .await?;
        }
        for (kind, seq) in &dump.floors {
            q("INSERT INTO change_floor (kind, seq) VALUES ($1, $2) \
               ON CONFLICT (kind) DO UPDATE SET seq = excluded.seq")
            .bind(kind.as_str())
            .bind(checked_i64("seq", *seq)?)
            .execute(c)
            .await?;
        }
        for sql in core.db.after_import() {
            q(sql).execute(c).await?;
        }
        w.commit().await
    }
}
