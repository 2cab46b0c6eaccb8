//! [`Metrics`]: one Prometheus registry per server (`prometheus-client`, no global recorder,
//! so two servers in one process never share counters), its metric families, and the
//! OpenMetrics text a scrape gets.
//!
//! Labels are typed and bounded: methods and outcomes are fixed strings, and the `tool` label
//! is capped ([`Metrics::tool_label`]): past the cap, and for names that are not a live tool
//! the caller may use (unknown, hidden, pending), calls count under `tool="other"`. Gauges
//! that are cheaper to read than to keep (sessions, run queue, catalog sizes) are set from
//! their sources when scraped ([`Metrics::set_load`] and friends, called by the scrape).

use std::collections::HashSet;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// The `status` label values of the task gauges.
const TASK_STATUSES: [&str; 5] = [
    "working",
    "input_required",
    "completed",
    "failed",
    "cancelled",
];

/// The media type of [`Metrics::encode`]'s text (OpenMetrics 1.0, which Prometheus scrapes).
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The default cap on distinct `tool` label values (`--metrics-max-tools`).
pub const DEFAULT_MAX_TOOLS: usize = 200;

/// The `tool` label of calls that get no label of their own.
pub(crate) const OTHER: &str = "other";

/// The most distinct `upstream` label values (manifest services); the rest count as `other`.
const MAX_UPSTREAMS: usize = 64;

/// The `method` label of requests the HTTP front refused before any handler saw them.
const FRONT_METHOD: &str = "unknown";

/// Where a called tool comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Source {
    /// An `omniforge_*` built-in.
    Builtin,
    /// A manifest RPC on a Connect upstream.
    Manifest,
    /// A stored script tool.
    Stored,
}

impl Source {
    fn label(self) -> &'static str {
        match self {
            Source::Builtin => "builtin",
            Source::Manifest => "manifest",
            Source::Stored => "stored",
        }
    }
}

/// How a tool call ended, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true` (the tool failed, or the call was refused as a tool-level
    /// problem: unknown tool, bad arguments).
    ToolError,
    /// The run queue was full.
    Busy,
    /// The client cancelled the call.
    Cancelled,
}

impl CallOutcome {
    fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Busy => "busy",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

/// Why a call log row was lost (`omniforge_call_log_dropped_total`'s `reason`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallLogLoss {
    /// The writer's queue was full.
    QueueFull,
    /// The store refused the row's batch (a database error).
    WriteFailed,
}

impl CallLogLoss {
    /// The `reason` label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            CallLogLoss::QueueFull => "queue_full",
            CallLogLoss::WriteFailed => "write_failed",
        }
    }
}

/// Why the sandbox killed a run.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KillCause {
    /// The call's timeout expired.
    Timeout,
    /// The call was cancelled (by the client, or the server stopping).
    Cancel,
    /// The run's memory cgroup OOM-killed one of its processes (`cgroup-memory` layer).
    Memory,
    /// The run's pids cgroup refused a fork or thread (`cgroup-pids` layer).
    Pids,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    mcp_method_name: &'static str,
    error_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    tool: String,
    source: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolDurationLabels {
    source: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CatalogLabels {
    kind: &'static str,
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    kind: &'static str,
}

/// Which SSE stream is open.
#[derive(Clone, Copy, Debug)]
pub(crate) enum StreamKind {
    /// A GET stream (server-to-client messages outside any request).
    Get,
    /// A POST request's answer streamed as SSE.
    Post,
}

/// Counts one open SSE stream in `omniforge_open_streams` until dropped.
#[derive(Debug)]
pub(crate) struct StreamGuard(Option<Gauge>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(gauge) = &self.0 {
            gauge.dec();
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabels {
    version: &'static str,
}

type Histograms<S> = Family<S, Histogram, fn() -> Histogram>;

fn latency() -> Histogram {
    // 5 ms … ~82 s: the OpenTelemetry MCP semconv range, in powers of two.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

fn build_latency() -> Histogram {
    // 0.1 s … ~27 min: environment builds resolve and download packages.
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

/// The gauges read from elsewhere at scrape time.
pub(crate) struct Load {
    /// Script runs executing.
    pub(crate) running: usize,
    /// Script runs admitted and waiting for a slot.
    pub(crate) queued: usize,
}

/// A server's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    operation_duration: Histograms<OperationLabels>,
    tool_calls: Family<ToolCallLabels, Counter>,
    tool_call_duration: Histograms<ToolDurationLabels>,
    upstream_duration: Histograms<UpstreamLabels>,
    build_duration: Histograms<OutcomeLabels>,
    busy_refusals: Counter,
    kills: Family<CauseLabels, Counter>,
    call_log_dropped: Family<ReasonLabels, Counter>,
    run_queue: Gauge,
    run_slots_busy: Gauge,
    sessions: Gauge,
    catalog: Family<CatalogLabels, Gauge>,
    tasks: Family<StatusLabels, Gauge>,
    open_streams: Family<StreamLabels, Gauge>,
    /// The tool names that have a `tool` label of their own, at most `max_tools`.
    tools: RwLock<HashSet<String>>,
    /// The manifest services that have an `upstream` label of their own, at most
    /// [`MAX_UPSTREAMS`].
    upstreams: RwLock<HashSet<String>>,
    max_tools: usize,
    /// `false` (`--metrics=false`): nothing is recorded.
    enabled: bool,
    /// Counts the live HTTP sessions, set by the HTTP front when it starts.
    session_count: Mutex<Option<Box<dyn Fn() -> usize + Send + Sync>>>,
}

impl Metrics {
    /// Empty metrics with at most `max_tools` distinct `tool` labels; with `enabled` false
    /// nothing is ever recorded (the scrape shows only the build info).
    pub(crate) fn new(max_tools: usize, enabled: bool) -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("omniforge");
        let requests = Family::default();
        registry.register(
            "requests",
            "MCP requests, by method and outcome: ok or error when a handler answered; requests \
             the HTTP front refused before any handler saw them count under method=\"unknown\" \
             with outcome unauthorized (401), forbidden (403), bad_request (400), \
             unknown_session (404), too_large (413), busy (503, 429), refused (other 4xx) or \
             failed (5xx)",
            requests.clone(),
        );
        let tool_calls = Family::default();
        registry.register(
            "tool_calls",
            "tools/call requests by tool (capped; the rest as other), source and outcome; \
             isError results count as tool_error",
            tool_calls.clone(),
        );
        let tool_call_duration: Histograms<ToolDurationLabels> =
            Family::new_with_constructor(latency);
        registry.register_with_unit(
            "tool_call_duration",
            "tools/call latency by source and outcome",
            Unit::Seconds,
            tool_call_duration.clone(),
        );
        let upstream_duration: Histograms<UpstreamLabels> = Family::new_with_constructor(latency);
        registry.register_with_unit(
            "upstream_request_duration",
            "Connect upstream calls of manifest tools, by upstream (the manifest's service; past \
             64 services, other) and outcome (ok, connect_error, failure)",
            Unit::Seconds,
            upstream_duration.clone(),
        );
        let build_duration: Histograms<OutcomeLabels> = Family::new_with_constructor(build_latency);
        registry.register_with_unit(
            "environment_build_duration",
            "Python environment builds of stored tools, by outcome",
            Unit::Seconds,
            build_duration.clone(),
        );
        let busy_refusals = Counter::default();
        registry.register(
            "busy_refusals",
            "script runs refused because every run slot and queue place was taken",
            busy_refusals.clone(),
        );
        let kills = Family::default();
        registry.register(
            "sandbox_kills",
            "script runs the sandbox stopped, once per run by cause: memory (a process OOM-killed \
             by the run's memory cgroup; needs the cgroup-memory layer, without which a script \
             past its address-space limit gets MemoryError and is not counted), pids (a fork or \
             thread refused at pids.max; needs the cgroup-pids layer), else timeout or cancel",
            kills.clone(),
        );
        let call_log_dropped: Family<ReasonLabels, Counter> = Family::default();
        if enabled {
            for reason in [CallLogLoss::QueueFull, CallLogLoss::WriteFailed] {
                let _ = call_log_dropped.get_or_create(&ReasonLabels {
                    reason: reason.label(),
                });
            }
        }
        registry.register(
            "call_log_dropped",
            "call log rows lost, the calls themselves answered: queue_full (the call-log \
             writer's queue, --call-log-queue, was full) or write_failed (the store refused \
             their batch)",
            call_log_dropped.clone(),
        );
        let run_queue = Gauge::default();
        registry.register(
            "run_queue_depth",
            "script runs admitted and waiting for a run slot",
            run_queue.clone(),
        );
        let run_slots_busy = Gauge::default();
        registry.register(
            "run_slots_busy",
            "script runs executing",
            run_slots_busy.clone(),
        );
        let sessions = Gauge::default();
        registry.register(
            "sessions",
            "live Streamable HTTP sessions",
            sessions.clone(),
        );
        let catalog = Family::default();
        registry.register(
            "catalog_entries",
            "catalog sizes: tools by source; resources, resource templates and prompts",
            catalog.clone(),
        );
        let tasks = Family::default();
        registry.register(
            "tasks",
            "durable tasks in the store (every replica's), by status",
            tasks.clone(),
        );
        let open_streams: Family<StreamLabels, Gauge> = Family::default();
        for kind in ["get", "post"] {
            open_streams.get_or_create(&StreamLabels { kind }).set(0);
        }
        registry.register(
            "open_streams",
            "SSE streams open now: GET streams and POST answers streamed as SSE",
            open_streams.clone(),
        );
        let build_info: Family<VersionLabels, Gauge> = Family::default();
        build_info
            .get_or_create(&VersionLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        registry.register("build_info", "the running OmniForge version", build_info);
        // The OpenTelemetry MCP server metric, `mcp.server.operation.duration`, in Prometheus
        // spelling and outside our prefix.
        let operation_duration: Histograms<OperationLabels> = Family::new_with_constructor(latency);
        root.register_with_unit(
            "mcp_server_operation_duration",
            "MCP requests handled, by method and error type (empty when it succeeded)",
            Unit::Seconds,
            operation_duration.clone(),
        );
        Metrics {
            registry: root,
            requests,
            operation_duration,
            tool_calls,
            tool_call_duration,
            upstream_duration,
            build_duration,
            busy_refusals,
            kills,
            call_log_dropped,
            run_queue,
            run_slots_busy,
            sessions,
            catalog,
            tasks,
            open_streams,
            tools: RwLock::new(HashSet::new()),
            upstreams: RwLock::new(HashSet::new()),
            max_tools,
            enabled,
            session_count: Mutex::new(None),
        }
    }

    /// Counts one request of `method` (a fixed MCP method name) that took `elapsed`;
    /// `error` is the JSON-RPC error code when it failed, `Some("tool_error")` for an
    /// `isError` result.
    pub(crate) fn request(
        &self,
        method: &'static str,
        error: Option<&'static str>,
        elapsed: Duration,
    ) {
        if !self.enabled {
            return;
        }
        let outcome = if error.is_some() { "error" } else { "ok" };
        self.requests
            .get_or_create(&RequestLabels { method, outcome })
            .inc();
        self.operation_duration
            .get_or_create(&OperationLabels {
                mcp_method_name: method,
                error_type: error.unwrap_or(""),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// The `tool` label of a call of `name`: its own while there is room under the cap or
    /// it already has one, else [`OTHER`]. `listed` says whether `name` is a live tool the
    /// caller may use; names that are not (unknown, hidden, pending) are always [`OTHER`], so
    /// a client cannot mint label values.
    pub(crate) fn tool_label(&self, name: &str, listed: bool) -> String {
        if !listed || !self.enabled {
            return OTHER.to_owned();
        }
        capped(&self.tools, name, self.max_tools)
    }

    /// Counts one `tools/call` of the tool labelled `tool`.
    pub(crate) fn tool_call(
        &self,
        tool: String,
        source: Source,
        outcome: CallOutcome,
        elapsed: Duration,
    ) {
        if !self.enabled {
            return;
        }
        let (source, outcome) = (source.label(), outcome.label());
        self.tool_calls
            .get_or_create(&ToolCallLabels {
                tool,
                source,
                outcome,
            })
            .inc();
        self.tool_call_duration
            .get_or_create(&ToolDurationLabels { source, outcome })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one request the HTTP front answered with `status` without a handler seeing it
    /// (nothing for a status below 400).
    pub(crate) fn refused(&self, status: u16) {
        if !self.enabled || status < 400 {
            return;
        }
        let outcome = match status {
            400 => "bad_request",
            401 => "unauthorized",
            403 => "forbidden",
            404 => "unknown_session",
            413 => "too_large",
            429 | 503 => "busy",
            402..=499 => "refused",
            _ => "failed",
        };
        self.requests
            .get_or_create(&RequestLabels {
                method: FRONT_METHOD,
                outcome,
            })
            .inc();
    }

    /// Records one Connect upstream call of a tool of manifest `service` (`outcome`: `ok`,
    /// `connect_error` or `failure`).
    pub(crate) fn upstream_call(&self, service: &str, outcome: &'static str, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let upstream = capped(&self.upstreams, service, MAX_UPSTREAMS);
        self.upstream_duration
            .get_or_create(&UpstreamLabels { upstream, outcome })
            .observe(elapsed.as_secs_f64());
    }

    /// Records one environment build.
    pub(crate) fn environment_build(&self, ok: bool, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let outcome = if ok { "ok" } else { "error" };
        self.build_duration
            .get_or_create(&OutcomeLabels { outcome })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a run refused as busy.
    pub(crate) fn busy(&self) {
        if !self.enabled {
            return;
        }
        self.busy_refusals.inc();
    }

    /// Counts a run the sandbox killed.
    pub(crate) fn kill(&self, cause: KillCause) {
        if !self.enabled {
            return;
        }
        let cause = match cause {
            KillCause::Timeout => "timeout",
            KillCause::Cancel => "cancel",
            KillCause::Memory => "memory",
            KillCause::Pids => "pids",
        };
        self.kills.get_or_create(&CauseLabels { cause }).inc();
    }

    /// Counts `rows` call log rows lost for `reason`.
    pub(crate) fn call_log_dropped(&self, reason: CallLogLoss, rows: u64) {
        if !self.enabled {
            return;
        }
        self.call_log_dropped
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc_by(rows);
    }

    /// Sets the run slot and queue gauges.
    pub(crate) fn set_load(&self, load: Load) {
        self.run_slots_busy.set(gauge_value(load.running));
        self.run_queue.set(gauge_value(load.queued));
    }

    /// Sets a catalog size: `kind` is `tool` (with the tool `source`), `resource`,
    /// `resource_template` or `prompt` (source `stored`).
    pub(crate) fn set_catalog(&self, kind: &'static str, source: &'static str, count: usize) {
        self.catalog
            .get_or_create(&CatalogLabels { kind, source })
            .set(gauge_value(count));
    }

    /// Counts an SSE stream of `kind` as open until the guard is dropped.
    pub(crate) fn stream_opened(&self, kind: StreamKind) -> StreamGuard {
        if !self.enabled {
            return StreamGuard(None);
        }
        let kind = match kind {
            StreamKind::Get => "get",
            StreamKind::Post => "post",
        };
        let gauge = self
            .open_streams
            .get_or_create(&StreamLabels { kind })
            .clone();
        gauge.inc();
        StreamGuard(Some(gauge))
    }

    /// Sets the task gauges: `counts` is the store's count by status (`working`,
    /// `input_required`, `completed`, `failed`, `cancelled`); a status it leaves out is 0.
    pub(crate) fn set_tasks(&self, counts: &[(&'static str, u64)]) {
        for status in TASK_STATUSES {
            let n = counts
                .iter()
                .find(|(s, _)| *s == status)
                .map_or(0, |(_, n)| *n);
            self.tasks
                .get_or_create(&StatusLabels { status })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Tells the metrics how to count live HTTP sessions (read at each scrape).
    pub(crate) fn count_sessions_with(&self, count: impl Fn() -> usize + Send + Sync + 'static) {
        *self.session_count.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(count));
    }

    /// The OpenMetrics text of every family, with the session gauge read now.
    pub(crate) fn encode(&self) -> String {
        let sessions = self
            .session_count
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |count| count());
        self.sessions.set(gauge_value(sessions));
        let mut text = String::new();
        // Writing into a String cannot fail; a family that could not encode is left out
        // rather than failing the scrape.
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!(%error, "encoding the metrics failed");
        }
        text
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("max_tools", &self.max_tools)
            .finish_non_exhaustive()
    }
}

/// `name` when it has a label of its own in `admitted` or there is room for one (at most
/// `max`), else [`OTHER`]. A name that got a label keeps it.
fn capped(admitted: &RwLock<HashSet<String>>, name: &str, max: usize) -> String {
    let known = admitted.read().unwrap_or_else(|e| e.into_inner());
    if known.contains(name) {
        return name.to_owned();
    }
    let full = known.len() >= max;
    drop(known);
    if full {
        return OTHER.to_owned();
    }
    let mut known = admitted.write().unwrap_or_else(|e| e.into_inner());
    if known.len() < max {
        known.insert(name.to_owned());
        name.to_owned()
    } else {
        OTHER.to_owned()
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `error_type` of a JSON-RPC error code: its decimal text for the standard codes and
/// the MCP ones we answer, `_OTHER` for the rest (the label stays bounded).
pub(crate) fn error_type(code: i32) -> &'static str {
    match code {
        -32700 => "-32700",
        -32600 => "-32600",
        -32601 => "-32601",
        -32602 => "-32602",
        -32603 => "-32603",
        -32002 => "-32002",
        -32042 => "-32042",
        -32800 => "-32800",
        _ => "_OTHER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_labels_are_capped_and_unlisted_names_are_other() {
        let metrics = Metrics::new(2, true);
        assert_eq!(metrics.tool_label("a", true), "a");
        assert_eq!(metrics.tool_label("nope", false), OTHER);
        assert_eq!(metrics.tool_label("b", true), "b");
        assert_eq!(metrics.tool_label("c", true), OTHER);
        // A tool that got a label keeps it.
        assert_eq!(metrics.tool_label("a", true), "a");
    }

    #[test]
    fn upstream_labels_are_capped() {
        let metrics = Metrics::new(DEFAULT_MAX_TOOLS, true);
        for n in 0..MAX_UPSTREAMS {
            assert_eq!(
                capped(&metrics.upstreams, &format!("s{n}"), MAX_UPSTREAMS),
                format!("s{n}")
            );
        }
        assert_eq!(capped(&metrics.upstreams, "one.more", MAX_UPSTREAMS), OTHER);
        assert_eq!(capped(&metrics.upstreams, "s0", MAX_UPSTREAMS), "s0");
    }

    #[test]
    fn disabled_metrics_record_nothing() {
        let metrics = Metrics::new(DEFAULT_MAX_TOOLS, false);
        metrics.request("tools/list", None, Duration::from_millis(3));
        metrics.kill(KillCause::Timeout);
        assert_eq!(metrics.tool_label("add", true), OTHER);
        let text = metrics.encode();
        assert!(!text.contains("omniforge_requests_total{"), "{text}");
        assert!(!text.contains("omniforge_sandbox_kills_total{"), "{text}");
        assert!(text.contains("omniforge_build_info{"), "{text}");
    }

    #[test]
    fn the_text_is_openmetrics_with_our_families() {
        let metrics = Metrics::new(DEFAULT_MAX_TOOLS, true);
        metrics.request("tools/list", None, Duration::from_millis(3));
        metrics.tool_call(
            "add".into(),
            Source::Stored,
            CallOutcome::ToolError,
            Duration::from_millis(40),
        );
        metrics.kill(KillCause::Timeout);
        metrics.kill(KillCause::Memory);
        metrics.refused(401);
        metrics.refused(200);
        metrics.upstream_call("fixture.v1.FixtureService", "ok", Duration::from_millis(2));
        metrics.set_tasks(&[("working", 2)]);
        metrics.call_log_dropped(CallLogLoss::QueueFull, 3);
        let get = metrics.stream_opened(StreamKind::Get);
        let closed = metrics.stream_opened(StreamKind::Get);
        drop(closed);
        let text = metrics.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in [
            r#"omniforge_requests_total{method="tools/list",outcome="ok"} 1"#,
            r#"omniforge_tool_calls_total{tool="add",source="stored",outcome="tool_error"} 1"#,
            r#"omniforge_sandbox_kills_total{cause="timeout"} 1"#,
            r#"omniforge_sandbox_kills_total{cause="memory"} 1"#,
            r#"omniforge_requests_total{method="unknown",outcome="unauthorized"} 1"#,
            r#"omniforge_upstream_request_duration_seconds_count{upstream="fixture.v1.FixtureService",outcome="ok"} 1"#,
            r#"omniforge_tasks{status="working"} 2"#,
            r#"omniforge_call_log_dropped_total{reason="queue_full"} 3"#,
            r#"omniforge_call_log_dropped_total{reason="write_failed"} 0"#,
            r#"omniforge_tasks{status="cancelled"} 0"#,
            r#"omniforge_open_streams{kind="get"} 1"#,
            r#"omniforge_open_streams{kind="post"} 0"#,
            "# TYPE mcp_server_operation_duration_seconds histogram",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        drop(get);
    }
}
