//! Secrets (admins only): names and update times, grants, and the secrets tool versions
//! declare but were not granted (requests), each with a button that grants it as the viewer
//! (the grant built-in's own operation). No value is ever read here: values are write-only.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::auth::Scope;
use crate::console::guard::{Viewer, not_found, require};
use crate::console::layout::{self, Nav};
use crate::console::pages::{done, field, fields, tool_href};
use crate::console::widgets::{scroll_table, utc};
use crate::console::{Console, actions};
use crate::tools::authoring::secret::{DeclaredSecret, secret_requests};

/// `GET /console/secrets`.
pub(crate) async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let secrets = console.stored.store.secrets().await.unwrap_or_default();
    let grants = console
        .stored
        .store
        .grants(None, None)
        .await
        .unwrap_or_default();
    let requests: Vec<DeclaredSecret> = secret_requests(&*console.stored.store, None)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.request.grant.is_none())
        .collect();
    layout::page(&viewer, Nav::Secrets, "Secrets", html! {
        h1 { "Secrets" }
        p.muted { "Values are write-only: set them with " code { "omniforge secret set" } " or the admin built-in; they are never shown." }
        section aria-labelledby="requests" {
            h2 #requests { "Requests" }
            p.muted { "Secrets the current version of a tool declares and was not granted." }
            @if requests.is_empty() {
                p { "No open requests." }
            } @else {
                (scroll_table("Secret requests", html! {
                    table {
                        caption.visually-hidden { "Secret requests" }
                        thead { tr { th scope="col" { "Secret" } th scope="col" { "Tool" } th scope="col" { "Version" } th scope="col" { "Set" } th scope="col" { "Action" } } }
                        tbody {
                            @for r in &requests {
                                @let tool = &r.tool;
                                @let secret = &r.request.secret;
                                @let version = r.version;
                                tr {
                                    th scope="row" { code { (secret) } }
                                    td { a href=(tool_href(tool)) { (tool) } }
                                    td.num { (version) }
                                    td { @if r.request.exists { "yes" } @else { "not set yet" } }
                                    td {
                                        form.inline method="post" action="/console/secrets/grant" {
                                            input type="hidden" name="csrf" value=(viewer.csrf);
                                            input type="hidden" name="secret" value=(secret);
                                            input type="hidden" name="tool" value=(tool);
                                            input type="hidden" name="version" value=(version);
                                            button type="submit" { "Grant " (secret) " to " (tool) " version " (version) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }))
            }
        }
        section aria-labelledby="names" {
            h2 #names { "Secrets" }
            @if secrets.is_empty() {
                p { "No secrets." }
            } @else {
                (scroll_table("Secrets", html! {
                    table {
                        caption.visually-hidden { "Secrets" }
                        thead { tr { th scope="col" { "Name" } th scope="col" { "Updated" } } }
                        tbody { @for s in &secrets { tr { th scope="row" { code { (s.name) } } td { (utc(s.updated_at_ms)) } } } }
                    }
                }))
            }
        }
        section aria-labelledby="grants" {
            h2 #grants { "Grants" }
            @if grants.is_empty() {
                p { "No grants." }
            } @else {
                (scroll_table("Grants", html! {
                    table {
                        caption.visually-hidden { "Grants" }
                        thead { tr { th scope="col" { "Secret" } th scope="col" { "Tool" } th scope="col" { "Version" } th scope="col" { "Granted by" } th scope="col" { "When" } } }
                        tbody {
                            @for g in &grants {
                                tr {
                                    th scope="row" { code { (g.secret) } }
                                    td { a href=(tool_href(&g.tool)) { (g.tool) } }
                                    td.num { (g.version) }
                                    td { (g.granted_by) }
                                    td { (utc(g.granted_at_ms)) }
                                }
                            }
                        }
                    }
                }))
            }
        }
    })
    .into_response()
}

/// `POST /console/secrets/grant`: grants a requested secret as the viewer (an admin).
pub(crate) async fn grant(
    State(console): State<Arc<Console>>,
    viewer: Viewer,
    body: Bytes,
) -> Response {
    if let Err(r) = require(&viewer, Scope::Admin) {
        return r;
    }
    let fields = fields(&body);
    let (Some(secret), Some(tool)) = (field(&fields, "secret"), field(&fields, "tool")) else {
        return not_found();
    };
    let version = field(&fields, "version").and_then(|v| v.parse::<u32>().ok());
    let outcome = actions::grant(&console, &viewer, secret, tool, version).await;
    done(
        &console,
        &viewer,
        outcome.ok,
        outcome.text,
        "/console/secrets",
    )
}
