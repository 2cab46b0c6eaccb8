//! A tool as a Python-style signature, generated from its inputSchema and outputSchema:
//! `add_vat(net: float, rate: float = 20) -> {net: str, vat: str, gross: str}`. Required
//! parameters come first and carry no default; an optional one shows its default, or
//! `= None`. Enums are their values joined by `|`; nested objects show their properties a
//! few levels deep (an optional one marked `?`); a tool without outputSchema has no `->`.
//! Hostile schemas are cut: at most [`MAX_CHARS`] characters, [`MAX_DEPTH`] levels, a few
//! enum values.

use serde_json::{Map, Value};

/// The longest signature, in characters (longer ones end in `…`).
pub(crate) const MAX_CHARS: usize = 1000;
/// How deep nested types are written out (deeper: `dict`, `list`).
const MAX_DEPTH: usize = 3;
/// How many enum values are written (then `|...`).
const MAX_ENUM: usize = 8;

/// The signature of the tool named `name` with these schemas.
pub(crate) fn signature(
    name: &str,
    input: &Map<String, Value>,
    output: Option<&Map<String, Value>>,
) -> String {
    let required = required(input);
    let mut params: Vec<(bool, String)> = Vec::new();
    if let Some(properties) = input.get("properties").and_then(Value::as_object) {
        for (param, schema) in properties {
            let is_required = required.contains(&param.as_str());
            let mut text = format!("{param}: {}", type_of(schema, 1));
            if !is_required {
                match schema.get("default") {
                    Some(default) => text.push_str(&format!(" = {}", literal(default))),
                    None => text.push_str(" = None"),
                }
            }
            params.push((is_required, text));
        }
    }
    // Required first, each group in schema order.
    params.sort_by_key(|(is_required, _)| !is_required);
    let params: Vec<String> = params.into_iter().map(|(_, t)| t).collect();
    let mut out = format!("{name}({})", params.join(", "));
    if let Some(output) = output {
        out.push_str(" -> ");
        out.push_str(&type_of(&Value::Object(output.clone()), 1));
    }
    cut(out)
}

fn required(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The Python-style type of `schema`.
fn type_of(schema: &Value, depth: usize) -> String {
    let Some(schema) = schema.as_object() else {
        return "Any".into();
    };
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let mut parts: Vec<String> = values.iter().take(MAX_ENUM).map(literal).collect();
        if values.len() > MAX_ENUM {
            parts.push("...".into());
        }
        return parts.join("|");
    }
    if let Some(value) = schema.get("const") {
        return literal(value);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = options
                .iter()
                .take(MAX_ENUM)
                .map(|o| type_of(o, depth + 1))
                .collect();
            return parts.join(" | ");
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => named(t, schema, depth),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .map(|t| named(t, schema, depth))
            .collect::<Vec<_>>()
            .join(" | "),
        _ if schema.contains_key("properties") => named("object", schema, depth),
        _ => "Any".into(),
    }
}

fn named(t: &str, schema: &Map<String, Value>, depth: usize) -> String {
    match t {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" if depth < MAX_DEPTH => match schema.get("items") {
            Some(items) => format!("list[{}]", type_of(items, depth + 1)),
            None => "list".into(),
        },
        "array" => "list".into(),
        "object" if depth < MAX_DEPTH => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return "dict".into();
            };
            if properties.is_empty() {
                return "dict".into();
            }
            let required = required(schema);
            let fields: Vec<String> = properties
                .iter()
                .map(|(name, s)| {
                    let mark = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{mark}: {}", type_of(s, depth + 1))
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        "object" => "dict".into(),
        _ => "Any".into(),
    }
}

/// A JSON value as Python would write it.
fn literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => Value::String(s.chars().take(60).collect()).to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(o) if o.is_empty() => "{}".into(),
        Value::Array(_) => "[...]".into(),
        Value::Object(_) => "{...}".into(),
    }
}

fn cut(text: String) -> String {
    if text.chars().count() <= MAX_CHARS {
        return text;
    }
    let mut out: String = text.chars().take(MAX_CHARS - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn the_issue_example_reads_as_python() {
        let input = obj(json!({"type": "object", "properties": {
            "rate": {"type": "number", "default": 20},
            "net": {"type": "number"}
        }, "required": ["net"]}));
        let output = obj(json!({"type": "object", "properties": {
            "net": {"type": "string"}, "vat": {"type": "string"}, "gross": {"type": "string"}
        }, "required": ["net", "vat", "gross"]}));
        // serde_json's maps are sorted by key unless `preserve_order` is on.
        let got = signature("add_vat", &input, Some(&output));
        assert!(
            got.starts_with("add_vat(net: float, rate: float = 20) -> {"),
            "{got}"
        );
        for field in ["net: str", "vat: str", "gross: str"] {
            assert!(got.contains(field), "{got}");
        }
    }

    #[test]
    fn enums_unions_lists_and_optional_fields() {
        let input = obj(json!({"type": "object", "properties": {
            "detail": {"enum": ["brief", "full"], "default": "brief"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "when": {"type": ["string", "null"]},
            "flag": {"type": "boolean", "default": false},
            "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": []}
        }, "required": ["where"]}));
        let got = signature("t", &input, None);
        assert!(got.starts_with("t(where: {lat?: float}, "), "{got}");
        for part in [
            "detail: \"brief\"|\"full\" = \"brief\"",
            "tags: list[str] = None",
            "when: str | None = None",
            "flag: bool = False",
        ] {
            assert!(got.contains(part), "{part} in {got}");
        }
        assert!(!got.contains("->"));
    }

    #[test]
    fn hostile_schemas_are_cut() {
        let mut deep = json!({"type": "string"});
        for _ in 0..100 {
            deep = json!({"type": "array", "items": deep});
        }
        let wide: Map<String, Value> = (0..5000)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({"enum": (0..100).collect::<Vec<_>>()}),
                )
            })
            .collect();
        let input = obj(json!({"properties": {"deep": deep}}));
        assert_eq!(
            signature("t", &input, None),
            "t(deep: list[list[list]] = None)"
        );
        let input = obj(json!({"properties": wide}));
        let got = signature("t", &input, None);
        assert_eq!(got.chars().count(), MAX_CHARS);
        assert!(got.ends_with('…'));
    }
}
