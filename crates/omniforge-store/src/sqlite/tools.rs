//! Tools and their immutable versions on SQLite: the `tool` and `tool_version` tables (status
//! changes are in `review.rs`).
//!
//! A tool row is inserted without a current version and then pointed at its first live version,
//! if any (a trigger refuses pointing it at a version that is not live). A version's content
//! columns never change (trigger); its status columns change only in `review.rs`.

use std::collections::HashSet;

use futures::TryStreamExt as _;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use super::rows::{col, corrupt, db, get_json, get_u32, get_u64, now_ms, to_json};
use super::{SqliteStore, Write};
use crate::digest::version_sha256;
use crate::error::{NameKind, StoreError};
use crate::model::{
    Actor, Annotations, AuditAction, AuditEntry, AuditObject, ChangeKind, JsonObject, Limits,
    NewStatus, NewVersion, Runtime, StoredTool, Tool, ToolVersion, VersionState, VersionStatus,
    validate_tool_name,
};
use crate::validate::{check_version, checked_i64, status_reason};

pub(super) fn tool_not_found(name: &str) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: None,
    }
}

pub(super) fn version_not_found(name: &str, number: u32) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: Some(number),
    }
}

/// A [`NewVersion`] checked and turned into column values, before any transaction begins.
pub(super) struct EncodedSpec<'a> {
    spec: &'a NewVersion,
    input_schema: String,
    output_schema: Option<String>,
    dependencies: String,
    secrets: String,
    examples: String,
    timeout_ms: i64,
    memory_bytes: i64,
}

pub(super) fn encode_spec(spec: &NewVersion) -> Result<EncodedSpec<'_>, StoreError> {
    check_version(spec)?;
    Ok(EncodedSpec {
        spec,
        input_schema: to_json("input_schema", &spec.input_schema)?,
        output_schema: spec
            .output_schema
            .as_ref()
            .map(|s| to_json("output_schema", s))
            .transpose()?,
        dependencies: to_json("dependencies", &spec.dependencies)?,
        secrets: to_json("secrets", &spec.secrets)?,
        examples: to_json("examples", &spec.examples)?,
        timeout_ms: checked_i64("limits.timeout_ms", spec.limits.timeout_ms)?,
        memory_bytes: checked_i64("limits.memory_bytes", spec.limits.memory_bytes)?,
    })
}

/// Inserts a tool row, enabled, without a current version.
pub(super) async fn insert_tool(
    conn: &mut SqliteConnection,
    name: &str,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq) \
         VALUES (?, 1, NULL, ?, ?, ?)",
    )
    .bind(name)
    .bind(now)
    .bind(now)
    .bind(seq)
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// The number the next version of `name` gets; `None` when it has no versions (no such tool).
pub(super) async fn next_version_number(
    conn: &mut SqliteConnection,
    name: &str,
) -> Result<Option<u32>, StoreError> {
    let highest: Option<i64> =
        sqlx::query_scalar("SELECT max(number) FROM tool_version WHERE tool = ?")
            .bind(name)
            .fetch_one(conn)
            .await
            .map_err(db)?;
    highest
        .map(|highest| {
            u32::try_from(highest + 1).map_err(|_| StoreError::Conflict {
                reason: format!("tool {name:?} has no version numbers left"),
            })
        })
        .transpose()
}

/// The current version number of `name`: `Ok(None)` for no such tool, `Ok(Some(None))` for a
/// tool without a current version.
pub(super) async fn current_version(
    conn: &mut SqliteConnection,
    name: &str,
) -> Result<Option<Option<u32>>, StoreError> {
    let row: Option<Option<i64>> =
        sqlx::query_scalar("SELECT current_version FROM tool WHERE name = ?")
            .bind(name)
            .fetch_optional(conn)
            .await
            .map_err(db)?;
    row.map(|current| {
        current
            .map(|n| u32::try_from(n).map_err(|_| corrupt(format!("current_version {n}"))))
            .transpose()
    })
    .transpose()
}

/// Points `name` at live version `number` (enabled state unchanged).
pub(super) async fn set_current_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tool SET current_version = ?, updated_at_ms = ?, updated_seq = ? WHERE name = ?",
    )
    .bind(i64::from(number))
    .bind(now)
    .bind(seq)
    .bind(name)
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Marks `name` as changed by the change `seq` (a status change or a version that did not
/// become current).
pub(super) async fn touch_tool(
    conn: &mut SqliteConnection,
    name: &str,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE tool SET updated_at_ms = ?, updated_seq = ? WHERE name = ?")
        .bind(now)
        .bind(seq)
        .bind(name)
        .execute(conn)
        .await
        .map_err(db)?;
    Ok(())
}

/// Inserts version `number` of `name` in `status`; returns its state.
pub(super) async fn insert_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
    now: i64,
    enc: &EncodedSpec<'_>,
    status: &NewStatus,
) -> Result<VersionState, StoreError> {
    let s = enc.spec;
    let state = VersionState {
        status: match status {
            NewStatus::Live => VersionStatus::Live,
            NewStatus::Pending => VersionStatus::Pending,
            NewStatus::Draft { .. } => VersionStatus::Draft,
        },
        reason: status_reason(status).map(str::to_owned),
        decided_by: None,
        decided_at_ms: None,
    };
    sqlx::query(
        "INSERT INTO tool_version (tool, number, title, description, input_schema, output_schema, \
         read_only_hint, destructive_hint, idempotent_hint, open_world_hint, runtime, code, \
         dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, author, \
         created_at_ms, examples, status, status_reason) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(name)
    .bind(i64::from(number))
    .bind(s.title.as_deref())
    .bind(&s.description)
    .bind(&enc.input_schema)
    .bind(enc.output_schema.as_deref())
    .bind(s.annotations.read_only_hint)
    .bind(s.annotations.destructive_hint)
    .bind(s.annotations.idempotent_hint)
    .bind(s.annotations.open_world_hint)
    .bind(s.runtime.as_str())
    .bind(&s.code)
    .bind(&enc.dependencies)
    .bind(enc.timeout_ms)
    .bind(enc.memory_bytes)
    .bind(s.limits.network)
    .bind(&s.lock)
    .bind(&s.env_id)
    .bind(&enc.secrets)
    .bind(&s.author)
    .bind(now)
    .bind(&enc.examples)
    .bind(state.status.as_str())
    .bind(state.reason.as_deref())
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(state)
}

/// The columns [`version_from_row`] reads, from a `tool_version` aliased `v`. A macro so that
/// queries stay `&'static str` literals built with `concat!`.
macro_rules! version_columns {
    () => {
        "v.tool AS v_tool, v.number AS v_number, v.title AS v_title, \
         v.description AS v_description, v.input_schema AS v_input_schema, \
         v.output_schema AS v_output_schema, v.read_only_hint AS v_read_only_hint, \
         v.destructive_hint AS v_destructive_hint, v.idempotent_hint AS v_idempotent_hint, \
         v.open_world_hint AS v_open_world_hint, v.runtime AS v_runtime, v.code AS v_code, \
         v.dependencies AS v_dependencies, v.timeout_ms AS v_timeout_ms, \
         v.memory_bytes AS v_memory_bytes, v.network AS v_network, v.lock AS v_lock, \
         v.env_id AS v_env_id, v.secrets AS v_secrets, v.author AS v_author, \
         v.created_at_ms AS v_created_at_ms, v.examples AS v_examples, v.status AS v_status, \
         v.status_reason AS v_status_reason, v.status_by AS v_status_by, \
         v.status_at_ms AS v_status_at_ms"
    };
}

/// The columns [`tool_from_row`] reads, from a `tool` aliased `t`.
macro_rules! tool_columns {
    () => {
        "t.name AS t_name, t.enabled AS t_enabled, t.current_version AS t_current_version, \
         t.created_at_ms AS t_created_at_ms, t.updated_at_ms AS t_updated_at_ms"
    };
}

pub(super) fn version_from_row(row: &SqliteRow) -> Result<ToolVersion, StoreError> {
    let output_schema: Option<String> = col(row, "v_output_schema")?;
    let output_schema = output_schema
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| corrupt(format!("column v_output_schema: {e}")))?;
    let runtime: String = col(row, "v_runtime")?;
    let status: String = col(row, "v_status")?;
    let spec = NewVersion {
        title: col(row, "v_title")?,
        description: col(row, "v_description")?,
        input_schema: get_json::<JsonObject>(row, "v_input_schema")?,
        output_schema,
        annotations: Annotations {
            read_only_hint: col(row, "v_read_only_hint")?,
            destructive_hint: col(row, "v_destructive_hint")?,
            idempotent_hint: col(row, "v_idempotent_hint")?,
            open_world_hint: col(row, "v_open_world_hint")?,
        },
        runtime: Runtime::parse(&runtime)
            .ok_or_else(|| corrupt(format!("unknown runtime {runtime:?}")))?,
        code: col(row, "v_code")?,
        dependencies: get_json(row, "v_dependencies")?,
        limits: Limits {
            timeout_ms: get_u64(row, "v_timeout_ms")?,
            memory_bytes: get_u64(row, "v_memory_bytes")?,
            network: col(row, "v_network")?,
        },
        lock: col(row, "v_lock")?,
        env_id: col(row, "v_env_id")?,
        secrets: get_json(row, "v_secrets")?,
        author: col(row, "v_author")?,
        examples: get_json(row, "v_examples")?,
    };
    Ok(ToolVersion {
        tool: col(row, "v_tool")?,
        number: get_u32(row, "v_number")?,
        created_at_ms: col(row, "v_created_at_ms")?,
        spec,
        state: VersionState {
            status: VersionStatus::parse(&status)
                .ok_or_else(|| corrupt(format!("unknown version status {status:?}")))?,
            reason: col(row, "v_status_reason")?,
            decided_by: col(row, "v_status_by")?,
            decided_at_ms: col(row, "v_status_at_ms")?,
        },
    })
}

fn tool_from_row(row: &SqliteRow) -> Result<Tool, StoreError> {
    let current: Option<i64> = col(row, "t_current_version")?;
    Ok(Tool {
        name: col(row, "t_name")?,
        enabled: col(row, "t_enabled")?,
        current_version: current
            .map(|n| u32::try_from(n).map_err(|_| corrupt(format!("current_version {n}"))))
            .transpose()?,
        created_at_ms: col(row, "t_created_at_ms")?,
        updated_at_ms: col(row, "t_updated_at_ms")?,
    })
}

fn stored_from_row(row: &SqliteRow) -> Result<StoredTool, StoreError> {
    Ok(StoredTool {
        tool: tool_from_row(row)?,
        current: version_from_row(row)?,
    })
}

const SELECT_VERSION: &str = concat!(
    "SELECT ",
    version_columns!(),
    " FROM tool_version v WHERE v.tool = ? AND v.number = ?"
);

pub(super) async fn fetch_version(
    conn: &mut SqliteConnection,
    name: &str,
    number: u32,
) -> Result<Option<ToolVersion>, StoreError> {
    let row = sqlx::query(SELECT_VERSION)
        .bind(name)
        .bind(i64::from(number))
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    row.as_ref().map(version_from_row).transpose()
}

pub(super) async fn tool_exists(
    conn: &mut SqliteConnection,
    name: &str,
) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT 1 FROM tool WHERE name = ?")
        .bind(name)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    Ok(row.is_some())
}

pub(super) async fn create_tool(
    store: &SqliteStore,
    actor: &Actor,
    name: &str,
    spec: NewVersion,
    status: NewStatus,
) -> Result<ToolVersion, StoreError> {
    actor.validate()?;
    validate_tool_name(name)?;
    let enc = encode_spec(&spec)?;
    let hash = version_sha256(&spec);
    let mut w = store.write().await?;
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

pub(super) async fn add_version(
    store: &SqliteStore,
    actor: &Actor,
    name: &str,
    spec: NewVersion,
    status: NewStatus,
) -> Result<ToolVersion, StoreError> {
    actor.validate()?;
    let enc = encode_spec(&spec)?;
    let hash = version_sha256(&spec);
    let mut w = store.write().await?;
    let Some(number) = next_version_number(w.conn(), name).await? else {
        return Err(tool_not_found(name));
    };
    let previous = current_version(w.conn(), name).await?.flatten();
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
        supersede(&mut w, actor, name, &spec.author, number, now).await?;
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

/// Rejects `author`'s pending versions of `name` other than `newer`, as superseded by it; part
/// of the write that added `newer` (whose change of the feed covers these too).
async fn supersede(
    w: &mut Write<'_>,
    actor: &Actor,
    name: &str,
    author: &str,
    newer: u32,
    now: i64,
) -> Result<(), StoreError> {
    let reason = format!("superseded by version {newer}");
    let older: Vec<i64> = sqlx::query_scalar(
        "UPDATE tool_version SET status = 'rejected', status_reason = ?, status_by = ?, \
         status_at_ms = ? WHERE tool = ? AND author = ? AND status = 'pending' AND number <> ? \
         RETURNING number",
    )
    .bind(&reason)
    .bind(&actor.principal)
    .bind(now)
    .bind(name)
    .bind(author)
    .bind(i64::from(newer))
    .fetch_all(w.conn())
    .await
    .map_err(db)?;
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

pub(super) async fn get(store: &SqliteStore, name: &str) -> Result<Option<StoredTool>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        tool_columns!(),
        ", ",
        version_columns!(),
        " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
         WHERE t.name = ?"
    );
    let row = sqlx::query(Q)
        .bind(name)
        .fetch_optional(&store.reader)
        .await
        .map_err(db)?;
    row.as_ref().map(stored_from_row).transpose()
}

pub(super) async fn tool(store: &SqliteStore, name: &str) -> Result<Option<Tool>, StoreError> {
    const Q: &str = concat!("SELECT ", tool_columns!(), " FROM tool t WHERE t.name = ?");
    let row = sqlx::query(Q)
        .bind(name)
        .fetch_optional(&store.reader)
        .await
        .map_err(db)?;
    row.as_ref().map(tool_from_row).transpose()
}

pub(super) async fn tools(store: &SqliteStore) -> Result<Vec<Tool>, StoreError> {
    const Q: &str = concat!("SELECT ", tool_columns!(), " FROM tool t ORDER BY t.name");
    let mut rows = sqlx::query(Q).fetch(&store.reader);
    let mut tools = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(db)? {
        tools.push(tool_from_row(&row)?);
    }
    Ok(tools)
}

pub(super) async fn versions(
    store: &SqliteStore,
    name: &str,
) -> Result<Vec<ToolVersion>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        version_columns!(),
        " FROM tool_version v WHERE v.tool = ? ORDER BY v.number"
    );
    // One statement: a tool always has at least one version, so no rows means no tool.
    let rows = sqlx::query(Q)
        .bind(name)
        .fetch_all(&store.reader)
        .await
        .map_err(db)?;
    if rows.is_empty() {
        return Err(tool_not_found(name));
    }
    rows.iter().map(version_from_row).collect()
}

pub(super) async fn version(
    store: &SqliteStore,
    name: &str,
    number: u32,
) -> Result<ToolVersion, StoreError> {
    let mut conn = store.reader.acquire().await.map_err(db)?;
    fetch_version(&mut conn, name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))
}

pub(super) async fn versions_with_status(
    store: &SqliteStore,
    status: VersionStatus,
    author: Option<&str>,
) -> Result<Vec<ToolVersion>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        version_columns!(),
        " FROM tool_version v WHERE v.status = ?1 AND (?2 IS NULL OR v.author = ?2) \
         ORDER BY v.tool, v.number"
    );
    let rows = sqlx::query(Q)
        .bind(status.as_str())
        .bind(author)
        .fetch_all(&store.reader)
        .await
        .map_err(db)?;
    rows.iter().map(version_from_row).collect()
}

pub(super) async fn list_enabled(store: &SqliteStore) -> Result<Vec<StoredTool>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        tool_columns!(),
        ", ",
        version_columns!(),
        " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
         WHERE t.enabled = 1 ORDER BY t.updated_seq DESC"
    );
    // Row by row: with `fetch_all`, 10,000 rows held as SQLite values next to their
    // decoded copies doubled the server's peak memory at start-up.
    let mut rows = sqlx::query(Q).fetch(&store.reader);
    let mut tools = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(db)? {
        tools.push(stored_from_row(&row)?);
    }
    Ok(tools)
}

pub(super) async fn set_enabled(
    store: &SqliteStore,
    actor: &Actor,
    name: &str,
    enabled: bool,
) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = store.write().await?;
    let Some(current) = current_version(w.conn(), name).await? else {
        return Err(tool_not_found(name));
    };
    let seq = w.change(ChangeKind::Tool, name).await?;
    sqlx::query("UPDATE tool SET enabled = ?, updated_at_ms = ?, updated_seq = ? WHERE name = ?")
        .bind(enabled)
        .bind(now_ms())
        .bind(seq)
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
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

pub(super) async fn purge(
    store: &SqliteStore,
    actor: &Actor,
    name: &str,
) -> Result<(), StoreError> {
    actor.validate()?;
    let mut w = store.write().await?;
    let versions: i64 = sqlx::query_scalar("SELECT count(*) FROM tool_version WHERE tool = ?")
        .bind(name)
        .fetch_one(w.conn())
        .await
        .map_err(db)?;
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM secret_grant WHERE tool = ?")
        .bind(name)
        .fetch_one(w.conn())
        .await
        .map_err(db)?;
    // Foreign keys cascade from `tool` to its versions, and from them to their grants and
    // example results; the explicit deletes keep purge complete even on a connection where
    // foreign keys were off. Stored calls and their hours have no foreign key (the log holds
    // every source's calls).
    for q in [
        "DELETE FROM call_log WHERE source = 'stored' AND tool = ?",
        "DELETE FROM call_hour WHERE source = 'stored' AND tool = ?",
        "DELETE FROM secret_grant WHERE tool = ?",
        "DELETE FROM example_result WHERE tool = ?",
    ] {
        sqlx::query(q)
            .bind(name)
            .execute(w.conn())
            .await
            .map_err(db)?;
    }
    let done = sqlx::query("DELETE FROM tool WHERE name = ?")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(tool_not_found(name));
    }
    sqlx::query("DELETE FROM tool_version WHERE tool = ?")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    w.change(ChangeKind::Tool, name).await?;
    if grants > 0 {
        w.change(ChangeKind::Grant, name).await?;
    }
    let entry =
        AuditEntry::new(AuditAction::Delete, AuditObject::Tool, name).detail("versions", versions);
    w.audit(actor, entry).await?;
    w.commit().await
}

pub(super) async fn env_ids_in_use(store: &SqliteStore) -> Result<HashSet<String>, StoreError> {
    // Tool versions, and the scripts of resource templates and prompts (stored as JSON).
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT env_id FROM tool_version \
         UNION SELECT json_extract(script, '$.env_id') FROM resource_template WHERE script IS NOT NULL \
         UNION SELECT json_extract(completion_script, '$.env_id') FROM resource_template WHERE completion_script IS NOT NULL \
         UNION SELECT json_extract(completion_script, '$.env_id') FROM prompt WHERE completion_script IS NOT NULL",
    )
        .fetch_all(&store.reader)
        .await
        .map_err(db)?;
    Ok(ids.into_iter().collect())
}
