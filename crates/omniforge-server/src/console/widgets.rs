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

/// Pretty JSON in a `pre`.
pub(crate) fn json(value: &Value) -> Markup {
    html! { pre.code { (serde_json::to_string_pretty(value).unwrap_or_default()) } }
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
                                    th scope="row" { code { (name) } }
                                    td { (type_of(p)) }
                                    td { @if required.contains(&name.as_str()) { "yes" } @else { "no" } }
                                    td { (p.get("description").and_then(Value::as_str).unwrap_or("")) }
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
