//! The built-ins' inputSchemas, derived from their argument types with schemars (JSON Schema
//! 2020-12, every subschema inline), then tidied into the shape clients have always been
//! served:
//! - no root `$schema`, `title` or `description` (the tool's own description says it);
//! - an argument that may be left out is not also `null` (`Option<T>` is `T`, absent);
//! - no schemars-only `format`s (`uint32`, `double`);
//! - no keywords that say nothing: `additionalProperties: true`, a `default` of `null` or of
//!   an empty collection (`{}`, `[]`: what leaving the argument out means anyway);
//! - the root lists its `properties`, even none (some clients require the key);
//! - a doc comment's line breaks are spaces (Markdown's soft breaks), blank lines stay
//!   paragraphs.

use std::sync::Arc;

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The inputSchema of arguments of type `T`.
pub(crate) fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    tidy(&mut schema);
    match schema {
        Value::Object(mut root) => {
            for key in ["$schema", "title", "description"] {
                root.remove(key);
            }
            root.entry("properties")
                .or_insert_with(|| Value::Object(JsonObject::new()));
            Arc::new(root)
        }
        _ => Arc::new(JsonObject::new()),
    }
}

/// `schema` with `required` set to `fields`, in that order (an operation whose arguments are
/// another's with more of them required, e.g. create and update).
pub(crate) fn requiring(mut schema: schemars::Schema, fields: &[&str]) -> schemars::Schema {
    schema.insert(
        "required".into(),
        Value::Array(fields.iter().map(|f| Value::from(*f)).collect()),
    );
    schema
}

/// The formats schemars writes that are no JSON Schema format.
const SCHEMARS_FORMATS: [&str; 12] = [
    "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float",
    "double", "int",
];

fn tidy(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    // `Option<T>`: `T` or null, written as a type list, an `enum` with null, or `anyOf`.
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let single = types.remove(0);
            map.insert("type".into(), single);
        }
    }
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if let Some(Value::Array(options)) = map.get("anyOf") {
        let is_null = |v: &Value| v.get("type").is_some_and(|t| t == "null");
        let mut rest = options.iter().filter(|o| !is_null(o));
        if let (Some(Value::Object(only)), None) = (rest.next(), rest.next()) {
            let only = only.clone();
            map.remove("anyOf");
            for (key, value) in only {
                map.entry(key).or_insert(value);
            }
        }
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| SCHEMARS_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if map.get("additionalProperties") == Some(&Value::Bool(true)) {
        map.remove("additionalProperties");
    }
    let says_nothing = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if map.get("default").is_some_and(says_nothing) {
        map.remove("default");
    }
    if let Some(Value::String(text)) = map.get_mut("description") {
        *text = unwrap_lines(text);
    }
    for (key, value) in map.iter_mut() {
        match key.as_str() {
            "properties" => {
                if let Value::Object(properties) = value {
                    properties.values_mut().for_each(tidy);
                }
            }
            "items" | "additionalProperties" => tidy(value),
            "anyOf" | "oneOf" | "allOf" => {
                if let Value::Array(options) = value {
                    options.iter_mut().for_each(tidy);
                }
            }
            _ => {}
        }
    }
}

/// A doc comment's text as one line per paragraph.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// An example argument type.
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        /// The name,
        /// wrapped.
        name: String,
        #[schemars(range(min = 1))]
        version: Option<u32>,
        #[serde(default)]
        force: bool,
        kind: Option<Kind>,
        map: Option<JsonObject>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Kind {
        A,
        B,
    }

    #[test]
    fn derived_schemas_read_as_written_by_hand() {
        let schema = input_schema::<Example>();
        assert_eq!(
            Value::Object((*schema).clone()),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name, wrapped."},
                    "version": {"type": "integer", "minimum": 1},
                    "force": {"type": "boolean", "default": false},
                    "kind": {"type": "string", "enum": ["a", "b"]},
                    "map": {"type": "object"}
                },
                "required": ["name"],
                "additionalProperties": false
            })
        );
    }
}
