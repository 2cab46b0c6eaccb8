//! The diff between two versions of a tool, section by section (description, code, schemas,
//! dependencies, lock, secrets, examples, limits), with `similar`: line diffs with three lines
//! of context and the changed words inside a changed line emphasised. Signs and hidden words
//! carry the meaning as well as colour does. Hidden characters (bidirectional controls,
//! zero-width characters) are shown marked ([`visible`]).
//!
//! A diff is bounded as a whole, since any `tools:write` principal can write the versions: one
//! [`DEADLINE`] for all its sections and their inline emphasis, and a size cap
//! ([`MAX_DIFF_BYTES`], [`MAX_DIFF_LINES`]) beyond which the page says "too large to diff"
//! and links to both sides as downloads ([`source`]). It runs on the blocking pool, never on
//! the async workers that serve MCP and `/healthz` ([`versions`]).

use std::time::{Duration, Instant};

use maud::{Markup, html};
use omniforge_store::ToolVersion;
use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

use crate::console::widgets::{bytes, hidden_count, scroll_table, visible};

/// The most time one diff (all its sections) may take; past it `similar` gives a coarser diff.
const DEADLINE: Duration = Duration::from_millis(250);

/// The most bytes (old and new sides together) of the changed sections one diff compares.
pub(crate) const MAX_DIFF_BYTES: usize = 256 * 1024;

/// The most lines (old and new sides together) of the changed sections one diff compares:
/// each line is a table row on the page.
pub(crate) const MAX_DIFF_LINES: usize = 5_000;

/// A version's parts as text, in the order they are compared: its whole content, as the
/// approval page of a new tool shows it too.
pub(crate) fn sections(v: &ToolVersion) -> Vec<(&'static str, String)> {
    let pretty = |value: &Value| serde_json::to_string_pretty(value).unwrap_or_default();
    let s = &v.spec;
    let hint = |name: &str, value: Option<bool>| value.map(|b| format!("{name} {b}\n"));
    let a = &s.annotations;
    vec![
        ("title", s.title.clone().unwrap_or_default()),
        ("description", s.description.clone()),
        ("code", s.code.clone()),
        (
            "input schema",
            pretty(&Value::Object(s.input_schema.clone())),
        ),
        (
            "output schema",
            s.output_schema
                .as_ref()
                .map(|o| pretty(&Value::Object(o.clone())))
                .unwrap_or_default(),
        ),
        ("dependencies", s.dependencies.join("\n")),
        ("lock", s.lock.clone()),
        ("secrets", s.secrets.join("\n")),
        (
            "examples",
            pretty(&Value::Array(
                s.examples.iter().cloned().map(Value::Object).collect(),
            )),
        ),
        (
            "limits",
            format!(
                "timeout_s {}\nmemory {} MiB\nnetwork {}",
                s.limits.timeout_ms as f64 / 1000.0,
                s.limits.memory_bytes >> 20,
                if s.limits.network { "allowed" } else { "off" }
            ),
        ),
        (
            "annotations",
            [
                hint("readOnlyHint", a.read_only_hint),
                hint("destructiveHint", a.destructive_hint),
                hint("idempotentHint", a.idempotent_hint),
                hint("openWorldHint", a.open_world_hint),
            ]
            .into_iter()
            .flatten()
            .collect(),
        ),
        (
            "task support",
            format!(
                "taskSupport {}\ntaskStart {}",
                s.execution.task_support.as_str(),
                s.execution.task_start.as_str()
            ),
        ),
    ]
}

/// The parts of `v` that hold hidden characters ([`hidden_count`]), with how many each holds:
/// for the warning on the approval page.
pub(crate) fn hidden_parts(v: &ToolVersion) -> Vec<(&'static str, usize)> {
    sections(v)
        .into_iter()
        .map(|(name, text)| (name, hidden_count(&text)))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// Renders the diff of version `a` to version `b` of `tool`, on the blocking pool ([`render`]).
/// `download`: the URL of a version's download ([`source`]) by its number.
pub(crate) async fn versions(
    tool: &str,
    a: &ToolVersion,
    b: &ToolVersion,
    download: impl Fn(u32) -> String,
) -> Markup {
    let (tool_name, old, new) = (tool.to_owned(), a.clone(), b.clone());
    let links = (download(a.number), download(b.number));
    tokio::task::spawn_blocking(move || render(&tool_name, &old, &new, &links))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "console: a diff failed");
            html! { p { "The diff could not be made." } }
        })
}

/// Renders the diff of version `a` to version `b`: "too large to diff", with `downloads` of
/// both sides, when the changed sections are over the size cap.
fn render(tool: &str, a: &ToolVersion, b: &ToolVersion, downloads: &(String, String)) -> Markup {
    let deadline = Instant::now() + DEADLINE;
    let new = sections(b);
    let mut unchanged = Vec::new();
    let mut changed = Vec::new();
    let (mut size, mut lines) = (0, 0);
    for ((name, old), (_, new)) in sections(a).into_iter().zip(new) {
        if old == new {
            unchanged.push(name);
        } else {
            size += old.len() + new.len();
            lines += old.lines().count() + new.lines().count();
            changed.push((name, old, new));
        }
    }
    let head = html! { h3 { "Version " (a.number) " → version " (b.number) } };
    if size > MAX_DIFF_BYTES || lines > MAX_DIFF_LINES {
        return html! {
            (head)
            p.flash.warn role="status" {
                "Too large to diff: the changed parts (" (changed.iter().map(|c| c.0).collect::<Vec<_>>().join(", "))
                ") hold " (bytes(size as u64)) " in " (lines) " lines, over the console's "
                (bytes(MAX_DIFF_BYTES as u64)) " or " (MAX_DIFF_LINES) " lines. Download both sides and compare them locally: "
                a href=(downloads.0) download { "version " (a.number) } " and "
                a href=(downloads.1) download { "version " (b.number) } "."
            }
        };
    }
    html! {
        (head)
        @if changed.is_empty() {
            p { "The two versions are identical." }
        }
        @for (name, old, new) in &changed { (section(tool, name, old, new, deadline)) }
        @if !unchanged.is_empty() {
            p.muted { "Unchanged: " (unchanged.join(", ")) "." }
        }
    }
}

/// A version as one plain text file, its parts in the diff's order under `== part ==` headings:
/// the download of a side too large to diff on the page.
pub(crate) fn source(v: &ToolVersion) -> String {
    let mut out = format!("# {} version {}\n", v.tool, v.number);
    for (name, text) in sections(v) {
        out.push_str(&format!("\n== {name} ==\n{text}\n"));
    }
    out
}

fn section(tool: &str, name: &str, old: &str, new: &str, deadline: Instant) -> Markup {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .deadline(deadline)
        .diff_lines(old, new);
    let label = format!("Changes to the {name} of {tool}");
    html! {
        h4 { (name) }
        (scroll_table(&label, html! {
            table.diff {
                caption.visually-hidden { (label) }
                thead { tr { th scope="col" { "Old" } th scope="col" { "New" } th scope="col" { "Change" } th scope="col" { "Text" } } }
                @for (g, group) in diff.grouped_ops(3).iter().enumerate() {
                    tbody {
                        @if g > 0 { tr.gap { td colspan="4" { "⋯" } } }
                        @for op in group {
                            @for change in diff.iter_inline_changes_deadline(op, Some(deadline)) {
                                @let (class, sign, word) = match change.tag() {
                                    ChangeTag::Delete => ("del", "−", "removed"),
                                    ChangeTag::Insert => ("ins", "+", "added"),
                                    ChangeTag::Equal => ("eq", " ", "unchanged"),
                                };
                                tr class=(class) {
                                    td.num { (change.old_index().map(|i| (i + 1).to_string()).unwrap_or_default()) }
                                    td.num { (change.new_index().map(|i| (i + 1).to_string()).unwrap_or_default()) }
                                    td.sign { span aria-hidden="true" { (sign) } span.visually-hidden { (word) } }
                                    td.text {
                                        @for (emphasised, text) in change.iter_strings_lossy() {
                                            @let text = text.trim_end_matches('\n');
                                            @if emphasised { mark { (visible(text)) } } @else { (visible(text)) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use omniforge_store::{Annotations, Limits, NewVersion, Runtime, VersionState};
    use serde_json::json;

    use super::*;

    fn version(number: u32, description: &str, code: &str) -> ToolVersion {
        ToolVersion {
            tool: "t".into(),
            number,
            created_at_ms: 0,
            spec: NewVersion {
                title: None,
                description: description.into(),
                input_schema: json!({"type": "object"}).as_object().cloned().unwrap(),
                output_schema: None,
                annotations: Annotations::default(),
                runtime: Runtime::Python,
                code: code.into(),
                dependencies: vec![],
                limits: Limits {
                    timeout_ms: 1000,
                    memory_bytes: 1 << 28,
                    network: false,
                },
                lock: String::new(),
                env_id: "none".into(),
                secrets: vec![],
                author: "a".into(),
                examples: Vec::new(),
                execution: Default::default(),
            },
            state: VersionState::live(),
        }
    }

    fn links() -> (String, String) {
        ("/old".into(), "/new".into())
    }

    #[test]
    fn a_diff_bomb_is_too_large_to_diff_and_links_both_sides() {
        // Two 3.2 MB versions (the reported bomb): refused at once, not rendered.
        let line = "x = 1  # a line of padding that changes in every version\n";
        let old = version(1, "d", &line.repeat(3_200_000 / line.len()));
        let new = version(
            2,
            "d",
            &line.replace('1', "2").repeat(3_200_000 / line.len()),
        );
        let started = Instant::now();
        let html = render("t", &old, &new, &links()).into_string();
        // Unbounded, this diff took 8.4 s of CPU in a release build.
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            html.contains("Too large to diff"),
            "{}",
            &html[..html.len().min(500)]
        );
        assert!(
            html.contains(r#"href="/old" download"#) && html.contains(r#"href="/new" download"#)
        );
        assert!(html.len() < 2_000, "{} bytes", html.len());
        // Many short lines under the byte cap are over the line cap.
        let old = version(1, "d", &"a\n".repeat(MAX_DIFF_LINES));
        let new = version(2, "d", &"b\n".repeat(10));
        assert!(
            render("t", &old, &new, &links())
                .into_string()
                .contains("Too large to diff")
        );
        // Just under both caps, the diff renders within the one deadline plus the render (a
        // debug build on a shared machine: a loose bound).
        let old = version(1, "d", &"a b c d\n".repeat(MAX_DIFF_LINES / 2 - 10));
        let new = version(2, "d", &"a c b e\n".repeat(MAX_DIFF_LINES / 2 - 10));
        let started = Instant::now();
        let html = render("t", &old, &new, &links()).into_string();
        assert!(!html.contains("Too large to diff"));
        assert!(started.elapsed() < DEADLINE * 8, "{:?}", started.elapsed());
    }

    #[test]
    fn a_version_downloads_as_text_with_every_part() {
        let v = version(3, "adds", "print(1)");
        let text = source(&v);
        assert!(text.starts_with("# t version 3\n"));
        assert!(text.contains("\n== code ==\nprint(1)\n"));
        assert!(text.contains("\n== limits ==\ntimeout_s 1\nmemory 256 MiB\nnetwork off\n"));
        assert!(text.contains("\n== task support ==\ntaskSupport forbidden\ntaskStart call\n"));
    }

    #[test]
    fn a_diff_shows_hidden_characters_marked() {
        let old = version(1, "adds", "if user != \"admin\":\n    raise Exit()\n");
        let new = version(
            2,
            "adds\u{200B}",
            "if user != \"admin\u{202E} \u{2066}# owner\u{2069} \u{2066}\":\n    raise Exit()\n",
        );
        let html = render("t", &old, &new, &links()).into_string();
        for c in ['\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}'] {
            assert!(!html.contains(c), "{c:?} reached the diff raw");
        }
        assert!(html.contains(">U+202E</mark>"), "{html}");
        assert!(html.contains(">U+200B</mark>"), "{html}");
        assert_eq!(hidden_parts(&new), vec![("description", 1), ("code", 4)]);
        assert!(hidden_parts(&old).is_empty());
    }
}
