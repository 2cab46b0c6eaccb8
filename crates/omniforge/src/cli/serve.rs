//! `serve` (Streamable HTTP), `stdio` and `bridge`: the commands that serve MCP until a
//! signal (or, on stdio, the end of stdin).

use anyhow::{Context, Result, bail};
use std::sync::Arc;

use omniforge_server::{HttpSettings, OAuth, TokenSet};
use tokio_util::sync::CancellationToken;

use super::parts::{self, Tools};
use super::ready::ReadyFile;
use crate::flags::{Common, Http};

/// A server and the token that shuts it down.
struct Server {
    server: omniforge_server::Server,
    shutdown: CancellationToken,
}

/// Builds the server and every tool source, and starts the signal handler.
async fn start(common: &Common, tools: Tools) -> Result<Server> {
    let server = parts::server(common, tools, common.scripts.authoring).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(wait_for_signal(shutdown.clone()));
    Ok(Server { server, shutdown })
}

/// `stdio` and `bridge`.
pub(super) async fn stdio(common: &Common, tools: Tools) -> Result<()> {
    let server = start(common, tools).await?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "serving MCP on stdio");
    let grace = common.shutdown_grace;
    let shutdown = server.shutdown.clone();
    let serving =
        server
            .server
            .serve_stdio(tokio::io::stdin(), tokio::io::stdout(), shutdown.clone());
    tokio::select! {
        // Serving ends with the call log's queue written.
        result = serving => result.context("stdio transport"),
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(?grace, "in-flight tool calls outlived the grace period");
            // The calls answered so far are still logged.
            server.server.flush_call_log().await;
            Ok(())
        }
    }
}

/// `serve`.
pub(super) async fn http(common: &Common, settings: Http) -> Result<()> {
    let tokens = match &settings.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading token file {}", path.display()))?;
            TokenSet::parse(&text).with_context(|| format!("token file {}", path.display()))?
        }
        None => TokenSet::default(),
    };
    let loopback = settings.listen.ip().is_loopback();
    if tokens.is_empty() && settings.oauth.is_none() && !loopback && !settings.insecure_no_auth {
        bail!(
            "refusing to listen on {} without authentication: give --token-file or \
             --oauth-issuer, bind a loopback address (127.0.0.1 or [::1]), or pass \
             --insecure-no-auth",
            settings.listen
        );
    }
    // A ready file left by an earlier run must not announce this one before it listens.
    let ready = settings.ready_file.map(ReadyFile::clear).transpose()?;
    // Bind before anything else is set up: a busy port fails at once, not after the store,
    // the sandbox and the warm templates.
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("binding {}", settings.listen))?;
    let metrics = match settings.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding --metrics-listen {addr}"))?,
        ),
        None => None,
    };
    let server = start(common, Tools::All).await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let url = format!("http://{addr}{}", settings.path);
    let oauth = match settings.oauth {
        Some(mut oauth) => {
            if oauth.audiences.is_empty() {
                if !loopback {
                    bail!(
                        "--oauth-audience is required on a non-loopback bind: give this server's \
                         public MCP URL (e.g. https://mcp.example.com/mcp)"
                    );
                }
                oauth.audiences.push(url.clone());
            }
            Some(Arc::new(OAuth::new(*oauth).context("OAuth settings")?))
        }
        None => None,
    };
    let config = HttpSettings {
        path: settings.path,
        stateless: settings.stateless,
        check_host: loopback || !settings.allow_host.is_empty(),
        allowed_origins: settings.allow_origin,
        allowed_hosts: settings.allow_host,
        tokens,
        oauth,
        max_body_bytes: settings.max_body_bytes,
        session_idle_timeout: settings.session_idle_timeout,
        max_sessions: settings.max_sessions,
        header_read_timeout: settings.header_read_timeout,
        keep_alive_timeout: settings.keep_alive_timeout,
        max_connections: settings.max_connections,
    };
    let served = server.server.served();
    let auth = match (&config.oauth, config.tokens.len()) {
        (Some(o), 0) => format!("OAuth {}", o.settings().issuer),
        (Some(o), n) => format!("OAuth {} and {n} token(s)", o.settings().issuer),
        (None, 0) => "none (anyone who reaches this address)".to_owned(),
        (None, n) => format!("{n} token(s)"),
    };
    // The one summary of what is served; the rest of the start-up logs at debug.
    tracing::info!(
        mcp = %url,
        console = %served
            .approval_required
            .map_or_else(|| "none (no store)".to_owned(), |_| format!("http://{addr}/console")),
        store = %store_shown(&common.database),
        %auth,
        approval = match served.approval_required {
            Some(true) => "required",
            Some(false) => "off",
            None => "none",
        },
        sources = %sources(common, &served),
        stateless = config.stateless,
        version = env!("CARGO_PKG_VERSION"),
        "serving"
    );
    if let Some(metrics) = metrics {
        let addr = metrics.local_addr().context("reading the bound address")?;
        if !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                "--metrics-listen is not a loopback address: anyone who reaches it reads the \
                 metrics (tool names and counts) without authentication"
            );
        }
        tracing::info!(url = %format!("http://{addr}/metrics"), "serving metrics without authentication");
        tokio::spawn(
            server
                .server
                .serve_metrics(metrics, server.shutdown.clone()),
        );
    }
    // The socket is listening (connections queue from here on), so clients may connect now.
    let _ready = ready.map(|file| file.announce(&url)).transpose()?;
    server
        .server
        .serve_http(listener, config, server.shutdown, common.shutdown_grace)
        .await
        .context("HTTP server")
}

/// The store URL with its password hidden.
fn store_shown(url: &str) -> String {
    omniforge_store::StoreUrl::parse(url).map_or_else(|_| "?".to_owned(), |u| u.redacted())
}

/// `3 stored tools, 2 manifests (a.json, b.json) with 7 tools, 26 built-ins`.
fn sources(common: &Common, served: &omniforge_server::Served) -> String {
    let mut parts = vec![format!("{} stored tools", served.stored_tools)];
    if !common.manifests.is_empty() {
        let names: Vec<String> = common
            .manifests
            .iter()
            .map(|m| {
                m.path.file_name().map_or_else(
                    || m.path.display().to_string(),
                    |n| n.to_string_lossy().into_owned(),
                )
            })
            .collect();
        parts.push(format!(
            "{} manifest(s) ({}) with {} tools",
            names.len(),
            names.join(", "),
            served.manifest_tools
        ));
    }
    parts.push(format!("{} built-ins", served.builtins));
    parts.join(", ")
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!(
            "cannot install signal handlers; SIGINT/SIGTERM will end the process abruptly"
        );
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}
