//! Tools and their immutable versions on PostgreSQL: the `tool` and `tool_version` tables.

use std::collections::HashSet;

use futures::TryStreamExt as _;
use sqlx::postgres::{PgConnection, PgRow};

use super::PgStore;
use super::rows::{col, corrupt, db, get_json, get_u32, get_u64, now_ms};
use crate::error::StoreError;
use crate::model::{
    Annotations, ChangeKind, JsonObject, Limits, NewVersion, Runtime, StoredTool, Tool,
    ToolVersion, validate_tool_name,
};
pub(super) use crate::rules::{EncodedSpec, encode_spec, tool_not_found, version_not_found};

pub(super) async fn insert_tool(
    conn: &mut PgConnection,
    name: &str,
    now: i64,
    seq: i64,
    enc: &EncodedSpec<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, updated_seq) \
         VALUES ($1, TRUE, 1, $2, $3, $4)",
    )
    .bind(name)
    .bind(now)
    .bind(now)
    .bind(seq)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    insert_version(conn, name, 1, now, enc).await
}

/// The number the next version of `name` gets; `None` when it has no versions (no such tool).
pub(super) async fn next_version_number(
    conn: &mut PgConnection,
    name: &str,
) -> Result<Option<u32>, StoreError> {
    let highest: Option<i64> =
        sqlx::query_scalar("SELECT max(number) FROM tool_version WHERE tool = $1")
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

/// Points `name` at version `number` (enabled state unchanged).
async fn set_current_version(
    conn: &mut PgConnection,
    name: &str,
    number: u32,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tool SET current_version = $1, updated_at_ms = $2, updated_seq = $3 WHERE name = $4",
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

pub(super) async fn insert_version(
    conn: &mut PgConnection,
    name: &str,
    number: u32,
    now: i64,
    enc: &EncodedSpec<'_>,
) -> Result<(), StoreError> {
    let s = enc.spec;
    sqlx::query(
        "INSERT INTO tool_version (tool, number, title, description, input_schema, output_schema, \
         read_only_hint, destructive_hint, idempotent_hint, open_world_hint, runtime, code, \
         dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, author, created_at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)",
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
    .execute(conn)
    .await
    .map_err(db)?;
    Ok(())
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
         v.created_at_ms AS v_created_at_ms"
    };
}

pub(super) use version_columns;

/// The columns [`tool_from_row`] reads, from a `tool` aliased `t`.
macro_rules! tool_columns {
    () => {
        "t.name AS t_name, t.enabled AS t_enabled, t.current_version AS t_current_version, \
         t.created_at_ms AS t_created_at_ms, t.updated_at_ms AS t_updated_at_ms"
    };
}
pub(super) use tool_columns;

pub(super) fn version_from_row(row: &PgRow) -> Result<ToolVersion, StoreError> {
    let output_schema: Option<String> = col(row, "v_output_schema")?;
    let output_schema = output_schema
        .map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| corrupt(format!("column v_output_schema: {e}")))?;
    let runtime: String = col(row, "v_runtime")?;
    let spec = NewVersion {
        title: col(row, "v_title")?,
        description: col(row, "v_description")?,
        input_schema: get_json::<JsonObject, _>(row, "v_input_schema")?,
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
    };
    Ok(ToolVersion {
        tool: col(row, "v_tool")?,
        number: get_u32(row, "v_number")?,
        created_at_ms: col(row, "v_created_at_ms")?,
        spec,
    })
}

pub(super) fn tool_from_row(row: &PgRow) -> Result<Tool, StoreError> {
    Ok(Tool {
        name: col(row, "t_name")?,
        enabled: col(row, "t_enabled")?,
        current_version: get_u32(row, "t_current_version")?,
        created_at_ms: col(row, "t_created_at_ms")?,
        updated_at_ms: col(row, "t_updated_at_ms")?,
    })
}

fn stored_from_row(row: &PgRow) -> Result<StoredTool, StoreError> {
    Ok(StoredTool {
        tool: tool_from_row(row)?,
        current: version_from_row(row)?,
    })
}

const SELECT_VERSION: &str = concat!(
    "SELECT ",
    version_columns!(),
    " FROM tool_version v WHERE v.tool = $1 AND v.number = $2"
);

pub(super) async fn fetch_version(
    conn: &mut PgConnection,
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

pub(super) async fn tool_exists(conn: &mut PgConnection, name: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT 1 FROM tool WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    Ok(row.is_some())
}

pub(super) async fn create_tool(
    store: &PgStore,
    name: &str,
    spec: NewVersion,
) -> Result<ToolVersion, StoreError> {
    validate_tool_name(name)?;
    let enc = encode_spec(&spec)?;
    let mut w = store.write().await?;
    if tool_exists(w.conn(), name).await? {
        return Err(StoreError::AlreadyExists {
            name: name.to_owned(),
        });
    }
    let seq = w.change(ChangeKind::Tool, name).await?;
    let now = now_ms();
    insert_tool(w.conn(), name, now, seq, &enc).await?;
    w.commit().await?;
    Ok(ToolVersion {
        tool: name.to_owned(),
        number: 1,
        created_at_ms: now,
        spec,
    })
}

pub(super) async fn add_version(
    store: &PgStore,
    name: &str,
    spec: NewVersion,
) -> Result<ToolVersion, StoreError> {
    let enc = encode_spec(&spec)?;
    let mut w = store.write().await?;
    let Some(number) = next_version_number(w.conn(), name).await? else {
        return Err(tool_not_found(name));
    };
    let seq = w.change(ChangeKind::Tool, name).await?;
    let now = now_ms();
    insert_version(w.conn(), name, number, now, &enc).await?;
    set_current_version(w.conn(), name, number, now, seq).await?;
    w.commit().await?;
    Ok(ToolVersion {
        tool: name.to_owned(),
        number,
        created_at_ms: now,
        spec,
    })
}

pub(super) async fn get(store: &PgStore, name: &str) -> Result<Option<StoredTool>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        tool_columns!(),
        ", ",
        version_columns!(),
        " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
         WHERE t.name = $1"
    );
    let row = sqlx::query(Q)
        .bind(name)
        .fetch_optional(&store.pool)
        .await
        .map_err(db)?;
    row.as_ref().map(stored_from_row).transpose()
}

pub(super) async fn versions(store: &PgStore, name: &str) -> Result<Vec<ToolVersion>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        version_columns!(),
        " FROM tool_version v WHERE v.tool = $1 ORDER BY v.number"
    );
    // One statement: a tool always has at least one version, so no rows means no tool.
    let rows = sqlx::query(Q)
        .bind(name)
        .fetch_all(&store.pool)
        .await
        .map_err(db)?;
    if rows.is_empty() {
        return Err(tool_not_found(name));
    }
    rows.iter().map(version_from_row).collect()
}

pub(super) async fn version(
    store: &PgStore,
    name: &str,
    number: u32,
) -> Result<ToolVersion, StoreError> {
    let mut conn = store.pool.acquire().await.map_err(db)?;
    fetch_version(&mut conn, name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))
}

pub(super) async fn list_enabled(store: &PgStore) -> Result<Vec<StoredTool>, StoreError> {
    const Q: &str = concat!(
        "SELECT ",
        tool_columns!(),
        ", ",
        version_columns!(),
        " FROM tool t JOIN tool_version v ON v.tool = t.name AND v.number = t.current_version \
         WHERE t.enabled ORDER BY t.updated_seq DESC"
    );
    // Row by row: with `fetch_all`, 10,000 rows held as SQLite values next to their
    // decoded copies doubled the server's peak memory at start-up.
    let mut rows = sqlx::query(Q).fetch(&store.pool);
    let mut tools = Vec::new();
    while let Some(row) = rows.try_next().await.map_err(db)? {
        tools.push(stored_from_row(&row)?);
    }
    Ok(tools)
}

pub(super) async fn set_enabled(
    store: &PgStore,
    name: &str,
    enabled: bool,
) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let seq = w.change(ChangeKind::Tool, name).await?;
    let done = sqlx::query(
        "UPDATE tool SET enabled = $1, updated_at_ms = $2, updated_seq = $3 WHERE name = $4",
    )
    .bind(enabled)
    .bind(now_ms())
    .bind(seq)
    .bind(name)
    .execute(w.conn())
    .await
    .map_err(db)?;
    if done.rows_affected() == 0 {
        // Dropping the transaction rolls the change back.
        return Err(tool_not_found(name));
    }
    w.commit().await
}

pub(super) async fn rollback(
    store: &PgStore,
    name: &str,
    number: u32,
) -> Result<ToolVersion, StoreError> {
    let mut w = store.write().await?;
    let version = fetch_version(w.conn(), name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))?;
    let seq = w.change(ChangeKind::Tool, name).await?;
    set_current_version(w.conn(), name, number, now_ms(), seq).await?;
    w.commit().await?;
    Ok(version)
}

pub(super) async fn purge(store: &PgStore, name: &str) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    // Foreign keys cascade from `tool` to its versions and their call log rows; the explicit
    // deletes keep purge complete even on a connection where foreign keys were off.
    sqlx::query("DELETE FROM call_log WHERE tool = $1")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    let done = sqlx::query("DELETE FROM tool WHERE name = $1")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    if done.rows_affected() == 0 {
        return Err(tool_not_found(name));
    }
    sqlx::query("DELETE FROM tool_version WHERE tool = $1")
        .bind(name)
        .execute(w.conn())
        .await
        .map_err(db)?;
    w.change(ChangeKind::Tool, name).await?;
    w.commit().await
}

pub(super) async fn env_ids_in_use(store: &PgStore) -> Result<HashSet<String>, StoreError> {
    // Tool versions, and the scripts of resource templates and prompts (stored as JSON).
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT env_id FROM tool_version \
         UNION SELECT script::json ->> 'env_id' FROM resource_template WHERE script IS NOT NULL \
         UNION SELECT completion_script::json ->> 'env_id' FROM resource_template WHERE completion_script IS NOT NULL \
         UNION SELECT completion_script::json ->> 'env_id' FROM prompt WHERE completion_script IS NOT NULL",
    )
        .fetch_all(&store.pool)
        .await
        .map_err(db)?;
    Ok(ids.into_iter().collect())
}
