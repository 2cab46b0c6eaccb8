//! [`Server`]: everything built from [`Settings`] — the catalog and its sources, the script
//! host, stored content, the change feed consumer and the list-change notifier — and the two
//! ways to serve it.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use omniforge_script::RunError;
use omniforge_store::{Store, StoreError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::catalog::entry::ToolSource;
use crate::catalog::publish::Catalog;
use crate::catalog::schema_profile::SchemaProfile;
use crate::changes::{self, Sides};
use crate::content::snapshot::Content;
use crate::mcp::state::{Shared, Stored};
use crate::peers::{self, Peers};
use crate::runs::input_required::StateCodec;
use crate::script_host::gc::collect_garbage;
use crate::script_host::host::{ScriptHost, ScriptSettings};
use crate::settings::HttpSettings;
use crate::tasks::{self, TaskSettings, Tasks};
use crate::telemetry::call_log::{CallLogSettings, CallLogWriter};
use crate::telemetry::metrics::Metrics;
use crate::tools::authoring::approval::Approval;
use crate::tools::authoring::tool::ToolAuthoring;
use crate::tools::builtin::instructions::{BRIDGE_INSTRUCTIONS, SERVER_INSTRUCTIONS};
use crate::tools::builtin::search::Discovery;
use crate::tools::manifest::source::{ManifestConfig, ManifestSource, ManifestSourceError};
use crate::tools::stored::call::StoredTools;
use crate::tools::stored::kept::KeptOutputs;
use crate::tools::stored::shape::Shaper;
use crate::tools::stored::source::StoredSource;
use crate::tools::{self as tool_sources, Authoring};
use crate::transport;

/// What a started server serves ([`Server::served`]): the tools by source, listed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Served {
    /// Stored (forged) tools with a live current version.
    pub stored_tools: usize,
    /// Tools from manifests.
    pub manifest_tools: usize,
    /// Built-in tools.
    pub builtins: usize,
    /// Whether new versions wait for an admin (`--require-approval`); `None` without a store.
    pub approval_required: Option<bool>,
}

/// What a server is built from.
pub struct Settings {
    /// Items per list page (at least 1). Large by default: several clients ignore `nextCursor`.
    pub page_size: usize,
    /// How tool schemas are served.
    pub schema_profile: SchemaProfile,
    /// The forge manifests and their upstreams.
    pub manifests: Vec<ManifestConfig>,
    /// Inline `$ref`s of manifest tool schemas.
    pub inline_schema_refs: bool,
    /// Stored tools, resources and prompts, and the built-ins; `None` serves manifest tools
    /// only (`omniforge bridge`).
    pub store: Option<StoreSettings>,
    /// The most tools that get a `tool` label of their own in `/metrics`; calls of the
    /// others count as `tool="other"` (`--metrics-max-tools`, default
    /// [`DEFAULT_METRICS_MAX_TOOLS`](crate::DEFAULT_METRICS_MAX_TOOLS)).
    pub metrics_max_tools: usize,
    /// Record metrics (`--metrics`, default true); `false` leaves `/metrics` with the build
    /// info only (what the benchmark compares against).
    pub metrics: bool,
}

/// The stored side of a server.
pub struct StoreSettings {
    /// The store.
    pub store: Arc<dyn Store>,
    /// How scripts are built and run.
    pub scripts: ScriptSettings,
    /// Whether the authoring built-ins are offered.
    pub authoring: bool,
    /// Most bytes of text a call returns to the client; the rest is cut with a marker.
    pub max_result_bytes: usize,
    /// How long the whole output of a cut result stays readable through its resource link.
    pub output_ttl: Duration,
    /// How long audit records are kept (`--audit-retention`): older ones are pruned at start
    /// and hourly. `None` keeps everything.
    pub audit_retention: Option<Duration>,
    /// Keep a tool version whose examples fail as a draft instead of refusing it
    /// (`--keep-failed-drafts`; a call's `keepFailedDrafts` overrides it).
    pub keep_failed_drafts: bool,
    /// The approval gate (`--require-approval`): a tool version written by a principal
    /// without `admin` waits, pending, until an admin approves it.
    pub require_approval: bool,
    /// How durable tasks are timed (TTL, poll interval, lease).
    pub tasks: TaskSettings,
    /// How the call log is written: calls queue their rows and one writer commits them in
    /// batches (`--call-log-queue`, `--call-log-batch-wait`).
    pub call_log: CallLogSettings,
    /// The keys that sign the `requestState` of input-required results (2026-07-28), as
    /// (id, key of at least 32 bytes): the first signs, every one opens, so replicas roll keys
    /// without a stop (`--request-state-key-file`). Empty: one random key for this process
    /// (a retry then works only on this process, until it stops).
    pub request_state_keys: Vec<(String, Vec<u8>)>,
}

/// A server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A manifest is missing or malformed, an upstream is misconfigured, or a manifest cannot be
    /// watched.
    #[error("loading manifests")]
    Manifests(#[source] ManifestSourceError),
    /// The sandbox cannot be set up (e.g. `--sandbox strict` without namespaces).
    #[error("starting script tools")]
    Sandbox(#[source] RunError),
    /// The stored tools cannot be read.
    #[error("starting script tools")]
    Tools(#[source] StoreError),
    /// The stored resources and prompts cannot be read.
    #[error("loading stored resources and prompts")]
    Content(#[source] StoreError),
    /// The request-state keys are unusable (a key shorter than 32 bytes, a repeated id).
    #[error("{0}")]
    RequestStateKeys(String),
}

/// A running server: its sources are loaded and followed. Serve it over stdio
/// ([`serve_stdio`](Server::serve_stdio)) or HTTP ([`serve_http`](Server::serve_http),
/// [`app`](Server::app)); the command line also uses its one-shot actions. Dropping it stops
/// its background tasks.
pub struct Server {
    pub(crate) shared: Arc<Shared>,
    /// Keeps the manifest watches alive.
    _manifests: ManifestSource,
    /// Stops the background tasks (notifier, change feed, garbage collection).
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
        // The warm templates stop with the server, whoever still holds the script host.
        if let Some(stored) = &self.shared.stored {
            stored.host.warm().retire_all();
            // The retired templates' and last runs' cgroups are removed in background tasks
            // that the runtime's shutdown would drop: remove them now (issue 30).
            stored
                .host
                .warm()
                .runner()
                .clear_cgroups(Duration::from_secs(2));
        }
    }
}

impl Server {
    /// Builds and loads everything. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// A manifest, the sandbox or the store cannot be used.
    pub async fn start(settings: Settings) -> Result<Server, StartError> {
        let stop = CancellationToken::new();
        let catalog = Arc::new(Catalog::new(settings.schema_profile));
        let peers = Arc::new(Peers::default());
        let metrics = Arc::new(Metrics::new(settings.metrics_max_tools, settings.metrics));
        let manifests = crate::tools::manifest::source::start(
            catalog.clone(),
            &settings.manifests,
            settings.inline_schema_refs,
            metrics.clone(),
        )
        .map_err(StartError::Manifests)?;
        let upstreams = manifests.upstreams();
        let stored = match settings.store {
            None => None,
            Some(s) => Some(Arc::new(
                start_stored(s, &catalog, &peers, &stop, metrics.clone()).await?,
            )),
        };
        let shared = Shared {
            catalog: catalog.clone(),
            peers: peers.clone(),
            page_size: settings.page_size.max(1),
            calls: TaskTracker::new(),
            instructions: match stored {
                Some(_) => SERVER_INSTRUCTIONS,
                None => BRIDGE_INSTRUCTIONS,
            },
            metrics,
            upstreams,
            stored,
        };
        tokio::spawn(peers::broadcast_changes(
            peers,
            catalog.subscribe(),
            stop.clone(),
        ));
        Ok(Server {
            shared: Arc::new(shared),
            _manifests: manifests,
            stop,
        })
    }

    /// What this server serves, for the start-up summary.
    pub fn served(&self) -> Served {
        let snapshot = self.shared.catalog.snapshot();
        Served {
            stored_tools: snapshot.count(ToolSource::Stored),
            manifest_tools: snapshot.count(ToolSource::Manifest),
            builtins: snapshot.count(ToolSource::Builtin),
            approval_required: self
                .shared
                .stored
                .as_ref()
                .map(|s| s.authoring.approval.required()),
        }
    }

    /// Serves MCP on `input`/`output` (stdin and stdout) until `input` ends or `shutdown`
    /// fires; then waits for in-flight tool calls (the caller bounds that wait) and writes the
    /// call log's queue ([`flush_call_log`](Server::flush_call_log)).
    ///
    /// # Errors
    /// An I/O error on `input` or `output`.
    pub async fn serve_stdio<R, W>(
        &self,
        input: R,
        output: W,
        shutdown: CancellationToken,
    ) -> std::io::Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let served = transport::stdio::serve(self.shared.clone(), input, output, shutdown).await;
        self.flush_call_log().await;
        served
    }

    /// Serves Streamable HTTP on `listener` until `shutdown` fires, then stops accepting, lets
    /// in-flight tool calls finish within `grace`, ends what is left, and writes the call log's
    /// queue ([`flush_call_log`](Server::flush_call_log)).
    ///
    /// # Errors
    /// An I/O error from the listener.
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        settings: HttpSettings,
        shutdown: CancellationToken,
        grace: Duration,
    ) -> std::io::Result<()> {
        let served =
            transport::http::serve(listener, self.shared.clone(), settings, shutdown, grace).await;
        self.flush_call_log().await;
        served
    }

    /// Waits until the call log holds every call that ended before this call (the rows queued
    /// so far are committed, or their batch failed): what a graceful shutdown does last, and a
    /// one-shot command before it exits. Waits at most 10 s (a store that does not answer
    /// must not hold the exit), then logs a warning. Without a store, returns at once.
    pub async fn flush_call_log(&self) {
        const BOUND: Duration = Duration::from_secs(10);
        if let Some(stored) = &self.shared.stored
            && tokio::time::timeout(BOUND, stored.call_log.flush())
                .await
                .is_err()
        {
            tracing::warn!(?BOUND, "the call log's queue was not written in time");
        }
    }

    /// The HTTP app (the MCP endpoint at `settings.path` and `GET /healthz`), for serving
    /// yourself or for in-process tests. `rmcp_ct` ends every session and SSE stream.
    pub fn app(&self, settings: HttpSettings, rmcp_ct: CancellationToken) -> Router {
        transport::http::app(self.shared.clone(), settings, rmcp_ct, TaskTracker::new())
    }

    /// The app of `--metrics-listen`: `GET /metrics` without authentication (bind it to a
    /// loopback or otherwise private address).
    pub fn metrics_app(&self) -> Router {
        transport::http::metrics::router(self.shared.clone())
    }

    /// Serves [`Server::metrics_app`] on `listener` until `shutdown` fires; logs an error
    /// should the listener fail.
    pub fn serve_metrics(
        &self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let app = self.metrics_app();
        async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "the metrics listener failed");
            }
        }
    }
}

/// Builds the stored side: script host, stored tools, content, the authoring built-ins, and
/// the tasks that follow the store.
async fn start_stored(
    s: StoreSettings,
    catalog: &Arc<Catalog>,
    peers: &Arc<Peers>,
    stop: &CancellationToken,
    metrics: Arc<Metrics>,
) -> Result<Stored, StartError> {
    let store = s.store;
    let call_log = Arc::new(CallLogWriter::start(
        store.clone(),
        s.call_log,
        metrics.clone(),
    ));
    let host = Arc::new(ScriptHost::new(s.scripts, metrics).map_err(StartError::Sandbox)?);
    let kept = Arc::new(KeptOutputs::new(store.clone(), s.output_ttl));
    let states = StateCodec::new(&s.request_state_keys)
        .map_err(|e| StartError::RequestStateKeys(e.to_string()))?;
    let states = Arc::new(states);
    let tools = Arc::new(StoredTools {
        store: store.clone(),
        call_log: call_log.clone(),
        host: host.clone(),
        shaper: Shaper {
            max_result_bytes: s.max_result_bytes,
            kept: kept.clone(),
        },
        states: states.clone(),
        versions: Default::default(),
    });
    let source = Arc::new(StoredSource::new(store.clone(), tools.clone(), catalog));
    // Read before loading: a change that lands in between is seen twice, never missed.
    let seq = store.current_seq().await.map_err(StartError::Tools)?;
    let content = Content::load(store.clone(), host.clone(), states.clone(), peers.clone())
        .await
        .map_err(StartError::Content)?;
    let approval = Arc::new(Approval::new(
        store.clone(),
        source.clone(),
        s.require_approval,
    ));
    let authoring = Arc::new(ToolAuthoring::new(
        store.clone(),
        tools,
        source.clone(),
        catalog,
        s.keep_failed_drafts,
        approval.clone(),
    ));
    let authoring = Authoring {
        tools: authoring,
        approval,
        store: store.clone(),
        content: content.clone(),
    };
    catalog.replace(
        ToolSource::Builtin,
        tool_sources::builtins(
            s.authoring.then_some(&authoring),
            &Arc::new(Discovery::new(catalog)),
        ),
    );
    source.reload_all().await.map_err(StartError::Tools)?;
    // Loading 100,000 tools decoded each one's row before keeping its compact entry: give the
    // freed heap back, so that a replica's RSS is what its catalog holds.
    crate::transport::http::memory::release_free_heap();
    let sides = Sides {
        tools: source.clone(),
        content: content.clone(),
    };
    tokio::spawn(changes::follow(store.clone(), seq, sides, stop.clone()));
    let tasks = Tasks::new(store.clone(), s.tasks, stop.clone());
    tokio::spawn(tasks::keep_leases(tasks.clone()));
    tokio::spawn(collect_garbage(
        Arc::downgrade(&host),
        store.clone(),
        stop.clone(),
    ));
    if let Some(keep) = s.audit_retention {
        tokio::spawn(crate::retention::prune_audit_log(
            store.clone(),
            keep,
            stop.clone(),
        ));
    }
    Ok(Stored {
        store,
        call_log,
        host,
        source,
        kept,
        tasks,
        authoring,
    })
}
