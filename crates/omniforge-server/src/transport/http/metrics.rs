//! `GET /metrics`: the server's metrics in OpenMetrics text
//! ([`Metrics`](crate::telemetry::metrics::Metrics)). On the MCP listener it needs a token
//! with the `admin` scope (403 `insufficient_scope` otherwise); `--metrics-listen` serves the
//! same text without authentication on its own address ([`router`]), for a scraper.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Uri};

use crate::auth::Scope;
use crate::catalog::entry::ToolSource;
use crate::mcp::state::Shared;
use crate::telemetry::metrics;
use crate::transport::http::front::Front;

/// The route on the MCP listener: Host check, no query token, then `admin`.
pub(super) async fn scrape(
    State(front): State<Arc<Front>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(response) = front.access.check_host(&headers) {
        return response;
    }
    if let Err(response) = front.access.check_query(&uri) {
        return response;
    }
    if let Err(response) = front.access.require(&headers, Scope::Admin).await {
        return response;
    }
    exposition(&front.shared).await
}

/// The app of `--metrics-listen`: `GET /metrics`, no authentication.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(shared): State<Arc<Shared>>| async move { exposition(&shared).await }),
        )
        .with_state(shared)
}

/// The metrics text, with the gauges read from their sources now.
async fn exposition(shared: &Shared) -> Response {
    let m = &shared.metrics;
    if let Some(stored) = &shared.stored {
        match stored.tasks.store().count_tasks().await {
            Ok(counts) => {
                let counts: Vec<_> = counts.into_iter().map(|(s, n)| (s.as_str(), n)).collect();
                m.set_tasks(&counts);
            }
            // The gauges keep their last values; the rest of the scrape still answers.
            Err(error) => tracing::warn!(%error, "counting the tasks for the metrics failed"),
        }
        m.set_load(stored.host.load());
    }
    let tools = shared.catalog.snapshot();
    for (source, label) in [
        (ToolSource::Builtin, "builtin"),
        (ToolSource::Manifest, "manifest"),
        (ToolSource::Stored, "stored"),
    ] {
        m.set_catalog("tool", label, tools.count(source));
    }
    if let Some(stored) = &shared.stored {
        let content = stored.content().snapshot();
        m.set_catalog("resource", "stored", content.resources.len());
        m.set_catalog("resource_template", "stored", content.templates.len());
        m.set_catalog("prompt", "stored", content.prompts.len());
    }
    let mut response = m.encode().into_response();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(metrics::CONTENT_TYPE),
    );
    response
}
