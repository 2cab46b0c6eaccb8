//! The diff between two versions of a tool, section by section (description, code, schemas,
//! dependencies, lock, secrets, examples, limits), with `similar`: line diffs with three lines
//! of context and the changed words inside a changed line emphasised. Signs and hidden words
//! carry the meaning as well as colour does. Hidden characters (bidirectional controls,
//! zero-width characters) are shown marked ([`visible`]). A deadline bounds the work on hostile inputs.

use std::time::Duration;

use maud::{Markup, html};
use omniforge_store::ToolVersion;
use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

use crate::console::widgets::{hidden_count, scroll_table, visible};

/// The most time one section's diff may take; past it `similar` gives a coarser diff.
const DEADLINE: Duration = Duration::from_millis(250);

/// A version's parts as text, in the order they are compared.
fn sections(v: &ToolVersion) -> Vec<(&'static str, String)> {
    let pretty = |value: &Value| serde_json::to_string_pretty(value).unwrap_or_default();
    let s = &v.spec;
    vec![
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
                "timeout_ms {}\nmemory_bytes {}\nnetwork {}",
                s.limits.timeout_ms, s.limits.memory_bytes, s.limits.network
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

/// Renders the diff of version `a` to version `b`.
pub(crate) fn versions(tool: &str, a: &ToolVersion, b: &ToolVersion) -> Markup {
    let new = sections(b);
    let mut unchanged = Vec::new();
    let mut changed = Vec::new();
    for ((name, old), (_, new)) in sections(a).iter().zip(&new) {
        if old == new {
            unchanged.push(*name);
        } else {
            changed.push(section(tool, name, old, new));
        }
    }
    html! {
        h3 { "Version " (a.number) " → version " (b.number) }
        @if changed.is_empty() {
            p { "The two versions are identical." }
        }
        @for markup in &changed { (markup) }
        @if !unchanged.is_empty() {
            p.muted { "Unchanged: " (unchanged.join(", ")) "." }
        }
    }
}

fn section(tool: &str, name: &str, old: &str, new: &str) -> Markup {
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Patience)
        .timeout(DEADLINE)
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
                            @for change in diff.iter_inline_changes(op) {
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

    pub(crate) fn version(number: u32, description: &str, code: &str) -> ToolVersion {
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

    #[test]
    fn a_diff_shows_hidden_characters_marked() {
        let old = version(1, "adds", "if user != \"admin\":\n    raise Exit()\n");
        let new = version(
            2,
            "adds\u{200B}",
            "if user != \"admin\u{202E} \u{2066}# owner\u{2069} \u{2066}\":\n    raise Exit()\n",
        );
        let html = versions("t", &old, &new).into_string();
        for c in ['\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}'] {
            assert!(!html.contains(c), "{c:?} reached the diff raw");
        }
        assert!(html.contains(">U+202E</mark>"), "{html}");
        assert!(html.contains(">U+200B</mark>"), "{html}");
        assert_eq!(hidden_parts(&new), vec![("description", 1), ("code", 4)]);
        assert!(hidden_parts(&old).is_empty());
    }
}
