//! The diff between two versions of a tool, section by section (description, code, schemas,
//! dependencies, lock, secrets, examples, limits), with `similar`: line diffs with three lines
//! of context and the changed words inside a changed line emphasised. Signs and hidden words
//! carry the meaning as well as colour does. A deadline bounds the work on hostile inputs.

use std::time::Duration;

use maud::{Markup, html};
use omniforge_store::ToolVersion;
use serde_json::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

use crate::console::widgets::scroll_table;

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
                                            @if emphasised { mark { (text) } } @else { (text) }
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
