//! The server page (admins only): what `/healthz` reports (the tools per source, the sandbox
//! layers as `omniforge doctor` names them, the live sessions, the warm templates), the tool
//! calls running now, and the calls per hour across all tools over the last 24 hours.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde_json::Value;

use crate::auth::Scope;
use crate::console::guard::{Viewer, require};
use crate::console::layout::{self, Nav};
use crate::console::widgets::scroll_table;
use crate::console::{Console, charts};

/// `GET /console/server`.
pub(crate) async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let health = console.shared.health((console.live_sessions)(), true);
    let running = console.shared.calls.len();
    let now = crate::console::now_ms();
    let stats = console
        .store
        .call_hours(None, now - 24 * 3_600_000)
        .await
        .unwrap_or_default();
    let hours = charts::last_day(now, &stats);
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let layers = health["sandbox_layers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tools = health["tools"].as_object().cloned().unwrap_or_default();
    let warm = serde_json::to_string_pretty(&health["warm"]).unwrap_or_default();
    layout::page(&viewer, Nav::Server, "Server", html! {
        h1 { "Server" }
        dl {
            dt { "Version" } dd { (text(&health["version"])) }
            dt { "Live sessions" } dd { (text(&health["sessions"])) }
            dt { "Tool calls running" } dd { (running) }
            @for (source, count) in &tools {
                dt { "Tools (" (source) ")" } dd { (text(count)) }
            }
        }
        h2 { "Sandbox layers" }
        @if layers.is_empty() {
            p { "No script host: stored tools do not run here." }
        } @else {
            (scroll_table("Sandbox layers", html! {
                table {
                    caption.visually-hidden { "Sandbox layers" }
                    thead { tr { th scope="col" { "Layer" } th scope="col" { "Active" } th scope="col" { "Detail" } } }
                    tbody {
                        @for l in &layers {
                            tr {
                                th scope="row" { (text(&l["name"])) }
                                td { @if l["active"] == Value::Bool(true) { "yes" } @else { "no" } }
                                td { (text(&l["detail"])) }
                            }
                        }
                    }
                }
            }))
        }
        h2 { "Warm pool" }
        pre.code { (warm) }
        h2 { "Calls per hour, all tools" }
        (charts::calls("server-calls-chart", "all tools", &hours))
    })
    .into_response()
}
