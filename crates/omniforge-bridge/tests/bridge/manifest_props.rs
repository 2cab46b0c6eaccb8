//! Property tests of the manifest loader (issue 11 asks for them): whatever the input, loading
//! returns a manifest or an error that names the file, and never panics; whatever loads obeys
//! the rules the server relies on.

use std::collections::HashSet;
use std::path::Path;

use omniforge_bridge::{Manifest, ManifestError};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const PATH: &str = "gen/mcp/manifest.json";

fn load(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(Path::new(PATH), text)
}

/// The rules of a loaded manifest, as the server uses them.
fn check_loaded(result: &Result<Manifest, ManifestError>) -> Result<(), TestCaseError> {
    match result {
        Ok(manifest) => {
            let mut names = HashSet::new();
            for tool in &manifest.tools {
                prop_assert!(
                    (1..=64).contains(&tool.name.len())
                        && tool
                            .name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                    "bad name {:?}",
                    tool.name
                );
                prop_assert!(names.insert(tool.name.clone()), "duplicate {:?}", tool.name);
                prop_assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
                if let Some(output) = &tool.output_schema {
                    prop_assert_eq!(output.get("type"), Some(&json!("object")));
                }
                prop_assert!(tool.is_streaming() || tool.procedure.starts_with('/'));
            }
        }
        Err(e) => {
            let text = e.to_string();
            prop_assert!(
                text.starts_with(PATH),
                "error does not name the file: {text}"
            );
        }
    }
    Ok(())
}

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("object"),
            Just("array"),
            Just("/a.B/C"),
            Just("server")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

/// Object keys: mostly the manifest's own field names, so that generated objects reach the
/// validation, sometimes anything.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "name", "description", "inputSchema", "outputSchema", "service", "method",
            "procedure", "auth_required", "idempotency_key", "streaming", "type", "tools",
            "_generated", "schema_version", "project",
        ])
        .prop_map(str::to_owned),
        1 => ".{0,8}",
    ]
}

/// A tool entry: each field absent, well typed, or any JSON.
fn tool_entry() -> impl Strategy<Value = Value> {
    let name = prop_oneof![
        "[a-zA-Z0-9_-]{1,64}".prop_map(Value::from),
        ".{0,70}".prop_map(Value::from),
        Just(json!("dup")),
        any_json(),
    ];
    let schema = prop_oneof![
        Just(json!({"type": "object"})),
        Just(json!({"type": "object", "properties": {"a": {"type": "string"}}})),
        any_json(),
    ];
    let procedure = prop_oneof![
        "/[a-z.]{1,10}/[A-Z][a-z]{0,6}".prop_map(Value::from),
        ".{0,10}".prop_map(Value::from),
        any_json(),
    ];
    let streaming = prop_oneof![Just(json!("")), Just(json!("server")), any_json()];
    (
        prop::option::of(name),
        prop::option::of(schema.clone()),
        prop::option::of(schema),
        prop::option::of(procedure),
        prop::option::of(streaming),
        prop::option::of(any_json()),
    )
        .prop_map(|(name, input, output, procedure, streaming, extra)| {
            let mut tool = Map::new();
            let fields = [
                ("name", name),
                ("inputSchema", input),
                ("outputSchema", output),
                ("procedure", procedure),
                ("streaming", streaming),
                ("auth_required", extra),
            ];
            for (field, value) in fields {
                if let Some(value) = value {
                    tool.insert(field.to_owned(), value);
                }
            }
            Value::Object(tool)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        check_loaded(&load(&text))?;
    }

    #[test]
    fn arbitrary_bytes_as_text_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        check_loaded(&load(&String::from_utf8_lossy(&bytes)))?;
    }

    #[test]
    fn arbitrary_json_never_panics(value in any_json()) {
        check_loaded(&load(&value.to_string()))?;
    }

    #[test]
    fn manifest_shaped_json_loads_exactly_when_every_tool_is_valid(
        tools in prop::collection::vec(tool_entry(), 0..6),
        project in prop::option::of(any_json()),
    ) {
        let mut doc = json!({"tools": tools});
        let mut valid = valid_tools(&tools);
        if let Some(project) = project {
            valid &= project.is_string();
            doc["project"] = project;
        }
        let result = load(&doc.to_string());
        check_loaded(&result)?;
        prop_assert_eq!(result.is_ok(), valid, "{} -> {:?}", doc, result.err().map(|e| e.to_string()));
    }
}

/// The manifest rules, spelled out independently of the loader: every entry has a valid unique
/// name and an object `inputSchema` of type object; `outputSchema` is absent, null or such an
/// object; `streaming` and `procedure` are strings when present, and a unary RPC's procedure
/// starts with `/`; `auth_required` is a boolean when present.
fn valid_tools(tools: &[Value]) -> bool {
    let mut names = HashSet::new();
    tools.iter().all(|tool| {
        let object_schema = |v: &Value| v.is_object() && v["type"] == "object";
        let name_ok = tool["name"].as_str().is_some_and(|n| {
            (1..=64).contains(&n.len())
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                && names.insert(n.to_owned())
        });
        let string_or_absent = |field: &str| tool.get(field).is_none_or(Value::is_string);
        let streaming = tool.get("streaming").and_then(Value::as_str).unwrap_or("");
        let procedure = tool.get("procedure").and_then(Value::as_str).unwrap_or("");
        name_ok
            && tool.get("inputSchema").is_some_and(object_schema)
            && tool
                .get("outputSchema")
                .is_none_or(|v| v.is_null() || object_schema(v))
            && string_or_absent("streaming")
            && string_or_absent("procedure")
            && (!streaming.is_empty() || procedure.starts_with('/'))
            && tool.get("auth_required").is_none_or(Value::is_boolean)
    })
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for depth in [127, 128, 129, 10_000, 200_000] {
        let text = format!(
            r#"{{"tools":[{{"name":"t","inputSchema":{{"type":"object","x":{}1{}}}}}]}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let result = load(&text);
        assert!(result.is_err() || depth < 127, "depth {depth}");
        let shallow = format!(r#"{{"tools":{}{}}}"#, "[".repeat(depth), "]".repeat(depth));
        assert!(load(&shallow).is_err(), "depth {depth}");
    }
}

#[test]
fn the_rules_accept_what_the_loader_accepts() {
    // The generators produce both valid and invalid manifests; the simplest valid one agrees.
    let doc = json!({"tools": [
        {"name": "a", "inputSchema": {"type": "object"}, "procedure": "/a.B/C"},
        {"name": "b", "inputSchema": {"type": "object"}, "streaming": "server"}
    ]});
    let manifest = load(&doc.to_string()).unwrap();
    assert_eq!(manifest.tools.len(), 2);
    assert!(valid_tools(doc["tools"].as_array().unwrap()));
}
