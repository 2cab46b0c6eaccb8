//! Stored resources, resource templates and prompts ([`ContentStore`]), and pack imports that
//! write tools and all of these in one transaction ([`ContentStore::import`]).
//!
//! Unlike tools they are not versioned: a write replaces the row. Every write that changes
//! something bumps the shared change counter ([`ToolStore::data_version`]) in its own
//! transaction and records that counter value as the row's `updated_seq`, so a server polling
//! the counter can tell exactly which resources changed (for `notifications/resources/updated`)
//! and whether a list changed (for `list_changed`). A write that changes nothing (same content,
//! already enabled) does not bump the counter: importing a pack twice changes nothing.
//!
//! This module knows nothing of MCP: prompt messages are kept as JSON values the server
//! validated, template and completion scripts as [`ScriptSpec`]s the server built.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::Row;
use sqlx::sqlite::{SqliteArguments, SqliteConnection, SqliteRow};

use crate::error::{self, NameKind, StoreError};
use crate::model::{NewVersion, validate_tool_name};
use crate::sqlite::{
    SqliteStore, bump, col, corrupt, encode_spec, fetch_version, get_json, insert_tool,
    insert_version, invalid, next_version_number, now_ms, to_json,
};
use crate::store::ToolStore;

/// A script that runs in the tools' sandbox: the code of a script-backed resource template, or
/// of a completion provider. Its environment was built from `lock` before it was stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptSpec {
    /// Python source.
    pub code: String,
    /// PEP 508 requirements as written.
    pub dependencies: Vec<String>,
    /// The resolved, hash-pinned requirements text.
    pub lock: String,
    /// The built environment's id (shared with tools of the same lock).
    pub env_id: String,
    /// Wall-clock limit of one run, milliseconds.
    pub timeout_ms: u64,
    /// Address-space limit of one run, bytes.
    pub memory_bytes: u64,
    /// Whether the script may use the network.
    pub network: bool,
}

/// The content of a stored resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceBody {
    /// UTF-8 text (MCP `text`).
    Text(String),
    /// Bytes (MCP `blob`, base64 on the wire).
    Blob(Vec<u8>),
}

impl ResourceBody {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            ResourceBody::Text(t) => t.len(),
            ResourceBody::Blob(b) => b.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A resource as written: its URI is its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewResource {
    /// Absolute URI, unique.
    pub uri: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType`.
    pub mime_type: Option<String>,
    /// Text or bytes.
    pub body: ResourceBody,
}

/// Bookkeeping every stored resource, template and prompt has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowState {
    /// Disabled rows are kept but not served.
    pub enabled: bool,
    /// Unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// Unix milliseconds (UTC) of the last change.
    pub updated_at_ms: i64,
    /// The change counter value of the transaction that last changed the row.
    pub updated_seq: i64,
}

/// A stored resource without its body, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInfo {
    /// URI.
    pub uri: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType`.
    pub mime_type: Option<String>,
    /// Bytes of the body.
    pub size: u64,
    /// Whether the body is text (else a blob).
    pub is_text: bool,
    /// Row state.
    pub state: RowState,
}

/// A stored resource with its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResource {
    /// What was written.
    pub spec: NewResource,
    /// Row state.
    pub state: RowState,
}

/// How a resource template produces the contents of a matching URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateBody {
    /// A text pattern in which each `{variable}` of the URI template is replaced.
    Text(String),
    /// A script that gets the variables as JSON on stdin and prints the text.
    Script(ScriptSpec),
}

/// A resource template as written: its URI template is its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTemplate {
    /// RFC 6570 URI template, unique.
    pub uri_template: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// MCP `mimeType` of the contents it produces.
    pub mime_type: Option<String>,
    /// Text pattern or script.
    pub body: TemplateBody,
    /// Declared values per variable, for `completion/complete`.
    pub completions: BTreeMap<String, Vec<String>>,
    /// A script that completes variables (instead of, or besides, declared values).
    pub completion_script: Option<ScriptSpec>,
}

/// A stored resource template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTemplate {
    /// What was written.
    pub spec: NewTemplate,
    /// Row state.
    pub state: RowState,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgumentSpec {
    /// Argument name, used as `{name}` in the messages.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether prompts/get must receive it.
    #[serde(default)]
    pub required: bool,
    /// Declared values, for `completion/complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A prompt as written: its name is its key.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPrompt {
    /// 1 to 64 characters from `[a-zA-Z0-9_-]`.
    pub name: String,
    /// MCP `title`.
    pub title: Option<String>,
    /// MCP `description`.
    pub description: Option<String>,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentSpec>,
    /// MCP `PromptMessage` objects with `{argument}` placeholders.
    pub messages: Vec<Value>,
    /// A script that completes arguments.
    pub completion_script: Option<ScriptSpec>,
}

/// A stored prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPrompt {
    /// What was written.
    pub spec: NewPrompt,
    /// Row state.
    pub state: RowState,
}

/// Whether a write may create, replace, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// The key must be new ([`StoreError::Duplicate`] otherwise).
    Create,
    /// The key must exist ([`StoreError::NotFound`] otherwise).
    Update,
    /// Either.
    Upsert,
}

/// What a pack import writes, all in one transaction.
#[derive(Debug, Clone, Default)]
pub struct ImportBatch {
    /// Tools by name, with the version to store when it differs from the current one.
    pub tools: Vec<(String, NewVersion)>,
    /// Resources.
    pub resources: Vec<NewResource>,
    /// Resource templates.
    pub templates: Vec<NewTemplate>,
    /// Prompts.
    pub prompts: Vec<NewPrompt>,
}

/// What an import did: one line per entry that changed, e.g. `tool add_vat: version 2`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// The entries created or changed.
    pub changed: Vec<String>,
    /// How many entries were already exactly as in the pack.
    pub unchanged: usize,
}

/// Persistence for resources, resource templates and prompts, on the same database (and change
/// counter) as the tools.
///
/// Writes take the same write lock as tool writes and are durable when they return. Keys are
/// checked for length and, for prompts, [`validate_tool_name`]'s rule; everything else is the
/// server's job to validate. Writing a row enables it.
#[async_trait]
pub trait ContentStore: ToolStore {
    /// Every resource without its body, enabled or not, by URI.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError>;

    /// One resource with its body.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_resource(&self, uri: &str) -> Result<Option<StoredResource>, StoreError>;

    /// Writes a resource; returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] / [`StoreError::NotFound`] as `mode` says;
    /// [`StoreError::InvalidName`] for an empty or too long URI; [`StoreError::Database`].
    async fn put_resource(
        &self,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_resource(&self, uri: &str) -> Result<(), StoreError>;

    /// Every resource template, enabled or not, by URI template.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError>;

    /// Writes a resource template; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource).
    async fn put_template(
        &self,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource template.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_template(&self, uri_template: &str) -> Result<(), StoreError>;

    /// Every prompt, enabled or not, by name.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError>;

    /// Writes a prompt; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource); [`StoreError::InvalidName`] for a bad name.
    async fn put_prompt(&self, prompt: NewPrompt, mode: WriteMode) -> Result<bool, StoreError>;

    /// Removes a prompt.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Database`].
    async fn delete_prompt(&self, name: &str) -> Result<(), StoreError>;

    /// Writes a whole pack in one transaction: every entry is upserted (a tool whose current
    /// version equals the given one, author aside, gets no new version; a disabled one is
    /// enabled). Either everything is written or, on any error, nothing. The change counter
    /// moves only if something changed.
    ///
    /// # Errors
    /// The first failing entry's error (names validated, [`StoreError::Invalid`] fields);
    /// [`StoreError::Database`].
    async fn import(&self, batch: ImportBatch) -> Result<ImportReport, StoreError>;
}

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

fn not_found(kind: NameKind, key: &str) -> StoreError {
    StoreError::NotFound {
        kind,
        name: key.to_owned(),
        version: None,
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

fn state_from_row(row: &SqliteRow) -> Result<RowState, StoreError> {
    Ok(RowState {
        enabled: col(row, "enabled")?,
        created_at_ms: col(row, "created_at_ms")?,
        updated_at_ms: col(row, "updated_at_ms")?,
        updated_seq: col(row, "updated_seq")?,
    })
}

fn opt_json<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = col(row, column)?;
    text.map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}

fn resource_from_row(row: &SqliteRow) -> Result<StoredResource, StoreError> {
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

fn template_from_row(row: &SqliteRow) -> Result<StoredTemplate, StoreError> {
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

fn prompt_from_row(row: &SqliteRow) -> Result<StoredPrompt, StoreError> {
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
    conn: &mut SqliteConnection,
    uri: &str,
) -> Result<Option<StoredResource>, StoreError> {
    fetch_row(
        conn,
        "SELECT uri, name, title, description, mime_type, text, blob, enabled, created_at_ms, \
         updated_at_ms, updated_seq FROM resource WHERE uri = ?",
        uri,
        resource_from_row,
    )
    .await
}

/// The row `sql` (with one `?` for `key`) selects, read by `from_row`.
async fn fetch_row<T>(
    conn: &mut SqliteConnection,
    sql: &'static str,
    key: &str,
    from_row: fn(&SqliteRow) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let row = sqlx::query(sql)
        .bind(key)
        .fetch_optional(conn)
        .await
        .map_err(error::db)?;
    row.as_ref().map(from_row).transpose()
}

/// What every resource, template and prompt write does before its upsert: checks `mode`
/// against the stored row, and returns `None` when that row already holds `new` and is enabled
/// (nothing to write, no counter bump); else bumps the counter and returns `(seq, now)`.
async fn start_write<T: PartialEq>(
    conn: &mut SqliteConnection,
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
    let seq = bump(conn).await?;
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

/// The `SELECT ... FROM prompt` that [`prompt_from_row`] reads.
macro_rules! prompt_select {
    () => {
        "SELECT name, title, description, arguments, messages, completion_script, enabled, \
         created_at_ms, updated_at_ms, updated_seq FROM prompt"
    };
}

/// Runs an upsert whose last three parameters are `created_at_ms`, `updated_at_ms` (both `now`)
/// and `updated_seq`; returns `true` (it changed the row).
async fn upsert(
    conn: &mut SqliteConnection,
    query: sqlx::query::Query<'_, sqlx::Sqlite, SqliteArguments>,
    now: i64,
    seq: i64,
) -> Result<bool, StoreError> {
    query
        .bind(now)
        .bind(now)
        .bind(seq)
        .execute(conn)
        .await
        .map_err(error::db)?;
    Ok(true)
}

async fn write_resource(
    conn: &mut SqliteConnection,
    r: &NewResource,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::Resource, &r.uri)?;
    let existing = fetch_resource(&mut *conn, &r.uri).await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let Some((seq, now)) =
        start_write(&mut *conn, NameKind::Resource, &r.uri, mode, existing, r).await?
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
         enabled, created_at_ms, updated_at_ms, updated_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) \
         ON CONFLICT (uri) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         blob = excluded.blob, size = excluded.size, enabled = 1, \
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
    upsert(conn, query, now, seq).await
}

async fn write_template(
    conn: &mut SqliteConnection,
    t: &NewTemplate,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::ResourceTemplate, &t.uri_template)?;
    let existing = fetch_row(
        &mut *conn,
        concat!(template_select!(), " WHERE uri_template = ?"),
        &t.uri_template,
        template_from_row,
    )
    .await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let kind = NameKind::ResourceTemplate;
    let Some((seq, now)) =
        start_write(&mut *conn, kind, &t.uri_template, mode, existing, t).await?
    else {
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
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) \
         ON CONFLICT (uri_template) DO UPDATE SET name = excluded.name, title = excluded.title, \
         description = excluded.description, mime_type = excluded.mime_type, text = excluded.text, \
         script = excluded.script, completions = excluded.completions, \
         completion_script = excluded.completion_script, enabled = 1, \
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
    upsert(conn, query, now, seq).await
}

async fn write_prompt(
    conn: &mut SqliteConnection,
    p: &NewPrompt,
    mode: WriteMode,
) -> Result<bool, StoreError> {
    check_key(NameKind::Prompt, &p.name)?;
    let existing = fetch_row(
        &mut *conn,
        concat!(prompt_select!(), " WHERE name = ?"),
        &p.name,
        prompt_from_row,
    )
    .await?;
    let existing = existing.as_ref().map(|e| (&e.spec, e.state));
    let Some((seq, now)) =
        start_write(&mut *conn, NameKind::Prompt, &p.name, mode, existing, p).await?
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
         enabled, created_at_ms, updated_at_ms, updated_seq) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?) \
         ON CONFLICT (name) DO UPDATE SET title = excluded.title, description = excluded.description, \
         arguments = excluded.arguments, messages = excluded.messages, \
         completion_script = excluded.completion_script, enabled = 1, \
         updated_at_ms = excluded.updated_at_ms, updated_seq = excluded.updated_seq",
    )
    .bind(&p.name)
    .bind(p.title.as_deref())
    .bind(p.description.as_deref())
    .bind(to_json("arguments", &p.arguments)?)
    .bind(to_json("messages", &p.messages)?)
    .bind(completion_script);
    upsert(conn, query, now, seq).await
}

/// Creates the tool, adds a version, enables it, or does nothing; returns what it did.
async fn write_tool(
    conn: &mut SqliteConnection,
    name: &str,
    spec: &NewVersion,
) -> Result<Option<String>, StoreError> {
    validate_tool_name(name)?;
    let enc = encode_spec(spec)?;
    let current = sqlx::query("SELECT current_version, enabled FROM tool WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *conn)
        .await
        .map_err(error::db)?;
    let now = now_ms();
    let Some(current) = current else {
        let seq = bump(&mut *conn).await?;
        insert_tool(&mut *conn, name, now, seq, &enc).await?;
        return Ok(Some(format!("tool {name}: created (version 1)")));
    };
    let number: i64 = current.try_get("current_version").map_err(error::db)?;
    let enabled: bool = current.try_get("enabled").map_err(error::db)?;
    let number = u32::try_from(number).map_err(|_| corrupt("current_version out of range"))?;
    let version = fetch_version(&mut *conn, name, number).await?;
    let same = version.is_some_and(|v| {
        let mut old = v.spec;
        old.author.clone_from(&spec.author);
        old == *spec
    });
    if same {
        if enabled {
            return Ok(None);
        }
        let seq = bump(&mut *conn).await?;
        sqlx::query(
            "UPDATE tool SET enabled = 1, updated_at_ms = ?, updated_seq = ? WHERE name = ?",
        )
        .bind(now)
        .bind(seq)
        .bind(name)
        .execute(&mut *conn)
        .await
        .map_err(error::db)?;
        return Ok(Some(format!("tool {name}: enabled")));
    }
    let next = next_version_number(&mut *conn, name)
        .await?
        .ok_or_else(|| corrupt("tool without versions"))?;
    let seq = bump(&mut *conn).await?;
    insert_version(&mut *conn, name, next, now, &enc).await?;
    sqlx::query(
        "UPDATE tool SET current_version = ?, enabled = 1, updated_at_ms = ?, updated_seq = ? WHERE name = ?",
    )
    .bind(i64::from(next))
    .bind(now)
    .bind(seq)
    .bind(name)
    .execute(&mut *conn)
    .await
    .map_err(error::db)?;
    Ok(Some(format!("tool {name}: version {next}")))
}

async fn delete_row(
    store: &SqliteStore,
    kind: NameKind,
    sql: &'static str,
    key: &str,
) -> Result<(), StoreError> {
    store
        .in_write(async |conn| {
            let done = sqlx::query(sql)
                .bind(key)
                .execute(&mut *conn)
                .await
                .map_err(error::db)?;
            if done.rows_affected() == 0 {
                return Err(not_found(kind, key));
            }
            bump(conn).await?;
            Ok(())
        })
        .await
}

/// Counts one write of an import: `changed` names it in the report, else it was unchanged.
fn tally(report: &mut ImportReport, changed: bool, what: impl FnOnce() -> String) {
    if changed {
        report.changed.push(what());
    } else {
        report.unchanged += 1;
    }
}

impl SqliteStore {
    /// Runs `f` in one write transaction, committed when `f` succeeds.
    async fn in_write<T>(
        &self,
        f: impl AsyncFnOnce(&mut SqliteConnection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut tx = self.write().await?;
        let out = f(&mut tx).await?;
        tx.commit().await.map_err(error::db)?;
        Ok(out)
    }

    /// Every row `sql` selects, read by `from_row`.
    async fn list_rows<T>(
        &self,
        sql: &'static str,
        from_row: fn(&SqliteRow) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = sqlx::query(sql)
            .fetch_all(&self.reader_pool())
            .await
            .map_err(error::db)?;
        rows.iter().map(from_row).collect()
    }
}

#[async_trait]
impl ContentStore for SqliteStore {
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT uri, name, title, description, mime_type, size, text IS NOT NULL AS is_text, \
             enabled, created_at_ms, updated_at_ms, updated_seq FROM resource ORDER BY uri",
        )
        .fetch_all(&self.reader_pool())
        .await
        .map_err(error::db)?;
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
        let mut conn = self.reader_pool().acquire().await.map_err(error::db)?;
        fetch_resource(&mut conn, uri).await
    }

    async fn put_resource(
        &self,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        self.in_write(async |conn| write_resource(conn, &resource, mode).await)
            .await
    }

    async fn delete_resource(&self, uri: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::Resource,
            "DELETE FROM resource WHERE uri = ?",
            uri,
        )
        .await
    }

    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError> {
        self.list_rows(
            concat!(template_select!(), " ORDER BY uri_template"),
            template_from_row,
        )
        .await
    }

    async fn put_template(
        &self,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError> {
        self.in_write(async |conn| write_template(conn, &template, mode).await)
            .await
    }

    async fn delete_template(&self, uri_template: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::ResourceTemplate,
            "DELETE FROM resource_template WHERE uri_template = ?",
            uri_template,
        )
        .await
    }

    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError> {
        self.list_rows(concat!(prompt_select!(), " ORDER BY name"), prompt_from_row)
            .await
    }

    async fn put_prompt(&self, prompt: NewPrompt, mode: WriteMode) -> Result<bool, StoreError> {
        self.in_write(async |conn| write_prompt(conn, &prompt, mode).await)
            .await
    }

    async fn delete_prompt(&self, name: &str) -> Result<(), StoreError> {
        delete_row(
            self,
            NameKind::Prompt,
            "DELETE FROM prompt WHERE name = ?",
            name,
        )
        .await
    }

    async fn import(&self, batch: ImportBatch) -> Result<ImportReport, StoreError> {
        let mut tx = self.write().await?;
        let mut report = ImportReport::default();
        for (name, spec) in &batch.tools {
            match write_tool(&mut tx, name, spec).await? {
                Some(line) => report.changed.push(line),
                None => report.unchanged += 1,
            }
        }
        for r in &batch.resources {
            let changed = write_resource(&mut tx, r, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("resource {}", r.uri));
        }
        for t in &batch.templates {
            let changed = write_template(&mut tx, t, WriteMode::Upsert).await?;
            tally(&mut report, changed, || {
                format!("resource template {}", t.uri_template)
            });
        }
        for p in &batch.prompts {
            let changed = write_prompt(&mut tx, p, WriteMode::Upsert).await?;
            tally(&mut report, changed, || format!("prompt {}", p.name));
        }
        tx.commit().await.map_err(error::db)?;
        Ok(report)
    }
}
