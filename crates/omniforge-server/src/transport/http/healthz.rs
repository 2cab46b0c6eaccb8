//! `GET /healthz`: liveness plus what a person checking the server wants at a glance: the
//! tools per source, the search index (entries, approximate bytes), the sandbox layers (as `omniforge doctor` names them), the sessions and
//! the warm templates (`warm`: on or why off, each template's state, pid, calls and memory).

use crate::mcp::state::Shared;
use axum::response::{IntoResponse, Response};

/// The `/healthz` answer; `sessions` is the number of live HTTP sessions; `admin`: the
/// request carries an `admin` token (or the server has no tokens), so the warm templates are
/// listed one by one.
pub(super) fn report(shared: &Shared, sessions: usize, admin: bool) -> Response {
    axum::Json(shared.health(sessions, admin)).into_response()
}
