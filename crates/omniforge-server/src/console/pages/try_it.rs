//! The try-it form on a tool's page: one field per inputSchema property (text, number,
//! integer, a true/false choice, a choice of enum values; anything else as JSON), run as the
//! signed-in principal through `tools/call`'s own path ([`actions::try_call`]). The answer
//! page shows the result as a client gets it (content blocks, `structuredContent`,
//! `isError`) and the progress messages the call sent.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::console::guard::{Viewer, not_found};
use crate::console::layout::{self, Nav};
use crate::console::pages::{fields, tool_href};
use crate::console::widgets::json as json_block;
use crate::console::{Console, actions, images};

/// How one property is entered.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Text,
    Number,
    Integer,
    Boolean,
    /// One of these values (each kept as JSON text in the form).
    Choice(Vec<Value>),
    /// Any other schema: JSON typed by hand.
    Json,
}

impl Kind {
    /// What the label says the field takes.
    fn word(&self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Number => "number",
            Kind::Integer => "integer",
            Kind::Boolean => "true or false",
            Kind::Choice(_) => "one of",
            Kind::Json => "JSON",
        }
    }
}

/// One property of the inputSchema, as a form field.
struct Field {
    name: String,
    kind: Kind,
    required: bool,
    description: Option<String>,
}

/// The form field name of property `name` (prefixed, so no property can collide with `csrf`).
fn input_name(name: &str) -> String {
    format!("arg.{name}")
}

fn kind_of(schema: &Value) -> Kind {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Kind::Choice(values.clone());
    }
    // `"type": ["string", "null"]` counts as a string.
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    match types.as_slice() {
        ["string"] => Kind::Text,
        ["number"] => Kind::Number,
        ["integer"] => Kind::Integer,
        ["boolean"] => Kind::Boolean,
        _ => Kind::Json,
    }
}

/// The fields of `schema`; `None` when it names no properties (then the arguments are one JSON
/// object typed by hand).
fn fields_of(schema: &JsonObject) -> Option<Vec<Field>> {
    let props = schema.get("properties").and_then(Value::as_object)?;
    if props.is_empty() {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Some(
        props
            .iter()
            .map(|(name, s)| Field {
                name: name.clone(),
                kind: kind_of(s),
                required: required.contains(&name.as_str()),
                description: s
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
            .collect(),
    )
}

/// The name of the whole-arguments textarea, for a schema without properties.
const WHOLE: &str = "arguments";

/// What is wrong with a submitted try-it form (shown above the form; nothing was called).
#[derive(Debug, thiserror::Error)]
enum FormError {
    #[error("The arguments are not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("The arguments must be a JSON object.")]
    NotObject,
    #[error("{name}: {what}")]
    Field { name: String, what: String },
}

/// The submitted form as call arguments.
///
/// # Errors
/// A value that is not of its property's kind, or JSON that does not parse.
fn arguments(schema: &JsonObject, form: &[(String, String)]) -> Result<JsonObject, FormError> {
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.trim().is_empty())
    };
    let Some(fields) = fields_of(schema) else {
        return match get(WHOLE) {
            None => Ok(JsonObject::new()),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(o)) => Ok(o),
                Ok(_) => Err(FormError::NotObject),
                Err(e) => Err(FormError::NotJson(e)),
            },
        };
    };
    let mut out = JsonObject::new();
    for f in fields {
        let Some(raw) = get(&input_name(&f.name)) else {
            continue;
        };
        let bad = |what: String| FormError::Field {
            name: f.name.clone(),
            what,
        };
        let value = match &f.kind {
            Kind::Text => Value::String(raw.to_owned()),
            Kind::Number => raw
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
                .ok_or_else(|| bad("not a number".into()))?,
            Kind::Integer => raw
                .trim()
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| bad("not an integer".into()))?,
            Kind::Boolean => match raw {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(bad("not true or false".into())),
            },
            Kind::Choice(_) | Kind::Json => {
                serde_json::from_str(raw).map_err(|e| bad(format!("not JSON: {e}")))?
            }
        };
        out.insert(f.name, value);
    }
    Ok(out)
}

/// The try-it form for a tool with `schema`, holding the values of `form` (after a run).
pub(crate) fn form(
    viewer: &Viewer,
    name: &str,
    schema: &JsonObject,
    form: &[(String, String)],
) -> Markup {
    let value = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map_or("", |(_, v)| v.as_str())
            .to_owned()
    };
    html! {
        form.try-it method="post" action=(format!("{}/try", tool_href(name))) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            @match fields_of(schema) {
                None => div.field {
                    label for="try-arguments" { "Arguments (a JSON object)" }
                    textarea #try-arguments name=(WHOLE) rows="4" { (value(WHOLE)) }
                },
                Some(fields) => @for (i, f) in fields.iter().enumerate() {
                    @let id = format!("try-{i}");
                    @let n = input_name(&f.name);
                    @let help = format!("{id}-help");
                    div.field {
                        label for=(id) {
                            (f.name) " (" (f.kind.word()) @if f.required { ", required" } ")"
                        }
                        @match &f.kind {
                            Kind::Text => input #(id) type="text" name=(n) value=(value(&n)) required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)];
                            Kind::Number => input #(id) type="number" step="any" name=(n) value=(value(&n)) required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)];
                            Kind::Integer => input #(id) type="number" step="1" name=(n) value=(value(&n)) required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)];
                            Kind::Boolean => select #(id) name=(n) required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)] {
                                option value="" { "(not set)" }
                                option value="true" selected[value(&n) == "true"] { "true" }
                                option value="false" selected[value(&n) == "false"] { "false" }
                            },
                            Kind::Choice(values) => select #(id) name=(n) required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)] {
                                option value="" { "(not set)" }
                                @for v in values {
                                    @let text = v.to_string();
                                    option value=(text) selected[value(&n) == text] { (match v { Value::String(s) => s.clone(), other => other.to_string() }) }
                                }
                            },
                            Kind::Json => textarea #(id) name=(n) rows="3" required[f.required] aria-describedby=[f.description.as_ref().map(|_| &help)] { (value(&n)) },
                        }
                        @if let Some(d) = &f.description { span.muted #(help) { (d) } }
                    }
                },
            }
            button type="submit" { "Run" }
        }
    }
}

/// The result as a client gets it: `isError`, each content block, `structuredContent`.
fn result(result: &CallToolResult, progress: &[String]) -> Markup {
    let failed = result.is_error == Some(true);
    html! {
        p {
            span.status.status-current[!failed].status-failed[failed] { @if failed { "isError: true" } @else { "isError: false" } }
        }
        h3 { "Content" }
        @if result.content.is_empty() { p.muted { "No content blocks." } }
        ol.content-blocks {
            @for block in &result.content {
                li {
                    @match block {
                        ContentBlock::Text(t) => { p.small { "text" } pre.code { (t.text) } },
                        ContentBlock::Image(i) => { p.small { "image" } (images::image(&i.data, &i.mime_type)) },
                        ContentBlock::Audio(a) => { p.small { "audio" } p.note { "Audio (" (a.mime_type) "), not played here." } },
                        other => { p.small { "other" } (json_block(&serde_json::to_value(other).unwrap_or(Value::Null))) },
                    }
                }
            }
        }
        @if let Some(s) = &result.structured_content {
            h3 { "structuredContent" }
            (json_block(s))
        }
        h3 { "Progress" }
        @if progress.is_empty() {
            p.muted { "The call sent no progress notifications." }
        } @else {
            ol.progress { @for m in progress { li { (m) } } }
        }
    }
}

/// `POST /console/tools/{name}/try`: calls the tool as the viewer, then shows its page's form
/// again with the answer below.
pub(crate) async fn submit(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let snapshot = console.shared.catalog.snapshot();
    let Some(entry) = snapshot
        .get_for(&name, Some(viewer.id()))
        .filter(|e| e.listed && viewer.can(e.scope))
    else {
        return not_found();
    };
    let schema = entry.tool().input_schema;
    drop(snapshot);
    let form_fields = fields(&body);
    let answer = match arguments(&schema, &form_fields) {
        Ok(args) => {
            let tried = actions::try_call(&console, &viewer, &name, args).await;
            result(&tried.result, &tried.progress)
        }
        Err(problem) => html! { p.flash.err role="alert" { (problem.to_string()) } },
    };
    let href = tool_href(&name);
    let body = html! {
        p.crumbs { a href="/console/tools" { "Catalog" } " / " a href=(href) { (name) } " / try it" }
        h1 { "Try " code { (name) } }
        (form(&viewer, &name, &schema, &form_fields))
        section #try-result aria-labelledby="result-h" {
            h2 #result-h { "Try-it result" }
            p { "Result of call to " code { (name) } ", as an MCP client gets it:" }
            (answer)
        }
    };
    layout::page(&viewer, Nav::Catalog, &format!("Try {name}"), body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
    }

    #[test]
    fn each_kind_of_property_becomes_its_json_type() {
        let s = schema(json!({"type": "object", "properties": {
            "s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"},
            "b": {"type": "boolean"}, "e": {"enum": ["a", 2]}, "o": {"type": "object"},
            "missing": {"type": "string"}
        }}));
        let args = arguments(
            &s,
            &pairs(&[
                ("arg.s", "12"),
                ("arg.n", "1.5"),
                ("arg.i", "7"),
                ("arg.b", "false"),
                ("arg.e", "2"),
                ("arg.o", r#"{"k": [1]}"#),
                ("arg.missing", ""),
                ("csrf", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"s": "12", "n": 1.5, "i": 7, "b": false, "e": 2, "o": {"k": [1]}})
        );
        assert!(arguments(&s, &pairs(&[("arg.i", "1.5")])).is_err());
        assert!(arguments(&s, &pairs(&[("arg.o", "{")])).is_err());
    }

    #[test]
    fn a_schema_without_properties_takes_one_json_object() {
        let s = schema(json!({"type": "object"}));
        let args = arguments(&s, &pairs(&[("arguments", r#"{"a": 1}"#)])).unwrap();
        assert_eq!(Value::Object(args), json!({"a": 1}));
        assert!(arguments(&s, &pairs(&[("arguments", "[1]")])).is_err());
    }
}
