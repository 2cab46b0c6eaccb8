//! OAuth 2.0 Protected Resource Metadata (RFC 9728), served only when OAuth is configured,
//! without authentication, at the path form (`/.well-known/oauth-protected-resource` plus the
//! MCP endpoint's path) and at the root form. It names the resource (this server's resource
//! URL, the tokens' audience), its authorization server and the scopes, in the provider's
//! names.

use std::sync::Arc;

use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL};
use http::{HeaderValue, StatusCode};
use serde_json::json;

use crate::auth::Scope;
use crate::auth::oauth::OAuth;
use crate::transport::http::challenge::METADATA_PATH;
use crate::transport::http::wire::json_response;

/// The metadata routes for `oauth` and the MCP endpoint at `path`.
pub(super) fn routes<S: Clone + Send + Sync + 'static>(oauth: &OAuth, path: &str) -> Router<S> {
    let settings = oauth.settings();
    let mut scopes: Vec<&str> = Vec::new();
    for scope in [Scope::Call, Scope::Write, Scope::Admin] {
        let name = settings.scopes.provider_name(scope);
        if !scopes.contains(&name) {
            scopes.push(name);
        }
    }
    let document = Arc::new(json!({
        "resource": oauth.resource(),
        "authorization_servers": [settings.issuer],
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "OmniForge",
    }));
    let handler = move || {
        let document = document.clone();
        async move { answer(&document) }
    };
    let path_form = format!("{METADATA_PATH}{}", path.trim_end_matches('/'));
    let router = Router::new().route(METADATA_PATH, get(handler.clone()));
    if path_form == METADATA_PATH {
        router
    } else {
        router.route(&path_form, get(handler))
    }
}

fn answer(document: &serde_json::Value) -> Response {
    let mut response = json_response(StatusCode::OK, document).into_response();
    let headers = response.headers_mut();
    // A public document: browser clients (the MCP Inspector) fetch it cross-origin.
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=3600"));
    response
}
