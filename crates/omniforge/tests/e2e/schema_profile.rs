//! WIRE-26 against a real server: `omniforge stdio --schema-profile conservative` serves a
//! created tool whose schemas use `$ref`/`$defs`, a type array and `additionalProperties` in
//! the subset strict hosts (Gemini function declarations) accept, while arguments are still
//! checked against the schema as authored.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{StdioServer, init_stdio, uv};

const REPLY: Duration = Duration::from_secs(120);

/// Sends one request and reads messages (skipping notifications) until its response.
async fn rpc(server: &mut StdioServer, id: u64, method: &str, params: Value) -> Value {
    let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    server.send_line(&req.to_string()).await.unwrap();
    loop {
        let msg = server
            .read_message(REPLY)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}\nstderr:\n{}", server.stderr_text()));
        if msg["id"] == json!(id) {
            assert!(msg.get("error").is_none(), "{method}: {msg}");
            return msg["result"].clone();
        }
    }
}

/// Every schema node (objects reachable through keyword values), with its JSON path.
fn nodes<'a>(
    v: &'a Value,
    path: String,
    out: &mut Vec<(String, &'a serde_json::Map<String, Value>)>,
) {
    match v {
        Value::Object(map) => {
            out.push((path.clone(), map));
            for (k, child) in map {
                match k.as_str() {
                    // Property names are data: their values are schemas.
                    "properties" => {
                        if let Value::Object(props) = child {
                            for (name, s) in props {
                                nodes(s, format!("{path}.properties.{name}"), out);
                            }
                        }
                    }
                    "enum" | "const" | "default" | "examples" | "required" => {}
                    _ => nodes(child, format!("{path}.{k}"), out),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                nodes(item, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The WIRE-26 checks on one served schema; the problems found.
fn wire26_problems(schema: &Value, name: &str) -> Vec<String> {
    let mut all = Vec::new();
    nodes(schema, name.to_owned(), &mut all);
    let mut problems = Vec::new();
    for (path, node) in all {
        if let Some(t) = node.get("type") {
            if !t.is_string() {
                problems.push(format!("{path}: type {t} is not a single string"));
            }
            if t != "object" && (node.contains_key("properties") || node.contains_key("required")) {
                problems.push(format!("{path}: properties/required on a {t} node"));
            }
            if t == "array" && !node.contains_key("items") {
                problems.push(format!("{path}: array without items"));
            }
        }
        for k in [
            "$ref",
            "$defs",
            "definitions",
            "additionalProperties",
            "$schema",
        ] {
            if node.contains_key(k) {
                problems.push(format!("{path}: has {k}"));
            }
        }
    }
    problems
}

#[tokio::test]
async fn wire26_conservative_profile_on_a_created_tool() {
    crate::support::needs_deps!();
    let uv = uv();
    let uv = uv.to_str().unwrap();
    let mut server = StdioServer::start(&["--schema-profile", "conservative", "--uv", uv]);
    init_stdio(&mut server, "2025-06-18").await.unwrap();

    let input = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "Address": {"type": "object", "properties": {
                "street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}
        },
        "properties": {
            "home": {"$ref": "#/$defs/Address"},
            "languages": {"type": ["array", "null"], "items": {"type": "string"}},
            "count": {"type": ["integer", "null"]}
        },
        "required": ["home"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "$defs": {"City": {"type": "string"}},
        "properties": {"city": {"$ref": "#/$defs/City"}, "n": {"type": ["integer", "null"]}},
        "required": ["city"],
        "additionalProperties": false
    });
    let code = "import json, sys\na = json.load(sys.stdin)\nprint(json.dumps({'city': a['home']['city'], 'n': len(a.get('languages') or [])}))\n";
    let created = rpc(
        &mut server,
        2,
        "tools/call",
        json!({"name": "omniforge_create_tool", "arguments": {
            "name": "where", "description": "Echoes the city.", "code": code,
            "inputSchema": input, "outputSchema": output}}),
    )
    .await;
    assert_ne!(created["isError"], true, "{created}");

    let list = rpc(&mut server, 3, "tools/list", json!({})).await;
    let tools = list["tools"].as_array().unwrap();
    let mut problems = Vec::new();
    for t in tools {
        let name = t["name"].as_str().unwrap();
        problems.extend(wire26_problems(
            &t["inputSchema"],
            &format!("{name}.inputSchema"),
        ));
        if let Some(out) = t.get("outputSchema") {
            problems.extend(wire26_problems(out, &format!("{name}.outputSchema")));
        }
    }
    assert!(problems.is_empty(), "WIRE-26: {problems:#?}");
    let tool = tools
        .iter()
        .find(|t| t["name"] == "where")
        .expect("the created tool is listed");
    // The reference was inlined, not dropped; the type arrays kept their non-null member.
    let props = &tool["inputSchema"]["properties"];
    assert_eq!(
        props["home"]["properties"]["city"],
        json!({"type": "string"}),
        "{tool}"
    );
    assert_eq!(props["home"]["required"], json!(["city"]), "{tool}");
    assert_eq!(
        props["languages"],
        json!({"type": "array", "items": {"type": "string"}})
    );
    assert_eq!(props["count"], json!({"type": "integer"}));
    assert_eq!(
        tool["outputSchema"]["properties"]["city"],
        json!({"type": "string"})
    );

    // Arguments are checked against the authored schema: null where it allows null is fine,
    // an extra property (additionalProperties: false as authored) is refused.
    let ok = rpc(
        &mut server,
        4,
        "tools/call",
        json!({"name": "where", "arguments": {"home": {"city": "Paris"}, "languages": null, "count": null}}),
    )
    .await;
    assert_ne!(ok["isError"], true, "{ok}");
    assert_eq!(
        ok["structuredContent"],
        json!({"city": "Paris", "n": 0}),
        "{ok}"
    );
    let bad = rpc(
        &mut server,
        5,
        "tools/call",
        json!({"name": "where", "arguments": {"home": {"city": "Paris", "zip": 1}, "extra": true}}),
    )
    .await;
    assert_eq!(bad["isError"], true, "{bad}");
    let text = bad["content"][0]["text"].as_str().unwrap_or("");
    assert!(
        text.starts_with("Arguments do not match inputSchema"),
        "{text}"
    );
    server.close(Duration::from_secs(10)).await;
}
