//! The crate's architecture invariants (ARCHITECTURE.md, "omniforge-server"), checked on its
//! source text, as rust-analyzer's tidy tests do:
//! - dependencies between rooms point one way, down the layers;
//! - only the request context reads markers out of request extensions;
//! - no library function returns `Result<_, String>`;
//! - a built-in is never found by its name outside its own registration.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The rooms, lowest first. A file may name its own room or a lower one, never a higher one.
const LAYERS: &[&[&str]] = &[
    &["auth", "peers", "schema", "telemetry"],
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
