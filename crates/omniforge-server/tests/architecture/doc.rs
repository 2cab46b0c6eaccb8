//! ARCHITECTURE.md stays a map: at most [`MAX_BYTES`], every repository path it names exists,
//! no link leaves the repository, and no issue number appears (issues close; the map should
//! not need editing when they do).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The map's size limit.
const MAX_BYTES: usize = 35_000;

/// Top-level entries a backticked name without an extension or trailing `/` must start with
/// to count as a path (so `tools/call` and `application/json` are not paths).
const ROOTS: &[&str] = &[
    "crates/",
    "bench/",
    "docs/",
    "scripts/",
    "tests/",
    "deploy/",
    "examples/",
    "packs/",
];

/// File extensions that make a backticked name a path.
const EXTENSIONS: &[&str] = &[
    "rs", "md", "toml", "py", "mjs", "js", "sql", "yml", "yaml", "json", "jsonl", "cfg", "sh",
    "service", "lock",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn map() -> String {
    std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap()
}

/// Every file and directory of the repository, relative to its root, directories ending in
/// `/`; build output, installed dependencies and VCS data are not the repository's.
fn tree() -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), ".git" | "target" | ".deps" | "node_modules") {
                continue;
            }
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"));
                walk(root, &path, out);
            } else {
                out.insert(rel);
            }
        }
    }
    let root = repo().canonicalize().unwrap();
    let mut out = BTreeSet::new();
    walk(&root, &root, &mut out);
    out
}

/// The backticked spans of a Markdown text (code fences excluded).
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            spans.push(span.to_owned());
        }
    }
    spans
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs` (one brace group).
fn expand(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_owned()];
    };
    if close < open {
        return vec![span.to_owned()];
    }
    span[open + 1..close]
        .split(',')
        .map(|alt| format!("{}{}{}", &span[..open], alt.trim(), &span[close + 1..]))
        .collect()
}

/// Whether a backticked span names a repository path: no spaces or placeholders, and either a
/// known extension, a trailing `/` with a directory-like name, or a top-level directory first.
fn is_path(span: &str) -> bool {
    let plain = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    if !plain || span.starts_with('/') || span.starts_with('.') || span.contains("//") {
        return false;
    }
    let has_ext = Path::new(span)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.contains(&e));
    has_ext
        || (span.contains('/')
            && (span.ends_with('/') || ROOTS.iter().any(|r| span.starts_with(r))))
}

/// Whether `path` is a repository file or directory, or the tail of one: the map names files
/// relative to their crate's `src/`.
fn exists(tree: &BTreeSet<String>, path: &str) -> bool {
    tree.iter().any(|entry| {
        let entry_trimmed = entry.trim_end_matches('/');
        let wanted = path.trim_end_matches('/');
        let is_dir = entry.ends_with('/');
        (is_dir || !path.ends_with('/'))
            && (entry_trimmed == wanted || entry_trimmed.ends_with(&format!("/{wanted}")))
    })
}

/// The paths of `text` that name nothing in `tree`.
fn missing_paths(text: &str, tree: &BTreeSet<String>) -> Vec<String> {
    code_spans(text)
        .iter()
        .flat_map(|span| expand(span))
        .filter(|span| is_path(span))
        .filter(|path| !exists(tree, path))
        .collect()
}

/// Links that leave the repository: any `http://` or `https://`, and Markdown link targets
/// that are absolute.
fn outside_links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        if line.contains("http://") || line.contains("https://") {
            found.push(line.trim().to_owned());
        }
        for (at, _) in line.match_indices("](") {
            let target = &line[at + 2..];
            if target.starts_with('/') || target.starts_with("..") {
                found.push(line.trim().to_owned());
            }
        }
    }
    found
}

/// "issue 12", "issues 11", "issue-16", "#13": references to the project's issues.
fn issue_references(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut found = Vec::new();
    for (at, _) in lower.match_indices("issue") {
        let rest = lower[at + "issue".len()..].trim_start_matches('s');
        let rest = rest.trim_start_matches([' ', '-', '\u{a0}']);
        if rest.starts_with(|c: char| c.is_ascii_digit()) {
            found.push(text[at..(at + 12).min(text.len())].to_owned());
        }
    }
    for (at, _) in text.match_indices('#') {
        if text[at + 1..].starts_with(|c: char| c.is_ascii_digit()) {
            found.push(text[at..(at + 6).min(text.len())].to_owned());
        }
    }
    found
}

#[test]
fn architecture_md_is_a_small_map() {
    let len = map().len();
    assert!(
        len <= MAX_BYTES,
        "ARCHITECTURE.md is {len} bytes, over {MAX_BYTES}: move per-feature detail to \
         docs/src/reference/ or the module's //! doc"
    );
}

#[test]
fn architecture_md_names_only_paths_that_exist() {
    let missing = missing_paths(&map(), &tree());
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (moved? update the map): {missing:?}"
    );
}

#[test]
fn architecture_md_links_nothing_outside_the_repository() {
    let links = outside_links(&map());
    assert!(
        links.is_empty(),
        "ARCHITECTURE.md links outside the repository: {links:?}"
    );
}

#[test]
fn architecture_md_names_no_issue_numbers() {
    let refs = issue_references(&map());
    assert!(refs.is_empty(), "ARCHITECTURE.md names issues: {refs:?}");
}

/// The checks above see what they are meant to see.
#[test]
fn the_map_checks_see_what_they_check() {
    let tree: BTreeSet<String> = [
        "crates/",
        "crates/x/",
        "crates/x/src/",
        "crates/x/src/a.rs",
        "bench/",
        "bench/RESULTS.md",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let text = "`a.rs`, `src/a.rs`, `x/src/`, `bench/RESULTS.md`, `tools/call`, `b.rs`, \
                `src/{a,b}.rs`, `bench/gone`, `x/nothing/`, `crates/x/src/a.rs/`\n\
                ```\n`in/a/fence.rs`\n```\n";
    assert_eq!(
        missing_paths(text, &tree),
        [
            "b.rs",
            "src/b.rs",
            "bench/gone",
            "x/nothing/",
            "crates/x/src/a.rs/"
        ]
    );
    assert_eq!(
        outside_links("see [x](https://example.org) and [y](docs/a.md)").len(),
        1
    );
    assert_eq!(outside_links("[z](/etc/passwd)").len(), 1);
    assert_eq!(
        issue_references("issue 12, issues 11 and 13, issue-16, #7, an issue, RFC 9728, C#").len(),
        4
    );
}
