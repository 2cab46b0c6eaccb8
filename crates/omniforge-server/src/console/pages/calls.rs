//! The call log: every principal's calls for admins, one's own calls for everyone else; and
//! one call's arguments and result as they were logged (secret values already redacted by
//! the call itself).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use omniforge_store::{CallFilter, LoggedCall};
use serde::Deserialize;

use crate::auth::Scope;
use crate::console::Console;
use crate::console::guard::{Viewer, not_found};
use crate::console::layout::{self, Nav};
use crate::console::pages::{query, tool_href};
use crate::console::widgets::{duration, scroll_table, utc};

/// Calls per page.
const PAGE: u32 = 50;

/// The page's query: the id the previous page ended at.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Paging {
    before: Option<u64>,
}

/// A table of calls, each linking to its detail.
pub(crate) fn call_table(calls: &[LoggedCall]) -> Markup {
    html! {
        @if calls.is_empty() {
            p { "No calls." }
        } @else {
            (scroll_table("Calls", html! {
                table {
                    caption.visually-hidden { "Calls" }
                    thead { tr {
                        th scope="col" { "Time" } th scope="col" { "Tool" } th scope="col" { "Principal" } th scope="col" { "Version" }
                        th scope="col" { "Duration" } th scope="col" { "Exit" } th scope="col" { "Error" }
                    } }
                    tbody {
                        @for c in calls {
                            tr {
                                th scope="row" { a href=(format!("/console/calls/{}", c.id)) { (utc(c.call.started_at_ms)) } }
                                td { (c.call.tool) }
                                td { (c.call.principal.as_deref().unwrap_or("")) }
                                td.num { (c.call.version.map(|v| v.to_string()).unwrap_or_default()) }
                                td.num { (duration(c.call.duration_ms)) }
                                td { (c.call.outcome.to_string()) }
                                td { (c.call.error.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }))
        }
    }
}

/// Whether `viewer` may see call `c`: admins see every call, others their own.
fn may_see(viewer: &Viewer, c: &LoggedCall) -> bool {
    viewer.can(Scope::Admin) || c.call.principal.as_deref() == Some(viewer.id())
}

/// `GET /console/calls`.
pub(crate) async fn list(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    let paging: Paging = query(raw);
    let filter = CallFilter {
        principal: (!viewer.can(Scope::Admin)).then(|| viewer.id().to_owned()),
        before_id: paging.before,
        limit: PAGE,
        ..CallFilter::default()
    };
    let calls = console
        .stored
        .store
        .calls(&filter)
        .await
        .unwrap_or_default();
    let next = (calls.len() == PAGE as usize)
        .then(|| calls.last().map(|c| c.id))
        .flatten();
    layout::page(&viewer, Nav::Calls, "Calls", html! {
        h1 { "Calls" }
        p.muted { @if viewer.can(Scope::Admin) { "Every principal's calls, newest first." } @else { "Your own calls, newest first." } }
        (call_table(&calls))
        @if let Some(next) = next { p { a href=(format!("/console/calls?before={next}")) { "Older calls" } } }
    })
    .into_response()
}

/// `GET /console/calls/{id}`.
pub(crate) async fn detail(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path(id): Path<u64>,
) -> Response {
    let Some(c) = console
        .stored
        .store
        .call(id)
        .await
        .ok()
        .flatten()
        .filter(|c| may_see(&viewer, c))
    else {
        return not_found();
    };
    let call = &c.call;
    let title = format!("Call {id}");
    layout::page(&viewer, Nav::Calls, &title, html! {
        p.crumbs { a href="/console/calls" { "Calls" } " / " (id) }
        h1 { "Call " (id) " of " code { (call.tool) } }
        dl.facts {
            dt { "Tool" } dd { a href=(tool_href(&call.tool)) { (call.tool) } " (" (call.source.as_str()) ")" }
            dt { "Time" } dd { (utc(call.started_at_ms)) }
            dt { "Principal" } dd { (call.principal.as_deref().unwrap_or("")) }
            @if let Some(v) = call.version { dt { "Version" } dd { (v) } }
            dt { "Duration" } dd { (duration(call.duration_ms)) }
            dt { "Exit" } dd { (call.outcome.to_string()) }
            @if let Some(e) = &call.error { dt { "Error" } dd { (e) } }
        }
        p.muted { "As logged: secret values were replaced before the call was recorded." }
        h2 { "Arguments" }
        @match &call.arguments_text {
            Some(a) => { pre.code { (a.text) } @if a.total_bytes as usize > a.text.len() { p.muted { "Cut: " (a.total_bytes) " bytes in all." } } },
            None => p.muted { "Not kept." },
        }
        h2 { "Result" }
        @match &call.result_text {
            Some(r) => { pre.code { (r.text) } @if r.total_bytes as usize > r.text.len() { p.muted { "Cut: " (r.total_bytes) " bytes in all." } } },
            None => p.muted { "Not kept." },
        }
    })
    .into_response()
}
