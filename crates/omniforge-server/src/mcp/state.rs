//! [`Shared`]: the server-wide state every handler (one per stdio connection or HTTP session)
//! shares.

use std::sync::Arc;

use omniforge_store::Store;
use tokio_util::task::TaskTracker;

use crate::catalog::publish::Catalog;
use crate::content::snapshot::Content;
use crate::peers::Peers;
use crate::script_host::host::ScriptHost;
use crate::tasks::Tasks;
use crate::telemetry::call_log::CallLogWriter;
use crate::telemetry::metrics::Metrics;
use crate::tools::Authoring;
use crate::tools::stored::kept::KeptOutputs;
use crate::tools::stored::source::StoredSource;

/// Server-wide state.
pub(crate) struct Shared {
    /// The merged tool catalog.
    pub(crate) catalog: Arc<Catalog>,
    /// Peers to tell about list changes.
    pub(crate) peers: Arc<Peers>,
    /// Items per list page. Large by default: several clients ignore `nextCursor`.
    pub(crate) page_size: usize,
    /// Tracks in-flight `tools/call`s so shutdown can wait for them.
    pub(crate) calls: TaskTracker,
    /// The server-level `instructions` of the InitializeResult.
    pub(crate) instructions: &'static str,
    /// The server's metrics (`/metrics`).
    pub(crate) metrics: Arc<Metrics>,
    /// Each manifest's upstream and how it has answered (the console's server page).
    pub(crate) upstreams: Vec<Arc<crate::tools::manifest::health::UpstreamHealth>>,
    /// The stored side; `None` in bridge mode (`omniforge bridge`), which serves manifest
    /// tools only.
    pub(crate) stored: Option<Arc<Stored>>,
}

/// The stored side of a server: the store and everything built on it, all there or (bridge
/// mode) none of it.
pub(crate) struct Stored {
    /// The store: where built-in and manifest calls are recorded (stored calls record
    /// themselves), and what the console reads.
    pub(crate) store: Arc<dyn Store>,
    /// The call log's queue: every call's row goes there, to be written in batches.
    pub(crate) call_log: Arc<CallLogWriter>,
    /// The script host (`/healthz`'s sandbox layers, content scripts, warm templates).
    pub(crate) host: Arc<ScriptHost>,
    /// The stored tools in the catalog (the command line runs them).
    pub(crate) source: Arc<StoredSource>,
    /// The outputs behind the resource links of cut results.
    pub(crate) kept: Arc<KeptOutputs>,
    /// This replica's durable tasks (the Tasks extension is advertised exactly when there is
    /// a store).
    pub(crate) tasks: Arc<Tasks>,
    /// What the built-in operations work with: tool authoring, the approval gate, secrets and
    /// stored content (also the command line's and the console's changes).
    pub(crate) authoring: Authoring,
}

impl Stored {
    /// Stored resources, templates and prompts.
    pub(crate) fn content(&self) -> &Arc<Content> {
        &self.authoring.content
    }
}

impl Shared {
    /// The server's health as `/healthz` answers it and the console's server page shows it:
    /// the tools per source, the sandbox layers (as `omniforge doctor` names them), the live
    /// `sessions`, and the warm templates (one by one when `detail`, for admins).
    pub(crate) fn health(&self, sessions: usize, detail: bool) -> serde_json::Value {
        use crate::catalog::entry::ToolSource;
        use serde_json::{Value, json};
        let snapshot = self.catalog.snapshot();
        let tools: serde_json::Map<String, Value> = [
            ToolSource::Builtin,
            ToolSource::Manifest,
            ToolSource::Stored,
        ]
        .into_iter()
        .map(|s| (s.as_str().to_owned(), json!(snapshot.count(s))))
        .collect();
        // Whether each layer is active, and (as in `doctor --json`) how, or why not.
        let host = self.stored.as_ref().map(|s| &s.host);
        let layers = host.iter().flat_map(|h| h.layers());
        let sandbox: serde_json::Map<String, Value> = layers
            .clone()
            .map(|l| (l.name.to_owned(), json!(l.active)))
            .collect();
        let sandbox_layers: Vec<Value> = layers
            .map(|l| json!({"name": l.name, "active": l.active, "detail": l.detail}))
            .collect();
        let (indexed, bytes) = self.catalog.index_size();
        json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "tools": tools,
            "search_index": {"entries": indexed, "bytes": bytes},
            "sandbox": sandbox,
            "sandbox_layers": sandbox_layers,
            "sessions": sessions,
            "warm": host.map(|h| h.warm().report(detail)),
        })
    }
}
