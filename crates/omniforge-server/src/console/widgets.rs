//! Small shared renderings: times (`human_time`'s), durations, JSON, schemas, scrollable tables. Everything is
//! interpolated through maud, which escapes it; nothing here builds HTML from strings.

use maud::{Markup, html};
use serde_json::Value;

pub(crate) use crate::human_time::utc;

/// `41 ms`, `2.3 s`.
pub(crate) fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// `512 B`, `3.4 KiB`, `1.2 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Pretty JSON in a `pre`, hidden characters shown ([`visible`]).
pub(crate) fn json(value: &Value) -> Markup {
    code(&serde_json::to_string_pretty(value).unwrap_or_default())
}

/// Text in a `pre.code`, hidden characters shown ([`visible`]).
pub(crate) fn code(text: &str) -> Markup {
    html! { pre.code { (visible(text)) } }
}

/// The name of a character that changes how text reads without being seen: the bidirectional
/// controls of Trojan Source (CVE-2021-42574: embeddings, overrides, isolates and marks) and
/// the zero-width characters. `None` for any other character.
pub(crate) fn hidden_char(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{202A}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202B}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202C}' => "POP DIRECTIONAL FORMATTING",
        '\u{202D}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202E}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{200E}' => "LEFT-TO-RIGHT MARK",
        '\u{200F}' => "RIGHT-TO-LEFT MARK",
        '\u{061C}' => "ARABIC LETTER MARK",
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{2060}' => "WORD JOINER",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR",
        _ => return None,
    })
}

/// How many hidden characters ([`hidden_char`]) `text` holds.
pub(crate) fn hidden_count(text: &str) -> usize {
    text.chars().filter(|&c| hidden_char(c).is_some()).count()
}

/// `text` with each hidden character ([`hidden_char`]) shown as a marked `U+202E` (named in
/// its title) instead of itself, so that what a reviewer reads is what the code does.
pub(crate) fn visible(text: &str) -> Markup {
    html! {
        @for (plain, hidden) in split_hidden(text) {
            (plain)
            @if let Some(c) = hidden {
                mark.hidden-char title=(hidden_char(c).unwrap_or_default()) { (format!("U+{:04X}", u32::from(c))) }
            }
        }
    }
}

/// `text` as runs of plain text, each followed by the hidden character that ends it (none
/// after the last run).
fn split_hidden(text: &str) -> Vec<(&str, Option<char>)> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if hidden_char(c).is_some() {
            parts.push((&text[start..at], Some(c)));
            start = at + c.len_utf8();
        }
    }
    if start < text.len() || parts.is_empty() {
        parts.push((&text[start..], None));
    }
    parts
}

/// A table that may scroll sideways inside itself on a narrow screen (never the page). The
/// region is focusable so keyboard users can scroll it.
pub(crate) fn scroll_table(label: &str, table: Markup) -> Markup {
    html! { div.table-wrap role="region" aria-label=(format!("{label} table")) tabindex="0" { (table) } }
}

/// A JSON Schema's properties as a table: name, type, required, description. The schema as
/// written follows in a disclosure.
pub(crate) fn schema(label: &str, schema: &Value) -> Markup {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    html! {
        @match props {
            Some(props) if !props.is_empty() => {
                (scroll_table(label, html! {
                    table {
                        caption.visually-hidden { (label) }
                        thead { tr { th scope="col" { "Field" } th scope="col" { "Type" } th scope="col" { "Required" } th scope="col" { "Description" } } }
                        tbody {
                            @for (name, p) in props {
                                tr {
                                    th scope="row" { code { (visible(name)) } }
                                    td { (visible(&type_of(p))) }
                                    td { @if required.contains(&name.as_str()) { "yes" } @else { "no" } }
                                    td { (visible(p.get("description").and_then(Value::as_str).unwrap_or(""))) }
                                }
                            }
                        }
                    }
                }))
            }
            _ => { p.muted { "No arguments." } }
        }
        details { summary { (label) " as JSON" } (json(schema)) }
    }
}

fn type_of(p: &Value) -> String {
    match p.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let item = p.get("items").map_or_else(|| "any".into(), type_of);
            format!("array of {item}")
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_are_shown_marked_and_named() {
        // Trojan Source's "stretched string": the check reads as a comment once rendered raw.
        let code = "access = \"user\u{202E} \u{2066}# admin only\u{2069} \u{2066}\"\nx\u{200B}y";
        let html = code_html(code);
        for c in ['\u{202E}', '\u{2066}', '\u{2069}', '\u{200B}'] {
            assert!(!html.contains(c), "{c:?} reached the page raw: {html}");
        }
        assert!(
            html.contains(
                r#"<mark class="hidden-char" title="RIGHT-TO-LEFT OVERRIDE">U+202E</mark>"#
            ),
            "{html}"
        );
        assert!(
            html.contains(r#"title="ZERO WIDTH SPACE">U+200B</mark>y"#),
            "{html}"
        );
        assert_eq!(hidden_count(code), 5);
        // Plain text (and what maud escapes) is unchanged.
        assert_eq!(visible("a < b\u{00e9}").into_string(), "a &lt; b\u{00e9}");
        assert_eq!(visible("").into_string(), "");
        assert_eq!(
            visible("\u{FEFF}").into_string(),
            r#"<mark class="hidden-char" title="ZERO WIDTH NO-BREAK SPACE">U+FEFF</mark>"#
        );
    }

    fn code_html(text: &str) -> String {
        code(text).into_string()
    }
}
