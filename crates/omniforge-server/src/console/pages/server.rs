//! The server page (admins only): what `/healthz` reports (the tools per source, the sandbox
//! layers as `omniforge doctor` names them, the live sessions), the tool calls running now,
//! the environments on disk (measured at most once a minute, [`crate::console::disk`]), each
//! manifest's upstream with the outcome of its last call (no probing traffic: the page never
//! waits on an upstream), the warm pool as a table, and the calls per hour across all tools
//! over the last 24 hours.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde_json::Value;

use crate::auth::Scope;
use crate::console::guard::{Viewer, require};
use crate::console::layout::{self, Nav};
use crate::console::widgets::{bytes, duration, scroll_table, utc};
use crate::console::{Console, charts};
use crate::tools::manifest::health::UpstreamReport;

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `GET /console/server`.
pub(crate) async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let health = console.shared.health((console.live_sessions)(), true);
    let running = console.shared.calls.len();
    let now = crate::console::now_ms();
    let stats = console
        .stored
        .store
        .call_hours(None, now - 24 * 3_600_000)
        .await
        .unwrap_or_default();
    let hours = charts::last_day(now, &stats);
    let layers = health["sandbox_layers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tools = health["tools"].as_object().cloned().unwrap_or_default();
    let envs = environments(&console, &console.stored.host).await;
    let upstreams: Vec<UpstreamReport> = console
        .shared
        .upstreams
        .iter()
        .map(|u| u.report())
        .collect();
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
        div #runtime {
            h2 { "Environments" }
            (envs)
            h2 { "Manifest upstreams" }
            (upstream_table(&upstreams))
            h2 { "Warm pool" }
            (warm(&health["warm"]))
        }
        h2 { "Calls per hour, all tools" }
        (charts::calls("server-calls-chart", "all tools", &hours))
    })
    .into_response()
}

async fn environments(
    console: &Console,
    host: &Arc<crate::script_host::host::ScriptHost>,
) -> Markup {
    let measured = match console.env_sizes.get(host, &console.stored.store).await {
        Ok(m) => m,
        Err(why) => return html! { p.flash.err { (why.to_string()) } },
    };
    let sizes = &measured.sizes;
    let unused: u64 = sizes
        .envs
        .iter()
        .filter(|e| !e.in_use)
        .map(|e| e.bytes)
        .sum();
    html! {
        p {
            (sizes.envs.len()) " environment(s), " (bytes(sizes.total_bytes)) " in total; "
            (bytes(unused)) " in environments no tool version uses (the next garbage collection, or "
            code { "omniforge gc" } ", removes them). Measured "
            @if measured.age.as_secs() == 0 { "now" } @else { (measured.age.as_secs()) " s ago" }
            " (at most once a minute)."
            @if sizes.truncated {
                " The walk stopped at its limit of " (crate::script_host::disk::MAX_ENTRIES)
                " files: sizes are lower bounds."
            }
        }
        @if !sizes.envs.is_empty() {
            (scroll_table("Environments", html! {
                table {
                    caption.visually-hidden { "Environments on disk" }
                    thead { tr {
                        th scope="col" { "Environment" } th scope="col" { "Size" }
                        th scope="col" { "In use" } th scope="col" { "Built" }
                    } }
                    tbody {
                        @for e in &sizes.envs {
                            tr {
                                th scope="row" { code { (e.env_id) } }
                                td { (bytes(e.bytes)) }
                                td { @if e.in_use { "yes" } @else { "no: garbage collection removes it" } }
                                td { @if e.built { "yes" } @else { "no" } }
                            }
                        }
                    }
                }
            }))
        }
    }
}

fn upstream_table(upstreams: &[UpstreamReport]) -> Markup {
    if upstreams.is_empty() {
        return html! { p { "No forge manifest is configured." } };
    }
    html! {
        p { "From the calls themselves since the server started; the page sends no traffic upstream." }
        (scroll_table("Manifest upstreams", html! {
            table {
                caption.visually-hidden { "Manifest upstreams" }
                thead { tr {
                    th scope="col" { "Manifest" } th scope="col" { "Service" } th scope="col" { "Health" }
                    th scope="col" { "Last call" } th scope="col" { "Answered" } th scope="col" { "No answer" }
                } }
                tbody {
                    @for u in upstreams {
                        tr {
                            th scope="row" { code { (u.manifest.display()) } }
                            td { @if u.base_url.is_empty() { "not configured" } @else { code { (u.base_url) } } }
                            td { (health_word(u)) }
                            td {
                                @if let Some(last) = &u.last {
                                    @let ms = last.at.duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                                    (utc(ms)) ", " code { (last.procedure) } ", "
                                    (duration(u64::try_from(last.elapsed.as_millis()).unwrap_or(u64::MAX)))
                                    @if !last.detail.is_empty() { ": " (last.detail) }
                                } @else { "none yet" }
                            }
                            td { (u.answered) }
                            td { (u.failed) }
                        }
                    }
                }
            }
        }))
    }
}

/// The upstream's health in words, from its last call.
fn health_word(u: &UpstreamReport) -> &'static str {
    match u.last.as_ref().map(|l| l.outcome) {
        _ if u.base_url.is_empty() => "not configured",
        None => "no calls yet",
        Some("ok") => "answering",
        Some("connect_error") => "answering with an error",
        Some(_) => "not answering",
    }
}

fn warm(report: &Value) -> Markup {
    if report.is_null() {
        return html! { p { "No script host: no warm pool." } };
    }
    let templates = report["templates"].as_array().cloned().unwrap_or_default();
    let size = |v: &Value| v.as_u64().map(bytes).unwrap_or_default();
    html! {
        dl {
            dt { "State" }
            dd { @if report["on"] == Value::Bool(true) { "on" } @else { "off: " (text(&report["off_reason"])) } }
            dt { "Templates (at most)" } dd { (text(&report["max_templates"])) }
            dt { "Ready / starting / cold" }
            dd { (text(&report["ready"])) " / " (text(&report["starting"])) " / " (text(&report["cold"])) }
            dt { "Memory (RSS / PSS)" } dd { (size(&report["rss_bytes"])) " / " (size(&report["pss_bytes"])) }
        }
        @if templates.is_empty() {
            p { "No warm templates now." }
        } @else {
            (scroll_table("Warm templates", html! {
                table {
                    caption.visually-hidden { "Warm templates" }
                    thead { tr {
                        th scope="col" { "Tool version" } th scope="col" { "Principal" } th scope="col" { "State" }
                        th scope="col" { "Calls" } th scope="col" { "Running" } th scope="col" { "Spares" }
                        th scope="col" { "Idle" } th scope="col" { "Boot" } th scope="col" { "Memory (RSS)" } th scope="col" { "Host pid" }
                    } }
                    tbody {
                        @for t in &templates {
                            tr {
                                th scope="row" { code { (text(&t["version"])) } }
                                td { (text(&t["principal"])) }
                                td { (text(&t["state"])) @if !t["cold_reason"].is_null() { ": " (text(&t["cold_reason"])) } }
                                td { (text(&t["calls"])) }
                                td { (text(&t["running"])) }
                                td { (text(&t["spares"])) }
                                td { @if let Some(s) = t["idle_s"].as_f64() { (format!("{s:.0} s")) } }
                                td { @if let Some(ms) = t["boot_ms"].as_f64() { (format!("{ms:.0} ms")) } }
                                td { (size(&t["template_rss_bytes"])) }
                                td { (text(&t["pid"])) }
                            }
                        }
                    }
                }
            }))
        }
    }
}
