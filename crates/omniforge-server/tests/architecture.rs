//! The crate's architecture invariants (ARCHITECTURE.md, "omniforge-server"), checked on its
//! source text, as rust-analyzer's tidy tests do:
//! - dependencies between rooms point one way, down the layers;
//! - only the request context reads markers out of request extensions;
//! - no library function returns `Result<_, String>`;
//! - a built-in is never found by its name outside its own registration;
//! - no built-in builds a `CallToolResult`: only the built-ins' MCP adapter, the script call
//!   loop, the tool-source adapters and the wire (`mcp/`) do;
//! - no built-in's arguments are a hand-written JSON Schema: their inputSchemas are derived
//!   from the argument types;
//! - ARCHITECTURE.md stays a small map whose paths exist (`doc`).

#[path = "architecture/doc.rs"]
mod doc;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The rooms, lowest first. A file may name its own room or a lower one, never a higher one.
const LAYERS: &[&[&str]] = &[
    &[
        "auth",
        "human_time",
        "peers",
        "retention",
        "schema",
        "telemetry",
    ],
    &["error", "settings"],
    &["context"],
    &["catalog", "script_host"],
    &["content"],
    &["tools"],
    &["changes", "pack", "tasks"],
    &["mcp"],
    &["console"],
    &["transport"],
    &["server"],
    &["commands"],
];

fn rank(room: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&room))
}

fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, without_tests(&text)));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out.sort();
    out
}

/// The code before the file's `#[cfg(test)]` module (test modules sit at the end of a file),
/// without comment lines (doc links may name any module).
fn without_tests(text: &str) -> String {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    code.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The room of a source file: its first path component under `src/` (`lib.rs` has none).
fn room_of(path: &Path) -> Option<String> {
    let rel = path
        .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
        .unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?;
    let room = first.strip_suffix(".rs").unwrap_or(first);
    (room != "lib").then(|| room.to_owned())
}

/// The rooms a text names through `crate::ROOM` paths, grouped imports included.
fn named_rooms(text: &str) -> BTreeSet<String> {
    let mut rooms = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    rooms.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            rooms.insert(name);
        }
    }
    rooms
}

#[test]
fn dependencies_point_down_the_layers() {
    let mut violations = Vec::new();
    for (path, text) in sources() {
        let Some(room) = room_of(&path) else { continue };
        let own = rank(&room).unwrap_or_else(|| panic!("{room} is in no layer"));
        for named in named_rooms(&text) {
            if named == room {
                continue;
            }
            let Some(theirs) = rank(&named) else { continue };
            if theirs >= own {
                violations.push(format!("{} names {named}", path.display()));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "upward or sideways dependencies:\n{}",
        violations.join("\n")
    );
}

#[test]
fn only_the_request_context_reads_request_extensions() {
    for (path, text) in sources() {
        let reads = text.contains("extensions.get") || text.contains("extensions().get");
        assert!(
            !reads || path.ends_with("context/request.rs"),
            "{} reads request extensions; go through RequestCx",
            path.display()
        );
    }
}

#[test]
fn no_function_returns_a_string_error() {
    for (path, text) in sources() {
        let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in flat.match_indices("Result<") {
            let rest = &flat[at..];
            let end = rest
                .find('{')
                .unwrap_or(rest.len())
                .min(rest.find(';').unwrap_or(rest.len()));
            let signature = &rest[..end];
            assert!(
                !signature.trim_end().ends_with(", String>"),
                "{}: {signature}",
                path.display()
            );
        }
    }
}

#[test]
fn built_ins_are_not_looked_up_by_name() {
    // Each built-in's name appears in the file of its family only (where it is registered
    // with its operation), so no other code can route on it.
    for (path, text) in sources() {
        for name in [
            "\"omniforge_create_tool\"",
            "\"omniforge_call_tool\"",
            "\"omniforge_set_secret\"",
            "\"omniforge_create_prompt\"",
            "\"omniforge_get_definition\"",
        ] {
            if text.contains(name) {
                assert!(
                    path.components()
                        .any(|c| c.as_os_str() == "authoring" || c.as_os_str() == "builtin"),
                    "{} names {name}",
                    path.display()
                );
            }
        }
    }
}

/// The path of a source file under `src/`, with `/` separators.
fn rel(path: &Path) -> String {
    let rel = path
        .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
        .unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Where a `CallToolResult` is built, by `Type::constructor(..)` or a struct literal.
fn builds_call_tool_result(text: &str) -> Vec<usize> {
    const CONSTRUCTORS: [&str; 6] = [
        "success",
        "error",
        "structured",
        "structured_error",
        "new",
        "default",
    ];
    let mut at = Vec::new();
    for (i, _) in text.match_indices("CallToolResult") {
        let rest = text[i + "CallToolResult".len()..].trim_start();
        let built = match rest.strip_prefix("::") {
            Some(path) => CONSTRUCTORS.iter().any(|c| {
                path.trim_start().strip_prefix(c).is_some_and(|after| {
                    !after.starts_with(|ch: char| ch.is_alphanumeric() || ch == '_')
                })
            }),
            // A struct literal, not a function's return type (`-> CallToolResult {`).
            None => rest.starts_with('{') && !text[..i].trim_end().ends_with("->"),
        };
        if built {
            at.push(text[..i].lines().count());
        }
    }
    at
}

#[test]
fn only_the_adapters_build_call_tool_results() {
    // The built-ins answer in plain data (`tools/ops`' Outcome); the one adapter renders it.
    // Tool results are built where tools run: the script call loop (`tools/stored`) and the
    // tool-source adapters (`tools/manifest`); the wire (`mcp/`) maps errors.
    const ALLOWED: [&str; 4] = [
        "tools/ops/mcp.rs",
        "tools/stored/",
        "tools/manifest/",
        "mcp/",
    ];
    let mut violations = Vec::new();
    for (path, text) in sources() {
        let rel = rel(&path);
        if ALLOWED.iter().any(|a| rel.starts_with(a)) {
            continue;
        }
        for line in builds_call_tool_result(&text) {
            violations.push(format!("{rel}: CallToolResult built near line {line}"));
        }
    }
    assert!(
        violations.is_empty(),
        "a CallToolResult built outside the adapters:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_tidy_check_sees_call_tool_results_built() {
    assert_eq!(
        builds_call_tool_result("x = CallToolResult::success(vec![]);\ny = CallToolResult {\n"),
        [1, 2]
    );
    assert!(
        builds_call_tool_result(
            "fn f() -> CallToolResult {\nlet r: CallToolResult = g(); CallToolResult::successful()"
        )
        .is_empty()
    );
}

/// Where `text` has a JSON Schema keyword with a type's name as a string literal
/// (`"type": "object"`, `"type":"string"`, ...): a schema written by hand.
fn schema_literals(text: &str) -> Vec<usize> {
    const TYPES: [&str; 6] = ["object", "string", "integer", "number", "boolean", "array"];
    let mut at = Vec::new();
    for (i, _) in text.match_indices("\"type\"") {
        let rest = text[i + "\"type\"".len()..].trim_start();
        let Some(value) = rest.strip_prefix(':') else {
            continue;
        };
        let value = value.trim_start();
        if TYPES.iter().any(|t| value.starts_with(&format!("\"{t}\""))) {
            at.push(text[..i].lines().count());
        }
    }
    at
}

#[test]
fn no_built_in_has_a_hand_written_input_schema() {
    // The rooms that define built-ins and their argument types.
    const BUILT_INS: [&str; 4] = [
        "tools/authoring/",
        "tools/builtin/",
        "tools/ops/",
        "content/",
    ];
    let mut violations = Vec::new();
    for (path, text) in sources() {
        let rel = rel(&path);
        if !BUILT_INS.iter().any(|b| rel.starts_with(b)) {
            continue;
        }
        for line in schema_literals(&text) {
            violations.push(format!("{rel}: a JSON Schema literal near line {line}"));
        }
        for needle in ["json_schema!", "object_schema("] {
            if text.contains(needle) {
                violations.push(format!("{rel}: {needle}"));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "derive the inputSchema from the arguments type (tools/ops/schema.rs):\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_tidy_check_sees_schema_literals() {
    assert_eq!(
        schema_literals(
            "json!({\"type\": \"object\", \"properties\": {\"a\": {\"type\":\"string\"}}})"
        ),
        [1, 1]
    );
    assert!(schema_literals("json!({\"type\": \"text\", \"text\": t})").is_empty());
}
