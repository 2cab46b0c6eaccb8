//! The `WWW-Authenticate` answers of the MCP endpoint (RFC 6750 §3, RFC 9728 §5, MCP
//! authorization), built in one place.
//!
//! With only static tokens they stay `Bearer realm="omniforge"` (static-token clients must not
//! be sent into an OAuth discovery that cannot succeed). With OAuth every 401 and 403 also
//! names the protected-resource metadata (`resource_metadata`) and the `scope` a client must
//! ask for, in the provider's own scope names. `error_description` is always one of a fixed
//! set of texts, never token content.

use axum::response::Response;
use http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderValue, StatusCode};

use crate::auth::Scope;
use crate::auth::oauth::OAuth;
use crate::transport::http::wire::{SERVER_ERROR, rpc_error};

/// The path of the protected-resource metadata's root form.
pub(super) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// What a challenge says besides the realm.
pub(super) struct Challenge {
    /// `resource_metadata` and the provider names of the challenged scopes; `None` without
    /// OAuth.
    oauth: Option<(String, String)>,
    /// The provider's name of `admin`.
    admin_scope: String,
}

impl Challenge {
    /// The challenges of a server with `oauth` (or only static tokens).
    pub(super) fn new(oauth: Option<&OAuth>) -> Challenge {
        let Some(oauth) = oauth else {
            return Challenge {
                oauth: None,
                admin_scope: Scope::Admin.as_str().to_owned(),
            };
        };
        let settings = oauth.settings();
        let mut scopes: Vec<&str> = Vec::new();
        for scope in &settings.challenge_scopes {
            let name = settings.scopes.provider_name(*scope);
            if !scopes.contains(&name) {
                scopes.push(name);
            }
        }
        Challenge {
            oauth: Some((metadata_url(oauth.resource()), scopes.join(" "))),
            admin_scope: settings.scopes.provider_name(Scope::Admin).to_owned(),
        }
    }

    /// 401: no bearer token.
    pub(super) fn missing(&self) -> Response {
        self.respond(
            StatusCode::UNAUTHORIZED,
            None,
            None,
            "Unauthorized: a bearer token is required",
        )
    }

    /// 401: the token is not valid; `description` is a fixed text.
    pub(super) fn invalid(&self, description: &str) -> Response {
        self.respond(
            StatusCode::UNAUTHORIZED,
            Some(("invalid_token", description)),
            None,
            "Unauthorized: the bearer token is not valid",
        )
    }

    /// 403: a valid token that grants no OmniForge scope (or, with `admin`, not that one).
    pub(super) fn insufficient_scope(&self, needed: Option<Scope>) -> Response {
        let (scope, description) = match needed {
            Some(Scope::Admin) => (Some(self.admin_scope.clone()), "this needs the admin scope"),
            _ => (None, "the access token grants no OmniForge scope"),
        };
        self.respond(
            StatusCode::FORBIDDEN,
            Some(("insufficient_scope", description)),
            scope,
            &format!("Forbidden: {description}"),
        )
    }

    /// 503: the authorization server cannot be reached; the client keeps its token.
    pub(super) fn unavailable(&self) -> Response {
        let mut response = rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            SERVER_ERROR,
            "Service Unavailable: the authorization server cannot be reached; retry later",
        );
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("5"));
        response
    }

    /// 400: the token is not where RFC 6750 and MCP allow it (two `Authorization` headers).
    pub(super) fn bad_request(&self) -> Response {
        self.respond(
            StatusCode::BAD_REQUEST,
            Some((
                "invalid_request",
                "send exactly one Authorization: Bearer header",
            )),
            None,
            "Bad Request: send exactly one Authorization: Bearer header",
        )
    }

    /// 400: the token is in the query string (`?access_token=`, RFC 6750 §2.3), which
    /// OmniForge does not accept: URLs end up in logs and browser history, and MCP allows only
    /// the header.
    pub(super) fn token_in_query(&self) -> Response {
        self.respond(
            StatusCode::BAD_REQUEST,
            Some((
                "invalid_request",
                "send the access token in the Authorization header, not the query",
            )),
            None,
            "Bad Request: access tokens in the query string are not accepted; send an \
             Authorization: Bearer header",
        )
    }

    fn respond(
        &self,
        status: StatusCode,
        error: Option<(&str, &str)>,
        scope: Option<String>,
        message: &str,
    ) -> Response {
        let mut value = String::from(r#"Bearer realm="omniforge""#);
        if let Some((code, description)) = error {
            value.push_str(&format!(
                r#", error="{code}", error_description="{description}""#
            ));
        }
        if let Some((metadata, challenged)) = &self.oauth {
            value.push_str(&format!(r#", resource_metadata="{metadata}""#));
            let scope = scope.as_deref().unwrap_or(challenged);
            if !scope.is_empty() {
                value.push_str(&format!(r#", scope="{scope}""#));
            }
        }
        let mut response = rpc_error(status, None, SERVER_ERROR, message);
        // The values are our own texts and configured URLs with quotes removed, so this holds;
        // should it not, the bare realm still names the scheme.
        let header = HeaderValue::from_str(&value)
            .unwrap_or_else(|_| HeaderValue::from_static(r#"Bearer realm="omniforge""#));
        response.headers_mut().insert(WWW_AUTHENTICATE, header);
        response
    }
}

/// The metadata URL of a resource (RFC 9728 §3.1): the well-known path inserted between the
/// resource's origin and its path.
pub(super) fn metadata_url(resource: &str) -> String {
    let resource: String = resource.chars().filter(|c| *c != '"').collect();
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", &resource));
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], rest[at..].trim_end_matches('/')),
        None => (rest, ""),
    };
    format!("{scheme}://{authority}{METADATA_PATH}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_url_inserts_the_well_known_path() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8765"),
            "http://127.0.0.1:8765/.well-known/oauth-protected-resource"
        );
    }
}
