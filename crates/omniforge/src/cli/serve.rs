//! `serve` (Streamable HTTP), `stdio` and `bridge`: the commands that serve MCP until a
//! signal (or, on stdio, the end of stdin).

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use omniforge_server::auth::TokenSet;
use omniforge_server::catalog::Catalog;
use omniforge_server::handler::Shared;
use omniforge_server::http::HttpConfig;
use omniforge_server::{content, http, peers, stdio};
use tokio_util::sync::CancellationToken;

use super::parts;
use super::ready::ReadyFile;
use crate::flags::{Common, Http};

/// Which tools a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tools {
    /// Built-ins, manifest tools, stored tools, resources and prompts.
    All,
    /// The manifest's tools only (`bridge`).
    ManifestOnly,
}

/// A server's shared state and the handles that must live as long as it serves.
struct Server {
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    /// Watches the manifest files while it lives.
    _manifests: omniforge_server::manifests::ManifestSource,
}

/// Builds the catalog and every tool source, and starts the change broadcast and the signal
/// handler.
async fn start(common: &Common, tools: Tools) -> Result<Server> {
    let builtin_tools = match tools {
        Tools::All => parts::builtin_tools(common.scripts.authoring),
        Tools::ManifestOnly => Vec::new(),
    };
    let catalog = Arc::new(Catalog::with_profile(
        builtin_tools,
        parts::schema_profile(common),
    ));
    let manifests = parts::load_manifests(common, &catalog)?;
    let started = match tools {
        Tools::All => Some(parts::start_forge(common, catalog.clone()).await?),
        Tools::ManifestOnly => None,
    };
    let shared = Shared::new(
        catalog.clone(),
        common.page_size,
        started.as_ref().map(|(forge, _)| forge.clone()),
    );
    if let Some((forge, store)) = started {
        let content = content::Content::start(store, forge, shared.peers.clone())
            .await
            .context("loading stored resources and prompts")?;
        shared.set_content(content);
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(peers::broadcast_changes(
        shared.peers.clone(),
        catalog.subscribe(),
        shutdown.clone(),
    ));
    tokio::spawn(wait_for_signal(shutdown.clone()));
    Ok(Server {
        shared,
        shutdown,
        _manifests: manifests,
    })
}

/// `stdio` and `bridge`.
pub(super) async fn stdio(common: &Common, tools: Tools) -> Result<()> {
    let server = start(common, tools).await?;
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "serving MCP on stdio");
    let grace = common.shutdown_grace;
    let shutdown = server.shutdown.clone();
    let serving = stdio::serve(
        server.shared.clone(),
        tokio::io::stdin(),
        tokio::io::stdout(),
        shutdown.clone(),
    );
    tokio::select! {
        result = serving => result.context("stdio transport"),
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(?grace, "in-flight tool calls outlived the grace period");
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
    if tokens.is_empty() && !loopback && !settings.insecure_no_auth {
        bail!(
            "refusing to listen on {} without authentication: give --token-file, bind a loopback \
             address (127.0.0.1 or [::1]), or pass --insecure-no-auth",
            settings.listen
        );
    }
    // A ready file left by an earlier run must not announce this one before it listens.
    let ready = settings.ready_file.map(ReadyFile::clear).transpose()?;
    let server = start(common, Tools::All).await?;
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("binding {}", settings.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let url = format!("http://{addr}{}", settings.path);
    let config = HttpConfig {
        path: settings.path,
        stateless: settings.stateless,
        check_host: loopback || !settings.allow_host.is_empty(),
        allowed_origins: settings.allow_origin,
        allowed_hosts: settings.allow_host,
        tokens,
        max_body_bytes: settings.max_body_bytes,
        session_idle_timeout: settings.session_idle_timeout,
    };
    tracing::info!(
        %url,
        version = env!("CARGO_PKG_VERSION"),
        stateless = config.stateless,
        tokens = config.tokens.len(),
        "listening"
    );
    // The socket is listening (connections queue from here on), so clients may connect now.
    let _ready = ready.map(|file| file.announce(&url)).transpose()?;
    http::serve(
        listener,
        server.shared,
        config,
        server.shutdown,
        common.shutdown_grace,
    )
    .await
    .context("HTTP server")
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
