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
use crate::telemetry::metrics::Metrics;
use crate::tools::authoring::approval::Approval;
use crate::tools::authoring::tool::ToolAuthoring;
use crate::tools::stored::input_required::StateCodec;
use crate::tools::stored::kept::KeptOutputs;

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
    /// Stored resources, templates and prompts; `None` in bridge mode.
    pub(crate) content: Option<Arc<Content>>,
    /// The outputs behind the resource links of cut results; `None` in bridge mode.
    pub(crate) kept: Option<Arc<KeptOutputs>>,
    /// Where built-in and manifest calls are recorded (stored calls record themselves);
    /// `None` in bridge mode.
    pub(crate) call_log: Option<Arc<dyn Store>>,
    /// The script host (for `/healthz`'s sandbox layers); `None` in bridge mode.
    pub(crate) host: Option<Arc<ScriptHost>>,
    /// Seals and opens the `requestState` of input-required results (content scripts' too);
    /// `None` in bridge mode.
    pub(crate) states: Option<Arc<StateCodec>>,
    /// The server's metrics (`/metrics`).
    pub(crate) metrics: Arc<Metrics>,
    /// This replica's durable tasks (the Tasks extension is advertised exactly when set);
    /// `None` in bridge mode.
    pub(crate) tasks: Option<Arc<Tasks>>,
    /// The tool authoring operations (for the console's rollback and example runs); `None`
    /// in bridge mode.
    pub(crate) authoring: Option<Arc<ToolAuthoring>>,
    /// The approval gate (pending versions, approve, reject); `None` in bridge mode.
    pub(crate) approval: Option<Arc<Approval>>,
    /// Each manifest's upstream and how it has answered (the console's server page).
    pub(crate) upstreams: Vec<Arc<crate::tools::manifest::health::UpstreamHealth>>,
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
        let layers = self.host.iter().flat_map(|h| h.layers());
        let sandbox: serde_json::Map<String, Value> = layers
            .clone()
            .map(|l| (l.name.to_owned(), json!(l.active)))
            .collect();
        let sandbox_layers: Vec<Value> = layers
            .map(|l| json!({"name": l.name, "active": l.active, "detail": l.detail}))
            .collect();
        json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "tools": tools,
            "sandbox": sandbox,
            "sandbox_layers": sandbox_layers,
            "sessions": sessions,
            "warm": self.host.as_ref().map(|h| h.warm().report(detail)),
        })
    }
}
