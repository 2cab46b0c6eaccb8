//! Resources, resource templates and prompts on PostgreSQL (the tables of migration 0002), and pack
//! imports that write tools and all of these in one transaction.
//!
//! Every write that changes something is one change of the feed, and records its `seq` as the
//! row's `updated_seq`. A write that changes nothing (same content, already enabled) is no
//! change: importing a pack twice changes nothing.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::postgres::{PgArguments, PgConnection, PgRow};

use super::rows::{col, corrupt, db, get_json, invalid, now_ms, opt_json, to_json};
use super::tools::{encode_spec, fetch_version, insert_tool, insert_version, next_version_number};
use super::{PgStore, Write};
use crate::error::{NameKind, StoreError};
use crate::model::{
    ChangeKind, ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate, NewVersion,
    ResourceBody, ResourceInfo, RowState, ScriptSpec, StoredPrompt, StoredResource, StoredTemplate,
    TemplateBody, WriteMode, validate_tool_name,
};
use crate::rules::{change_kind, check_key, check_mode, not_found};
use crate::store::ContentStore;

fn state_from_row(row: &PgRow) -> Result<RowState, StoreError> {
    Ok(RowState {
        enabled: col(row, "enabled")?,
        created_at_ms: col(row, "created_at_ms")?,
        updated_at_ms: col(row, "updated_at_ms")?,
        updated_seq: col(row, "updated_seq")?,
    })
}

pub(super) fn resource_from_row(row: &PgRow) -> Result<StoredResource, StoreError> {
    let text: Option<String> = col(row, "text")?;
    let blob: Option<Vec<u8>> = col(row, "blob")?;
    let body = match (text, blob) {
        (Some(t), None) => ResourceBody::Text(t),
        (None, Some(b)) => ResourceBody::Blob(b),
        _ => return Err(corrupt("resource row without exactly one of text and blob")),
    };
    Ok(StoredResource {
        spec: NewResource {
            uri: col(row, "uri")?,
            name: col(row, "name")?,
            title: col(row, "title")?,
            description: col(row, "description")?,
            mime_type: col(row, "mime_type")?,
            body,
        },
        state: state_from_row(row)?,
    })
}

pub(super) fn template_from_row(row: &PgRow) -> Result<StoredTemplate, StoreError> {
    let text: Option<String> = col(row, "text")?;
    let script: Option<ScriptSpec> = opt_json(row, "script")?;
    let body = match (text, script) {
        (Some(t), None) => TemplateBody::Text(t),
        (None, Some(s)) => TemplateBody::Script(s),
        _ => {
            return Err(corrupt(
                "template row without exactly one of text and script",
            ));
        }
    };
    Ok(StoredTemplate {
        spec: NewTemplate {
            uri_template: col(row, "uri_template")?,
            name: col(row, "name")?,
            title: col(row, "title")?,
            description: col(row, "description")?,
            mime_type: col(row, "mime_type")?,
            body,
            completions: get_json(row, "completions")?,
            completion_script: opt_json(row, "completion_script")?,
        },
        state: state_from_row(row)?,
    })
}

pub(super) fn prompt_from_row(row: &PgRow) -> Result<StoredPrompt, StoreError> {
    Ok(StoredPrompt {
        spec: NewPrompt {
            name: col(row, "name")?,
            title: col(row, "title")?,
            description: col(row, "description")?,
            arguments: get_json(row, "arguments")?,
            messages: get_json(row, "messages")?,
            completion_script: opt_json(row, "completion_script")?,
        },
        state: state_from_row(row)?,
    })
}

async fn fetch_resource(
    conn: &mut PgConnection,
    uri: &str,
) -> Result<Option<StoredResource>, StoreError> {
    fetch_row(
        conn,
        "SELECT uri, name, title, description, mime_type, text, blob, enabled, created_at_ms, \
         updated_at_ms, updated_seq FROM resource WHERE uri = $1",
        uri,
        resource_from_row,
    )
    .await
}

/// The row `sql` (with one `?` for `key`) selects, read by `from_row`.
async fn fetch_row<T>(
    conn: &mut PgConnection,
    sql: &'static str,
    key: &str,
    from_row: fn(&PgRow) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let row = sqlx::query(sql)
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    row.as_ref().map(from_row).transpose()
}

/// What every resource, template and prompt write does before its upsert: checks `mode`
/// against the stored row, and returns `None` when that row already holds `new` and is enabled
/// (nothing to write, no change); else records the change and returns `(seq, now)`.
async fn start_write<T: PartialEq>(
    w: &mut Write<'_>,
    kind: NameKind,
    key: &str,
    mode: WriteMode,
    existing: Option<(&T, RowState)>,
    new: &T,
) -> Result<Option<(i64, i64)>, StoreError> {
    check_mode(kind, key, mode, existing.is_some())?;
    if existing.is_some_and(|(spec, state)| spec == new && state.enabled) {
        return Ok(None);
    }
    let seq = w.change(change_kind(kind), key).await?;
    Ok(Some((seq, now_ms())))
}

/// The `SELECT ... FROM resource_template` that [`template_from_row`] reads; a macro so that
/// queries stay `&'static str` literals.
macro_rules! template_select {
    () => {
        "SELECT uri_template, name, title, description, mime_type, text, script, completions, \
         completion_script, enabled, created_at_ms, updated_at_ms, updated_seq FROM resource_template"
    };
}
pub(super) use template_select;

/// The `SELECT ... FROM prompt` that [`prompt_from_row`] reads.
macro_rules! prompt_select {
    () => {
        "SELECT name, title, description, arguments, messages, completion_script, enabled, \
         created_at_ms, updated_at_ms, updated_seq FROM prompt"
    };
}
pub(super) use prompt_select;

/// Runs an upsert whose last three parameters are `created_at_ms`, `updated_at_ms` (both `now`)
/// and `updated_seq`; returns `true` (it changed the row).
async fn upsert(
    conn: &mut PgConnection,
    query: sqlx::query::Query<'_, sqlx::Postgres, PgArguments>,
    now: i64,
    seq: i64,
) -> Result<bool, StoreError> {
    query
        .bind(now)
        .bind(now)
        .bind(seq)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(true)
}

async fn write_resource(
    w: &mut Write<'_>,
    r: &NewResource,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::Resource, &r.uri)?;
    let existing = fetch_resource(w.conn(), &r.uri).await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let Some((seq, now)) = start_write(w, NameKind::Resource, &r.uri, mode, existing, r).await?
    else {
        return Ok(false);
    };
    let (text, blob) = match &r.body {
        ResourceBody::Text(t) => (Some(t.as_str()), None),
        ResourceBody::Blob(b) => (None, Some(b.as_slice())),
    };
    let size = i64::try_from(r.body.len()).map_err(|_| invalid("size", "too large"))?;
    let query = sqlx::query(
        "INSERT INTO resource (uri, name, title, description, mime_type, text, blob, size, \
         enabled, created_at_ms, updated_at_ms, updated_seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, TRUE, $9, $10, $11) \
         ON CONFLICT (uri) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         blob = excluded.blob, size = excluded.size, enabled = TRUE, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq",
    )
    .bind(&r.uri)
    .bind(&r.name)
    .bind(r.title.as_deref())
    .bind(r.description.as_deref())
    .bind(r.mime_type.as_deref())
    .bind(text)
    .bind(blob)
    .bind(size);
    upsert(w.conn(), query, now, seq).await
}

async fn write_template(
    w: &mut Write<'_>,
    t: &NewTemplate,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::ResourceTemplate, &t.uri_template)?;
    let existing = fetch_row(
        w.conn(),
        concat!(template_select!(), " WHERE uri_template = $1"),
        &t.uri_template,
        template_from_row,
    )
    .await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let kind = NameKind::ResourceTemplate;
    let Some((seq, now)) = start_write(w, kind, &t.uri_template, mode, existing, t).await? else {
        return Ok(false);
    };
    let (text, script) = match &t.body {
        TemplateBody::Text(text) => (Some(text.clone()), None),
        TemplateBody::Script(s) => (None, Some(to_json("script", s)?)),
    };
    let completion_script = t
        .completion_script
        .as_ref()
        .map(|s| to_json("completion_script", s))
        .transpose()?;
    let query = sqlx::query(
        "INSERT INTO resource_template (uri_template, name, title, description, mime_type, text, \
         script, completions, completion_script, enabled, created_at_ms, updated_at_ms, updated_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, TRUE, $10, $11, $12) \
         ON CONFLICT (uri_template) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         script = excluded.script, completions = excluded.completions, \
         completion_script = excluded.completion_script, enabled = TRUE, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq",
    )
    .bind(&t.uri_template)
    .bind(&t.name)
    .bind(t.title.as_deref())
    .bind(t.description.as_deref())
    .bind(t.mime_type.as_deref())
    .bind(text)
    .bind(script)
    .bind(to_json("completions", &t.completions)?)
    .bind(completion_script);
    upsert(w.conn(), query, now, seq).await
}

async fn write_prompt(
    w: &mut Write<'_>,
    p: &NewPrompt,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::Prompt, &p.name)?;
    let existing = fetch_row(
        w.conn(),
        concat!(prompt_select!(), " WHERE name = $1"),
        &p.name,
        prompt_from_row,
    )
    .await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let Some((seq, now)) = start_write(w, NameKind::Prompt, &p.name, mode, existing, p).await?
    else {
        return Ok(false);
    };
    let completion_script = p
        .completion_script
        .as_ref()
        .map(|s| to_json("completion_script", s))
        .transpose()?;
    let query = sqlx::query(
        "INSERT INTO prompt (name, title, description, arguments, messages, completion_script, \
         enabled, created_at_ms, updated_at_ms, updated_seq) VALUES ($1, $2, $3, $4, $5, $6, TRUE, $7, $8, $9) \
         ON CONFLICT (name) DO UPDATE SET title = excluded.title, description = excluded.description, \
         arguments = excluded.arguments, messages = excluded.messages, \
         completion_script = excluded.completion_script, enabled = TRUE, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq",
    )
    .bind(&p.name)
    .bind(p.title.as_deref())
    .bind(p.description.as_deref())
    .bind(to_json("arguments", &p.arguments)?)
    .bind(to_json("messages", &p.messages)?)
    .bind(completion_script);
    upsert(w.conn(), query, now, seq).await
}

/// Creates the tool, adds a version, enables it, or does nothing; returns what it did.
async fn write_tool(
    w: &mut Write<'_>,
    name: &str,
    spec: &NewVersion,
) -> Result<Option<String>, StoreError> {
    validate_tool_name(name)?;
    let enc = encode_spec(spec)?;
    let current = sqlx::query("SELECT current_version, enabled FROM tool WHERE name = $1")
        .bind(name)
        .fetch_optional(w.conn())
        .await
        .map_err(db)?;
    let now = now_ms();
    let Some(current) = current else {
        let seq = w.change(ChangeKind::Tool, name).await?;
        insert_tool(w.conn(), name, now, seq, &enc).await?;
        return Ok(Some(format!("tool {name}: created (version 1)")));
    };
    let number: i64 = current.try_get("current_version").map_err(db)?;
    let enabled: bool = current.try_get("enabled").map_err(db)?;
    let number = u32::try_from(number).map_err(|_| corrupt("current_version out of range"))?;
    let version = fetch_version(w.conn(), name, number).await?;
    let same = version.is_some_and(|v| {
        let mut old = v.spec;
        old.author.clone_from(&spec.author);
        old == *spec
    });
    if same {
        if enabled {
            return Ok(None);
        }
        let seq = w.change(ChangeKind::Tool, name).await?;
        sqlx::query(
            "UPDATE tool SET enabled = TRUE, updated_at_ms = $1, updated_seq = $2 WHERE name = $3",
        )
        .bind(now)
        .bind(seq)
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
        return Ok(Some(format!("tool {name}: enabled")));
    }
    let next = next_version_number(w.conn(), name)
        .await?
        .ok_or_else(|| corrupt("tool without versions"))?;
    let seq = w.change(ChangeKind::Tool, name).await?;
    insert_version(w.conn(), name, next, now, &enc).await?;
    sqlx::query(
        "UPDATE tool SET current_version = $1, enabled = TRUE, updated_at_ms = $2, updated_seq = $3 WHERE name = $4",
    )
    .bind(i64::from(next))
    .bind(now)
    .bind(seq)
    .bind(name)
    .execute(w.conn())
    .await
    .map_err(db)?;
    Ok(Some(format!("tool {name}: version {next}")))
}

async fn delete_row(
    store: &PgStore,
    kind: NameKind,
    sql: &'static str,
    key: &str,
) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let done = sqlx::query(sql)
        .bind(key)
        .execute(w.conn())
        .await
        .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(not_found(kind, key));
    }
    w.change(change_kind(kind), key).await?;
    w.commit().await
}

/// Counts one write of an import: `changed` names it in the report, else it was unchanged.
fn tally(report: &mut ImportReport, changed: bool, what: impl FnOnce() -> String) {
    if changed {
        report.changed.push(what());
    } else {
        report.unchanged += 1;
    }
}

impl PgStore {
    /// Every row `sql` selects, read by `from_row`.
    async fn list_rows<T>(
        &self,
        sql: &'static str,
        from_row: fn(&PgRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = sqlx::query(sql).fetch_all(&self.pool).await.map_err(db)?;
        rows.iter().map(from_row).collect()
    }
}

#[async_trait]
impl ContentStore for PgStore {
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT uri, name, title, description, mime_type, size, text IS NOT NULL AS is_text, \
             enabled, created_at_ms, updated_at_ms, updated_seq FROM resource ORDER BY uri COLLATE \"C\"",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let size: i64 = col(row, "size")?;
                Ok(ResourceInfo {
                    uri: col(row, "uri")?,
                    name: col(row, "name")?,
                    title: col(row, "title")?,
                    description: col(row, "description")?,
                    mime_type: col(row, "mime_type")?,
                    size: u64::try_from(size).map_err(|_| corrupt("negative size"))?,
                    is_text: col(row, "is_text")?,
                    state: state_from_row(row)?,
                })
            })
            .collect()
    }

    async fn get_resource(&self, uri: &str) -> Result<Option<StoredResource>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        fetch_resource(&mut conn, uri).await
    }

    async fn put_resource(
        &self,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        let mut w = self.write().await?;
        let changed = write_resource(&mut w, &resource, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_resource(&self, uri: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::Resource,
            "DELETE FROM resource WHERE uri = $1",
            uri,
        )
        .await
    }

    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError> {
        self.list_rows(
            concat!(template_select!(), " ORDER BY uri_template COLLATE \"C\""),
            template_from_row,
        )
        .await
    }

    async fn put_template(
        &self,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        let mut w = self.write().await?;
        let changed = write_template(&mut w, &template, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_template(&self, uri_template: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::ResourceTemplate,
            "DELETE FROM resource_template WHERE uri_template = $1",
            uri_template,
        )
        .await
    }

    async fn get_template(&self, uri_template: &str) -> Result<Option<StoredTemplate>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        fetch_row(
            &mut conn,
            concat!(template_select!(), " WHERE uri_template = $1"),
            uri_template,
            template_from_row,
        )
        .await
    }

    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError> {
        self.list_rows(
            concat!(prompt_select!(), " ORDER BY name COLLATE \"C\""),
            prompt_from_row,
        )
        .await
    }

    async fn put_prompt(&self, prompt: NewPrompt, mode: WriteMode) -> Result<bool, StoreError> {
        let mut w = self.write().await?;
        let changed = write_prompt(&mut w, &prompt, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_prompt(&self, name: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::Prompt,
            "DELETE FROM prompt WHERE name = $1",
            name,
        )
        .await
    }

    async fn get_prompt(&self, name: &str) -> Result<Option<StoredPrompt>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        fetch_row(
            &mut conn,
            concat!(prompt_select!(), " WHERE name = $1"),
            name,
            prompt_from_row,
        )
        .await
    }

    async fn import(&self, batch: ImportBatch) -> Result<ImportReport, StoreError> {
        let mut w = self.write().await?;
        let mut report = ImportReport::default();
        for (name, spec) in &batch.tools {
            match write_tool(&mut w, name, spec).await? {
                Some(line) => report.changed.push(line),
                None => report.unchanged += 1,
            }
        }
        for r in &batch.resources {
            let changed = write_resource(&mut w, r, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("resource {}", r.uri));
        }
        for t in &batch.templates {
            let changed = write_template(&mut w, t, WriteMode::Upsert).await?;
            tally(&mut report, changed, || {
                format!("resource template {}", t.uri_template)
            });
        }
        for p in &batch.prompts {
            let changed = write_prompt(&mut w, p, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("prompt {}", p.name));
        }
        w.commit().await?;
        Ok(report)
    }
}
