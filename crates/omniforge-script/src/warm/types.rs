//! The pool's public types: its settings, keys, errors and report.

use std::time::Duration;

/// Default [`WarmConfig::max_templates`]: 8.
pub const DEFAULT_MAX_TEMPLATES: usize = 8;
/// Default [`WarmConfig::idle`]: 10 minutes.
pub const DEFAULT_WARM_IDLE: Duration = Duration::from_secs(600);

/// Settings of a [`WarmPool`](super::WarmPool).
#[derive(Debug, Clone)]
pub struct WarmConfig {
    /// Templates at most (one per [`WarmKey`]); 0 turns the pool off (default
    /// [`DEFAULT_MAX_TEMPLATES`]). A template that would pass it replaces the one used least
    /// recently that has no call running; without one, the call stays cold.
    pub max_templates: usize,
    /// A template unused for this long is stopped (default [`DEFAULT_WARM_IDLE`]).
    pub idle: Duration,
    /// Spare children each template keeps ready (default 1): calls beyond them wait for a
    /// fork, a Landlock ruleset and the cgroup moves (milliseconds).
    pub spares: usize,
    /// How long a template may spend importing the submodules of the packages the code
    /// imports (default 3 s); the code's own imports are always loaded.
    pub preload_budget: Duration,
    /// Import the public submodules of the packages the code imports (default `true`): what
    /// they import lazily (numpy's `ma` in `percentile`) is then shared by every call.
    pub preload_submodules: bool,
    /// How long a template may take to become ready (default 60 s).
    pub boot_timeout: Duration,
    /// Per-call layers to leave out, for measurements only: `cgroups` (no per-call cgroups:
    /// a call's leftovers live on until the template stops), `landlock` (no per-call domain:
    /// calls are not separated from each other). Default: none.
    pub disabled_call_layers: Vec<String>,
}

impl Default for WarmConfig {
    fn default() -> WarmConfig {
        WarmConfig {
            max_templates: DEFAULT_MAX_TEMPLATES,
            idle: DEFAULT_WARM_IDLE,
            spares: 1,
            preload_budget: Duration::from_secs(3),
            preload_submodules: true,
            boot_timeout: Duration::from_secs(60),
            disabled_call_layers: Vec::new(),
        }
    }
}

/// Which template a call may use: a tool version, and a partition within it. Calls of one
/// key share a template; the server uses the calling principal as the partition (see the
/// module doc for what calls of one template share).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WarmKey {
    /// The tool version, as the server names it (e.g. `"name@3"`); [`WarmPool::retire`](super::WarmPool::retire)
    /// takes the same string.
    pub version: String,
    /// The partition (the calling principal).
    pub partition: String,
}

impl WarmKey {
    /// The key of `version`'s calls by `partition`.
    pub fn new(version: impl Into<String>, partition: impl Into<String>) -> WarmKey {
        WarmKey {
            version: version.into(),
            partition: partition.into(),
        }
    }
}

/// Why the pool could not start a template, or why a template stopped working.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WarmError {
    /// The template did not start or did not become ready.
    #[error("the warm template did not start: {0}")]
    Start(String),
    /// A spare child could not be made.
    #[error("a warm spare could not be made: {0}")]
    Spare(String),
    /// The template is gone (stopped or died).
    #[error("the warm template is gone")]
    Gone,
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl WarmError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> WarmError {
        let context = context.into();
        move |source| WarmError::Io { context, source }
    }
}

/// What [`WarmPool::prepare`](super::WarmPool::prepare) came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared {
    /// The key's template is ready: its next call runs warm.
    Ready,
    /// The key's calls run cold; the text says why (the code needs a private `/tmp`, its
    /// imports started threads, the template failed, the pool is off or full, ...).
    Cold(String),
}

/// The state of one key's template, as [`WarmPool::report`](super::WarmPool::report) shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TemplateState {
    /// Starting.
    Starting,
    /// Ready for calls.
    Ready,
    /// The key's calls run cold, for this reason, until the version is retired.
    Cold(String),
}

/// One key's template in a [`WarmReport`].
#[derive(Debug, Clone)]
pub struct TemplateReport {
    /// Its key.
    pub key: WarmKey,
    /// Its state.
    pub state: TemplateState,
    /// The template interpreter's pid (on the host), while it runs.
    pub pid: Option<u32>,
    /// Calls it ran.
    pub calls: u64,
    /// Calls running on it now.
    pub running: usize,
    /// Since it was last used (or started).
    pub idle_for: Duration,
    /// From its start to ready.
    pub boot: Option<Duration>,
    /// Spare children ready.
    pub spares: usize,
    /// Resident memory of the template's processes (bubblewrap, its init, the interpreter).
    pub template_rss_bytes: u64,
    /// Resident memory of its ready spares (mostly pages shared with the template).
    pub spares_rss_bytes: u64,
    /// Proportional memory (PSS: shared pages split among their users) of all of them: what
    /// the template really costs.
    pub pss_bytes: u64,
}

/// The pool's state (for `/healthz` and metrics).
#[derive(Debug, Clone)]
pub struct WarmReport {
    /// Why the pool is off, when it is (every call then runs cold).
    pub off: Option<String>,
    /// [`WarmConfig::max_templates`].
    pub max_templates: usize,
    /// One entry per key the pool knows.
    pub templates: Vec<TemplateReport>,
    /// Sum of the templates' and spares' resident memory (pages they share count once per
    /// process).
    pub rss_bytes: u64,
    /// Sum of their proportional memory: the pool's share of the machine's memory.
    pub pss_bytes: u64,
}
