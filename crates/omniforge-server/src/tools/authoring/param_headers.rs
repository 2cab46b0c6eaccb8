//! `x-mcp-header` in a tool's `inputSchema` (SEP-2243, 2026-07-28 Streamable HTTP "Request
//! Metadata"): a property so marked is mirrored by clients into the `Mcp-Param-<Name>` header,
//! which rmcp checks against the body on every call. A tool whose declarations break the
//! revision's rules is invalid (clients must drop it from `tools/list`), so authoring refuses
//! it, naming the property.
//!
//! The rules: the value is a non-empty RFC 9110 token (`1*tchar`), unique within the schema
//! ignoring case; it marks a property of type `string`, `integer` or `boolean` (not `number`)
//! reached from the root through `properties` keys only (not under `items`, `allOf`/`anyOf`/
//! `oneOf`/`not`, `if`/`then`/`else`, `$defs` or `$ref`), never the root itself.
//!
//! A header is visible to every proxy on the way: never mark a property that carries a secret.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::error::AuthoringError;

/// The keyword.
pub(crate) const KEYWORD: &str = "x-mcp-header";

/// Checks every `x-mcp-header` of the inputSchema `schema`.
///
/// # Errors
/// The first violation, naming the property (`properties.a.properties.b`).
pub(crate) fn check(schema: &Map<String, Value>) -> Result<(), AuthoringError> {
    if schema.contains_key(KEYWORD) {
        return Err(invalid(format!(
            "{KEYWORD} must mark a property, not the schema's root"
        )));
    }
    let mut seen = HashSet::new();
    check_properties(schema, "", &mut seen)?;
    // Anywhere else it is off the `properties` chain.
    off_chain(&Value::Object(schema.clone()), "", true)
}

fn invalid(reason: String) -> AuthoringError {
    AuthoringError::invalid("inputSchema", reason)
}

/// Walks the `properties` chain from `schema`.
fn check_properties(
    schema: &Map<String, Value>,
    at: &str,
    seen: &mut HashSet<String>,
) -> Result<(), AuthoringError> {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Ok(());
    };
    for (name, property) in properties {
        let Value::Object(property) = property else {
            continue;
        };
        let path = format!("{at}properties.{name}");
        if let Some(header) = property.get(KEYWORD) {
            check_header(&path, header, property, seen)?;
        }
        check_properties(property, &format!("{path}."), seen)?;
    }
    Ok(())
}

fn check_header(
    path: &str,
    header: &Value,
    property: &Map<String, Value>,
    seen: &mut HashSet<String>,
) -> Result<(), AuthoringError> {
    let Value::String(header) = header else {
        return Err(invalid(format!(
            "{path}.{KEYWORD} must be a string (the header name)"
        )));
    };
    if header.is_empty() {
        return Err(invalid(format!("{path}.{KEYWORD} must not be empty")));
    }
    if let Some(bad) = header.chars().find(|c| !is_tchar(*c)) {
        return Err(invalid(format!(
            "{path}.{KEYWORD} {header:?} is not an HTTP token (RFC 9110): {bad:?} is not allowed"
        )));
    }
    if !seen.insert(header.to_ascii_lowercase()) {
        return Err(invalid(format!(
            "{path}.{KEYWORD} {header:?} is declared twice (header names ignore case)"
        )));
    }
    match property.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(()),
        other => Err(invalid(format!(
            "{path}.{KEYWORD} marks a property of type {}: only string, integer and boolean \
             properties can be headers",
            other.map_or_else(|| "(none)".to_owned(), |t| format!("{t:?}"))
        ))),
    }
}

/// The first `x-mcp-header` that is not on a `properties`-only path. `on_chain`: `value` is
/// the root or a property reached through `properties` alone.
fn off_chain(value: &Value, at: &str, on_chain: bool) -> Result<(), AuthoringError> {
    match value {
        Value::Object(map) => {
            if !on_chain && map.contains_key(KEYWORD) {
                let at = if at.is_empty() { "(root)" } else { at };
                return Err(invalid(format!(
                    "{at}.{KEYWORD}: a header must be a property reached from the root through \
                     `properties` only (not under items, allOf, anyOf, oneOf, not, if/then/else, \
                     $defs or $ref)"
                )));
            }
            for (key, child) in map {
                let path = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                if key == "properties" && on_chain {
                    // Its keys are property names; each property stays on the chain.
                    if let Value::Object(properties) = child {
                        for (name, property) in properties {
                            off_chain(property, &format!("{path}.{name}"), true)?;
                        }
                    }
                } else if key != KEYWORD {
                    off_chain(child, &path, false)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| off_chain(item, &format!("{at}[{i}]"), false)),
        _ => Ok(()),
    }
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checked(schema: Value) -> Result<(), AuthoringError> {
        check(schema.as_object().unwrap())
    }

    #[test]
    fn headers_on_the_properties_chain_pass() {
        // The conformance pack's test_custom_headers.
        checked(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "tenant_id": {"type": "integer", "x-mcp-header": "Tenant-Id"},
            "dry_run": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "query": {"type": "string"},
            "target": {"type": "object", "properties": {
                "zone": {"type": "string", "x-mcp-header": "Zone"}}},
            "x-mcp-header": {"type": "string"},
        }}))
        .unwrap();
    }

    #[test]
    fn every_broken_declaration_is_refused_naming_the_property() {
        let cases = [
            (json!({"x-mcp-header": "Root"}), "root"),
            (
                json!({"properties": {"a": {"type": "number", "x-mcp-header": "A"}}}),
                "properties.a",
            ),
            (
                json!({"properties": {"a": {"x-mcp-header": "A"}}}),
                "(none)",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
                "empty",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "Has Space"}}}),
                "' '",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\n"}}}),
                "HTTP token",
            ),
            (
                json!({"properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
                "must be a string",
            ),
            (
                json!({"properties": {
                    "a": {"type": "string", "x-mcp-header": "Zone"},
                    "b": {"type": "string", "x-mcp-header": "zone"}}}),
                "twice",
            ),
            (
                json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
                "properties.a.items",
            ),
            (
                json!({"allOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
                "allOf",
            ),
            (
                json!({"$defs": {"a": {"type": "string", "x-mcp-header": "A"}}}),
                "$defs.a",
            ),
            (
                json!({"if": {"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}}),
                "if",
            ),
        ];
        for (mut schema, needle) in cases {
            schema["type"] = json!("object");
            let error = checked(schema.clone())
                .expect_err(&schema.to_string())
                .to_string();
            assert!(error.contains(needle), "{schema}: {error}");
        }
    }
}
