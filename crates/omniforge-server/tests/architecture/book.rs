//! The book (`docs/`, an mdBook) stays whole: every page is in `SUMMARY.md` and every
//! `SUMMARY.md` entry is a page, the built-ins reference names every built-in the server lists,
//! the screenshots the pages show exist, and the README's links into the book name pages
//! that exist. (The rendered book's links and anchors are checked by `scripts/book-links.py`,
//! which `scripts/test` runs after `mdbook build docs`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn src() -> PathBuf {
    repo().join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The Markdown link targets of `text` (`[label](target)` and `![alt](target)`), without a
/// `#fragment`; external ones (with a scheme) left out.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push(target.to_owned());
    }
    out
}

/// Every `.md` page under `docs/src`, relative to it.
fn pages() -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(&src(), &src(), &mut out);
    out
}

#[test]
fn every_page_is_in_the_summary_and_every_entry_is_a_page() {
    let summary = read(&src().join("SUMMARY.md"));
    let entries: BTreeSet<String> = link_targets(&summary).into_iter().collect();
    let pages: BTreeSet<String> = pages().into_iter().filter(|p| p != "SUMMARY.md").collect();
    let missing: Vec<_> = entries.difference(&pages).collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md names pages that do not exist: {missing:?}"
    );
    let unlisted: Vec<_> = pages.difference(&entries).collect();
    assert!(
        unlisted.is_empty(),
        "pages under docs/src/ that SUMMARY.md does not list (mdBook would not build them): \
         {unlisted:?}"
    );
}

#[test]
fn the_builtins_reference_names_every_builtin() {
    let snapshot: serde_json::Value = serde_json::from_str(&read(
        &repo().join("crates/omniforge-server/tests/snapshots/builtins_tools_list.json"),
    ))
    .unwrap();
    let reference = read(&src().join("reference/builtins.md"));
    let names: Vec<&str> = snapshot
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.len() > 20,
        "the snapshot lists the built-ins: {names:?}"
    );
    let missing: Vec<_> = names
        .iter()
        .filter(|name| !reference.contains(&format!("| `{name}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/reference/builtins.md has no row for {missing:?}: add one (scope, arguments, \
         description as tools/list gives it)"
    );
}

#[test]
fn every_image_and_page_a_page_links_exists() {
    let mut broken = Vec::new();
    for page in pages() {
        let path = src().join(&page);
        let dir = path.parent().unwrap().to_owned();
        for target in link_targets(&read(&path)) {
            if !dir.join(&target).exists() {
                broken.push(format!("{page}: {target}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing under docs/src/: {broken:?}"
    );
}

#[test]
fn the_readme_links_into_the_book_name_files_that_exist() {
    let readme = read(&repo().join("README.md"));
    let broken: Vec<_> = link_targets(&readme)
        .into_iter()
        .filter(|target| target.starts_with("docs/"))
        .filter(|target| !repo().join(target).exists())
        .collect();
    assert!(broken.is_empty(), "README.md links to nothing: {broken:?}");
    assert!(
        readme.contains("docs/src/getting-started.md"),
        "README.md links to the book's getting-started chapter"
    );
}

/// The checks see what they check.
#[test]
fn the_book_checks_see_what_they_check() {
    assert_eq!(
        link_targets("[a](x.md) ![b](../console/c.png) [c](https://e.org) [d](y.md#z) [e](#f)"),
        ["x.md", "../console/c.png", "y.md"]
    );
}
