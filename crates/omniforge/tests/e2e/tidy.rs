//! The e2e tests' own tidy rules, checked on their source text (like
//! `crates/omniforge-server/tests/architecture.rs`). Every test file (each `.rs` under
//! `tests/e2e` except `main.rs`, this file and `support/`):
//! - `imports`: names nothing of this crate but `crate::support` (and its own module, for a
//!   test split into a folder): no `crate::other_test`, no `super::other_test`;
//! - `server`: starts no server of its own: no `Command::new(BIN)`, no `CARGO_BIN_EXE_`, no
//!   struct holding a [`Serve`](crate::support::Serve), no `struct Omni`, no `fn start(` that
//!   starts `omniforge`; [`crate::support::server`] is the one server builder;
//! - `client`: speaks MCP through [`crate::support::client`], with no HTTP client of its own
//!   (`reqwest::Client::new()`/`::builder()`; `support::http_client()` is the one) and no
//!   struct of its own that numbers JSON-RPC requests (a `next_id` field);
//! - `sleep`: no fixed sleep (`tokio::time::sleep`, `std::thread::sleep`) unless the line, or
//!   the line above, says `// scenario: WHY` (a slow tool, a pause the scenario is about);
//!   waiting for something uses [`crate::support::eventually()`].
//!
//! The files that still break a rule are listed in [`ALLOWED`], one entry per file and rule
//! with the exact count. The list only shrinks: a count above its entry fails (a new
//! violation), and so does a count below it (lower the entry, or remove it at zero).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

static KRATE_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bcrate::(\w+)").unwrap());
static SUPERS_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b(?:super::)+(\w+)").unwrap());
static SPAWN_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Command::new\(\s*(?:\w+::)*BIN\s*\)|CARGO_BIN_EXE_").unwrap());
static OMNI_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bstruct\s+Omni\b").unwrap());
static FIELD_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?\w+\s*:\s*(?:\w+::)*Serve\s*,").unwrap()
});
static STARTS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Serve::|HttpServer::start|StdioServer::start|\bBIN\b").unwrap());
static HTTP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"reqwest::Client::(?:new|builder)\s*\(|ClientBuilder::new\s*\(").unwrap()
});
static NEXT_ID_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(?:pub(?:\([\w:]+\))?\s+)?next_id\s*:\s*u\d+\s*,").unwrap());
static SLEEP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:tokio::time::|std::thread::|\bthread::|\btime::)sleep\s*\(|(?:^|[^\w.:])sleep\s*\(",
    )
    .unwrap()
});

/// (file under `tests/e2e`, rule, how many times it breaks the rule today).
const ALLOWED: &[(&str, &str, usize)] = &[
    ("kubernetes.rs", "server", 2),
    ("manifest_tools/raw.rs", "server", 2),
    ("manifest_tools/startup.rs", "server", 1),
    ("robustness.rs", "client", 1),
    ("walkthrough.rs", "server", 3),
];

/// The test files: every `.rs` under `tests/e2e` but `main.rs`, `tidy.rs` and `support/`.
fn test_files() -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                if rel != "support" {
                    walk(root, &path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && rel != "main.rs"
                && rel != "tidy.rs"
            {
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out.sort();
    out
}

/// The code of a line: without a `//` comment (outside a string literal, roughly: a `//`
/// preceded by an odd number of quotes is inside a string).
fn code_of(line: &str) -> &str {
    let mut from = 0;
    while let Some(at) = line[from..].find("//") {
        let at = from + at;
        if line[..at].matches('"').count().is_multiple_of(2) {
            return &line[..at];
        }
        from = at + 2;
    }
    line
}

/// The module path of a test file: `a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(rel: &str) -> Vec<String> {
    let rel = rel.strip_suffix(".rs").unwrap();
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The test modules: the top-level `.rs` files and folders of `tests/e2e` (without `main`,
/// `tidy` and `support`).
fn test_modules() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut out: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|m| !["main", "tidy", "support"].contains(&m.as_str()))
        .collect();
    out.sort();
    out
}

/// `imports`: `crate::X` for an X that is neither `support` nor the file's own top module,
/// and `super::...::X` naming another test module (`super::` inside the file's own module,
/// or an inline one, is fine).
fn imports(rel: &str, text: &str, modules: &[String]) -> usize {
    let own = module_of(rel).remove(0);
    let krate = &*KRATE_RE;
    let supers = &*SUPERS_RE;
    let other = |name: &str| name != own && modules.iter().any(|m| m == name);
    let mut n = 0;
    for line in text.lines().map(code_of) {
        n += krate
            .captures_iter(line)
            .filter(|c| &c[1] != "support" && c[1] != own)
            .count();
        n += supers.captures_iter(line).filter(|c| other(&c[1])).count();
    }
    n
}

/// `server`: a server started by hand, or a struct wrapping one.
fn server(text: &str) -> usize {
    let spawn = &*SPAWN_RE;
    let omni = &*OMNI_RE;
    let field = &*FIELD_RE;
    let starts = &*STARTS_RE;
    let lines: Vec<&str> = text.lines().map(code_of).collect();
    let mut n = 0;
    let mut in_struct = false;
    for (i, line) in lines.iter().enumerate() {
        n += spawn.find_iter(line).count() + omni.find_iter(line).count();
        if line.trim_start().starts_with("struct ") || line.contains(" struct ") {
            in_struct = line.trim_end().ends_with('{');
        } else if in_struct && line.trim() == "}" {
            in_struct = false;
        } else if in_struct && field.is_match(line) {
            n += 1;
        }
        if line.contains("fn start(") {
            // The body: up to the closing brace at the function's own indentation.
            let indent = &line[..line.len() - line.trim_start().len()];
            let end = format!("{indent}}}");
            let body = lines[i..]
                .iter()
                .skip(1)
                .take_while(|l| l.trim_end() != end)
                .any(|l| starts.is_match(l));
            n += usize::from(body);
        }
    }
    n
}

/// `client`: an HTTP client of its own, or a struct that numbers JSON-RPC requests.
fn client(text: &str) -> usize {
    let http = &*HTTP_RE;
    let next_id = &*NEXT_ID_RE;
    text.lines()
        .map(code_of)
        .map(|line| http.find_iter(line).count() + usize::from(next_id.is_match(line)))
        .sum()
}

/// `sleep`: a fixed sleep without a `// scenario:` reason on its line or the line above.
fn sleep(text: &str) -> usize {
    let sleep = &*SLEEP_RE;
    let lines: Vec<&str> = text.lines().collect();
    (0..lines.len())
        .filter(|&i| {
            let code = code_of(lines[i]);
            if !sleep.is_match(code) || code.contains("fn sleep") {
                return false;
            }
            let reason = |l: &str| l.contains("// scenario:");
            !(reason(lines[i]) || (i > 0 && reason(lines[i - 1])))
        })
        .count()
}

/// Every rule's count per file (only the non-zero ones).
fn counts() -> BTreeMap<(String, &'static str), usize> {
    let modules = test_modules();
    let mut out = BTreeMap::new();
    for (rel, text) in test_files() {
        let found = [
            ("imports", imports(&rel, &text, &modules)),
            ("server", server(&text)),
            ("client", client(&text)),
            ("sleep", sleep(&text)),
        ];
        for (rule, n) in found {
            if n > 0 {
                out.insert((rel.clone(), rule), n);
            }
        }
    }
    out
}

#[test]
fn e2e_files_use_only_support_and_wait_with_eventually() {
    let found = counts();
    let allowed: BTreeMap<(String, &str), usize> = ALLOWED
        .iter()
        .map(|&(file, rule, n)| ((file.to_owned(), rule), n))
        .collect();
    let mut problems = Vec::new();
    for ((file, rule), &n) in &found {
        match allowed.get(&(file.clone(), *rule)) {
            None => problems.push(format!(
                "{file} breaks `{rule}` {n} time(s): use crate::support (see tidy.rs)"
            )),
            Some(&max) if n > max => problems.push(format!(
                "{file} breaks `{rule}` {n} time(s), {max} allowed: a new violation"
            )),
            Some(&max) if n < max => problems.push(format!(
                "{file} breaks `{rule}` only {n} time(s) now: lower its ALLOWED entry from {max}"
            )),
            Some(_) => {}
        }
    }
    for ((file, rule), max) in &allowed {
        if !found.contains_key(&(file.clone(), *rule)) {
            problems.push(format!(
                "{file} no longer breaks `{rule}`: remove its ALLOWED entry ({max})"
            ));
        }
    }
    let listing: Vec<String> = found
        .iter()
        .map(|((file, rule), n)| format!("    (\"{file}\", \"{rule}\", {n}),"))
        .collect();
    assert!(
        problems.is_empty(),
        "{}\n\ntoday's counts:\n{}",
        problems.join("\n"),
        listing.join("\n")
    );
}

#[test]
fn tidy_rules_catch_what_they_name() {
    let bad = r#"
use crate::oauth::Setup;
use super::server::EventStream;
struct Omni {
    server: Serve,
}
impl Omni {
    async fn start() -> Omni {
        let s = Serve::command().start().await;
    }
}
fn raw() {
    let c = reqwest::Client::builder().build();
    let child = Command::new(BIN).spawn();
    tokio::time::sleep(Duration::from_millis(100)).await;
    std::thread::sleep(Duration::from_millis(100));
    // scenario: the tool is slow on purpose
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_secs(1)).await; // scenario: a pause between calls
}
struct Session {
    next_id: u64,
}
"#;
    let modules = ["oauth".to_owned(), "server".to_owned(), "x".to_owned()];
    assert_eq!(imports("x.rs", bad, &modules), 2);
    let own = "use super::shared;\nuse crate::x::z;\nsuper::Mode::Warm";
    assert_eq!(imports("x/y.rs", own, &modules), 0);
    assert_eq!(
        imports("x/y.rs", "use super::super::oauth::z;", &modules),
        1
    );
    // `struct Omni`, its `Serve` field, `fn start` that starts one, `Command::new(BIN)`.
    assert_eq!(server(bad), 4);
    assert_eq!(client(bad), 2);
    assert_eq!(sleep(bad), 2);
    let fine = "use crate::support::{Serve, eventually};\n// crate::oauth in a comment\n\
                let x = \"a // b\"; let t = time.sleep(1);";
    assert_eq!(
        imports("x.rs", fine, &modules) + server(fine) + client(fine) + sleep(fine),
        0
    );
}
