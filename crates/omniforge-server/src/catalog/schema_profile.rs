//! Schema profiles: how tool schemas are served.
//!
//! `as-authored` (the default) serves each schema as its author wrote it, once validated; JSON
//! Schema 2020-12 keywords such as `$schema`, `$defs` and `additionalProperties: false` pass
//! unchanged. `conservative` rewrites every served schema into the subset strict hosts accept
//! (WIRE-26, e.g. Gemini function declarations): references inlined, `$schema`/`$defs`
//! removed, a single-string `type` (a type array keeps its first non-null member), and no
//! `additionalProperties`. Arguments are still validated against the authored schema.

use omniforge_bridge::schema_refs::inline_refs;
use serde_json::{Map, Value};

/// How tool schemas are served in `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaProfile {
    /// As authored (default).
    #[default]
    AsAuthored,
    /// The subset strict hosts accept.
    Conservative,
}

/// The conservative form of `schema`. A schema whose references cannot be inlined (a cycle)
/// keeps them, with a logged warning.
pub(crate) fn conservative(schema: &Map<String, Value>) -> Map<String, Value> {
    let inlined = inline_refs(schema).unwrap_or_else(|error| {
        tracing::warn!(%error, "schema profile conservative: references kept");
        schema.clone()
    });
    match simplify(Value::Object(inlined)) {
        Value::Object(mut map) => {
            map.remove("$schema");
            map
        }
        _ => Map::new(),
    }
}

fn simplify(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, v) in map {
                match key.as_str() {
                    "additionalProperties" | "$defs" | "definitions" => {}
                    "type" => {
                        let single = match v {
                            Value::Array(types) => types
                                .into_iter()
                                .find(|t| t.as_str() != Some("null"))
                                .unwrap_or(Value::String("null".into())),
                            other => other,
                        };
                        out.insert(key, single);
                    }
                    // Property names are data, not keywords: keep them, simplify their schemas.
                    "properties" | "patternProperties" => {
                        let v = match v {
                            Value::Object(props) => Value::Object(
                                props
                                    .into_iter()
                                    .map(|(name, s)| (name, simplify(s)))
                                    .collect(),
                            ),
                            other => other,
                        };
                        out.insert(key, v);
                    }
                    _ => {
                        out.insert(key, simplify(v));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(simplify).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conservative_keeps_what_strict_hosts_take() {
        let authored = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "when": {"$ref": "#/$defs/Date"},
                "note": {"type": ["string", "null"]},
                "additionalProperties": {"type": "integer"}
            },
            "additionalProperties": false,
            "$defs": {"Date": {"type": "string", "format": "date", "additionalProperties": false}}
        });
        let out = conservative(authored.as_object().unwrap());
        assert_eq!(
            Value::Object(out),
            json!({"type": "object", "properties": {
                "when": {"type": "string", "format": "date"},
                "note": {"type": "string"},
                "additionalProperties": {"type": "integer"}
            }})
        );
    }
}
