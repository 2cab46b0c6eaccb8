//! A tool's page: description and schemas, its versions with a diff between any two, its
//! examples and their last results, its code, its recent calls, the try-it form ([`try_it`]);
//! for `tools:write` viewers, rollback and "run the examples again" (the rollback and check
//! built-ins' own operations, run as the viewer).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use maud::{Markup, html};
use omniforge_store::{CallFilter, CallSource, ExampleResult, ToolVersion, VersionStatus};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::entry::ToolSource;
use crate::console::guard::{Viewer, not_found, require};
use crate::console::layout::{self, Nav};
use crate::console::pages::calls::call_table;
use crate::console::pages::{done, field, fields, query, tool_href, try_it};
use crate::console::widgets::{
    code as code_block, json as json_block, schema, scroll_table, utc, visible,
};
use crate::console::{Console, actions, charts, diff};

/// The page's query: which version to show, and which two to compare.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Shown {
    version: Option<u32>,
    from: Option<u32>,
    to: Option<u32>,
}

/// Whether `viewer` may see version `v`: pending, draft and rejected versions are their
/// author's and the admins'.
fn may_see(viewer: &Viewer, v: &ToolVersion) -> bool {
    v.state.status == VersionStatus::Live
        || viewer.can(Scope::Admin)
        || v.spec.author == viewer.id()
}

/// What the viewer may see of stored tool `name`: its visible versions and current number;
/// `None` when the viewer may not see the tool at all (then it is a 404 like an unknown one).
async fn stored_view(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    listed: bool,
) -> Option<(Vec<ToolVersion>, Option<u32>, bool)> {
    let tool = console.stored.store.tool(name).await.ok().flatten()?;
    let versions: Vec<ToolVersion> = console
        .stored
        .store
        .versions(name)
        .await
        .ok()?
        .into_iter()
        .filter(|v| may_see(viewer, v))
        .collect();
    let own_unreleased = versions
        .iter()
        .any(|v| v.state.status != VersionStatus::Live);
    let visible =
        listed || own_unreleased || (viewer.can(Scope::Write) && tool.current_version.is_some());
    (visible && !versions.is_empty()).then_some((versions, tool.current_version, tool.enabled))
}

/// `GET /console/tools/{name}`.
pub(crate) async fn page(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let q: Shown = query(raw);
    let snapshot = console.shared.catalog.snapshot();
    let entry = snapshot
        .get_for(&name, Some(viewer.id()))
        .filter(|e| e.listed && viewer.can(e.scope));
    let source = entry.map_or(ToolSource::Stored, |e| e.source);
    let tool = entry.map(|e| e.tool());
    // Versions, code and examples are what `omniforge_get_tool` shows: `tools:write` and up.
    let stored = match source {
        ToolSource::Stored if viewer.can(Scope::Write) => {
            stored_view(&console, &viewer, &name, entry.is_some()).await
        }
        _ => None,
    };
    if entry.is_none() && stored.is_none() {
        return not_found();
    }
    let call_source = match source {
        ToolSource::Builtin => CallSource::BuiltIn,
        ToolSource::Manifest => CallSource::Manifest,
        ToolSource::Stored => CallSource::Stored,
    };
    let filter = CallFilter {
        tool: Some(name.clone()),
        source: Some(call_source),
        principal: (!viewer.can(Scope::Admin)).then(|| viewer.id().to_owned()),
        before_id: None,
        limit: 20,
    };
    let calls = console
        .stored
        .store
        .calls(&filter)
        .await
        .unwrap_or_default();
    // The hourly statistics count every principal's calls: admins only.
    let hours = if viewer.can(Scope::Admin) {
        let now = crate::console::now_ms();
        let stats = console
            .stored
            .store
            .call_hours(Some((call_source, &name)), now - 24 * 3_600_000)
            .await
            .unwrap_or_default();
        Some(charts::last_day(now, &stats))
    } else {
        None
    };
    let title = format!("Tool {name}");
    let body = html! {
        p.crumbs { a href="/console/tools" { "Catalog" } " / " (name) }
        h1 { code { (name) } }
        @if let Some(tool) = tool.as_ref().filter(|_| stored.is_none()) {
            @if let Some(t) = &tool.title { p.subtitle { (visible(t)) } }
            p.lead { (visible(tool.description.as_deref().unwrap_or(""))) }
        }
        dl.facts {
            dt { "Source" } dd { (source.as_str()) }
            @if let Some((_, current, enabled)) = &stored {
                dt { "Status" } dd {
                    @match current { Some(n) => { "version " (n) " is current" }, None => { "no current version" } }
                    @if !enabled { ", disabled" }
                }
            }
        }
        @match &stored {
            Some((versions, current, enabled)) => (stored_sections(&console, &viewer, &name, versions, (*current, *enabled), &q).await),
            None => @if let Some(tool) = &tool {
                section aria-labelledby="schemas" {
                    h2 #schemas { "Schemas" }
                    h3 { "Input" }
                    (schema("Input schema", &Value::Object((*tool.input_schema).clone())))
                    @if let Some(out) = &tool.output_schema {
                        h3 { "Output" }
                        (schema("Output schema", &Value::Object((**out).clone())))
                    }
                }
            },
        }
        @if let Some(hours) = &hours {
            section aria-labelledby="activity" {
                h2 #activity { "Activity" }
                div.charts {
                    (charts::calls("calls-chart", &name, hours))
                    (charts::latency("latency-chart", &name, hours))
                }
            }
        }
        @if let Some(tool) = &tool {
            section aria-labelledby="try-h" {
                h2 #try-h { "Try it" }
                p.muted { "Calls the tool as you, as an MCP client would." }
                (try_it::form(&viewer, &name, &tool.input_schema, &[]))
            }
        }
        section aria-labelledby="calls-h" {
            h2 #calls-h { "Recent calls" }
            p.muted { @if viewer.can(Scope::Admin) { "Every principal's calls, newest first." } @else { "Your own calls, newest first." } }
            (call_table(&calls))
        }
    };
    layout::page(&viewer, Nav::Catalog, &title, body).into_response()
}

async fn stored_sections(
    console: &Console,
    viewer: &Viewer,
    name: &str,
    versions: &[ToolVersion],
    (current, enabled): (Option<u32>, bool),
    q: &Shown,
) -> Markup {
    let find = |n: Option<u32>| n.and_then(|n| versions.iter().find(|v| v.number == n));
    let Some(shown) = find(q.version).or(find(current)).or(versions.last()) else {
        return html! {};
    };
    let results = console
        .stored
        .store
        .example_results(name, shown.number)
        .await
        .unwrap_or_default();
    let can_edit = viewer.can(Scope::Write);
    let href = tool_href(name);
    let diff = match (find(q.from), find(q.to)) {
        (Some(a), Some(b)) => Some(diff::versions(name, a, b, |n| source_href(name, n)).await),
        _ => None,
    };
    let spec = &shown.spec;
    html! {
        p.lead { (visible(&spec.description)) }
        dl.facts {
            dt { "Shown" } dd { "version " (shown.number) " (" (shown.state.status.as_str()) "), by " (spec.author) ", " (utc(shown.created_at_ms)) }
            @if let Some(reason) = &shown.state.reason { dt { "Reason" } dd { (reason) } }
            dt { "Limits" } dd { "timeout " (spec.limits.timeout_ms) " ms; memory " (spec.limits.memory_bytes >> 20) " MiB; network " @if spec.limits.network { "allowed" } @else { "off" } }
            @if !spec.secrets.is_empty() {
                dt { "Secrets" } dd { @for (i, s) in spec.secrets.iter().enumerate() { @if i > 0 { ", " } code { (s) } } }
            }
        }
        @if can_edit && current.is_some() {
            form.inline method="post" action=(format!("{href}/enabled")) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                input type="hidden" name="enabled" value=(if enabled { "false" } else { "true" });
                button type="submit" .danger[enabled] { @if enabled { "Disable tool" } @else { "Enable tool" } }
            }
        }
        section aria-labelledby="schemas" {
            h2 #schemas { "Schemas" }
            h3 { "Input" }
            (schema("Input schema", &Value::Object(spec.input_schema.clone())))
            @if let Some(out) = &spec.output_schema {
                h3 { "Output" }
                (schema("Output schema", &Value::Object(out.clone())))
            }
        }
        section aria-labelledby="versions" {
            h2 #versions { "Versions" }
            (scroll_table("Versions", html! {
                table {
                    caption.visually-hidden { "Versions" }
                    thead { tr { th scope="col" { "Version" } th scope="col" { "Written" } th scope="col" { "Author" } th scope="col" { "Status" } @if can_edit { th scope="col" { "Action" } } } }
                    tbody {
                        @for v in versions.iter().rev() {
                            tr {
                                th scope="row" {
                                    a href=(format!("{href}?version={}", v.number)) { "Version " (v.number) }
                                    @if current == Some(v.number) { " " span.status.status-current { "current" } }
                                }
                                td { (utc(v.created_at_ms)) }
                                td { (v.spec.author) }
                                td {
                                    (v.state.status.as_str())
                                    @if let Some(by) = &v.state.decided_by { " by " (by) }
                                    @if let Some(reason) = &v.state.reason { ": " (reason) }
                                }
                                @if can_edit {
                                    td {
                                        @if v.state.status == VersionStatus::Live && current != Some(v.number) {
                                            form.inline method="post" action=(format!("{href}/rollback")) {
                                                input type="hidden" name="csrf" value=(viewer.csrf);
                                                input type="hidden" name="version" value=(v.number);
                                                button type="submit" { "Roll back to version " (v.number) }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }))
            @if versions.len() > 1 {
                form.diff-form method="get" action=(href) {
                    div.field {
                        label for="from" { "From version" }
                        select #from name="from" { @for v in versions { option value=(v.number) selected[Some(v.number) == q.from.or(versions.len().checked_sub(2).map(|i| versions[i].number))] { (v.number) } } }
                    }
                    div.field {
                        label for="to" { "To version" }
                        select #to name="to" { @for v in versions { option value=(v.number) selected[Some(v.number) == q.to.or(versions.last().map(|l| l.number))] { (v.number) } } }
                    }
                    button type="submit" { "Show diff" }
                }
            }
            @if let Some(diff) = diff {
                div #diff role="region" aria-label="Diff" { (diff) }
            }
        }
        section aria-labelledby="examples" {
            h2 #examples { "Examples" }
            @if spec.examples.is_empty() {
                p { "This version carries no examples." }
            } @else {
                ol.examples {
                    @for (i, e) in spec.examples.iter().enumerate() {
                        li {
                            div.example-grid {
                                div { h3.small { "Arguments" } (json_block(e.get("arguments").unwrap_or(&json!({})))) }
                                div { h3.small { "Expect" } (json_block(e.get("expect").unwrap_or(&json!({})))) }
                            }
                            (example_result(results.iter().find(|r| usize::try_from(r.index).ok() == Some(i))))
                        }
                    }
                }
                @if can_edit {
                    form.inline method="post" action=(format!("{href}/check")) {
                        input type="hidden" name="csrf" value=(viewer.csrf);
                        input type="hidden" name="version" value=(shown.number);
                        button type="submit" { "Run the examples of version " (shown.number) " again" }
                    }
                }
            }
        }
        section aria-labelledby="code" {
            h2 #code { "Code" }
            @if !spec.dependencies.is_empty() {
                p { "Dependencies: " @for (i, d) in spec.dependencies.iter().enumerate() { @if i > 0 { ", " } code { (visible(d)) } } }
            }
            (code_block(&spec.code))
            @if !spec.lock.is_empty() { details { summary { "Lock (hash-pinned requirements)" } (code_block(&spec.lock)) } }
        }
    }
}

/// The URL of version `number`'s download ([`source`]).
pub(crate) fn source_href(name: &str, number: u32) -> String {
    format!("{}/source?version={number}", tool_href(name))
}

/// `GET /console/tools/{name}/source?version=N`: version N as one plain text file (its parts
/// under headings, [`diff::source`]), for a diff too large for the page; only for a viewer
/// who may see the version on the tool's page.
pub(crate) async fn source(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Write) {
        return r;
    }
    let q: Shown = query(raw);
    let listed = console
        .shared
        .catalog
        .snapshot()
        .get_for(&name, Some(viewer.id()))
        .is_some_and(|e| e.listed && viewer.can(e.scope) && e.source == ToolSource::Stored);
    let Some((versions, _, _)) = stored_view(&console, &viewer, &name, listed).await else {
        return not_found();
    };
    let Some(v) = q
        .version
        .and_then(|n| versions.iter().find(|v| v.number == n))
    else {
        return not_found();
    };
    let file = format!(
        "attachment; filename=\"{}-v{}.txt\"",
        name.replace(
            |c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_',
            "_"
        ),
        v.number
    );
    (
        [
            (CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (CONTENT_DISPOSITION, file),
        ],
        diff::source(v),
    )
        .into_response()
}

fn example_result(run: Option<&ExampleResult>) -> Markup {
    html! {
        @match run {
            Some(run) => {
                p {
                    span.status.status-current[run.passed].status-failed[!run.passed] { @if run.passed { "passed" } @else { "failed" } }
                    " on " (utc(run.ran_at_ms)) " (" (run.trigger.as_str()) ", by " (run.ran_by) ")"
                }
                @if let Some(f) = &run.failure { p { "What did not match: " (f) } }
                details { summary { "Actual result" } (code_block(&run.actual)) }
            },
            None => p.muted { "Not run yet." },
        }
    }
}

/// `POST /console/tools/{name}/rollback`: the rollback built-in's operation as the viewer (the
/// version's examples run first; refused with the failures when one fails).
pub(crate) async fn rollback(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Write) {
        return r;
    }
    let fields = fields(&body);
    let Some(version) = field(&fields, "version").and_then(|v| v.parse::<u32>().ok()) else {
        return not_found();
    };
    let outcome = actions::rollback(&console, &viewer, &name, version).await;
    done(
        &console,
        &viewer,
        outcome.ok,
        outcome.text,
        &tool_href(&name),
    )
}

/// `POST /console/tools/{name}/check`: the check built-in's operation as the viewer.
pub(crate) async fn check(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Write) {
        return r;
    }
    let fields = fields(&body);
    let version = field(&fields, "version").and_then(|v| v.parse::<u32>().ok());
    let outcome = actions::check(&console, &viewer, &name, version).await;
    done(
        &console,
        &viewer,
        outcome.ok,
        outcome.text,
        &tool_href(&name),
    )
}

/// `POST /console/tools/{name}/enabled`: disables the tool (`enabled=false`) or enables it
/// again (`enabled=true`), as the viewer.
pub(crate) async fn set_enabled(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Write) {
        return r;
    }
    let enabled = match field(&fields(&body), "enabled") {
        Some("true") => true,
        Some("false") => false,
        _ => return not_found(),
    };
    let outcome = actions::set_enabled(&console, &viewer, &name, enabled).await;
    done(
        &console,
        &viewer,
        outcome.ok,
        outcome.text,
        &tool_href(&name),
    )
}
