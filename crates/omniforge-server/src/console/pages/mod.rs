//! One file per page family; each owns its handlers.

pub(crate) mod approvals;
pub(crate) mod audit;
pub(crate) mod calls;
pub(crate) mod catalog;
pub(crate) mod content;
pub(crate) mod oauth;
pub(crate) mod secrets;
pub(crate) mod server;
pub(crate) mod sign_in;
pub(crate) mod tool;
pub(crate) mod try_it;

use axum::response::{IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;

use crate::console::Console;
use crate::console::guard::Viewer;
use crate::console::session::Flash;

/// After a change: a message for the next page, and a 303 to it (POST/redirect/GET).
pub(crate) fn done(
    console: &Console,
    viewer: &Viewer,
    ok: bool,
    text: String,
    to: &str,
) -> Response {
    console
        .sessions
        .set_flash(&viewer.session_id, Flash { ok, text });
    Redirect::to(to).into_response()
}

/// Form fields as pairs, in order (repeated names kept).
pub(crate) fn fields(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(body).unwrap_or_default()
}

/// The first value of form field `name`.
pub(crate) fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A query string read into `T`; `T::default()` when absent or malformed (a filter that does
/// not parse filters nothing).
pub(crate) fn query<T: DeserializeOwned + Default>(raw: Option<String>) -> T {
    raw.and_then(|q| serde_urlencoded::from_str(&q).ok())
        .unwrap_or_default()
}

/// `/console/tools/NAME` with the name percent-encoded as a path segment.
pub(crate) fn tool_href(name: &str) -> String {
    let mut out = String::from("/console/tools/");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
