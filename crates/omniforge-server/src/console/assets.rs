//! The console's stylesheet, embedded in the binary with `include_bytes!` and served under a
//! name that carries a hash of its content, so it can be cached forever and a new build never
//! meets a stale copy. The console needs no script: every page is a plain form or link.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use sha2::{Digest, Sha256};

use crate::console::guard::not_found;

/// The stylesheet's bytes.
const CSS: &[u8] = include_bytes!("../../assets/console.css");

/// `console.HASH.css`: the first 6 bytes of its SHA-256, in hex.
fn css_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let hash = Sha256::digest(CSS);
        let short: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
        format!("console.{short}.css")
    })
}

/// The stylesheet's URL.
pub(crate) fn css_url() -> String {
    format!("/console/assets/{}", css_name())
}

/// `GET /console/assets/{file}`.
pub(crate) async fn serve(Path(file): Path<String>) -> Response {
    if file != css_name() {
        return not_found();
    }
    let mut response = CSS.into_response();
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    headers.insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    response
}
