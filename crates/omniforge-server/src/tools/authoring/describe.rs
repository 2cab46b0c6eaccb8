//! What `omniforge_get_tool` and `omniforge tool show|history|calls` print of a stored tool:
//! its current version, its versions with their status, and its recent calls.

use omniforge_store::{CallOutcome, CallRecord, StoredTool, ToolVersion, VersionStatus};
use serde_json::{Value, json};

/// One call of the call log as `omniforge_get_tool` shows it (issue 11, finding 12): time,
/// principal, version, duration, outcome, exit status and the failure's reason.
pub fn call_json(call: &CallRecord) -> Value {
    let (outcome, exit) = match call.outcome {
        CallOutcome::Ok => ("ok", None),
        CallOutcome::Error => ("error", None),
        CallOutcome::Exit(n) => ("exit", Some(n)),
        CallOutcome::Timeout => ("timeout", None),
        CallOutcome::Cancelled => ("cancelled", None),
        _ => ("other", None),
    };
    json!({
        "startedAtMs": call.started_at_ms,
        "principal": call.principal,
        "version": call.version,
        "durationMs": call.duration_ms,
        "outcome": outcome,
        "exitCode": exit,
        "error": call.error,
    })
}

/// What `omniforge_get_tool` and `omniforge tool show` print: a stored tool's current version
/// (code, schemas, dependencies, lock, limits, secret names) and its versions. Never secret
/// values.
pub fn describe_tool(stored: &StoredTool, versions: &[ToolVersion]) -> Value {
    let spec = &stored.current.spec;
    json!({
        "name": stored.tool.name,
        "enabled": stored.tool.enabled,
        "currentVersion": stored.tool.current_version,
        "title": spec.title,
        "description": spec.description,
        "code": spec.code,
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema,
        "dependencies": spec.dependencies,
        "lock": spec.lock,
        "limits": {"timeout_s": spec.limits.timeout_ms as f64 / 1000.0, "memory_bytes": spec.limits.memory_bytes, "network": spec.limits.network},
        "secrets": spec.secrets,
        "examples": spec.examples,
        "taskSupport": spec.execution.task_support.as_str(),
        "taskStart": spec.execution.task_start.as_str(),
        "versions": versions.iter().map(|v| json!({
            "number": v.number,
            "status": version_status(v, stored.tool.current_version),
            "current": stored.tool.current_version == Some(v.number),
            "statusReason": v.state.reason,
            "createdAtMs": v.created_at_ms,
            "author": v.spec.author,
            "description": v.spec.description,
        })).collect::<Vec<_>>(),
    })
}

/// A version's status as `omniforge_get_tool` and `omniforge tool history` show it: `current`
/// for the one that runs, `previous` for another live one (a rollback can make it current
/// again), else the store's `pending`, `draft` or `rejected`.
pub fn version_status(v: &ToolVersion, current: Option<u32>) -> &'static str {
    match v.state.status {
        VersionStatus::Live if current == Some(v.number) => "current",
        VersionStatus::Live => "previous",
        other => other.as_str(),
    }
}
