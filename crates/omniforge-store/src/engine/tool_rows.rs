//! The rows of the `tool` and `tool_version` tables, for every family that writes or reads
//! them: a version checked and encoded into columns, the inserts, the current-version pointer
//! and the `updated_*` columns, and decoding rows into model types.
//!
//! A tool row is inserted without a current version and then pointed at its first live version,
//! if any (the schema refuses pointing it at a version that is not live). A version's content
//! columns never change (the schema refuses it); its status columns change only in `review.rs`.

use super::exec::{Conn, Row, q};
use super::rows::{
    corrupt, get_json, get_u32, get_u64, opt_json, opt_u32, to_json, version_not_found,
};
use crate::error::StoreError;
use crate::model::{
    Annotations, Execution, JsonObject, Limits, NewStatus, NewVersion, Runtime, StoredTool,
    TaskStart, TaskSupport, Tool, ToolVersion, VersionState, VersionStatus,
};
use crate::validate::{check_version, checked_i64, status_reason};

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

/// Checks `spec` and encodes its JSON and integer columns.
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
    conn: &mut dyn Conn,
    name: &str,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    q(
        "INSERT INTO tool (name, enabled, current_version, created_at_ms, updated_at_ms, \
       updated_seq) VALUES ($1, TRUE, NULL, $2, $2, $3)",
    )
    .bind(name)
    .bind(now)
    .bind(seq)
    .execute(conn)
    .await?;
    Ok(())
}

/// The number the next version of `name` gets; `None` when it has no versions (no such tool).
pub(super) async fn next_version_number(
    conn: &mut dyn Conn,
    name: &str,
) -> Result<Option<u32>, StoreError> {
    let highest: Option<i64> = q("SELECT max(number) FROM tool_version WHERE tool = $1")
        .bind(name)
        .scalar(conn)
        .await?;
    highest
        .map(|highest| {
            u32::try_from(highest + 1).map_err(|_| StoreError::Conflict {
                reason: format!("tool {name:?} has no version numbers left"),
            })
        })
        .transpose()
}

/// The current version number of `name` and whether it is enabled: `Ok(None)` for no such
/// tool; the number is `None` for a tool without a current version.
pub(super) async fn current_version(
    conn: &mut dyn Conn,
    name: &str,
) -> Result<Option<(Option<u32>, bool)>, StoreError> {
    let row = q("SELECT current_version, enabled FROM tool WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await?;
    row.map(|mut row| Ok((opt_u32(&mut row, "current_version")?, row.get("enabled")?)))
        .transpose()
}

/// Points `name` at live version `number` (enabled state unchanged).
pub(super) async fn set_current_version(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    q(
        "UPDATE tool SET current_version = $1, updated_at_ms = $2, updated_seq = $3 \
       WHERE name = $4",
    )
    .bind(number)
    .bind(now)
    .bind(seq)
    .bind(name)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks `name` as changed by the change `seq` (a status change or a version that did not
/// become current).
pub(super) async fn touch_tool(
    conn: &mut dyn Conn,
    name: &str,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    q("UPDATE tool SET updated_at_ms = $1, updated_seq = $2 WHERE name = $3")
        .bind(now)
        .bind(seq)
        .bind(name)
        .execute(conn)
        .await?;
    Ok(())
}

/// Sets a tool's enabled state, as the change `seq`.
pub(super) async fn set_enabled_row(
    conn: &mut dyn Conn,
    name: &str,
    enabled: bool,
    now: i64,
    seq: i64,
) -> Result<(), StoreError> {
    q("UPDATE tool SET enabled = $1, updated_at_ms = $2, updated_seq = $3 WHERE name = $4")
        .bind(enabled)
        .bind(now)
        .bind(seq)
        .bind(name)
        .execute(conn)
        .await?;
    Ok(())
}

/// Inserts version `number` of `name` in `status`; returns its state.
pub(super) async fn insert_version(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
    now: i64,
    enc: &EncodedSpec<'_>,
    status: &NewStatus,
) -> Result<VersionState, StoreError> {
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
    insert_version_row(conn, name, number, now, enc, &state).await?;
    Ok(state)
}

/// Inserts a whole `tool_version` row (a new version, or a copied one with its state).
pub(super) async fn insert_version_row(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
    created_at_ms: i64,
    enc: &EncodedSpec<'_>,
    state: &VersionState,
) -> Result<(), StoreError> {
    let s = enc.spec;
    q(
        "INSERT INTO tool_version (tool, number, title, description, input_schema, \
       output_schema, read_only_hint, destructive_hint, idempotent_hint, open_world_hint, \
       runtime, code, dependencies, timeout_ms, memory_bytes, network, lock, env_id, secrets, \
       author, created_at_ms, examples, status, status_reason, status_by, status_at_ms, \
       task_support, task_start) \
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
       $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)",
    )
    .bind(name)
    .bind(number)
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
    .bind(created_at_ms)
    .bind(&enc.examples)
    .bind(state.status.as_str())
    .bind(state.reason.as_deref())
    .bind(state.decided_by.as_deref())
    .bind(state.decided_at_ms)
    .bind(s.execution.task_support.as_str())
    .bind(s.execution.task_start.as_str())
    .execute(conn)
    .await?;
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
         v.created_at_ms AS v_created_at_ms, v.examples AS v_examples, v.status AS v_status, \
         v.status_reason AS v_status_reason, v.status_by AS v_status_by, \
         v.status_at_ms AS v_status_at_ms, v.task_support AS v_task_support, \
         v.task_start AS v_task_start"
    };
}
pub(super) use version_columns;

/// The columns [`tool_from_row`] reads, from a `tool` aliased `t`.
macro_rules! tool_columns {
    () => {
        "t.name AS t_name, t.enabled AS t_enabled, t.current_version AS t_current_version, \
         t.created_at_ms AS t_created_at_ms, t.updated_at_ms AS t_updated_at_ms, \
         t.updated_seq AS t_updated_seq"
    };
}
pub(super) use tool_columns;

/// A version read with [`version_columns!`].
pub(super) fn version_from_row(row: &mut Row) -> Result<ToolVersion, StoreError> {
    let runtime: String = row.get("v_runtime")?;
    let status: String = row.get("v_status")?;
    let task_support: String = row.get("v_task_support")?;
    let task_start: String = row.get("v_task_start")?;
    let spec = NewVersion {
        title: row.get("v_title")?,
        description: row.get("v_description")?,
        input_schema: get_json::<JsonObject>(row, "v_input_schema")?,
        output_schema: opt_json(row, "v_output_schema")?,
        annotations: Annotations {
            read_only_hint: row.get("v_read_only_hint")?,
            destructive_hint: row.get("v_destructive_hint")?,
            idempotent_hint: row.get("v_idempotent_hint")?,
            open_world_hint: row.get("v_open_world_hint")?,
        },
        runtime: Runtime::parse(&runtime)
            .ok_or_else(|| corrupt(format!("unknown runtime {runtime:?}")))?,
        code: row.get("v_code")?,
        dependencies: get_json(row, "v_dependencies")?,
        limits: Limits {
            timeout_ms: get_u64(row, "v_timeout_ms")?,
            memory_bytes: get_u64(row, "v_memory_bytes")?,
            network: row.get("v_network")?,
        },
        lock: row.get("v_lock")?,
        env_id: row.get("v_env_id")?,
        secrets: get_json(row, "v_secrets")?,
        author: row.get("v_author")?,
        examples: get_json(row, "v_examples")?,
        execution: Execution {
            task_support: TaskSupport::parse(&task_support)
                .ok_or_else(|| corrupt(format!("unknown task_support {task_support:?}")))?,
            task_start: TaskStart::parse(&task_start)
                .ok_or_else(|| corrupt(format!("unknown task_start {task_start:?}")))?,
        },
    };
    Ok(ToolVersion {
        tool: row.get("v_tool")?,
        number: get_u32(row, "v_number")?,
        created_at_ms: row.get("v_created_at_ms")?,
        spec,
        state: VersionState {
            status: VersionStatus::parse(&status)
                .ok_or_else(|| corrupt(format!("unknown version status {status:?}")))?,
            reason: row.get("v_status_reason")?,
            decided_by: row.get("v_status_by")?,
            decided_at_ms: row.get("v_status_at_ms")?,
        },
    })
}

/// A tool read with [`tool_columns!`].
pub(super) fn tool_from_row(row: &mut Row) -> Result<Tool, StoreError> {
    Ok(Tool {
        name: row.get("t_name")?,
        enabled: row.get("t_enabled")?,
        current_version: opt_u32(row, "t_current_version")?,
        created_at_ms: row.get("t_created_at_ms")?,
        updated_at_ms: row.get("t_updated_at_ms")?,
    })
}

pub(super) fn stored_from_row(row: &mut Row) -> Result<StoredTool, StoreError> {
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

/// Version `number` of `name`, if it exists.
pub(super) async fn fetch_version(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
) -> Result<Option<ToolVersion>, StoreError> {
    let row = q(SELECT_VERSION)
        .bind(name)
        .bind(number)
        .fetch_optional(conn)
        .await?;
    row.map(|mut row| version_from_row(&mut row)).transpose()
}

/// Version `number` of `name`, or [`StoreError::NotFound`].
pub(super) async fn existing_version(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
) -> Result<ToolVersion, StoreError> {
    fetch_version(conn, name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))
}

/// Whether tool `name` exists.
pub(super) async fn tool_exists(conn: &mut dyn Conn, name: &str) -> Result<bool, StoreError> {
    Ok(current_version(conn, name).await?.is_some())
}
