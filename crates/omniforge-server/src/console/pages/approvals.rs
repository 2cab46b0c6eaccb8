//! Pending approvals (admins only, with `--require-approval`): the list, and one pending
//! version's review: its network access, timeout and memory, then its diff against the
//! current version (or its whole content for a new tool: every part the diff compares, and its
//! examples' results), each secret it asks for as its own tick box (approving grants only the ticked ones),
//! approve, or reject with a reason. Hidden characters (Trojan Source) are shown marked, and
//! the page warns where the version holds any.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::auth::Scope;
use crate::console::guard::{Viewer, not_found, require};
use crate::console::layout::{self, Nav};
use crate::console::pages::tool::source_href;
use crate::console::pages::{done, field, fields, tool_href};
use crate::console::widgets::{code as code_block, scroll_table, utc, visible};
use crate::console::{Console, actions, diff};
use crate::context::request::RequestCx;
use crate::tools::authoring::approval::PendingVersion;

/// The pending versions the viewer (an admin) may decide on.
async fn pending(console: &Console, viewer: &Viewer) -> Vec<PendingVersion> {
    let cx = RequestCx::local(&viewer.principal, None);
    let approval = &console.stored.authoring.approval;
    approval.pending(&cx).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "console: the pending versions could not be read");
        Vec::new()
    })
}

fn review_href(name: &str, version: u32) -> String {
    let tool = tool_href(name);
    let name = tool.trim_start_matches("/console/tools/");
    format!("/console/approvals/{name}/{version}")
}

/// `GET /console/approvals`.
pub(crate) async fn list(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let pending = pending(&console, &viewer).await;
    let required = console.stored.authoring.approval.required();
    layout::page(&viewer, Nav::Approvals, "Approvals", html! {
        h1 { "Pending approvals" }
        @if !required {
            p.muted { "This server runs without " code { "--require-approval" } ": new versions go live at once." }
        }
        @if pending.is_empty() {
            p { "Nothing waits for approval." }
        } @else {
            (scroll_table("Pending versions", html! {
                table {
                    caption.visually-hidden { "Pending versions" }
                    thead { tr { th scope="col" { "Version" } th scope="col" { "Author" } th scope="col" { "Written" } th scope="col" { "Current" } th scope="col" { "Secrets asked for" } } }
                    tbody {
                        @for p in &pending {
                            @let v = &p.version;
                            tr {
                                th scope="row" { a href=(review_href(&v.tool, v.number)) { "Review " (v.tool) " version " (v.number) } }
                                td { (v.spec.author) }
                                td { (utc(v.created_at_ms)) }
                                td { @match &p.current { Some(c) => { "version " (c.number) }, None => { "none (a new tool)" } } }
                                td { (p.requests.iter().filter(|r| r.grant.is_none()).count()) }
                            }
                        }
                    }
                }
            }))
        }
    })
    .into_response()
}

/// `GET /console/approvals/{name}/{version}`.
pub(crate) async fn review(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path((name, version)): Path<(String, u32)>,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let all = pending(&console, &viewer).await;
    let Some(p) = all
        .iter()
        .find(|p| p.version.tool == name && p.version.number == version)
    else {
        return not_found();
    };
    let v = &p.version;
    let results = match &p.current {
        Some(_) => Vec::new(),
        None => console
            .stored
            .store
            .example_results(&name, version)
            .await
            .unwrap_or_default(),
    };
    let action = review_href(&name, version);
    let title = format!("Review {name} version {version}");
    layout::page(&viewer, Nav::Approvals, &title, html! {
        p.crumbs { a href="/console/approvals" { "Approvals" } " / " (name) " version " (version) }
        h1 { "Review " code { (name) } " version " (version) }
        dl.facts {
            dt { "Author" } dd { (v.spec.author) }
            dt { "Written" } dd { (utc(v.created_at_ms)) }
            dt { "Tool" } dd { a href=(tool_href(&name)) { (name) } }
            dt { "Network" } dd {
                @if v.spec.limits.network { strong { "allowed" } ": its code can reach whatever this server reaches" } @else { "off" }
                @if let Some(c) = &p.current { @if c.spec.limits.network != v.spec.limits.network { " (changed: version " (c.number) " has it " @if c.spec.limits.network { "allowed" } @else { "off" } ")" } }
            }
            dt { "Timeout" } dd { (v.spec.limits.timeout_ms as f64 / 1000.0) " s" }
            dt { "Memory" } dd { (v.spec.limits.memory_bytes >> 20) " MiB" }
        }
        @let hidden = diff::hidden_parts(v);
        @if !hidden.is_empty() {
            div.flash.warn role="alert" {
                strong { "Hidden characters. " }
                "This version holds "
                @for (i, (part, n)) in hidden.iter().enumerate() {
                    @if i > 0 { ", " }
                    (n) " in its " (part)
                }
                ": bidirectional controls or zero-width characters make text read differently from what it does (Trojan Source). Each one is shown below as a marked "
                code { "U+…" } " code. Approve only if you know why it is there."
            }
        }
        section aria-labelledby="changes" {
            h2 #changes { "What changes" }
            @match &p.current {
                Some(current) => div role="region" aria-label="Diff" { (diff::versions(&name, current, v, |n| source_href(&name, n)).await) },
                None => {
                    p { "A new tool: nobody but its author sees it until it is approved. Its whole content:" }
                    @for (part, text) in diff::sections(v) {
                        h3 { (capitalised(part)) }
                        @if text.is_empty() { p.muted { "None." } } @else { (code_block(&text)) }
                        @if part == "examples" && !results.is_empty() {
                            h4 { "Their results when it was written" }
                            ol.examples {
                                @for r in &results {
                                    li value=(r.index + 1) {
                                        span.status.status-current[r.passed].status-failed[!r.passed] { @if r.passed { "passed" } @else { "failed" } }
                                        @if let Some(f) = &r.failure { " — " (visible(f)) }
                                        (code_block(&r.actual))
                                    }
                                }
                            }
                        }
                    }
                },
            }
        }
        section aria-labelledby="decide" {
            h2 #decide { "Decide" }
            form method="post" action=(format!("{action}/approve")) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                @let asked: Vec<_> = p.requests.iter().filter(|r| r.grant.is_none()).collect();
                @if asked.is_empty() {
                    p { "This version asks for no secret." }
                } @else {
                    fieldset {
                        legend { "Secrets it asks for: approving grants only those ticked" }
                        @for r in &asked {
                            @let id = format!("grant-{}", r.secret);
                            div.check {
                                input type="checkbox" id=(id) name="grant" value=(r.secret) disabled[!r.exists];
                                label for=(id) {
                                    "Grant " (r.secret) " to " (name) " version " (version)
                                    @if !r.exists { " (not set yet: set it first)" }
                                }
                            }
                        }
                    }
                }
                button type="submit" { "Approve version " (version) }
            }
            form method="post" action=(format!("{action}/reject")) {
                input type="hidden" name="csrf" value=(viewer.csrf);
                div.field {
                    label for="reason" { "Reason for rejecting" }
                    textarea #reason name="reason" rows="3" required {}
                }
                button.danger type="submit" { "Reject version " (version) }
            }
        }
    })
    .into_response()
}

/// `input schema` → `Input schema`.
fn capitalised(part: &str) -> String {
    let mut chars = part.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `POST /console/approvals/{name}/{version}/approve`: the ticked `grant` fields only.
pub(crate) async fn approve(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path((name, version)): Path<(String, u32)>,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let grants: Vec<String> = fields(&body)
        .into_iter()
        .filter(|(k, _)| k == "grant")
        .map(|(_, v)| v)
        .collect();
    let outcome = actions::approve(&console, &viewer, &name, version, &grants).await;
    let to = if outcome.ok {
        "/console/approvals".to_owned()
    } else {
        review_href(&name, version)
    };
    done(&console, &viewer, outcome.ok, outcome.text, &to)
}

/// `POST /console/approvals/{name}/{version}/reject`.
pub(crate) async fn reject(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    Path((name, version)): Path<(String, u32)>,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let fields = fields(&body);
    let reason = field(&fields, "reason").unwrap_or("");
    let outcome = actions::reject(&console, &viewer, &name, version, reason).await;
    let to = if outcome.ok {
        "/console/approvals".to_owned()
    } else {
        review_href(&name, version)
    };
    done(&console, &viewer, outcome.ok, outcome.text, &to)
}
