//! The crate's architecture invariants (ARCHITECTURE.md, "omniforge-server"), checked on its
//! source text, as rust-analyzer's tidy tests do:
//! - dependencies between rooms point one way, down the layers;
//! - no circle between second-level rooms (`tools::builtin`, `tools::stored`, `runs`, ...);
//! - only the request context reads markers out of request extensions;
//! - no library function returns `Result<_, String>`;
//! - a built-in is never found by its name outside its own registration;
//! - no built-in builds a `CallToolResult`: only the built-ins' MCP adapter, the script call
//!   loop, the tool-source adapters and the wire (`mcp/`) do;
//! - no built-in's arguments are a hand-written JSON Schema: their inputSchemas are derived
//!   from the argument types;
//! - ARCHITECTURE.md stays a small map whose paths exist (`doc`);
//! - the book in `docs/` stays whole: pages, summary, built-ins, screenshots (`book`).

#[path = "architecture/book.rs"]
mod book;
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
    &["runs"],
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

/// The paths a text names from the crate root (`crate::a::b::C`), each as its segments after
/// `crate`; grouped imports are expanded (`crate::a::{b, c::{D, E}}` names `a::b`, `a::c::D`
/// and `a::c::E`).
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || "_:$".contains(c)) {
            continue; // `$crate::`, `other_crate::`, `super::crate::`
        }
        let mut rest = &text[at + "crate::".len()..];
        tree(&mut rest, Vec::new(), &mut paths);
    }
    paths
}

/// Parses one use tree (`a::b`, `a::{b, c}`, `a as b`, `*`) off the front of `rest`, pushing
/// each full path (after `prefix`) to `out`.
fn tree(rest: &mut &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        *rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            *rest = group;
            loop {
                tree(rest, path.clone(), out);
                *rest = rest.trim_start();
                match rest.chars().next() {
                    Some(',') => *rest = &rest[1..],
                    Some('}') => {
                        *rest = &rest[1..];
                        return;
                    }
                    _ => return,
                }
                if rest.trim_start().starts_with('}') {
                    *rest = &rest.trim_start()[1..];
                    return;
                }
            }
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            // `*`, or the end of the path.
            *rest = rest.strip_prefix('*').unwrap_or(rest);
            break;
        }
        *rest = &rest[name.len()..];
        if name != "self" {
            path.push(name);
        }
        match rest.strip_prefix("::") {
            Some(after) => *rest = after,
            None => break,
        }
    }
    // `a::b as c`: the alias names nothing new.
    if let Some(alias) = rest.trim_start().strip_prefix("as ") {
        let alias = alias.trim_start();
        let len = alias
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(alias.len());
        *rest = &alias[len..];
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The rooms a text names through `crate::ROOM` paths, grouped imports included.
fn named_rooms(text: &str) -> BTreeSet<String> {
    crate_paths(text)
        .into_iter()
        .map(|path| path[0].clone())
        .collect()
}

/// The second-level room a module path (segments under `src/`) lies in: `a::b` when `src/a/b/`
/// is a folder (a room of its own, such as `tools::stored`), else `a` (`content`, `runs`, and a
/// house's own files such as `tools/mod.rs`).
fn second_level(segments: &[String]) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    match segments {
        [a, b, ..] if src.join(a).join(b).is_dir() => format!("{a}::{b}"),
        [a, ..] => a.clone(),
        [] => String::new(),
    }
}

/// The second-level room of a source file (`None` for `lib.rs`).
fn second_level_of(path: &Path) -> Option<String> {
    let rel = rel(path);
    let mut segments: Vec<String> = rel.split('/').map(str::to_owned).collect();
    let last = segments.pop()?;
    let stem = last.strip_suffix(".rs").unwrap_or(&last);
    if stem != "mod" && !(segments.is_empty() && stem == "lib") {
        segments.push(stem.to_owned());
    }
    (!segments.is_empty()).then(|| second_level(&segments))
}

/// The edges between second-level rooms: `(from, to)` with a file of `from` that names `to`.
fn room_graph() -> std::collections::BTreeMap<(String, String), String> {
    let mut edges = std::collections::BTreeMap::new();
    for (path, text) in sources() {
        let Some(from) = second_level_of(&path) else {
            continue;
        };
        for named in crate_paths(&text) {
            let to = second_level(&named);
            if to != from {
                edges
                    .entry((from.clone(), to))
                    .or_insert_with(|| rel(&path));
            }
        }
    }
    edges
}

/// The circles of a graph: for each strongly connected part of more than one room, one
/// circle through it, as its rooms in order (the first repeated at the end).
fn circles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    use std::collections::BTreeMap;
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    // Which rooms reach which (the graph is a few dozen rooms: a closure per room is cheap).
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(room) = todo.pop() {
            for n in &next[room] {
                if seen.insert(*n) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|r| (*r, reach(r))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for room in next.keys() {
        if done.contains(room) || !reaches[room].contains(room) {
            continue;
        }
        let part: BTreeSet<&str> = reaches[room]
            .iter()
            .copied()
            .filter(|r| reaches[r].contains(room))
            .collect();
        done.extend(part.iter().copied());
        // A shortest way back to `room` inside its part (breadth first).
        let mut from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*room]);
        'search: while let Some(at) = queue.pop_front() {
            for n in &next[at] {
                if !part.contains(n) {
                    continue;
                }
                if n == room {
                    from.insert(room, at);
                    break 'search;
                }
                if !from.contains_key(n) {
                    from.insert(n, at);
                    queue.push_back(n);
                }
            }
        }
        let mut circle = vec![room.to_string()];
        let mut at = from[room];
        while at != *room {
            circle.push(at.to_string());
            at = from[at];
        }
        circle.push(room.to_string());
        circle.reverse();
        out.push(circle);
    }
    out
}

#[test]
fn no_circle_between_second_level_rooms() {
    let edges = room_graph();
    let found = circles(&edges.keys().cloned().collect());
    let shown: Vec<String> = found
        .iter()
        .map(|circle| {
            let steps: Vec<String> = circle
                .windows(2)
                .map(|w| {
                    let file = &edges[&(w[0].clone(), w[1].clone())];
                    format!("  {} -> {} ({file})", w[0], w[1])
                })
                .collect();
            format!("{}\n{}", circle.join(" -> "), steps.join("\n"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "circles between rooms:\n{}",
        shown.join("\n")
    );
}

#[test]
fn the_room_graph_check_sees_paths_and_circles() {
    let paths = crate_paths(
        "use crate::a::{self, b::{C, D as E}, f::*};\nlet x = crate::g::h(1); $crate::no",
    );
    let joined: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(joined, ["a", "a::b::C", "a::b::D", "a::f", "g::h"]);
    let edge = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    let graph = BTreeSet::from([
        edge("a", "b"),
        edge("b", "c"),
        edge("c", "a"),
        edge("c", "d"),
    ]);
    assert_eq!(circles(&graph), [["a", "b", "c", "a"]]);
    assert!(circles(&BTreeSet::from([edge("a", "b"), edge("b", "c")])).is_empty());
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
    // Tool results are built where tools run: the script call loop (`runs/`) and the
    // tool-source adapters (`tools/stored`, `tools/manifest`); the wire (`mcp/`) maps errors.
    const ALLOWED: [&str; 5] = [
        "tools/ops/mcp.rs",
        "runs/",
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
