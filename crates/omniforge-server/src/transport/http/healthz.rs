//! `GET /healthz`: liveness plus what a person checking the server wants at a glance: the
//! tools per source, the sandbox layers (as `omniforge doctor` names them), the sessions and
//! the warm templates (`warm`: on or why off, each template's state, pid, calls and memory).

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::catalog::entry::ToolSource;
use crate::mcp::state::Shared;

/// The `/healthz` answer; `sessions` is the number of live HTTP sessions; `admin`: the
/// request carries an `admin` token (or the server has no tokens), so the warm templates are
/// listed one by one.
pub(super) fn report(shared: &Shared, sessions: usize, admin: bool) -> Response {
    let snapshot = shared.catalog.snapshot();
    let tools: serde_json::Map<String, Value> = [
        ToolSource::Builtin,
        ToolSource::Manifest,
        ToolSource::Stored,
    ]
    .into_iter()
    .map(|s| (s.as_str().to_owned(), json!(snapshot.count(s))))
    .collect();
    // Whether each layer is active, and (as in `doctor --json`) how, or why not.
    let layers = shared.host.iter().flat_map(|h| h.layers());
    let sandbox: serde_json::Map<String, Value> = layers
        .clone()
        .map(|l| (l.name.to_owned(), json!(l.active)))
        .collect();
    let sandbox_layers: Vec<Value> = layers
        .map(|l| json!({"name": l.name, "active": l.active, "detail": l.detail}))
        .collect();
    axum::Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "tools": tools,
        "sandbox": sandbox,
        "sandbox_layers": sandbox_layers,
        "sessions": sessions,
        "warm": shared.host.as_ref().map(|h| h.warm().report(admin)),
    }))
    .into_response()
}
