//! The option groups, as raw flags: each subcommand flattens the groups it uses, and the top
//! level takes every group but the HTTP one (so `omniforge [OPTIONS] serve` keeps working).
//!
//! Every field is an `Option` (or an empty `Vec`): "not given" must stay distinguishable from a
//! default, because the config file and the defaults fill the gaps later ([`super::hiargs`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde::Deserialize;

/// Options of the commands that serve MCP (`serve`, `stdio`, `bridge`).
#[derive(Debug, Default, Args)]
pub(crate) struct ServerOptions {
    /// Log line format [default: text].
    #[arg(long, env = "OMNIFORGE_LOG_FORMAT", value_name = "FORMAT")]
    pub(crate) log_format: Option<LogFormat>,
    /// Tools per tools/list page [default: 1000]. Large, because several clients ignore nextCursor.
    #[arg(long, env = "OMNIFORGE_PAGE_SIZE", value_name = "N")]
    pub(crate) page_size: Option<usize>,
    /// How long in-flight tool calls may run after SIGINT/SIGTERM, e.g. 10s [default: 10s].
    #[arg(long, env = "OMNIFORGE_SHUTDOWN_GRACE", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) shutdown_grace: Option<Duration>,
    /// How tool schemas are served: as-authored, or conservative (references inlined, single
    /// `type`, no additionalProperties: the subset strict hosts such as Gemini accept)
    /// [default: as-authored].
    #[arg(long, env = "OMNIFORGE_SCHEMA_PROFILE", value_name = "PROFILE")]
    pub(crate) schema_profile: Option<SchemaProfileArg>,
    /// The most tools that get a `tool` label of their own in /metrics; calls of the others
    /// count as tool="other" [default: 200].
    #[arg(long, env = "OMNIFORGE_METRICS_MAX_TOOLS", value_name = "N")]
    pub(crate) metrics_max_tools: Option<usize>,
    /// Record Prometheus metrics [default: true]; --metrics=false leaves /metrics with the
    /// build info only.
    #[arg(long, env = "OMNIFORGE_METRICS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) metrics: Option<bool>,
    /// Export trace spans over OTLP/HTTP (protobuf) to this collector base URL, e.g.
    /// http://127.0.0.1:4318 (/v1/traces is appended). Nothing is exported without it.
    #[arg(long, env = "OMNIFORGE_OTLP_ENDPOINT", value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,
}

/// Forge manifests and their Connect upstreams.
#[derive(Debug, Default, Args)]
pub(crate) struct ManifestOptions {
    /// A forge manifest (gen/mcp/manifest.json) whose RPCs become tools (repeatable;
    /// comma-separated in the environment). Watched: edits reload it and announce list_changed.
    #[arg(
        long,
        env = "OMNIFORGE_MANIFEST",
        value_delimiter = ',',
        value_name = "PATH"
    )]
    pub(crate) manifest: Vec<PathBuf>,
    /// The Connect service base URL for the manifest at the same position (repeatable),
    /// e.g. http://127.0.0.1:8080. Without one, each call of that manifest's tools returns a
    /// clear configuration error.
    #[arg(
        long,
        visible_alias = "addr",
        env = "OMNIFORGE_UPSTREAM",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub(crate) upstream: Vec<String>,
    /// The Authorization header value sent, verbatim, to the upstream at the same position
    /// (repeatable), e.g. "Bearer abc". A command line is visible to other processes: prefer
    /// --upstream-auth-file or the environment variable. The MCP client's own token is never
    /// forwarded.
    #[arg(
        long,
        visible_alias = "auth-header",
        env = "OMNIFORGE_UPSTREAM_AUTH",
        hide_env_values = true,
        value_name = "VALUE"
    )]
    pub(crate) upstream_auth: Vec<String>,
    /// A file holding the Authorization header value for the upstream at the same position
    /// (repeatable; comma-separated in the environment): its first line, e.g. "Bearer abc".
    #[arg(
        long,
        env = "OMNIFORGE_UPSTREAM_AUTH_FILE",
        value_delimiter = ',',
        value_name = "FILE"
    )]
    pub(crate) upstream_auth_file: Vec<PathBuf>,
    /// Per-call timeout for manifest tools, also sent as Connect-Timeout-Ms [default: 30s].
    #[arg(long, env = "OMNIFORGE_UPSTREAM_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) upstream_timeout: Option<Duration>,
    /// The largest upstream response body accepted for a manifest tool call, in bytes
    /// [default: 16777216]; past it the call is an error result naming the cap, and the body is
    /// not read further.
    #[arg(long, env = "OMNIFORGE_UPSTREAM_MAX_RESPONSE_BYTES", value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) upstream_max_response_bytes: Option<u64>,
    /// Inline local $ref/$defs in manifest tool schemas, for strict clients that cannot resolve
    /// references (bounded depth; a cycle is an error naming the tool).
    #[arg(long, env = "OMNIFORGE_INLINE_SCHEMA_REFS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) inline_schema_refs: Option<bool>,
}

/// The interpreter and the uv that script environments are built with.
#[derive(Debug, Default, Args)]
pub(crate) struct InterpreterOptions {
    /// The Python interpreter script tools run with; resolved to its real executable
    /// (never a shim) [default: python3].
    #[arg(long, env = "OMNIFORGE_PYTHON", value_name = "PATH")]
    pub(crate) python: Option<PathBuf>,
    /// The uv that builds script environments [default: uv on PATH, else <data-dir>/uv,
    /// installed there from PyPI when missing].
    #[arg(long, env = "OMNIFORGE_UV", value_name = "PATH")]
    pub(crate) uv: Option<PathBuf>,
}

/// The script sandbox level.
#[derive(Debug, Default, Args)]
pub(crate) struct SandboxOptions {
    /// Script isolation: strict (refuse to start without namespaces), standard (best
    /// available), off [default: standard].
    #[arg(long, env = "OMNIFORGE_SANDBOX", value_name = "LEVEL")]
    pub(crate) sandbox: Option<SandboxArg>,
    /// Test only: leave out one sandbox layer although this machine has it (repeatable), so
    /// the escape suite can attack a server without bubblewrap on a machine that has it.
    /// `strict` still refuses to start without a layer it needs. Not in --help.
    #[arg(long = "sandbox-disable-layer", hide = true, value_name = "LAYER",
          value_parser = ["namespaces", "cgroup-pids", "cgroup-kill", "cgroup-memory", "landlock", "seccomp"])]
    pub(crate) sandbox_disable_layer: Vec<String>,
}

/// What a new tool version (or script-backed template or prompt) is built and stamped with.
#[derive(Debug, Default, Args)]
pub(crate) struct AuthoringOptions {
    /// Allow installing dependencies from source distributions (their build code then runs
    /// inside the sandbox, with network for the package index); wheels only by default.
    #[arg(long, env = "OMNIFORGE_ALLOW_SOURCE_BUILDS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) allow_source_builds: Option<bool>,
    /// Timeout of a script tool call when the tool sets none [default: 30s].
    #[arg(long, env = "OMNIFORGE_TOOL_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) tool_timeout: Option<Duration>,
    /// The largest timeout a script tool may set [default: 10m].
    #[arg(long, env = "OMNIFORGE_MAX_TOOL_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) max_tool_timeout: Option<Duration>,
    /// Memory limit of a script call, in bytes: the address space of each of its processes
    /// and, where the sandbox has the cgroup-memory layer, the memory of its whole process
    /// tree [default: 2147483648].
    #[arg(long, env = "OMNIFORGE_MEMORY_LIMIT_BYTES", value_name = "BYTES")]
    pub(crate) memory_limit_bytes: Option<u64>,
    /// Keep a tool version whose examples fail as a draft (never current) instead of refusing
    /// it; an authoring call's keepFailedDrafts overrides it.
    #[arg(long, env = "OMNIFORGE_KEEP_FAILED_DRAFTS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) keep_failed_drafts: Option<bool>,
}

/// How script calls are answered and logged.
#[derive(Debug, Default, Args)]
pub(crate) struct CallOptions {
    /// Most bytes of text a script call returns to the client [default: 65536].
    #[arg(long, env = "OMNIFORGE_MAX_RESULT_BYTES", value_name = "BYTES")]
    pub(crate) max_result_bytes: Option<usize>,
    /// Rows kept in the call log [default: 10000].
    #[arg(long, env = "OMNIFORGE_CALL_LOG_ROWS", value_name = "N")]
    pub(crate) call_log_rows: Option<u64>,
    /// Call log rows waiting to be written at most: calls queue their rows and one writer
    /// commits them in batches; past this, rows are dropped (never calls) and counted in
    /// omniforge_call_log_dropped_total [default: 4096].
    #[arg(long, env = "OMNIFORGE_CALL_LOG_QUEUE", value_name = "N")]
    pub(crate) call_log_queue: Option<usize>,
    /// How long a call-log batch gathers rows before its one commit: what kill -9 may lose
    /// [default: 20ms].
    #[arg(long, env = "OMNIFORGE_CALL_LOG_BATCH_WAIT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) call_log_batch_wait: Option<Duration>,
}

/// What a long-running server offers besides the tools themselves (`serve`, `stdio`).
#[derive(Debug, Default, Args)]
pub(crate) struct HostingOptions {
    /// Hide the authoring built-ins (every `omniforge_*` tool but `omniforge_instructions`
    /// and `omniforge_call_tool`: tools, secrets, resources, templates, prompts).
    #[arg(long, env = "OMNIFORGE_NO_AUTHORING", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) no_authoring: Option<bool>,
    /// The approval gate: a tool version created or updated by a principal without the
    /// `admin` scope is pending (seen and called by its author only, without secrets) until
    /// an admin approves it (`omniforge tool approve`, `omniforge_approve_tool`).
    #[arg(long, env = "OMNIFORGE_REQUIRE_APPROVAL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) require_approval: Option<bool>,
    /// How long the whole output of a cut script result stays readable through its resource
    /// link [default: 1h].
    #[arg(long, env = "OMNIFORGE_OUTPUT_TTL", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) output_ttl: Option<Duration>,
    /// How long audit records are kept: older ones are pruned at start and hourly, one replica
    /// at a time, and each prune is itself audited [default: keep everything].
    #[arg(long, env = "OMNIFORGE_AUDIT_RETENTION", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) audit_retention: Option<Duration>,
    /// How long a durable task is kept from its creation (never shorter than its call's
    /// timeout); a task still running then is stopped and failed [default: 24h].
    #[arg(long, env = "OMNIFORGE_TASK_TTL", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) task_ttl: Option<Duration>,
    /// How long a task's lease holds without renewal: a task whose server died reads failed
    /// at most this plus a third after its last renewal [default: 30s].
    #[arg(long, env = "OMNIFORGE_TASK_LEASE", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) task_lease: Option<Duration>,
    /// The keys that sign the requestState of input-required results (protocol 2026-07-28):
    /// one `ID BASE64KEY` line per key (32 random bytes), mode 0600; the first signs, every
    /// one opens, so replicas roll keys without a stop. Replicas must share it
    /// [default: <data-dir>/request-state.key, made with one key on first use].
    #[arg(long, env = "OMNIFORGE_REQUEST_STATE_KEY_FILE", value_name = "FILE")]
    pub(crate) request_state_key_file: Option<PathBuf>,
    /// Warm templates at most: a stored tool's calls fork from an interpreter that already
    /// started in the sandbox and imported the tool's dependencies (one template per tool
    /// version and calling principal); 0 turns the pool off and every call starts cold
    /// [default: 8].
    #[arg(long, env = "OMNIFORGE_WARM_POOL", value_name = "N")]
    pub(crate) warm_pool: Option<usize>,
    /// A warm template unused for this long is stopped [default: 10m].
    #[arg(long, env = "OMNIFORGE_WARM_IDLE", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) warm_idle: Option<Duration>,
}

/// Streamable HTTP (`serve` only).
#[derive(Debug, Default, Args)]
pub(crate) struct HttpOptions {
    /// Address to listen on [default: 127.0.0.1:8765]. Port 0 picks a free port.
    #[arg(long, env = "OMNIFORGE_LISTEN", value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// Path of the MCP endpoint [default: /mcp].
    #[arg(long, env = "OMNIFORGE_PATH", value_name = "PATH")]
    pub(crate) path: Option<String>,
    /// Serve without sessions, so that any replica can answer any request.
    #[arg(long, env = "OMNIFORGE_STATELESS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) stateless: Option<bool>,
    /// A browser Origin to allow besides loopback ones (repeatable; comma-separated in the
    /// environment), e.g. https://claude.ai.
    #[arg(
        long,
        env = "OMNIFORGE_ALLOW_ORIGIN",
        value_delimiter = ',',
        value_name = "ORIGIN"
    )]
    pub(crate) allow_origin: Vec<String>,
    /// A Host header value to accept, e.g. mcp.example.com or proxy-upstream:8000 (repeatable).
    /// Turns the Host check on for any bind address; behind a reverse proxy, list the Host it sends.
    #[arg(
        long,
        env = "OMNIFORGE_ALLOW_HOST",
        value_delimiter = ',',
        value_name = "HOST"
    )]
    pub(crate) allow_host: Vec<String>,
    /// Bearer tokens, one `NAME TOKEN SCOPES` line each (scopes: tools:call, tools:write, admin).
    #[arg(long, env = "OMNIFORGE_TOKEN_FILE", value_name = "FILE")]
    pub(crate) token_file: Option<PathBuf>,
    /// Allow a non-loopback bind without tokens (anyone who can reach the port gets admin).
    #[arg(long, env = "OMNIFORGE_INSECURE_NO_AUTH", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) insecure_no_auth: Option<bool>,
    /// Largest request body in bytes [default: 4194304]; larger bodies get 413.
    #[arg(long, env = "OMNIFORGE_MAX_BODY_BYTES", value_name = "BYTES")]
    pub(crate) max_body_bytes: Option<usize>,
    /// How long an idle HTTP session lives, e.g. 5m [default: 5m]; then its id gets 404.
    #[arg(long, env = "OMNIFORGE_SESSION_IDLE_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) session_idle_timeout: Option<Duration>,
    /// Most live HTTP sessions [default: 1000]; past it a new session gets 503 and existing
    /// sessions go on.
    #[arg(long, env = "OMNIFORGE_MAX_SESSIONS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_sessions: Option<u32>,
    /// How long a connection may take to send a request's whole head, from when it opens or
    /// from the first byte of a later request, e.g. 30s [default: 30s]; then it is closed.
    #[arg(long, env = "OMNIFORGE_HEADER_READ_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) header_read_timeout: Option<Duration>,
    /// How long a connection with no request in flight and nothing received stays open
    /// [default: 75s].
    #[arg(long, env = "OMNIFORGE_KEEP_ALIVE_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) keep_alive_timeout: Option<Duration>,
    /// Most open HTTP connections [default: 1024]; past it new connections wait until one
    /// closes.
    #[arg(long, env = "OMNIFORGE_MAX_CONNECTIONS", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_connections: Option<u32>,
    /// Once the server accepts connections, write the MCP endpoint's URL and a newline
    /// (e.g. "http://127.0.0.1:43125/mcp") to FILE, atomically (a temporary file renamed into
    /// place): the readiness signal for supervisors and tests that listen on port 0. Removed at
    /// exit.
    #[arg(long, env = "OMNIFORGE_READY_FILE", value_name = "FILE")]
    pub(crate) ready_file: Option<PathBuf>,
    /// Also serve GET /metrics on ADDR without authentication, for a Prometheus scraper
    /// (bind a loopback or private address). On the MCP listener /metrics needs `admin`.
    #[arg(long, env = "OMNIFORGE_METRICS_LISTEN", value_name = "ADDR")]
    pub(crate) metrics_listen: Option<SocketAddr>,
}

/// Every group that the top level takes, merged with a subcommand's.
#[derive(Debug, Default)]
pub(crate) struct Options {
    pub(crate) server: ServerOptions,
    pub(crate) manifests: ManifestOptions,
    pub(crate) interpreter: InterpreterOptions,
    pub(crate) sandbox: SandboxOptions,
    pub(crate) authoring: AuthoringOptions,
    pub(crate) calls: CallOptions,
    pub(crate) hosting: HostingOptions,
}

/// Replaces what was given earlier (before the subcommand) with what was given later (after
/// it), field by field: a value given after the subcommand wins, a list given there replaces
/// the earlier list.
pub(crate) trait Overlay {
    /// Overlays `later` onto `self`.
    fn overlay(&mut self, later: Self);
}

impl<T> Overlay for Option<T> {
    fn overlay(&mut self, later: Self) {
        if later.is_some() {
            *self = later;
        }
    }
}

impl<T> Overlay for Vec<T> {
    fn overlay(&mut self, later: Self) {
        if !later.is_empty() {
            *self = later;
        }
    }
}

/// `impl Overlay` for a group: every field in turn.
macro_rules! overlay_fields {
    ($($group:ident { $($field:ident),* $(,)? })*) => {$(
        impl Overlay for $group {
            fn overlay(&mut self, later: Self) {
                $(self.$field.overlay(later.$field);)*
            }
        }
    )*};
}

overlay_fields! {
    ServerOptions { log_format, page_size, shutdown_grace, schema_profile, metrics, metrics_max_tools, otlp_endpoint }
    ManifestOptions { manifest, upstream, upstream_auth, upstream_auth_file, upstream_timeout, upstream_max_response_bytes, inline_schema_refs }
    InterpreterOptions { python, uv }
    SandboxOptions { sandbox, sandbox_disable_layer }
    AuthoringOptions { allow_source_builds, tool_timeout, max_tool_timeout, memory_limit_bytes, keep_failed_drafts }
    CallOptions { max_result_bytes, call_log_rows, call_log_queue, call_log_batch_wait }
    HostingOptions { no_authoring, require_approval, output_ttl, audit_retention, task_ttl, task_lease, request_state_key_file, warm_pool, warm_idle }
}

/// How tool schemas are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SchemaProfileArg {
    /// As their authors wrote them.
    AsAuthored,
    /// The subset strict hosts accept.
    Conservative,
}

/// Script isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SandboxArg {
    /// Refuse to start without the namespace layer.
    Strict,
    /// The best layers this machine has.
    Standard,
    /// Process group and rlimits only.
    Off,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// A duration written like `30s`, `5m` or `1h30m`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write durations like 30s, 5m or 1h30m)"))
}
