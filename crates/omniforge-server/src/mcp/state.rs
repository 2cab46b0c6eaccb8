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
}
