//! Whole-store reads and writes on SQLite, for copies between backends
//! ([`Backend`](crate::Backend)'s `export` and `import_dump`).

use std::collections::HashMap;

use sqlx::sqlite::SqliteConnection;

use super::SqliteStore;
use super::calls::call_from_row;
use super::changes::kind_of;
use super::content::{
    prompt_from_row, prompt_select, resource_from_row, template_from_row, template_select,
};
use super::rows::{col, corrupt, db, get_u64, to_json};
use super::tools::{
    encode_spec, insert_version, tool_columns, tool_from_row, version_columns, version_from_row,
};
use crate::dump::{DumpedSecret, DumpedTool, StoreDump, not_empty, seq_i64};
use crate::error::StoreError;
use crate::model::{Change, ResourceBody, SecretValue, TemplateBody};
use crate::rules::{checked_i64, encode_outcome};

/// [`Backend::export`](crate::Backend::export): one read transaction.
pub(super) async fn export(store: &SqliteStore) -> Result<StoreDump, StoreError> {
    let mut tx = store.read().await?;
    let data_version: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'data_version'")
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
    let mut versions: HashMap<String, Vec<_>> = HashMap::new();
    let rows = sqlx::query(concat!(
        "SELECT ",
        version_columns!(),
        " FROM tool_version v ORDER BY v.tool, v.number"
    ))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    for row in &rows {
        let v = version_from_row(row)?;
        versions.entry(v.tool.clone()).or_default().push(v);
    }
    let rows = sqlx::query(concat!(
        "SELECT ",
        tool_columns!(),
        ", t.updated_seq AS t_updated_seq FROM tool t ORDER BY t.name"
    ))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut tools = Vec::with_capacity(rows.len());
    for row in &rows {
        let tool = tool_from_row(row)?;
        tools.push(DumpedTool {
            versions: versions.remove(&tool.name).unwrap_or_default(),
            updated_seq: col(row, "t_updated_seq")?,
            tool,
        });
    }
    let rows = sqlx::query(
        "SELECT id, tool, version, started_at_ms, duration_ms, outcome, exit_code, bytes_out, \
         principal, error FROM call_log ORDER BY id",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let calls = rows
        .iter()
        .map(|row| Ok((col(row, "id")?, call_from_row(row)?)))
        .collect::<Result<_, StoreError>>()?;
    let rows = sqlx::query("SELECT name, value, updated_at_ms FROM secret ORDER BY name")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let secrets = rows
        .iter()
        .map(|row| {
            Ok(DumpedSecret {
                name: col(row, "name")?,
                value: SecretValue::new(col::<String, _>(row, "value")?),
                updated_at_ms: col(row, "updated_at_ms")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let rows = sqlx::query(
        "SELECT uri, name, title, description, mime_type, text, blob, enabled, created_at_ms, \
         updated_at_ms, updated_seq FROM resource ORDER BY uri",
    )
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let resources = rows
        .iter()
        .map(resource_from_row)
        .collect::<Result<_, _>>()?;
    let rows = sqlx::query(concat!(template_select!(), " ORDER BY uri_template"))
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let templates = rows
        .iter()
        .map(template_from_row)
        .collect::<Result<_, _>>()?;
    let rows = sqlx::query(concat!(prompt_select!(), " ORDER BY name"))
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let prompts = rows.iter().map(prompt_from_row).collect::<Result<_, _>>()?;
    let rows = sqlx::query("SELECT seq, kind, key, at_ms FROM changes ORDER BY seq")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let changes = rows
        .iter()
        .map(|row| {
            Ok(Change {
                seq: get_u64(row, "seq")?,
                kind: kind_of(row)?,
                key: col(row, "key")?,
                at_ms: col(row, "at_ms")?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    let rows = sqlx::query("SELECT kind, seq FROM change_floor ORDER BY kind")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let floors = rows
        .iter()
        .map(|row| Ok((kind_of(row)?, get_u64(row, "seq")?)))
        .collect::<Result<_, StoreError>>()?;
    Ok(StoreDump {
        data_version: u64::try_from(data_version)
            .map_err(|_| corrupt(format!("negative change counter {data_version}")))?,
        tools,
        calls,
        secrets,
        resources,
        templates,
        prompts,
        changes,
        floors,
    })
}

/// [`Backend::import_dump`](crate::Backend::import_dump): one write transaction.
pub(super) async fn import(store: &SqliteStore, dump: &StoreDump) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let conn = w.conn();
    let used: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM tool) + (SELECT count(*) FROM secret) \
         + (SELECT count(*) FROM resource) + (SELECT count(*) FROM resource_template) \
         + (SELECT count(*) FROM prompt) + (SELECT value FROM meta WHERE key = 'data_version')",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(db)?;
    if used != 0 {
        return Err(not_empty());
    }
    sqlx::query("UPDATE meta SET value = ? WHERE key = 'data_version'")
        .bind(seq_i64(dump.data_version)?)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    for t in &dump.tools {
        sqlx::query(
            "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, \
             updated_seq) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&t.tool.name)
        .bind(t.tool.enabled)
        .bind(i64::from(t.tool.current_version))
        .bind(t.tool.created_at_ms)
        .bind(t.tool.updated_at_ms)
        .bind(t.updated_seq)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        for v in &t.versions {
            insert_version(
                conn,
                &v.tool,
                v.number,
                v.created_at_ms,
                &encode_spec(&v.spec)?,
            )
            .await?;
        }
    }
    for (id, c) in &dump.calls {
        let (outcome, exit_code) = encode_outcome(c.outcome);
        sqlx::query(
            "INSERT INTO call_log (id, tool, version, started_at_ms, duration_ms, outcome, \
             exit_code, bytes_out, principal, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(&c.tool)
        .bind(i64::from(c.version))
        .bind(c.started_at_ms)
        .bind(checked_i64("duration_ms", c.duration_ms)?)
        .bind(outcome)
        .bind(exit_code)
        .bind(checked_i64("bytes_out", c.bytes_out)?)
        .bind(c.principal.as_deref())
        .bind(c.error.as_deref())
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for s in &dump.secrets {
        sqlx::query("INSERT INTO secret (name, value, updated_at_ms) VALUES (?, ?, ?)")
            .bind(&s.name)
            .bind(s.value.expose())
            .bind(s.updated_at_ms)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    import_content(conn, dump).await?;
    for c in &dump.changes {
        sqlx::query("INSERT INTO changes (seq, kind, key, at_ms) VALUES (?, ?, ?, ?)")
            .bind(seq_i64(c.seq)?)
            .bind(c.kind.as_str())
            .bind(&c.key)
            .bind(c.at_ms)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    for (kind, seq) in &dump.floors {
        sqlx::query(
            "INSERT INTO change_floor (kind, seq) VALUES (?, ?) \
             ON CONFLICT (kind) DO UPDATE SET seq = excluded.seq",
        )
        .bind(kind.as_str())
        .bind(seq_i64(*seq)?)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    w.commit().await
}

/// Resources, templates and prompts with their row state.
async fn import_content(conn: &mut SqliteConnection, dump: &StoreDump) -> Result<(), StoreError> {
    for r in &dump.resources {
        let (text, blob) = match &r.spec.body {
            ResourceBody::Text(t) => (Some(t.as_str()), None),
            ResourceBody::Blob(b) => (None, Some(b.as_slice())),
        };
        sqlx::query(
            "INSERT INTO resource (uri, name, title, description, mime_type, text, blob, size, \
             enabled, created_at_ms, updated_at_ms, updated_seq) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&r.spec.uri)
        .bind(&r.spec.name)
        .bind(r.spec.title.as_deref())
        .bind(r.spec.description.as_deref())
        .bind(r.spec.mime_type.as_deref())
        .bind(text)
        .bind(blob)
        .bind(checked_i64("size", r.spec.body.len() as u64)?)
        .bind(r.state.enabled)
        .bind(r.state.created_at_ms)
        .bind(r.state.updated_at_ms)
        .bind(r.state.updated_seq)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for t in &dump.templates {
        let (text, script) = match &t.spec.body {
            TemplateBody::Text(text) => (Some(text.clone()), None),
            TemplateBody::Script(s) => (None, Some(to_json("script", s)?)),
        };
        let completion_script = t
            .spec
            .completion_script
            .as_ref()
            .map(|s| to_json("completion_script", s))
            .transpose()?;
        sqlx::query(
            "INSERT INTO resource_template (uri_template, name, title, description, mime_type, \
             text, script, completions, completion_script, enabled, created_at_ms, updated_at_ms, \
             updated_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&t.spec.uri_template)
        .bind(&t.spec.name)
        .bind(t.spec.title.as_deref())
        .bind(t.spec.description.as_deref())
        .bind(t.spec.mime_type.as_deref())
        .bind(text)
        .bind(script)
        .bind(to_json("completions", &t.spec.completions)?)
        .bind(completion_script)
        .bind(t.state.enabled)
        .bind(t.state.created_at_ms)
        .bind(t.state.updated_at_ms)
        .bind(t.state.updated_seq)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    for p in &dump.prompts {
        let completion_script = p
            .spec
            .completion_script
            .as_ref()
            .map(|s| to_json("completion_script", s))
            .transpose()?;
        sqlx::query(
            "INSERT INTO prompt (name, title, description, arguments, messages, \
             completion_script, enabled, created_at_ms, updated_at_ms, updated_seq) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&p.spec.name)
        .bind(p.spec.title.as_deref())
        .bind(p.spec.description.as_deref())
        .bind(to_json("arguments", &p.spec.arguments)?)
        .bind(to_json("messages", &p.spec.messages)?)
        .bind(completion_script)
        .bind(p.state.enabled)
        .bind(p.state.created_at_ms)
        .bind(p.state.updated_at_ms)
        .bind(p.state.updated_seq)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }
    Ok(())
}
