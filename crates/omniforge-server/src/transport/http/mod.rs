//! Streamable HTTP (2025-11-25, Basic > Transports > Streamable HTTP) behind an axum front.
//!
//! rmcp's [`StreamableHttpService`] does the protocol work: sessions, SSE streams, GET and
//! DELETE. The front runs first and fixes what rmcp 3.11 answers differently from what
//! clients need, one concern per file:
//! - [`access`]: **Host** (DNS rebinding) and **Origin** checks, answered with a 403 and a
//!   JSON-RPC body (rmcp answers plain text), CORS; **bearer tokens** (`--token-file`): 401
//!   with `WWW-Authenticate: Bearer` when missing or wrong.
//! - [`negotiation`]: **Accept** (a client that accepts only `application/json` gets one JSON
//!   answer; rmcp insists on both types), `Content-Type`, the **body limit** (413 with a
//!   JSON-RPC body), **MCP-Protocol-Version** (ignored on `initialize`; afterwards, when absent,
//!   the session's negotiated revision is used, where rmcp assumes 2025-03-26) and whether a
//!   **batch** is allowed (answered as an array under 2025-03-26 and earlier; 400 / -32600
//!   under later revisions, where rmcp answers 415).
//! - [`sessions`]: the front's record of each session (negotiated revision, owning token,
//!   what keeps it alive, the `--max-sessions` cap); [`expiry`] closes idle ones and
//!   [`memory`] hands the freed heap back; [`request_ids`]: requests that reuse an id in flight.
//! - [`resume`]: rmcp's session manager, wrapped so a tool can close its POST stream for a
//!   `Last-Event-ID` resume (SEP-1699).
//! - [`sse_json`]: an SSE answer collapsed into one JSON response.
//! - [`wire`]: header names and JSON-RPC error bodies (every plain-text error rmcp produces
//!   gets one).
//! - [`front`]: the endpoint that runs these in order and forwards each message to rmcp.
//! - [`healthz`]: `GET /healthz`; [`metrics`]: `GET /metrics` (`admin`).
//! - [`connections`]: the accept loop: header read timeout, keep-alive idle timeout, connection
//!   cap.
//! - [`challenge`]: the `WWW-Authenticate` answers (static tokens; OAuth with
//!   `resource_metadata` and `scope`); [`well_known`]: the OAuth protected-resource metadata
//!   (RFC 9728), only when OAuth is configured.
//!
//! `tools/call` arguments that are `null` or not an object reach the handler
//! ([`crate::transport::jsonrpc`]).

pub(crate) mod access;
pub(crate) mod challenge;
pub(crate) mod connections;
pub(crate) mod expiry;
pub(crate) mod front;
pub(crate) mod healthz;
pub(crate) mod memory;
pub(crate) mod metrics;
pub(crate) mod negotiation;
pub(crate) mod request_ids;
pub(crate) mod resume;
pub(crate) mod sessions;
pub(crate) mod sse_json;
pub(crate) mod well_known;
pub(crate) mod wire;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::{any, get};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::mcp::handler::OmniForge;
use crate::mcp::state::Shared;
use crate::settings::HttpSettings;
use crate::transport::http::access::Access;
use crate::transport::http::front::Front;
use crate::transport::http::resume::ResumableSessions;
use crate::transport::http::sessions::SessionBook;

/// Builds the axum app: the MCP endpoint at `settings.path`, `GET /healthz`, and the web
/// console at `/console` on a server with a store.
///
/// `rmcp_ct` ends every session and SSE stream when cancelled; `answers` tracks the POST
/// answers still streaming, for the shutdown's drain.
pub(crate) fn app(
    shared: Arc<Shared>,
    settings: HttpSettings,
    rmcp_ct: CancellationToken,
    answers: TaskTracker,
) -> Router {
    let book = Arc::new(SessionBook::new(settings.max_sessions));
    let sessions = Arc::downgrade(&book);
    shared
        .metrics
        .count_sessions_with(move || sessions.upgrade().map_or(0, |book| book.len()));
    let mut session_manager = LocalSessionManager::default();
    // rmcp's idle timer restarts only when a message passes, so it ended silent calls:
    // `expiry` closes sessions by what they are doing instead.
    session_manager.session_config.keep_alive = None;
    let session_manager = Arc::new(ResumableSessions::new(session_manager, book.clone()));
    let rmcp_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!settings.stateless)
        // The front checks Host and Origin; rmcp's checks would answer in plain text.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(settings.max_body_bytes)
        .with_cancellation_token(rmcp_ct);
    let factory_shared = shared.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(OmniForge::new(factory_shared.clone())),
        session_manager.clone(),
        rmcp_config,
    );
    tokio::spawn(expiry::expire(
        Arc::downgrade(&book),
        session_manager,
        shared.peers.clone(),
        settings.session_idle_timeout,
    ));
    let metadata = settings
        .oauth
        .as_deref()
        .map(|oauth| well_known::routes(oauth, &settings.path));
    // The console (issue 17) sits behind the same Host check as the MCP endpoint.
    let counted = book.clone();
    let live_sessions: crate::console::LiveSessions = Arc::new(move || counted.len());
    let console = crate::console::router(shared.clone(), &settings, live_sessions).map(|console| {
        let access = Arc::new(Access::new(&settings));
        console.route_layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let access = access.clone();
                async move {
                    match access.check_host(request.headers()) {
                        Ok(()) => next.run(request).await,
                        Err(refused) => refused,
                    }
                }
            },
        ))
    });
    let front = Arc::new(Front {
        shared,
        access: Access::new(&settings),
        max_body_bytes: settings.max_body_bytes,
        mcp,
        book,
        answers,
    });
    let router = Router::new()
        .route("/healthz", get(health))
        .route("/metrics", get(metrics::scrape))
        .route(&settings.path, any(front::endpoint))
        .with_state(front);
    let router = match console {
        Some(console) => router.merge(console),
        None => router,
    };
    match metadata {
        Some(metadata) => router.merge(metadata),
        None => router,
    }
}

async fn health(State(front): State<Arc<Front>>, headers: http::HeaderMap) -> Response {
    // Which tools run warm for whom (tool and principal names, host pids) is for `admin` only.
    let admin = front
        .access
        .authenticate(&headers)
        .await
        .is_ok_and(|p| p.allows(crate::auth::Scope::Admin));
    healthz::report(&front.shared, front.book.len(), admin)
}

/// Serves `app` on `listener` until `shutdown` fires, then stops accepting, lets in-flight
/// tool calls finish and their answers reach their clients within `grace`, and ends what is
/// left.
///
/// # Errors
/// An I/O error from the listener.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    settings: HttpSettings,
    shutdown: CancellationToken,
    grace: Duration,
) -> std::io::Result<()> {
    let rmcp_ct = CancellationToken::new();
    let limits = connections::Limits {
        header_read_timeout: settings.header_read_timeout,
        keep_alive_timeout: settings.keep_alive_timeout,
        max_connections: settings.max_connections,
    };
    let answers = TaskTracker::new();
    let router = app(shared.clone(), settings, rmcp_ct.clone(), answers.clone());
    let drain = {
        let shutdown = shutdown.clone();
        let rmcp_ct = rmcp_ct.clone();
        async move {
            shutdown.cancelled().await;
            shared.calls.close();
            shared.peers.close_subscriptions();
            answers.close();
            let deadline = tokio::time::Instant::now() + grace;
            if tokio::time::timeout_at(deadline, shared.calls.wait())
                .await
                .is_err()
            {
                tracing::warn!(grace = ?grace, "in-flight tool calls outlived the grace period; cancelling them");
            } else if tokio::time::timeout_at(deadline, answers.wait())
                .await
                .is_err()
            {
                // Streams of calls that were answered, but whose clients read slowly.
                tracing::warn!(grace = ?grace, "answers still streaming at the end of the grace period; ending them");
            }
            rmcp_ct.cancel();
        }
    };
    tokio::spawn(drain);
    let server = connections::serve(listener, router, limits, shutdown.clone());
    tokio::select! {
        result = server => result,
        // Connections that outlive the cancelled sessions (idle keep-alives) do not hold us.
        () = async { rmcp_ct.cancelled().await; tokio::time::sleep(Duration::from_secs(2)).await } => Ok(()),
    }
}
