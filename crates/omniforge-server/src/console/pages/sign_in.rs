//! Sign-in with a static token (the MCP endpoint's token file) or an OAuth access token
//! (checked exactly as the MCP endpoint checks it), and sign-out.
//!
//! The form is served with an anonymous session whose CSRF token it carries, so a sign-in
//! cannot be forged from another site (no login CSRF); a successful sign-in replaces that
//! session with a new one (new id, new CSRF token), so no id chosen before sign-in survives
//! it. A session signed in with an OAuth access token ends when the token expires.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use http::header::SET_COOKIE;
use http::{HeaderMap, StatusCode};
use maud::{Markup, html};

use crate::auth::Principal;
use crate::auth::oauth::{Grant, OAuth, TokenError};
use crate::console::Console;
use crate::console::guard::{over_tls, session_id, set_cookie};
use crate::console::layout;
use crate::console::pages::{field, fields};

/// What a refused token is told.
const INVALID: &str = "That token is not valid.";

/// The sign-in page: "Sign in with ISSUER" when the console has an OAuth client, and the
/// token form.
pub(crate) fn page(console: &Console, csrf: &str, error: Option<&str>) -> Markup {
    let issuer = console
        .oauth
        .as_ref()
        .filter(|o| o.console_client().is_some())
        .map(|o| o.issuer());
    layout::shell(
        "Sign in",
        html! {
            h1 { "Sign in to the OmniForge console" }
            @if let Some(e) = error { p.flash.err role="alert" { (e) } }
            @if let Some(issuer) = issuer {
                form method="post" action="/console/oauth/start" {
                    input type="hidden" name="csrf" value=(csrf);
                    button type="submit" { "Sign in with " (issuer) }
                }
                p { "Or with a token:" }
            }
            form method="post" action="/console/sign-in" {
                input type="hidden" name="csrf" value=(csrf);
                @if console.open {
                    p { "This server has no tokens configured: everyone on this machine is its anonymous admin." }
                } @else {
                    div.field {
                        label for="token" { "Token" }
                        p.hint id="token-hint" {
                            @if console.oauth.is_some() {
                                "A bearer token from the server's token file, or an OAuth access token issued for this server (the session then ends when the token expires). "
                            } @else {
                                "A bearer token from the server's token file. "
                            }
                            "The console checks it and keeps only who it names."
                        }
                        input #token type="password" name="token" autocomplete="off" required aria-describedby="token-hint";
                    }
                }
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// 503: no session id could be made.
pub(crate) fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        layout::bare(
            "Sign-in unavailable",
            "The server could not make a session id. Try again.",
        ),
    )
        .into_response()
}

/// `GET /console/sign-in`: the form, with a new anonymous session unless one is live.
pub(crate) async fn form(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    let existing = session_id(&headers).and_then(|id| console.sessions.get(&id));
    match existing {
        Some(s) if s.principal.is_some() => Redirect::to("/console/tools").into_response(),
        Some(s) => page(&console, &s.csrf, None).into_response(),
        None => match console.sessions.start(None, None) {
            Some((id, s)) => (
                [(SET_COOKIE, set_cookie(over_tls(&headers), Some(&id)))],
                page(&console, &s.csrf, None),
            )
                .into_response(),
            None => unavailable(),
        },
    }
}

/// The principal of `token` and when its sign-in ends: a static token (compared in constant
/// time against every configured token), else an OAuth access token. `Err`: what to tell.
async fn authenticate(
    console: &Console,
    token: Option<&str>,
) -> Result<(Principal, Option<Instant>), &'static str> {
    if console.open {
        return Ok((Principal::anonymous(), None));
    }
    let token = token
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(INVALID)?;
    if let Some(principal) = console.tokens.authenticate(token) {
        return Ok((principal, None));
    }
    let oauth = console.oauth.as_ref().ok_or(INVALID)?;
    check_access_token(oauth, token).await
}

/// The principal of an OAuth access token, checked exactly as `/mcp` checks it, and when its
/// sign-in ends (the token's `exp`). `Err`: what to tell.
pub(crate) async fn check_access_token(
    oauth: &OAuth,
    token: &str,
) -> Result<(Principal, Option<Instant>), &'static str> {
    match oauth.check(token).await {
        Ok(Grant {
            principal,
            scope: Some(scope),
            expires_at,
        }) => {
            let until = expires_at.map(|at| {
                Instant::now() + at.duration_since(SystemTime::now()).unwrap_or_default()
            });
            Ok((Principal::new(principal, scope), until))
        }
        Ok(Grant { scope: None, .. }) => Err("That token grants no OmniForge scope."),
        Err(TokenError::Unavailable) => {
            Err("The authorization server cannot be reached; try again later.")
        }
        Err(error) => {
            tracing::info!(
                reason = error.kind(),
                "console sign-in refused an OAuth access token"
            );
            Err(INVALID)
        }
    }
}

/// `POST /console/sign-in`. The change guard has checked the Origin and the anonymous
/// session's CSRF token before this runs.
pub(crate) async fn submit(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(old) = session_id(&headers) else {
        return Redirect::to("/console/sign-in").into_response();
    };
    let fields = fields(&body);
    let (principal, until) = match authenticate(&console, field(&fields, "token")).await {
        Ok(signed_in) => signed_in,
        Err(message) => {
            tracing::info!("console sign-in refused: {message}");
            let csrf = console
                .sessions
                .get(&old)
                .map(|s| s.csrf)
                .unwrap_or_default();
            return (
                StatusCode::UNAUTHORIZED,
                page(&console, &csrf, Some(message)),
            )
                .into_response();
        }
    };
    tracing::info!(principal = %principal.id, "console sign-in");
    console.sessions.end(&old);
    match console.sessions.start(Some(principal), until) {
        Some((id, _)) => (
            [(SET_COOKIE, set_cookie(over_tls(&headers), Some(&id)))],
            Redirect::to("/console/tools"),
        )
            .into_response(),
        None => unavailable(),
    }
}

/// `POST /console/sign-out`: ends the session and removes the cookie.
pub(crate) async fn sign_out(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(id) = session_id(&headers) {
        console.sessions.end(&id);
    }
    (
        [(SET_COOKIE, set_cookie(over_tls(&headers), None))],
        Redirect::to("/console/sign-in"),
    )
        .into_response()
}
