//! The audit log (admins only): who did what to which object, newest first.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use maud::html;
use omniforge_store::AuditFilter;
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Scope;
use crate::console::Console;
use crate::console::guard::{Viewer, require};
use crate::console::layout::{self, Nav};
use crate::console::pages::query;
use crate::console::widgets::{scroll_table, utc};

/// Records per page.
const PAGE: u32 = 100;

/// The page's query: the id the previous page ended at.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Paging {
    before: Option<u64>,
}

/// `GET /console/audit`.
pub(crate) async fn page(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let paging: Paging = query(raw);
    let filter = AuditFilter {
        before_id: paging.before,
        limit: PAGE,
        ..AuditFilter::default()
    };
    let records = console
        .stored
        .store
        .audit(&filter)
        .await
        .unwrap_or_default();
    let next = (records.len() == PAGE as usize)
        .then(|| records.last().map(|r| r.id))
        .flatten();
    layout::page(&viewer, Nav::Audit, "Audit log", html! {
        h1 { "Audit log" }
        @if records.is_empty() {
            p { "No records." }
        } @else {
            (scroll_table("Audit records", html! {
                table {
                    caption.visually-hidden { "Audit records" }
                    thead { tr {
                        th scope="col" { "Time" } th scope="col" { "Principal" } th scope="col" { "Action" }
                        th scope="col" { "Object" } th scope="col" { "Version" } th scope="col" { "Detail" }
                    } }
                    tbody {
                        @for r in &records {
                            tr {
                                th scope="row" { (utc(r.at_ms)) }
                                td { (r.principal) }
                                td { (r.action.to_string()) }
                                td { (r.object.to_string()) " " code { (r.name) } }
                                td.num { (r.version.map(|v| v.to_string()).unwrap_or_default()) }
                                td { code { (Value::Object(r.detail.clone()).to_string()) } }
                            }
                        }
                    }
                }
            }))
        }
        @if let Some(next) = next { p { a href=(format!("/console/audit?before={next}")) { "Older records" } } }
    })
    .into_response()
}
