//! A tool's searchable fields, read from its served definition (the `Tool` JSON an entry
//! keeps): its name, its title (and the annotations' title), its description, its
//! parameters (inputSchema and outputSchema property names, titles, descriptions and string
//! enum values, a few levels deep), and its behaviour hints as words.

use serde_json::Value;

/// How many fields a tool has.
pub(crate) const FIELDS: usize = 5;

/// One searchable field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// The tool's name, split into words.
    Name = 0,
    /// Its title and the annotations' title.
    Title = 1,
    /// Its description.
    Description = 2,
    /// Its parameters and results: property names, titles, descriptions, enum values.
    Params = 3,
    /// Its behaviour hints as words (`read only`, `destructive`, `idempotent`, `open world`).
    Annotations = 4,
}

/// How deep into nested schemas parameters are read.
const MAX_DEPTH: usize = 3;
/// How many schema nodes of one tool are read at most (a hostile schema is read in part).
const MAX_NODES: usize = 256;

/// Calls `emit` with each part of `tool`'s text and the field it belongs to.
pub(crate) fn each(tool: &Value, emit: &mut dyn FnMut(Field, &str)) {
    let text = |key: &str| tool.get(key).and_then(Value::as_str);
    if let Some(name) = text("name") {
        emit(Field::Name, name);
    }
    if let Some(title) = text("title") {
        emit(Field::Title, title);
    }
    if let Some(description) = text("description") {
        emit(Field::Description, description);
    }
    let mut nodes = 0;
    for key in ["inputSchema", "outputSchema"] {
        if let Some(schema) = tool.get(key) {
            params(schema, 0, &mut nodes, emit);
        }
    }
    if let Some(annotations) = tool.get("annotations") {
        if let Some(title) = annotations.get("title").and_then(Value::as_str) {
            emit(Field::Title, title);
        }
        let hint = |key: &str| annotations.get(key).and_then(Value::as_bool);
        for (key, words) in [
            ("readOnlyHint", "read only"),
            ("destructiveHint", "destructive"),
            ("idempotentHint", "idempotent"),
            ("openWorldHint", "open world"),
        ] {
            if hint(key) == Some(true) {
                emit(Field::Annotations, words);
            }
        }
    }
}

fn params(schema: &Value, depth: usize, nodes: &mut usize, emit: &mut dyn FnMut(Field, &str)) {
    if depth > MAX_DEPTH || *nodes >= MAX_NODES {
        return;
    }
    *nodes += 1;
    if depth > 0 {
        for key in ["title", "description"] {
            if let Some(text) = schema.get(key).and_then(Value::as_str) {
                emit(Field::Params, text);
            }
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            for value in values.iter().take(32).filter_map(Value::as_str) {
                emit(Field::Params, value);
            }
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if *nodes >= MAX_NODES {
                return;
            }
            emit(Field::Params, name);
            params(property, depth + 1, nodes, emit);
        }
    }
    if let Some(items) = schema.get("items") {
        params(items, depth + 1, nodes, emit);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            for option in options {
                params(option, depth + 1, nodes, emit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_field_is_read_and_nested_parameters_too() {
        let tool = json!({
            "name": "get_forecast", "title": "Forecast", "description": "The weather.",
            "inputSchema": {"type": "object", "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
                "where": {"type": "object", "properties": {"lat": {"type": "number"}}}
            }},
            "outputSchema": {"type": "object", "properties": {"temperature": {}}},
            "annotations": {"readOnlyHint": true, "destructiveHint": false}
        });
        let mut got = Vec::new();
        each(&tool, &mut |f, t| got.push((f, t.to_owned())));
        let of = |field| -> Vec<&str> {
            got.iter()
                .filter(|(f, _)| *f == field)
                .map(|(_, t)| t.as_str())
                .collect()
        };
        assert_eq!(of(Field::Name), ["get_forecast"]);
        assert_eq!(of(Field::Title), ["Forecast"]);
        assert_eq!(of(Field::Description), ["The weather."]);
        assert_eq!(
            of(Field::Params),
            [
                "city",
                "City name",
                "unit",
                "celsius",
                "fahrenheit",
                "where",
                "lat",
                "temperature"
            ]
        );
        assert_eq!(of(Field::Annotations), ["read only"]);
    }

    #[test]
    fn a_huge_schema_is_read_in_part() {
        let properties: serde_json::Map<String, Value> = (0..10_000)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let tool = json!({"name": "x", "inputSchema": {"properties": properties}});
        let mut n = 0;
        each(&tool, &mut |_, _| n += 1);
        assert!(n <= MAX_NODES + 1, "{n}");
    }
}
