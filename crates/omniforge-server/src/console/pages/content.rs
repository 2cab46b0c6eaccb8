//! Resources and prompts (every signed-in viewer: `resources/list` and `prompts/list` need no
//! more than any token): the resources, resource templates and prompts a client would list,
//! with their descriptions, read-only.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use crate::auth::Scope;
use crate::console::Console;
use crate::console::guard::{Viewer, require};
use crate::console::layout::{self, Nav};
use crate::console::widgets::scroll_table;

/// `GET /console/content`.
pub(crate) async fn page(State(console): State<Arc<Console>>, viewer: Viewer) -> Response {
    if let Err(r) = require(&viewer, Scope::Call) {
        return r;
    }
    let content = console.stored.content();
    let resources = content.list_resources();
    let templates = content.list_templates();
    let prompts = content.list_prompts();
    layout::page(&viewer, Nav::Content, "Resources and prompts", html! {
        h1 { "Resources and prompts" }
        h2 { "Resources" }
        @if resources.is_empty() {
            p { "No resources." }
        } @else {
            (scroll_table("Resources", html! {
                table {
                    caption.visually-hidden { "Resources" }
                    thead { tr { th scope="col" { "URI" } th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Description" } } }
                    tbody {
                        @for r in &resources {
                            tr {
                                th scope="row" { code { (r.uri) } }
                                td { (r.title.as_deref().unwrap_or(&r.name)) }
                                td { (r.mime_type.as_deref().unwrap_or("")) }
                                td { (r.description.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }))
        }
        h2 { "Resource templates" }
        @if templates.is_empty() {
            p { "No resource templates." }
        } @else {
            (scroll_table("Resource templates", html! {
                table {
                    caption.visually-hidden { "Resource templates" }
                    thead { tr { th scope="col" { "URI template" } th scope="col" { "Name" } th scope="col" { "Type" } th scope="col" { "Description" } } }
                    tbody {
                        @for t in &templates {
                            tr {
                                th scope="row" { code { (t.uri_template) } }
                                td { (t.title.as_deref().unwrap_or(&t.name)) }
                                td { (t.mime_type.as_deref().unwrap_or("")) }
                                td { (t.description.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }))
        }
        h2 { "Prompts" }
        @if prompts.is_empty() {
            p { "No prompts." }
        } @else {
            (scroll_table("Prompts", html! {
                table {
                    caption.visually-hidden { "Prompts" }
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Arguments" } th scope="col" { "Description" } } }
                    tbody {
                        @for p in &prompts {
                            tr {
                                th scope="row" { code { (p.name) } }
                                td {
                                    @for a in p.arguments.iter().flatten() {
                                        code { (a.name) } @if a.required == Some(true) { " (required)" } " "
                                    }
                                }
                                td { (p.description.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }))
        }
    })
    .into_response()
}
