//! Resources, resource templates and prompts, and pack imports that write tools and all of
//! these in one transaction.
//!
//! Every write that changes something is one change of the feed, and records its `seq` as the
//! row's `updated_seq`, and one audit record with the definition's hash. A write that changes
//! nothing (same content, already enabled) is neither: importing a pack twice changes nothing
//! (the second import writes only its summary record).

use async_trait::async_trait;

use super::exec::{Conn, Q, Row, q};
use super::rows::{corrupt, get_json, get_u64, invalid, not_found, now_ms, opt_json, to_json};
use super::tool_rows::{
    current_version, encode_spec, fetch_version, insert_tool, insert_version, next_version_number,
    set_current_version, set_enabled_row,
};
use super::{Engine, Write};
use crate::digest::{prompt_sha256, resource_sha256, template_sha256, version_sha256};
use crate::error::{NameKind, StoreError};
use crate::model::{
    Actor, AuditAction, AuditEntry, AuditObject, ChangeKind, ImportBatch, ImportReport, NewPrompt,
    NewResource, NewStatus, NewTemplate, NewVersion, ResourceBody, ResourceInfo, RowState,
    ScriptSpec, StoredPrompt, StoredResource, StoredTemplate, TemplateBody, WriteMode,
    validate_tool_name,
};
use crate::store::ContentStore;

fn check_key(kind: NameKind, key: &str) -> Result<(), StoreError> {
    let ok = match kind {
        NameKind::Prompt => validate_tool_name(key).is_ok(),
        _ => (1..=4096).contains(&key.len()),
    };
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind,
            name: key.to_owned(),
        })
    }
}

/// The feed's kind and the audit log's object for a content key's kind.
fn kinds(kind: NameKind) -> (ChangeKind, AuditObject) {
    match kind {
        NameKind::ResourceTemplate => (ChangeKind::ResourceTemplate, AuditObject::ResourceTemplate),
        NameKind::Prompt => (ChangeKind::Prompt, AuditObject::Prompt),
        _ => (ChangeKind::Resource, AuditObject::Resource),
    }
}

fn check_mode(kind: NameKind, key: &str, mode: WriteMode, exists: bool) -> Result<(), StoreError> {
    match (mode, exists) {
        (WriteMode::Create, true) => Err(StoreError::Duplicate {
            kind,
            name: key.to_owned(),
        }),
        (WriteMode::Update, false) => Err(not_found(kind, key)),
        _ => Ok(()),
    }
}

fn state_from_row(row: &mut Row) -> Result<RowState, StoreError> {
    Ok(RowState {
        enabled: row.get("enabled")?,
        created_at_ms: row.get("created_at_ms")?,
        updated_at_ms: row.get("updated_at_ms")?,
        updated_seq: row.get("updated_seq")?,
    })
}

/// A `resource` row read with [`RESOURCE_SELECT`].
pub(super) fn resource_from_row(row: &mut Row) -> Result<StoredResource, StoreError> {
    let text: Option<String> = row.get("text")?;
    let blob: Option<Vec<u8>> = row.get("blob")?;
    let body = match (text, blob) {
        (Some(t), None) => ResourceBody::Text(t),
        (None, Some(b)) => ResourceBody::Blob(b),
        _ => return Err(corrupt("resource row without exactly one of text and blob")),
    };
    Ok(StoredResource {
        spec: NewResource {
            uri: row.get("uri")?,
            name: row.get("name")?,
            title: row.get("title")?,
            description: row.get("description")?,
            mime_type: row.get("mime_type")?,
            body,
        },
        state: state_from_row(row)?,
    })
}

/// A `resource_template` row read with [`template_select!`].
pub(super) fn template_from_row(row: &mut Row) -> Result<StoredTemplate, StoreError> {
    let text: Option<String> = row.get("text")?;
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
            uri_template: row.get("uri_template")?,
            name: row.get("name")?,
            title: row.get("title")?,
            description: row.get("description")?,
            mime_type: row.get("mime_type")?,
            body,
            completions: get_json(row, "completions")?,
            completion_script: opt_json(row, "completion_script")?,
        },
        state: state_from_row(row)?,
    })
}

/// A `prompt` row read with [`prompt_select!`].
pub(super) fn prompt_from_row(row: &mut Row) -> Result<StoredPrompt, StoreError> {
    Ok(StoredPrompt {
        spec: NewPrompt {
            name: row.get("name")?,
            title: row.get("title")?,
            description: row.get("description")?,
            arguments: get_json(row, "arguments")?,
            messages: get_json(row, "messages")?,
            script: opt_json(row, "script")?,
            completion_script: opt_json(row, "completion_script")?,
        },
        state: state_from_row(row)?,
    })
}

/// The `SELECT ... FROM resource` that [`resource_from_row`] reads.
macro_rules! resource_select {
    () => {
        "SELECT uri, name, title, description, mime_type, text, blob, enabled, created_at_ms, \
         updated_at_ms, updated_seq FROM resource"
    };
}
pub(super) use resource_select;

/// The `SELECT ... FROM resource_template` that [`template_from_row`] reads.
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
        "SELECT name, title, description, arguments, messages, script, completion_script, \
         enabled, created_at_ms, updated_at_ms, updated_seq FROM prompt"
    };
}
pub(super) use prompt_select;

/// The row `sql` (with `$1` for `key`) selects, read by `from_row`.
pub(super) async fn fetch_row<T>(
    conn: &mut dyn Conn,
    sql: &'static str,
    key: &str,
    from_row: fn(&mut Row) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let row = q(sql).bind(key).fetch_optional(conn).await?;
    row.map(|mut row| from_row(&mut row)).transpose()
}

/// Every row `sql` selects, read by `from_row`.
async fn list_rows<T>(
    core: &Engine,
    sql: &'static str,
    from_row: fn(&mut Row) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let rows = q(sql).fetch_all(&mut *core.db.read().await?).await?;
    rows.into_iter().map(|mut row| from_row(&mut row)).collect()
}

/// What every resource, template and prompt write does before its upsert: checks `mode`
/// against the stored row, and returns `None` when that row already holds `new` and is enabled
/// (nothing to write, no change, no record); else records the change and the action (`create`
/// or `update`, with the definition's hash `sha256`), and returns the row state to write.
#[allow(clippy::too_many_arguments)]
async fn start_write<T: PartialEq>(
    w: &mut Write<'_>,
    actor: &Actor,
    kind: NameKind,
    key: &str,
    mode: WriteMode,
    existing: Option<(&T, RowState)>,
    new: &T,
    sha256: impl FnOnce(&T) -> String,
) -> Result<Option<RowState>, StoreError> {
    check_mode(kind, key, mode, existing.is_some())?;
    if existing.is_some_and(|(spec, state)| spec == new && state.enabled) {
        return Ok(None);
    }
    let (change, object) = kinds(kind);
    let seq = w.change(change, key).await?;
    let action = if existing.is_some() {
        AuditAction::Update
    } else {
        AuditAction::Create
    };
    w.audit(
        actor,
        AuditEntry::new(action, object, key).hash(sha256(new)),
    )
    .await?;
    let now = now_ms();
    Ok(Some(RowState {
        enabled: true,
        created_at_ms: existing.map_or(now, |(_, state)| state.created_at_ms),
        updated_at_ms: now,
        updated_seq: seq,
    }))
}

/// Binds a row state's columns after the others: `enabled`, `created_at_ms` (kept by an
/// update), `updated_at_ms`, `updated_seq`.
fn bind_state<'a>(query: Q<'a>, state: &RowState) -> Q<'a> {
    query
        .bind(state.enabled)
        .bind(state.created_at_ms)
        .bind(state.updated_at_ms)
        .bind(state.updated_seq)
}

/// Inserts or replaces a resource row.
pub(super) async fn upsert_resource(
    conn: &mut dyn Conn,
    r: &NewResource,
    state: &RowState,
) -> Result<(), StoreError> {
    let (text, blob) = match &r.body {
        ResourceBody::Text(t) => (Some(t.as_str()), None),
        ResourceBody::Blob(b) => (None, Some(b.as_slice())),
    };
    let size = i64::try_from(r.body.len()).map_err(|_| invalid("size", "too large"))?;
    let query = q(
        "INSERT INTO resource (uri, name, title, description, mime_type, text, blob, \
         size, enabled, created_at_ms, updated_at_ms, updated_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (uri) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         blob = excluded.blob, size = excluded.size, enabled = excluded.enabled, \
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
    bind_state(query, state).execute(conn).await?;
    Ok(())
}

/// Inserts or replaces a resource template row.
pub(super) async fn upsert_template(
    conn: &mut dyn Conn,
    t: &NewTemplate,
    state: &RowState,
) -> Result<(), StoreError> {
    let (text, script) = match &t.body {
        TemplateBody::Text(text) => (Some(text.clone()), None),
        TemplateBody::Script(s) => (None, Some(to_json("script", s)?)),
    };
    let completion_script = t
        .completion_script
        .as_ref()
        .map(|s| to_json("completion_script", s))
        .transpose()?;
    let query = q("INSERT INTO resource_template (uri_template, name, title, description, \
         mime_type, text, script, completions, completion_script, enabled, created_at_ms, \
         updated_at_ms, updated_seq) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
         ON CONFLICT (uri_template) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         script = excluded.script, completions = excluded.completions, \
         completion_script = excluded.completion_script, enabled = excluded.enabled, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq")
    .bind(&t.uri_template)
    .bind(&t.name)
    .bind(t.title.as_deref())
    .bind(t.description.as_deref())
    .bind(t.mime_type.as_deref())
    .bind(text)
    .bind(script)
    .bind(to_json("completions", &t.completions)?)
    .bind(completion_script);
    bind_state(query, state).execute(conn).await?;
    Ok(())
}

/// Inserts or replaces a prompt row.
pub(super) async fn upsert_prompt(
    conn: &mut dyn Conn,
    p: &NewPrompt,
    state: &RowState,
) -> Result<(), StoreError> {
    let completion_script = p
        .completion_script
        .as_ref()
        .map(|s| to_json("completion_script", s))
        .transpose()?;
    let script = p
        .script
        .as_ref()
        .map(|s| to_json("script", s))
        .transpose()?;
    let query = q("INSERT INTO prompt (name, title, description, arguments, messages, \
         script, completion_script, enabled, created_at_ms, updated_at_ms, updated_seq) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (name) DO UPDATE SET title = excluded.title, description = excluded.description, \
         arguments = excluded.arguments, messages = excluded.messages, script = excluded.script, \
         completion_script = excluded.completion_script, enabled = excluded.enabled, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq")
    .bind(&p.name)
    .bind(p.title.as_deref())
    .bind(p.description.as_deref())
    .bind(to_json("arguments", &p.arguments)?)
    .bind(to_json("messages", &p.messages)?)
    .bind(script)
    .bind(completion_script);
    bind_state(query, state).execute(conn).await?;
    Ok(())
}

async fn write_resource(
    w: &mut Write<'_>,
    actor: &Actor,
    r: &NewResource,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::Resource, &r.uri)?;
    let existing = fetch_row(
        w.conn(),
        concat!(resource_select!(), " WHERE uri = $1"),
        &r.uri,
        resource_from_row,
    )
    .await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let kind = NameKind::Resource;
    let Some(state) =
        start_write(w, actor, kind, &r.uri, mode, existing, r, resource_sha256).await?
    else {
        return Ok(false);
    };
    upsert_resource(w.conn(), r, &state).await?;
    Ok(true)
}

async fn write_template(
    w: &mut Write<'_>,
    actor: &Actor,
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
    let key = &t.uri_template;
    let Some(state) = start_write(w, actor, kind, key, mode, existing, t, template_sha256).await?
    else {
        return Ok(false);
    };
    upsert_template(w.conn(), t, &state).await?;
    Ok(true)
}

async fn write_prompt(
    w: &mut Write<'_>,
    actor: &Actor,
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
    let kind = NameKind::Prompt;
    let Some(state) =
        start_write(w, actor, kind, &p.name, mode, existing, p, prompt_sha256).await?
    else {
        return Ok(false);
    };
    upsert_prompt(w.conn(), p, &state).await?;
    Ok(true)
}

/// Creates the tool, adds a live version, enables it, or does nothing; returns what it did,
/// with its audit record.
async fn write_tool(
    w: &mut Write<'_>,
    actor: &Actor,
    name: &str,
    spec: &NewVersion,
) -> Result<Option<String>, StoreError> {
    validate_tool_name(name)?;
    let enc = encode_spec(spec)?;
    let current = current_version(w.conn(), name).await?;
    let now = now_ms();
    let Some((number, enabled)) = current else {
        let seq = w.change(ChangeKind::Tool, name).await?;
        insert_tool(w.conn(), name, now, seq).await?;
        insert_version(w.conn(), name, 1, now, &enc, &NewStatus::Live).await?;
        set_current_version(w.conn(), name, 1, now, seq).await?;
        let entry = AuditEntry::new(AuditAction::Create, AuditObject::Tool, name)
            .version(1)
            .hash(version_sha256(spec))
            .detail("status", "live");
        w.audit(actor, entry).await?;
        return Ok(Some(format!("tool {name}: created (version 1)")));
    };
    let version = match number {
        Some(number) => fetch_version(w.conn(), name, number).await?,
        None => None,
    };
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
        set_enabled_row(w.conn(), name, true, now, seq).await?;
        let mut entry = AuditEntry::new(AuditAction::Enable, AuditObject::Tool, name);
        if let Some(number) = number {
            entry = entry.version(number);
        }
        w.audit(actor, entry).await?;
        return Ok(Some(format!("tool {name}: enabled")));
    }
    let next = next_version_number(w.conn(), name)
        .await?
        .ok_or_else(|| corrupt("tool without versions"))?;
    let seq = w.change(ChangeKind::Tool, name).await?;
    insert_version(w.conn(), name, next, now, &enc, &NewStatus::Live).await?;
    set_enabled_row(w.conn(), name, true, now, seq).await?;
    set_current_version(w.conn(), name, next, now, seq).await?;
    let entry = AuditEntry::new(AuditAction::Update, AuditObject::Tool, name)
        .version(next)
        .hash(version_sha256(spec))
        .detail("status", "live")
        .detail("previous_version", number);
    w.audit(actor, entry).await?;
    Ok(Some(format!("tool {name}: version {next}")))
}

async fn delete_row(
    core: &Engine,
    actor: &Actor,
    kind: NameKind,
    sql: &'static str,
    key: &str,
) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = core.write().await?;
    let done = q(sql).bind(key).execute(w.conn()).await?;
    if done == 0 {
        return Err(not_found(kind, key));
    }
    let (change, object) = kinds(kind);
    w.change(change, key).await?;
    w.audit(actor, AuditEntry::new(AuditAction::Delete, object, key))
        .await?;
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

#[async_trait]
impl ContentStore for Engine {
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError> {
        let core = self;
        let rows = q("SELECT uri, name, title, description, mime_type, size, \
             text IS NOT NULL AS is_text, enabled, created_at_ms, updated_at_ms, updated_seq \
             FROM resource ORDER BY uri")
        .fetch_all(&mut *core.db.read().await?)
        .await?;
        rows.into_iter()
            .map(|mut row| {
                Ok(ResourceInfo {
                    uri: row.get("uri")?,
                    name: row.get("name")?,
                    title: row.get("title")?,
                    description: row.get("description")?,
                    mime_type: row.get("mime_type")?,
                    size: get_u64(&mut row, "size")?,
                    is_text: row.get("is_text")?,
                    state: state_from_row(&mut row)?,
                })
            })
            .collect()
    }

    async fn get_resource(&self, uri: &str) -> Result<Option<StoredResource>, StoreError> {
        let core = self;
        let sql = concat!(resource_select!(), " WHERE uri = $1");
        fetch_row(&mut *core.db.read().await?, sql, uri, resource_from_row).await
    }

    async fn put_resource(
        &self,
        actor: &Actor,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let changed = write_resource(&mut w, actor, &resource, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_resource(&self, actor: &Actor, uri: &str) -> Result<(), StoreError> {
        let core = self;
        let sql = "DELETE FROM resource WHERE uri = $1";
        delete_row(core, actor, NameKind::Resource, sql, uri).await
    }

    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError> {
        let core = self;
        let sql = concat!(template_select!(), " ORDER BY uri_template");
        list_rows(core, sql, template_from_row).await
    }

    async fn put_template(
        &self,
        actor: &Actor,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let changed = write_template(&mut w, actor, &template, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_template(&self, actor: &Actor, uri_template: &str) -> Result<(), StoreError> {
        let core = self;
        let key = uri_template;
        let sql = "DELETE FROM resource_template WHERE uri_template = $1";
        delete_row(core, actor, NameKind::ResourceTemplate, sql, key).await
    }

    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError> {
        let core = self;
        list_rows(
            core,
            concat!(prompt_select!(), " ORDER BY name"),
            prompt_from_row,
        )
        .await
    }

    async fn put_prompt(
        &self,
        actor: &Actor,
        prompt: NewPrompt,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        let core = self;
        actor.validate()?;
        let mut w = core.write().await?;
        let changed = write_prompt(&mut w, actor, &prompt, mode).await?;
        w.commit().await?;
        Ok(changed)
    }

    async fn delete_prompt(&self, actor: &Actor, name: &str) -> Result<(), StoreError> {
        let core = self;
        let sql = "DELETE FROM prompt WHERE name = $1";
        delete_row(core, actor, NameKind::Prompt, sql, name).await
    }

    async fn get_prompt(&self, name: &str) -> Result<Option<StoredPrompt>, StoreError> {
        let core = self;
        let sql = concat!(prompt_select!(), " WHERE name = $1");
        fetch_row(&mut *core.db.read().await?, sql, name, prompt_from_row).await
    }

    async fn import(&self, actor: &Actor, batch: ImportBatch) -> Result<ImportReport, StoreError> {
        let core = self;
        actor.validate()?;
        // Each entry's record says it came with the import.
        let entry_actor = actor.clone().with("via", "import");
        let a = &entry_actor;
        let mut w = core.write().await?;
        let mut report = ImportReport::default();
        for (name, spec) in &batch.tools {
            match write_tool(&mut w, a, name, spec).await? {
                Some(line) => report.changed.push(line),
                None => report.unchanged += 1,
            }
        }
        for r in &batch.resources {
            let changed = write_resource(&mut w, a, r, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("resource {}", r.uri));
        }
        for t in &batch.templates {
            let changed = write_template(&mut w, a, t, WriteMode::Upsert).await?;
            tally(&mut report, changed, || {
                format!("resource template {}", t.uri_template)
            });
        }
        for p in &batch.prompts {
            let changed = write_prompt(&mut w, a, p, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("prompt {}", p.name));
        }
        let summary = AuditEntry::new(AuditAction::Import, AuditObject::Pack, "pack")
            .detail("changed", report.changed.clone())
            .detail("unchanged", report.unchanged);
        w.audit(actor, summary).await?;
        w.commit().await?;
        Ok(report)
    }
}
