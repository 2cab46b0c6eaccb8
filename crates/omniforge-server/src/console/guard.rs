//! The console's boundary: security headers on every answer, the checks every change passes
//! (Origin allowlist, Fetch Metadata, form encoding, CSRF token), the session cookie, and the
//! signed-in viewer.
//!
//! Changes are checked in one middleware, before routing reaches a handler, so a new POST
//! route cannot forget them.

use std::sync::Arc;

use axum::body::{Body, to_bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, COOKIE, HOST, ORIGIN};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode};

use crate::auth::{Principal, Scope};
use crate::console::session::Flash;
use crate::console::{Console, layout};

/// Every console answer's policy: scripts and styles only from the console's own assets,
/// images only from them or `data:`, forms only to the console, nothing may frame it.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The largest form body a change may send.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// The session cookie's name over plain HTTP (path `/console`).
pub(crate) const COOKIE_NAME: &str = "omniforge_console";
/// Its name over TLS: `__Host-` binds it to this exact origin (path `/`, `Secure`).
pub(crate) const SECURE_COOKIE_NAME: &str = "__Host-omniforge_console";

/// Adds the security headers to every console response (pages, assets, refusals, 404s).
pub(crate) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// Whether the browser reached the console over TLS: directly (an `https` request URI) or
/// through a proxy that terminates TLS and says so in `X-Forwarded-Proto`. A forged header
/// only makes the cookie stricter (a `Secure` cookie is then never sent back over HTTP).
pub(crate) fn over_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// `Set-Cookie` for a session id (or its removal, with `None`): HttpOnly, SameSite=Strict,
/// and over TLS `Secure` under the `__Host-` prefix.
pub(crate) fn set_cookie(secure: bool, id: Option<&str>) -> HeaderValue {
    let (name, path, flag) = if secure {
        (SECURE_COOKIE_NAME, "/", "; Secure")
    } else {
        (COOKIE_NAME, "/console", "")
    };
    let value = match id {
        Some(id) => format!("{name}={id}; Path={path}; HttpOnly; SameSite=Strict{flag}"),
        None => format!("{name}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Strict{flag}"),
    };
    // Ids are base64url, so the value is always a valid header value.
    HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static(""))
}

/// The session id the request's cookie names, if any (the `__Host-` cookie over TLS).
pub(crate) fn session_id(headers: &HeaderMap) -> Option<String> {
    let name = if over_tls(headers) {
        SECURE_COOKIE_NAME
    } else {
        COOKIE_NAME
    };
    cookie(headers, name)
}

/// The value of the request's cookie `name`, if any: the first one, over every `Cookie`
/// header, that the `cookie` crate parses (a malformed pair is skipped, not fatal).
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

fn refuse(status: StatusCode, why: &str) -> Response {
    (status, layout::bare("Change refused", why)).into_response()
}

/// The origin a page of this console has: the scheme the browser used and the `Host` it sent
/// (the transport checked `Host` against its allowlist before the console ran).
fn own_origin(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(HOST)?.to_str().ok()?;
    let scheme = if over_tls(headers) { "https" } else { "http" };
    Some(format!("{scheme}://{host}"))
}

/// Whether `origin` may send changes: the console's own origin, or one of `--allow-origin`.
fn origin_allowed(console: &Console, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let origin = origin.trim_end_matches('/');
    own_origin(headers).is_some_and(|own| own.eq_ignore_ascii_case(origin))
        || console
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin))
}

/// Checks every request that is not GET or HEAD: its Origin is the console's own (or
/// listed), Fetch Metadata does not say another site, it is a urlencoded form, and its `csrf`
/// field is the session's token. The body is read (bounded) and handed on unchanged.
pub(crate) async fn protect_changes(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    if !origin_allowed(&console, &parts.headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "This request did not come from a console page (its Origin is missing or not allowed).",
        );
    }
    let site = parts
        .headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok());
    if site.is_some_and(|s| s != "same-origin") {
        return refuse(
            StatusCode::FORBIDDEN,
            "This request came from another site.",
        );
    }
    let form = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|t| {
            t.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Changes are sent as forms.",
        );
    }
    let Ok(bytes) = to_bytes(body, MAX_FORM_BYTES).await else {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "The form is too large.");
    };
    let session = session_id(&parts.headers).and_then(|id| console.sessions.get(&id));
    let presented = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
        .ok()
        .and_then(|fields| {
            fields
                .into_iter()
                .find(|(k, _)| k == "csrf")
                .map(|(_, v)| v)
        });
    let ok = match (&session, presented) {
        (Some(s), Some(token)) => s.csrf_matches(&token),
        _ => false,
    };
    if !ok {
        return refuse(
            StatusCode::FORBIDDEN,
            "This form has expired or was not sent by the console. Reload the page and try again.",
        );
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The signed-in user of a request, with the session's CSRF token for the forms it renders.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// Who, with which scope.
    pub(crate) principal: Principal,
    /// The session's CSRF token, put in every form.
    pub(crate) csrf: String,
    /// The session id (to leave a message for the next page).
    pub(crate) session_id: String,
    /// The outcome of the last change, shown once.
    pub(crate) flash: Option<Flash>,
}

impl Viewer {
    /// Whether the viewer holds `scope`.
    pub(crate) fn can(&self, scope: Scope) -> bool {
        self.principal.allows(scope)
    }

    /// The viewer's principal id as the call and audit logs write it.
    pub(crate) fn id(&self) -> &str {
        self.principal.id.as_str()
    }
}

impl FromRequestParts<Arc<Console>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Self, Self::Rejection> {
        let found =
            session_id(&parts.headers).and_then(|id| console.sessions.get(&id).map(|s| (id, s)));
        match found {
            Some((id, session)) => match session.principal {
                Some(principal) => Ok(Viewer {
                    principal,
                    csrf: session.csrf,
                    flash: console.sessions.take_flash(&id),
                    session_id: id,
                }),
                None => Err(Redirect::to("/console/sign-in").into_response()),
            },
            None => Err(Redirect::to("/console/sign-in").into_response()),
        }
    }
}

/// Refuses a viewer without `scope` with the answer of a page that does not exist, so a
/// page's existence is not a signal.
#[allow(clippy::result_large_err)] // a ready `Response`, built once per refused request
pub(crate) fn require(viewer: &Viewer, scope: Scope) -> Result<(), Response> {
    if viewer.can(scope) {
        Ok(())
    } else {
        Err(not_found())
    }
}

/// 404 with a page saying so.
pub(crate) fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        layout::bare("Not found", "There is no such page, or you may not see it."),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(COOKIE, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn cookies_are_found_by_exact_name_over_every_header() {
        let h = headers(&[
            "xomniforge_console=wrong; theme=dark",
            "broken;  omniforge_console=abc-_1 ; omniforge_console=second",
        ]);
        assert_eq!(cookie(&h, COOKIE_NAME).as_deref(), Some("abc-_1"));
        assert_eq!(cookie(&h, "theme").as_deref(), Some("dark"));
        assert_eq!(cookie(&h, "omniforge"), None);
        assert_eq!(cookie(&headers(&[]), COOKIE_NAME), None);
        assert_eq!(cookie(&headers(&["=v; ;"]), COOKIE_NAME), None);
    }

    #[test]
    fn the_session_cookie_over_tls_is_the_host_prefixed_one() {
        let mut h = headers(&["omniforge_console=plain; __Host-omniforge_console=tls"]);
        assert_eq!(session_id(&h).as_deref(), Some("plain"));
        h.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert_eq!(session_id(&h).as_deref(), Some("tls"));
    }
}
