//! Sign-in through the issuer (authorization code + PKCE), when `[oauth.console]` names the
//! console's client:
//!
//! - `POST /console/oauth/start` (a change: the sign-in form's anonymous session, its CSRF
//!   token and the Origin are checked first) makes a `state`, a PKCE verifier and a binding
//!   value; keeps the verifier and the binding's hash server-side ([`Logins`]); gives the
//!   browser the binding in its own cookie (HttpOnly, SameSite=Lax so the issuer's redirect
//!   back carries it, path `/console/oauth`, ten minutes); and sends it to the issuer.
//! - `GET /console/oauth/callback` takes the `state` once, and only with the browser's
//!   binding (no login CSRF); exchanges the code at the token endpoint; checks the access
//!   token exactly as `/mcp` does (signature, issuer, audience = this resource, expiry,
//!   scope); ends any session the browser had and opens a new one (fresh id) for the
//!   `oauth:` principal, ending when the token does.
//!
//! [`Logins`]: crate::console::logins::Logins

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use http::header::SET_COOKIE;
use http::{HeaderMap, HeaderValue, StatusCode};
use maud::html;
use serde::Deserialize;

use crate::auth::oauth::{CodeError, OAuth, shown_error};
use crate::console::guard::{cookie, not_found, over_tls, session_id, set_cookie};
use crate::console::pages::query;
use crate::console::pages::sign_in::{check_access_token, unavailable};
use crate::console::session::random_token;
use crate::console::{Console, layout, logins};

/// The binding cookie over plain HTTP.
const LOGIN_COOKIE: &str = "omniforge_console_login";
/// Over TLS (`Secure`; `__Secure-` since its path is not `/`).
const SECURE_LOGIN_COOKIE: &str = "__Secure-omniforge_console_login";

/// `Set-Cookie` for the binding value (or its removal).
fn login_cookie(secure: bool, value: Option<&str>) -> HeaderValue {
    let name = if secure {
        SECURE_LOGIN_COOKIE
    } else {
        LOGIN_COOKIE
    };
    let flag = if secure { "; Secure" } else { "" };
    let text = match value {
        Some(v) => format!(
            "{name}={v}; Path=/console/oauth; Max-Age={}; HttpOnly; SameSite=Lax{flag}",
            logins::LIFETIME.as_secs()
        ),
        None => format!("{name}=; Path=/console/oauth; Max-Age=0; HttpOnly; SameSite=Lax{flag}"),
    };
    // Random values are base64url: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static(""))
}

fn login_binding(headers: &HeaderMap) -> Option<String> {
    let name = if over_tls(headers) {
        SECURE_LOGIN_COOKIE
    } else {
        LOGIN_COOKIE
    };
    cookie(headers, name)
}

/// The OAuth checker, when a console client is configured (else the routes do not exist).
fn with_client(console: &Console) -> Option<&Arc<OAuth>> {
    console
        .oauth
        .as_ref()
        .filter(|o| o.console_client().is_some())
}

/// `POST /console/oauth/start`.
pub(crate) async fn start(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let Some(oauth) = with_client(&console) else {
        return not_found();
    };
    let (Some(state), Some(verifier), Some(binding)) =
        (random_token(), random_token(), random_token())
    else {
        return unavailable();
    };
    match oauth.authorization_url(&state, &verifier).await {
        Ok(url) => {
            console.logins.insert(&state, verifier, &binding);
            (
                [(SET_COOKIE, login_cookie(over_tls(&headers), Some(&binding)))],
                Redirect::to(&url),
            )
                .into_response()
        }
        Err(error) => {
            tracing::warn!(%error, "console sign-in through the issuer could not start");
            let csrf = session_id(&headers)
                .and_then(|id| console.sessions.get(&id))
                .map(|s| s.csrf)
                .unwrap_or_default();
            let page = crate::console::pages::sign_in::page(
                &console,
                &csrf,
                Some("The authorization server cannot be reached; try again later."),
            );
            (StatusCode::SERVICE_UNAVAILABLE, page).into_response()
        }
    }
}

/// The authorization response's parameters (RFC 6749 §4.1.2).
#[derive(Debug, Default, Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /console/oauth/callback`.
pub(crate) async fn callback(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let Some(oauth) = with_client(&console) else {
        return not_found();
    };
    let secure = over_tls(&headers);
    let refuse = |status: StatusCode, message: String| {
        tracing::info!(%message, "console sign-in through the issuer refused");
        (
            status,
            [(SET_COOKIE, login_cookie(secure, None))],
            layout::shell(
                "Sign-in failed",
                html! {
                    h1 { "Sign-in failed" }
                    p role="alert" { (message) }
                    p { a href="/console/sign-in" { "Back to the sign-in page" } }
                },
            ),
        )
            .into_response()
    };
    let params: Callback = query(raw);
    let binding = login_binding(&headers);
    let Some(verifier) = params
        .state
        .as_deref()
        .and_then(|state| console.logins.take(state, binding.as_deref()))
    else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser, has expired, or was already used. \
             Start again from the sign-in page."
                .into(),
        );
    };
    if let Some(error) = params.error.as_deref() {
        return refuse(
            StatusCode::UNAUTHORIZED,
            format!(
                "The authorization server did not sign you in ({}).",
                shown_error(error)
            ),
        );
    }
    let Some(code) = params.code.as_deref().filter(|c| !c.is_empty()) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "The authorization server sent no code.".into(),
        );
    };
    let token = match oauth.exchange_code(code, &verifier).await {
        Ok(token) => token,
        Err(error @ CodeError::Unavailable) => {
            return refuse(StatusCode::SERVICE_UNAVAILABLE, error.to_string());
        }
        Err(error) => return refuse(StatusCode::UNAUTHORIZED, error.to_string()),
    };
    let (principal, until) = match check_access_token(oauth, &token).await {
        Ok(signed_in) => signed_in,
        Err(message) => return refuse(StatusCode::UNAUTHORIZED, message.into()),
    };
    tracing::info!(principal = %principal.id, "console sign-in through the issuer");
    if let Some(old) = session_id(&headers) {
        console.sessions.end(&old);
    }
    let who = principal.id.to_string();
    let Some((id, _)) = console.sessions.start(Some(principal), until) else {
        return unavailable();
    };
    (
        AppendHeaders([
            (SET_COOKIE, set_cookie(secure, Some(&id))),
            (SET_COOKIE, login_cookie(secure, None)),
        ]),
        layout::shell_then(
            "Signed in",
            Some("/console/tools"),
            html! {
                h1 { "Signed in" }
                p { "Signed in as " code { (who) } "." }
                p { a href="/console/tools" { "Continue to the console" } }
            },
        ),
    )
        .into_response()
}
