//! Who may reach the MCP endpoint: the `Host` check (DNS rebinding), `Origin` validation with
//! its CORS answers, and bearer tokens: the static token file's, then OAuth access tokens
//! ([`crate::auth::oauth`]). A refusal is a ready response with a JSON-RPC body; its
//! `WWW-Authenticate` comes from [`challenge`](super::challenge).

// A rejection is a ready `Response` (axum's idiom); it is built once per refused request, so
// its size on the stack does not matter.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::header::{ALLOW, AUTHORIZATION, HOST, ORIGIN, VARY};
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::auth::oauth::{Grant, OAuth, TokenError};
use crate::auth::{Principal, Scope, TokenSet};
use crate::settings::HttpSettings;
use crate::transport::http::challenge::Challenge;
use crate::transport::http::wire::{SERVER_ERROR, rpc_error};

/// The methods the MCP endpoint answers.
pub(super) const ALLOWED_METHODS: &str = "GET, POST, DELETE, OPTIONS";

/// The access rules of one endpoint.
pub(super) struct Access {
    check_host: bool,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    tokens: TokenSet,
    oauth: Option<Arc<OAuth>>,
    challenge: Challenge,
}

impl Access {
    /// The rules of `settings`.
    pub(super) fn new(settings: &HttpSettings) -> Access {
        Access {
            check_host: settings.check_host,
            allowed_hosts: settings.allowed_hosts.clone(),
            allowed_origins: settings.allowed_origins.clone(),
            tokens: settings.tokens.clone(),
            oauth: settings.oauth.clone(),
            challenge: Challenge::new(settings.oauth.as_deref()),
        }
    }

    /// DNS-rebinding guard. The spec mandates Origin checks, not Host checks; this one is
    /// on for loopback binds (where rebinding is the threat) and whenever hosts are listed.
    pub(super) fn check_host(&self, headers: &HeaderMap) -> Result<(), Response> {
        if !self.check_host {
            return Ok(());
        }
        let Some(host) = headers.get(HOST).and_then(|v| v.to_str().ok()) else {
            return Ok(());
        };
        let (name, _) = split_authority(host);
        let allowed = is_loopback_host(name)
            || self.allowed_hosts.iter().any(|entry| {
                if split_authority(entry).1.is_some() {
                    entry.eq_ignore_ascii_case(host)
                } else {
                    entry.eq_ignore_ascii_case(name)
                }
            });
        if allowed {
            Ok(())
        } else {
            tracing::warn!(host, "rejected a request: Host is not allowed");
            Err(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                SERVER_ERROR,
                format!("Forbidden: Host '{host}' is not allowed (add it with --allow-host)"),
            ))
        }
    }

    /// Origin validation (2025-11-25, Streamable HTTP > Security Warning, item 1). Returns
    /// the origin to echo in CORS headers when the request carries an allowed one.
    pub(super) fn check_origin(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<HeaderValue>, Response> {
        let Some(value) = headers.get(ORIGIN) else {
            return Ok(None);
        };
        let origin = value.to_str().unwrap_or("").trim_end_matches('/');
        let loopback = origin
            .split_once("://")
            .filter(|(scheme, _)| matches!(*scheme, "http" | "https"))
            .is_some_and(|(_, authority)| is_loopback_host(split_authority(authority).0));
        let listed = self
            .allowed_origins
            .iter()
            .any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin));
        if origin != "null" && (loopback || listed) {
            Ok(Some(value.clone()))
        } else {
            tracing::warn!(origin, "rejected a request: Origin is not allowed");
            Err(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                SERVER_ERROR,
                format!("Forbidden: Origin '{origin}' is not allowed (add it with --allow-origin)"),
            ))
        }
    }

    /// Refuses a request whose query string carries `access_token` (RFC 6750 §2.3 is not
    /// supported: MCP allows only the `Authorization` header), with or without authentication
    /// configured, so a token sent that way is never taken and the client learns why.
    pub(super) fn check_query(&self, uri: &http::Uri) -> Result<(), Response> {
        let carries_token = uri.query().is_some_and(|query| {
            url::form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "access_token")
        });
        if carries_token {
            tracing::info!("refused a request with an access token in its query string");
            return Err(self.challenge.token_in_query());
        }
        Ok(())
    }

    /// The principal of the request's bearer token when it holds `scope`; 403
    /// `insufficient_scope` naming it when it does not.
    pub(super) async fn require(
        &self,
        headers: &HeaderMap,
        scope: Scope,
    ) -> Result<Principal, Response> {
        let principal = self.authenticate(headers).await?;
        if principal.allows(scope) {
            Ok(principal)
        } else {
            Err(self.challenge.insufficient_scope(Some(scope)))
        }
    }

    /// The principal of the request's bearer token: a static token's, else an OAuth access
    /// token's. [`Principal::anonymous`] when neither is configured.
    pub(super) async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, Response> {
        if self.tokens.is_empty() && self.oauth.is_none() {
            return Ok(Principal::anonymous());
        }
        let mut values = headers.get_all(AUTHORIZATION).iter();
        let first = values.next();
        if values.next().is_some() {
            return Err(self.challenge.bad_request());
        }
        // Another scheme (`Basic ...`) counts as no bearer token.
        let presented = first
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty());
        let Some(token) = presented else {
            return Err(self.challenge.missing());
        };
        if let Some(principal) = self.tokens.authenticate(token) {
            return Ok(principal);
        }
        let Some(oauth) = &self.oauth else {
            return Err(self.challenge.invalid("the token is not valid"));
        };
        match oauth.check(token).await {
            Ok(Grant {
                principal,
                scope: Some(scope),
                ..
            }) => Ok(Principal::new(principal, scope)),
            Ok(Grant {
                principal,
                scope: None,
                ..
            }) => {
                tracing::info!(%principal, "refused an OAuth access token: it grants no OmniForge scope");
                Err(self.challenge.insufficient_scope(None))
            }
            Err(TokenError::Unavailable) => Err(self.challenge.unavailable()),
            Err(error) => {
                tracing::info!(reason = error.kind(), "refused an OAuth access token");
                Err(self.challenge.invalid(&error.to_string()))
            }
        }
    }
}

/// Answers a CORS preflight (or a plain OPTIONS) for the MCP endpoint.
pub(super) fn preflight(headers: &HeaderMap, cors: bool) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    out.insert(ALLOW, HeaderValue::from_static(ALLOWED_METHODS));
    if cors {
        out.insert(
            "access-control-allow-methods",
            HeaderValue::from_static(ALLOWED_METHODS),
        );
        let requested = headers
            .get("access-control-request-headers")
            .cloned()
            .unwrap_or(HeaderValue::from_static(
                "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id",
            ));
        out.insert("access-control-allow-headers", requested);
        out.insert("access-control-max-age", HeaderValue::from_static("600"));
    }
    response
}

/// The CORS headers of an answer to an allowed `origin`.
pub(super) fn allow_origin(response: &mut Response, origin: HeaderValue) {
    let headers = response.headers_mut();
    headers.insert("access-control-allow-origin", origin);
    headers.insert(
        "access-control-expose-headers",
        HeaderValue::from_static("Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"),
    );
    headers.append(VARY, HeaderValue::from_static("Origin"));
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Splits `host[:port]` (with `[v6]` brackets) into host and optional port.
fn split_authority(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        assert_eq!(
            split_authority("localhost:8080"),
            ("localhost", Some("8080"))
        );
        assert_eq!(split_authority("[::1]:80"), ("::1", Some("80")));
        assert_eq!(split_authority("example.com"), ("example.com", None));
        assert!(
            is_loopback_host("127.0.0.5")
                && is_loopback_host("[::1]")
                && is_loopback_host("LOCALHOST")
        );
        assert!(!is_loopback_host("evil.example.com") && !is_loopback_host("10.0.0.1"));
    }
}
