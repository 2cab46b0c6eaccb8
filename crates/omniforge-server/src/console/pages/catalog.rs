//! The catalog: every tool the viewer may see, with source, status, author, and (for admins)
//! the last call and the day's call and error counts; search and a source filter as a plain
//! GET form.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use omniforge_store::{CallSource, VersionStatus};
use serde::Deserialize;

use crate::auth::Scope;
use crate::console::Console;
use crate::console::guard::Viewer;
use crate::console::layout::{self, Nav};
use crate::console::pages::{query, tool_href};
use crate::console::widgets::{scroll_table, utc, visible};

/// The catalog's search form.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Filter {
    q: String,
    source: String,
}

const SOURCES: [&str; 3] = ["builtin", "manifest", "stored"];

/// One row.
struct Row {
    name: String,
    source: &'static str,
    status: &'static str,
    description: String,
    author: String,
    /// A version of this tool awaits approval (shown to its author and admins).
    update_pending: bool,
}

/// `GET /console/tools`.
pub(crate) async fn page(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    let filter: Filter = query(raw);
    let rows = match rows(&console, &viewer).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "console: the catalog could not be read");
            Vec::new()
        }
    };
    let q = filter.q.trim().to_lowercase();
    let shown: Vec<&Row> = rows
        .iter()
        .filter(|r| filter.source.is_empty() || r.source == filter.source)
        .filter(|r| {
            q.is_empty()
                || r.name.to_lowercase().contains(&q)
                || r.description.to_lowercase().contains(&q)
                || r.author.to_lowercase().contains(&q)
        })
        .collect();
    let activity = if viewer.can(Scope::Admin) {
        let since = crate::console::now_ms() - 24 * 3_600_000;
        console
            .stored
            .store
            .call_activity(since)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|a| ((a.source, a.tool.clone()), a))
            .collect()
    } else {
        HashMap::new()
    };
    layout::page(&viewer, Nav::Catalog, "Catalog", html! {
        h1 { "Catalog" }
        form.filters method="get" action="/console/tools" role="search" {
            div.field {
                label for="q" { "Search tools" }
                input #q type="search" name="q" value=(filter.q) placeholder="name, description or author";
            }
            div.field {
                label for="source" { "Source" }
                select #source name="source" {
                    option value="" { "Any source" }
                    @for s in SOURCES { option value=(s) selected[filter.source == s] { (s) } }
                }
            }
            button type="submit" { "Filter" }
        }
        p.count role="status" { (shown.len()) @if shown.len() == 1 { " tool" } @else { " tools" } }
        (table(&viewer, &shown, &activity))
    })
    .into_response()
}

fn call_source(source: &str) -> CallSource {
    match source {
        "builtin" => CallSource::BuiltIn,
        "manifest" => CallSource::Manifest,
        _ => CallSource::Stored,
    }
}

fn table(
    viewer: &Viewer,
    rows: &[&Row],
    activity: &HashMap<(CallSource, String), omniforge_store::ToolActivity>,
) -> Markup {
    let admin = viewer.can(Scope::Admin);
    html! {
        (scroll_table("Tools", html! {
            table.catalog {
                caption.visually-hidden { "Tools" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Source" } th scope="col" { "Status" } th scope="col" { "Author" }
                    @if admin { th scope="col" { "Last call" } th scope="col" { "Calls (24 h)" } th scope="col" { "Errors (24 h)" } }
                } }
                tbody {
                    @for r in rows {
                        tr {
                            th scope="row" {
                                a href=(tool_href(&r.name)) { (r.name) }
                                br; span.muted.small { (visible(&r.description.chars().take(120).collect::<String>())) }
                            }
                            td { (r.source) }
                            td {
                                span.status class=(format!("status-{}", r.status)) { (r.status) }
                                @if r.update_pending { " " span.status.status-pending { "update pending" } }
                            }
                            td { (r.author) }
                            @if admin {
                                @let a = activity.get(&(call_source(r.source), r.name.clone()));
                                td { @match a { Some(a) => (utc(a.last_call_ms)), None => span.muted { "none" } } }
                                td.num { (a.map_or(0, |a| a.calls)) }
                                td.num { (a.map_or(0, |a| a.errors)) }
                            }
                        }
                    }
                }
            }
        }))
        @if rows.is_empty() { p { "No tool matches." } }
    }
}

/// The tools `viewer` may see: the catalog's entries within their scope; stored tools that
/// are disabled (to `tools:write` and admins); tools whose only versions await approval (to
/// admins, and to their author).
async fn rows(console: &Console, viewer: &Viewer) -> Result<Vec<Row>, omniforge_store::StoreError> {
    let snapshot = console.shared.catalog.snapshot();
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for entry in snapshot.entries_for(Some(viewer.id())) {
        if !entry.listed || !viewer.can(entry.scope) {
            continue;
        }
        rows.insert(
            entry.name.to_string(),
            Row {
                name: entry.name.to_string(),
                source: entry.source.as_str(),
                status: "current",
                description: entry.tool().description.unwrap_or_default().into_owned(),
                // The live version's author (a viewer's own pending version is marked below).
                author: snapshot
                    .get(&entry.name)
                    .map_or(&entry.author, |live| &live.author)
                    .to_string(),
                update_pending: false,
            },
        );
    }
    if viewer.can(Scope::Write) {
        for t in console.stored.store.tools().await? {
            if rows.contains_key(&t.name) || t.current_version.is_none() {
                continue;
            }
            rows.insert(
                t.name.clone(),
                Row {
                    name: t.name,
                    source: "stored",
                    status: if t.enabled { "current" } else { "disabled" },
                    description: String::new(),
                    author: String::new(),
                    update_pending: false,
                },
            );
        }
    }
    let author = (!viewer.can(Scope::Admin)).then(|| viewer.id());
    for v in console
        .stored
        .store
        .versions_with_status(VersionStatus::Pending, author)
        .await?
    {
        rows.entry(v.tool.clone())
            .and_modify(|r| r.update_pending = true)
            .or_insert(Row {
                name: v.tool,
                source: "stored",
                status: "pending",
                description: v.spec.description,
                author: v.spec.author,
                update_pending: false,
            });
    }
    Ok(rows.into_values().collect())
}
