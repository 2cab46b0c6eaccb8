//! The official MCP JSON Schemas, one per revision, and validators for their definitions:
//! every message a test in this module receives is checked against its revision's schema
//! (see the module docs of [`super`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::{HANDSHAKE_VERSIONS, V2025, V2026};

const FILES: [(&str, &str); 5] = [
    (
        "2024-11-05",
        include_str!("../../data/schema/2024-11-05/schema.json"),
    ),
    (
        "2025-03-26",
        include_str!("../../data/schema/2025-03-26/schema.json"),
    ),
    (
        "2025-06-18",
        include_str!("../../data/schema/2025-06-18/schema.json"),
    ),
    (
        "2025-11-25",
        include_str!("../../data/schema/2025-11-25/schema.json"),
    ),
    (
        "2026-07-28",
        include_str!("../../data/schema/2026-07-28/schema.json"),
    ),
];

type Cache = Mutex<HashMap<(String, String), Arc<jsonschema::Validator>>>;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Cache::default)
}

/// A validator for definition `def` of revision `rev`'s schema (`definitions` in the
/// draft-07 files, `$defs` in the 2020-12 ones): the whole document with a root `$ref`.
fn validator(rev: &str, def: &str) -> Result<Arc<jsonschema::Validator>, String> {
    let key = (rev.to_owned(), def.to_owned());
    if let Some(v) = cache().lock().unwrap().get(&key) {
        return Ok(v.clone());
    }
    let text = FILES
        .iter()
        .find(|(r, _)| *r == rev)
        .map(|(_, t)| *t)
        .ok_or_else(|| format!("no schema for revision {rev}"))?;
    let mut doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let section = if doc.get("$defs").is_some() {
        "$defs"
    } else {
        "definitions"
    };
    if doc.pointer(&format!("/{section}/{def}")).is_none() {
        return Err(format!("the {rev} schema has no definition {def}"));
    }
    doc["$ref"] = Value::String(format!("#/{section}/{def}"));
    let v = Arc::new(
        jsonschema::validator_for(&doc)
            .map_err(|e| format!("the {rev} schema does not compile: {e}"))?,
    );
    cache().lock().unwrap().insert(key, v.clone());
    Ok(v)
}

/// Checks `value` against definition `def` of revision `rev`.
pub(super) fn check(rev: &str, def: &str, value: &Value) -> Result<(), String> {
    let v = validator(rev, def)?;
    let problems: Vec<String> = v
        .iter_errors(value)
        .map(|e| format!("  at {}: {e}", e.instance_path()))
        .take(10)
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "not a valid {rev} {def}:\n{}\nvalue: {value}",
            problems.join("\n")
        ))
    }
}

/// The schema definition of the result of `method`, where the test checks one.
fn result_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "ping" | "logging/setLevel" => "EmptyResult",
        "server/discover" => "DiscoverResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        _ => return None,
    })
}

/// Validates one message the server sent under revision `rev`. `method` is the method of
/// the request a response answers (`None` for notifications and transport-level errors).
fn validate(rev: &str, method: Option<&str>, message: &Value) -> Result<(), String> {
    let new_envelopes = rev >= "2025-11-25";
    if message.get("error").is_some() {
        if message.get("id") == Some(&Value::Null) {
            // See the module docs: `"id": null` is JSON-RPC 2.0 but in no MCP schema.
            let mut without_id = message.clone();
            without_id.as_object_mut().unwrap().remove("id");
            return check("2025-11-25", "JSONRPCErrorResponse", &without_id);
        }
        let def = if new_envelopes {
            "JSONRPCErrorResponse"
        } else {
            "JSONRPCError"
        };
        return check(rev, def, message);
    }
    if message.get("result").is_some() {
        let def = if new_envelopes {
            "JSONRPCResultResponse"
        } else {
            "JSONRPCResponse"
        };
        check(rev, def, message)?;
        if let Some(def) = method.and_then(result_def) {
            check(rev, def, &message["result"])?;
        }
        return Ok(());
    }
    match message.get("method").and_then(Value::as_str) {
        Some("notifications/tools/list_changed") => {
            check(rev, "ToolListChangedNotification", message)
        }
        Some("notifications/subscriptions/acknowledged") => {
            check(rev, "SubscriptionsAcknowledgedNotification", message)
        }
        Some(_) if message.get("id").is_none() => check(rev, "JSONRPCNotification", message),
        _ => check(rev, "JSONRPCMessage", message),
    }
}

/// Panics unless every message conforms (see [`validate`]).
#[track_caller]
pub(super) fn assert_valid(rev: &str, method: Option<&str>, messages: &[Value]) {
    for m in messages {
        if let Err(e) = validate(rev, method, m) {
            panic!("schema violation ({}): {e}", method.unwrap_or("-"));
        }
    }
}

/// The validation above must be able to fail: broken messages are rejected.
#[test]
fn schema_validation_rejects_nonconforming_messages() {
    let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
    for rev in HANDSHAKE_VERSIONS {
        validate(rev, Some("tools/list"), &ok).unwrap();
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": 3}]}});
        assert!(validate(rev, Some("tools/list"), &bad).is_err(), "{rev}");
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": "x"}});
        assert!(validate(rev, Some("tools/call"), &bad).is_err(), "{rev}");
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}});
        assert!(validate(rev, Some("initialize"), &bad).is_err(), "{rev}");
    }
    // 2026-07-28 results carry resultType (and list results ttlMs/cacheScope).
    assert!(validate(V2026, Some("tools/list"), &ok).is_err());
    let mut discover = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {},
        "ttlMs": 0, "cacheScope": "private"}});
    validate(V2026, Some("server/discover"), &discover).unwrap();
    discover["result"]["supportedVersions"] = json!("2026-07-28");
    assert!(validate(V2026, Some("server/discover"), &discover).is_err());
    let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
    assert!(validate(V2026, Some("server/discover"), &bad).is_err());
    // Error envelopes: code must be an integer; a null id is tolerated, a bool id is not.
    let bad = json!({"jsonrpc": "2.0", "id": null, "error": {"code": "x", "message": "m"}});
    assert!(validate(V2025, None, &bad).is_err());
    let bad = json!({"jsonrpc": "2.0", "id": true, "error": {"code": 1, "message": "m"}});
    assert!(validate(V2025, None, &bad).is_err());
    let good = json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "m"}});
    validate(V2025, None, &good).unwrap();
    let bad = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": 1});
    assert!(validate(V2025, None, &bad).is_err());
}
