//! The web console (issue 17): server-rendered pages at `/console`, mounted beside the MCP
//! endpoint by `transport::http::app` (behind the same `Host` check) on a server with a
//! store. People sign in with the same static tokens or OAuth access tokens as MCP clients, and see what the
//! principal of that token may see over MCP, no more; its changes run the same built-ins
//! through the catalog as that principal ([`actions`]).
//!
//! - [`guard`]: security headers, the change checks (Origin, Fetch Metadata, CSRF), the
//!   session cookie, the signed-in [`guard::Viewer`].
//! - [`session`]: the session store.
//! - [`logins`]: sign-ins gone to the OAuth issuer (state, PKCE verifier, browser binding).
//! - [`disk`]: the server page's environment sizes, measured at most once a minute.
//! - [`assets`]: the stylesheet, embedded, served under a content-hashed name.
//! - [`layout`], [`widgets`], [`diff`], [`charts`] (inline SVG), [`images`] (result images as
//!   raster `data:` URLs only): shared rendering (maud: every value escaped).
//! - `pages/`: one file per page family, each with its routes.

pub(crate) mod actions;
pub(crate) mod assets;
pub(crate) mod charts;
pub(crate) mod diff;
pub(crate) mod disk;
pub(crate) mod guard;
pub(crate) mod images;
pub(crate) mod layout;
pub(crate) mod logins;
pub(crate) mod pages;
pub(crate) mod session;
pub(crate) mod widgets;

use std::sync::Arc;

use axum::Router;
use axum::middleware;
use axum::response::Redirect;
use axum::routing::{get, post};

use crate::auth::TokenSet;
use crate::auth::oauth::OAuth;
use crate::mcp::state::{Shared, Stored};
use crate::settings::HttpSettings;

/// The console's state, shared by its handlers.
pub(crate) struct Console {
    /// The server's state: the catalog the console lists and calls through.
    pub(crate) shared: Arc<Shared>,
    /// The stored side: the store the pages read, the operations the changes run.
    pub(crate) stored: Arc<Stored>,
    /// The static tokens one signs in with (the MCP endpoint's own set).
    pub(crate) tokens: TokenSet,
    /// The OAuth resource server the MCP endpoint checks access tokens with, if configured:
    /// its access tokens sign in too.
    pub(crate) oauth: Option<Arc<OAuth>>,
    /// No authentication is configured (a loopback server without tokens or OAuth): as on
    /// the MCP endpoint, everyone is the `anonymous` admin.
    pub(crate) open: bool,
    /// Origins besides the console's own that may send changes (`--allow-origin`).
    pub(crate) allowed_origins: Vec<String>,
    /// The sessions.
    pub(crate) sessions: session::Sessions,
    /// How many MCP sessions are live now (the transport's count).
    pub(crate) live_sessions: LiveSessions,
    /// The environment sizes of the server page.
    pub(crate) env_sizes: disk::EnvSizeCache,
    /// Sign-ins gone to the OAuth issuer and not back yet.
    pub(crate) logins: logins::Logins,
}

/// Counts the live MCP sessions (the transport owns them; the console only asks).
pub(crate) type LiveSessions = Arc<dyn Fn() -> usize + Send + Sync>;

/// Every console route, or `None` on a server without a store (bridge mode). Changes are
/// POSTs and pass [`guard::protect_changes`] first; every answer gets
/// [`guard::security_headers`].
pub(crate) fn router(
    shared: Arc<Shared>,
    settings: &HttpSettings,
    live_sessions: LiveSessions,
) -> Option<Router> {
    let stored = shared.stored.clone()?;
    let console = Arc::new(Console {
        shared,
        stored,
        tokens: settings.tokens.clone(),
        oauth: settings.oauth.clone(),
        open: settings.tokens.is_empty() && settings.oauth.is_none(),
        allowed_origins: settings.allowed_origins.clone(),
        sessions: session::Sessions::default(),
        live_sessions,
        env_sizes: disk::EnvSizeCache::default(),
        logins: logins::Logins::default(),
    });
    use pages::{
        approvals, audit, calls, catalog, content, oauth, secrets, server, sign_in, tool, try_it,
    };
    let router = Router::new()
        .route("/console", get(|| async { Redirect::to("/console/tools") }))
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/tools") }),
        )
        .route("/console/sign-in", get(sign_in::form).post(sign_in::submit))
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/oauth/start", post(oauth::start))
        .route("/console/oauth/callback", get(oauth::callback))
        .route("/console/tools", get(catalog::page))
        .route("/console/content", get(content::page))
        .route("/console/tools/{name}", get(tool::page))
        .route("/console/tools/{name}/rollback", post(tool::rollback))
        .route("/console/tools/{name}/check", post(tool::check))
        .route("/console/tools/{name}/try", post(try_it::submit))
        .route("/console/tools/{name}/enabled", post(tool::set_enabled))
        .route("/console/tools/{name}/source", get(tool::source))
        .route("/console/calls", get(calls::list))
        .route("/console/calls/{id}", get(calls::detail))
        .route("/console/approvals", get(approvals::list))
        .route(
            "/console/approvals/{name}/{version}",
            get(approvals::review),
        )
        .route(
            "/console/approvals/{name}/{version}/approve",
            post(approvals::approve),
        )
        .route(
            "/console/approvals/{name}/{version}/reject",
            post(approvals::reject),
        )
        .route("/console/audit", get(audit::page))
        .route("/console/secrets", get(secrets::page))
        .route("/console/secrets/grant", post(secrets::grant))
        .route("/console/server", get(server::page))
        .route("/console/assets/{file}", get(assets::serve))
        // Unknown console paths get the console's 404 (with its headers); other paths stay
        // the MCP server's.
        .route(
            "/console/{*rest}",
            get(|| async { guard::not_found() }).post(|| async { guard::not_found() }),
        )
        // `route_layer`: on every console route (the catch-all above included), and not on
        // the fallback, which the merged router shares with the MCP endpoint.
        .route_layer(middleware::from_fn_with_state(
            console.clone(),
            guard::protect_changes,
        ))
        .route_layer(middleware::from_fn(guard::security_headers))
        .with_state(console);
    Some(router)
}

/// Now, in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tidy {
    /// Nothing in the console emits raw HTML: maud escapes every `(value)` unless it is
    /// wrapped in maud's pre-escaped type, so that type's name must not appear in the
    /// console's source. (Clippy's `disallowed-types` sees type positions only, not the
    /// constructor inside `html!`.)
    #[test]
    fn no_raw_html() {
        fn walk(dir: &std::path::Path, hits: &mut Vec<String>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, hits);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let needle = ["Pre", "Escaped"].concat();
                    for (i, line) in text.lines().enumerate() {
                        if line.contains(&needle) {
                            hits.push(format!("{}:{}", path.display(), i + 1));
                        }
                    }
                }
            }
        }
        let mut hits = Vec::new();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/console");
        walk(&dir, &mut hits);
        assert!(dir.is_dir(), "the console's source moved: update this test");
        assert!(hits.is_empty(), "raw HTML in the console: {hits:?}");
    }
}
