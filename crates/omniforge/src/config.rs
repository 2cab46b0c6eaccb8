//! Command line, environment and config file, resolved into settings.
//!
//! Two steps, as in ripgrep: [`Cli`] holds the raw flags (clap also reads each flag's
//! `OMNIFORGE_*` environment variable, so a flag beats its variable), then [`Settings`] fills
//! every gap from the TOML config file and finally from the defaults.
//! Precedence: flags > environment > config file > defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use omniforge_server::UpstreamConfig;
use omniforge_server::manifests::ManifestConfig;
use serde::Deserialize;

const EXAMPLES: &str = "\
Examples:
  omniforge serve                                   # Streamable HTTP on http://127.0.0.1:8765/mcp
  omniforge serve --listen 127.0.0.1:9000 --path /mcp
  omniforge serve --listen 0.0.0.0:8765 --token-file tokens.txt --allow-origin https://claude.ai
  omniforge stdio                                   # MCP over stdin/stdout (for Claude Code, VS Code, ...)
  OMNIFORGE_LOG_LEVEL=debug omniforge --config omniforge.toml serve

Every flag can also be set with an OMNIFORGE_* environment variable (e.g. OMNIFORGE_LISTEN)
or in the TOML file given with --config (keys are the flag names with '_' for '-').";

/// OmniForge: an MCP server that hosts tools for AI agents.
#[derive(Debug, Parser)]
#[command(name = "omniforge", version, about, after_help = EXAMPLES)]
pub(crate) struct Cli {
    /// TOML config file; its values sit below flags and environment variables.
    #[arg(long, global = true, env = "OMNIFORGE_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where OmniForge keeps its data [default: the platform data directory + /omniforge,
    /// e.g. $XDG_DATA_HOME/omniforge].
    #[arg(long, global = true, env = "OMNIFORGE_DATA_DIR", value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives
    /// such as `omniforge_server=debug` [default: info,rmcp=error]. Logs go to stderr only.
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_LOG_LEVEL",
        value_name = "FILTER"
    )]
    pub(crate) log_level: Option<String>,
    /// Log line format [default: text].
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_LOG_FORMAT",
        value_name = "FORMAT"
    )]
    pub(crate) log_format: Option<LogFormat>,
    /// Tools per tools/list page [default: 1000]. Large, because several clients ignore nextCursor.
    #[arg(long, global = true, env = "OMNIFORGE_PAGE_SIZE", value_name = "N")]
    pub(crate) page_size: Option<usize>,
    /// How long in-flight tool calls may run after SIGINT/SIGTERM, e.g. 10s [default: 10s].
    #[arg(long, global = true, env = "OMNIFORGE_SHUTDOWN_GRACE", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) shutdown_grace: Option<Duration>,
    /// A forge manifest (gen/mcp/manifest.json) whose RPCs become tools (repeatable; comma-
    /// separated in the environment). Watched: edits reload it and announce list_changed.
    #[arg(
        long,
        global = true,
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
        global = true,
        env = "OMNIFORGE_UPSTREAM",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub(crate) upstream: Vec<String>,
    /// The Authorization header value sent, verbatim, to the upstream at the same position
    /// (repeatable), e.g. "Bearer abc". The MCP client's own token is never forwarded.
    #[arg(
        long,
        visible_alias = "auth-header",
        global = true,
        env = "OMNIFORGE_UPSTREAM_AUTH",
        value_name = "VALUE"
    )]
    pub(crate) upstream_auth: Vec<String>,
    /// Per-call timeout for manifest tools, also sent as Connect-Timeout-Ms [default: 30s].
    #[arg(long, global = true, env = "OMNIFORGE_UPSTREAM_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) upstream_timeout: Option<Duration>,
    /// Inline local $ref/$defs in manifest tool schemas, for strict clients that cannot resolve
    /// references (bounded depth; a cycle is an error naming the tool).
    #[arg(long, global = true, env = "OMNIFORGE_INLINE_SCHEMA_REFS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) inline_schema_refs: Option<bool>,
    /// The Python interpreter script tools run with; resolved to its real executable
    /// (never a shim) [default: python3].
    #[arg(long, global = true, env = "OMNIFORGE_PYTHON", value_name = "PATH")]
    pub(crate) python: Option<PathBuf>,
    /// The uv that builds script environments [default: uv on PATH, else <data-dir>/uv,
    /// installed there from PyPI when missing].
    #[arg(long, global = true, env = "OMNIFORGE_UV", value_name = "PATH")]
    pub(crate) uv: Option<PathBuf>,
    /// Allow installing dependencies from source distributions (their build code then runs
    /// inside the sandbox, with network for the package index); wheels only by default.
    #[arg(long, global = true, env = "OMNIFORGE_ALLOW_SOURCE_BUILDS", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) allow_source_builds: Option<bool>,
    /// Script isolation: strict (refuse to start without namespaces), standard (best
    /// available), off [default: standard].
    #[arg(long, global = true, env = "OMNIFORGE_SANDBOX", value_name = "LEVEL")]
    pub(crate) sandbox: Option<SandboxArg>,
    /// Test only: leave out one sandbox layer although this machine has it (repeatable), so
    /// the escape suite can attack a server without bubblewrap on a machine that has it.
    /// `strict` still refuses to start without a layer it needs. Not in --help.
    #[arg(long = "sandbox-disable-layer", global = true, hide = true, value_name = "LAYER",
          value_parser = ["namespaces", "cgroup-pids", "cgroup-kill", "landlock", "seccomp"])]
    pub(crate) sandbox_disable_layer: Vec<String>,
    /// Hide the authoring built-ins (every `omniforge_*` tool but `omniforge_instructions`
    /// and `omniforge_call_tool`: tools, secrets, resources, templates, prompts).
    #[arg(long, global = true, env = "OMNIFORGE_NO_AUTHORING", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) no_authoring: Option<bool>,
    /// Timeout of a script tool call when the tool sets none [default: 30s].
    #[arg(long, global = true, env = "OMNIFORGE_TOOL_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) tool_timeout: Option<Duration>,
    /// The largest timeout a script tool may set [default: 10m].
    #[arg(long, global = true, env = "OMNIFORGE_MAX_TOOL_TIMEOUT", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) max_tool_timeout: Option<Duration>,
    /// Address-space limit of a script call, in bytes [default: 2147483648].
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_MEMORY_LIMIT_BYTES",
        value_name = "BYTES"
    )]
    pub(crate) memory_limit_bytes: Option<u64>,
    /// Most bytes of text a script call returns to the client [default: 65536].
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_MAX_RESULT_BYTES",
        value_name = "BYTES"
    )]
    pub(crate) max_result_bytes: Option<usize>,
    /// How long the whole output of a cut script result stays readable through its resource
    /// link [default: 1h].
    #[arg(long, global = true, env = "OMNIFORGE_OUTPUT_TTL", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) output_ttl: Option<Duration>,
    /// Rows kept in the call log [default: 10000].
    #[arg(long, global = true, env = "OMNIFORGE_CALL_LOG_ROWS", value_name = "N")]
    pub(crate) call_log_rows: Option<u64>,
    /// How tool schemas are served: as-authored, or conservative (references inlined, single
    /// `type`, no additionalProperties: the subset strict hosts such as Gemini accept)
    /// [default: as-authored].
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_SCHEMA_PROFILE",
        value_name = "PROFILE"
    )]
    pub(crate) schema_profile: Option<SchemaProfileArg>,
    /// What to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve MCP over Streamable HTTP (also GET /healthz).
    Serve(ServeArgs),
    /// Serve MCP over stdin/stdout; the parent process is trusted.
    Stdio,
    /// Serve one manifest's RPCs, and nothing else, over stdio: the drop-in equivalent of
    /// `forge mcp serve` (`omniforge bridge --manifest gen/mcp/manifest.json --addr http://localhost:8080`).
    Bridge,
    /// Report the script sandbox layers this machine provides; exits 0 only when every layer
    /// the chosen --sandbox level needs is present.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove script environments that no tool version uses any more (the server also does
    /// this every hour).
    Gc,
    /// Copy the tool database consistently to FILE (safe while a server runs; FILE must not exist).
    Backup {
        /// Where to write the copy.
        file: PathBuf,
    },
    /// Manage secrets that tool versions declare and receive as environment variables.
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Manage stored tools from the command line. A running server on the same data dir sees
    /// the change within a second and announces list_changed.
    #[command(subcommand)]
    Tool(ToolCommand),
    /// Manage stored resources and resource templates. A running server on the same data dir
    /// sees the change within a second (list_changed, resources/updated to subscribers).
    #[command(subcommand)]
    Resource(ResourceCommand),
    /// Manage stored prompts. A running server on the same data dir sees the change within a second.
    #[command(subcommand)]
    Prompt(PromptCommand),
    /// Import or export packs: one TOML or JSON file of tools, resources and prompts.
    #[command(subcommand)]
    Pack(PackCommand),
}

/// `omniforge resource ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ResourceCommand {
    /// List stored resources and resource templates.
    List,
    /// Print a resource (URI) or template (URI template) as the arguments that create it.
    Show {
        /// The URI or URI template.
        key: String,
    },
    /// Create or replace a resource or template from a JSON file holding the arguments of
    /// omniforge_create_resource (with `uri`) or omniforge_create_resource_template (with `uriTemplate`).
    Add {
        /// The JSON file.
        file: PathBuf,
    },
    /// Remove a resource (by URI) or a template (by URI template).
    Rm {
        /// The URI or URI template.
        key: String,
    },
}

/// `omniforge prompt ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum PromptCommand {
    /// List stored prompts.
    List,
    /// Print a prompt as the arguments that create it.
    Show {
        /// Prompt name.
        name: String,
    },
    /// Create or replace a prompt from a JSON file holding the arguments of omniforge_create_prompt.
    Add {
        /// The JSON file.
        file: PathBuf,
    },
    /// Remove a prompt.
    Rm {
        /// Prompt name.
        name: String,
    },
}

/// `omniforge pack ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum PackCommand {
    /// Import a pack (.toml or .json): all of it, or nothing when any entry is wrong (every
    /// error is listed). Entries already stored exactly so are left alone.
    Import {
        /// The pack file.
        file: PathBuf,
    },
    /// Export every enabled tool, resource, template and prompt as a pack.
    Export {
        /// Write here (.toml or .json by extension) instead of JSON on stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// `omniforge tool ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum ToolCommand {
    /// List the enabled stored tools, most recently updated first.
    List,
    /// Show a tool's current version: code, schemas, dependencies, lock, limits.
    Show {
        /// Tool name.
        name: String,
    },
    /// List a tool's versions.
    History {
        /// Tool name.
        name: String,
    },
    /// Create a tool from a JSON file holding the arguments of omniforge_create_tool
    /// (see examples/tools/).
    Add {
        /// The JSON file.
        file: PathBuf,
    },
    /// Add a version from a JSON file holding the arguments of omniforge_update_tool; fields
    /// left out are kept.
    Edit {
        /// Tool name.
        name: String,
        /// The JSON file.
        file: PathBuf,
    },
    /// Enable a disabled tool.
    Enable {
        /// Tool name.
        name: String,
    },
    /// Disable a tool (its history is kept).
    Disable {
        /// Tool name.
        name: String,
    },
    /// Remove a tool and its history.
    Rm {
        /// Tool name.
        name: String,
    },
    /// Make an earlier version current.
    Rollback {
        /// Tool name.
        name: String,
        /// Version number.
        version: u32,
    },
    /// Run a tool once with JSON arguments and print its result; exits 1 when it is an error.
    Run {
        /// Tool name.
        name: String,
        /// Arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

/// `omniforge secret ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum SecretCommand {
    /// Store a secret; its value is read from stdin (so it stays out of shell history).
    Set {
        /// Name: letters, digits and _, not starting with a digit.
        name: String,
    },
    /// Remove a secret.
    Rm {
        /// Name.
        name: String,
    },
    /// List secret names (never values).
    List,
}

/// A one-shot command instead of a server.
#[derive(Debug)]
pub(crate) enum Maintenance {
    /// `doctor`.
    Doctor {
        /// JSON output.
        json: bool,
    },
    /// `gc`.
    Gc,
    /// `backup FILE`.
    Backup(PathBuf),
    /// `secret ...`.
    Secret(SecretCommand),
    /// `tool ...`.
    Tool(ToolCommand),
    /// `resource ...`.
    Resource(ResourceCommand),
    /// `prompt ...`.
    Prompt(PromptCommand),
    /// `pack ...`.
    Pack(PackCommand),
}

/// Flags of `omniforge serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
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

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write durations like 30s, 5m or 1h30m)"))
}

/// The config file: the same keys as the flags, with `_` for `-`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data_dir: Option<PathBuf>,
    log_level: Option<String>,
    log_format: Option<LogFormat>,
    page_size: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    shutdown_grace: Option<Duration>,
    #[serde(default)]
    manifest: Vec<FileManifest>,
    #[serde(default, with = "humantime_serde_opt")]
    upstream_timeout: Option<Duration>,
    inline_schema_refs: Option<bool>,
    python: Option<PathBuf>,
    uv: Option<PathBuf>,
    allow_source_builds: Option<bool>,
    sandbox: Option<SandboxArg>,
    no_authoring: Option<bool>,
    #[serde(default, with = "humantime_serde_opt")]
    tool_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    max_tool_timeout: Option<Duration>,
    memory_limit_bytes: Option<u64>,
    max_result_bytes: Option<usize>,
    call_log_rows: Option<u64>,
    schema_profile: Option<SchemaProfileArg>,
    #[serde(default, with = "humantime_serde_opt")]
    output_ttl: Option<Duration>,
    listen: Option<SocketAddr>,
    path: Option<String>,
    stateless: Option<bool>,
    #[serde(default)]
    allow_origin: Vec<String>,
    #[serde(default)]
    allow_host: Vec<String>,
    token_file: Option<PathBuf>,
    insecure_no_auth: Option<bool>,
    max_body_bytes: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    session_idle_timeout: Option<Duration>,
}

/// A `[[manifest]]` entry of the config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileManifest {
    path: PathBuf,
    #[serde(default)]
    upstream: String,
    auth_header: Option<String>,
    #[serde(default, with = "humantime_serde_opt")]
    timeout: Option<Duration>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

/// Durations in the config file are strings like "30s".
mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        super::parse_duration(&s)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// Settings every command shares.
#[derive(Debug)]
pub(crate) struct Common {
    /// Data directory (created if missing).
    pub(crate) data_dir: PathBuf,
    /// Log filter.
    pub(crate) log_level: String,
    /// Log format.
    pub(crate) log_format: LogFormat,
    /// Tools per tools/list page.
    pub(crate) page_size: usize,
    /// Grace period for in-flight calls at shutdown.
    pub(crate) shutdown_grace: Duration,
    /// Forge manifests to serve, each with its upstream.
    pub(crate) manifests: Vec<ManifestConfig>,
    /// Inline `$ref`s in manifest tool schemas.
    pub(crate) inline_schema_refs: bool,
    /// Script tools.
    pub(crate) scripts: Scripts,
    /// How tool schemas are served.
    pub(crate) schema_profile: SchemaProfileArg,
}

/// Settings of script tools.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) python: PathBuf,
    pub(crate) uv: Option<PathBuf>,
    pub(crate) allow_source_builds: bool,
    pub(crate) sandbox: SandboxArg,
    /// Layers left out for tests (`--sandbox-disable-layer`).
    pub(crate) disabled_layers: Vec<String>,
    pub(crate) authoring: bool,
    pub(crate) tool_timeout: Duration,
    pub(crate) max_tool_timeout: Duration,
    pub(crate) memory_limit_bytes: u64,
    pub(crate) max_result_bytes: usize,
    pub(crate) call_log_rows: u64,
    pub(crate) output_ttl: Duration,
}

/// Settings of `serve`.
#[derive(Debug)]
pub(crate) struct Serve {
    /// Listen address.
    pub(crate) listen: SocketAddr,
    /// MCP endpoint path, starting with `/`.
    pub(crate) path: String,
    /// No sessions.
    pub(crate) stateless: bool,
    /// Extra allowed origins.
    pub(crate) allow_origin: Vec<String>,
    /// Extra allowed hosts.
    pub(crate) allow_host: Vec<String>,
    /// Token file.
    pub(crate) token_file: Option<PathBuf>,
    /// Allow a non-loopback bind without tokens.
    pub(crate) insecure_no_auth: bool,
    /// Body limit.
    pub(crate) max_body_bytes: usize,
    /// Idle session lifetime.
    pub(crate) session_idle_timeout: Duration,
}

/// Everything resolved.
#[derive(Debug)]
pub(crate) struct Settings {
    /// `bridge`: serve only the manifest's tools.
    pub(crate) bridge_only: bool,
    /// `doctor`, `gc`, `backup`: run it and exit.
    pub(crate) maintenance: Option<Maintenance>,
    /// Shared settings.
    pub(crate) common: Common,
    /// `Some` for `serve`.
    pub(crate) serve: Option<Serve>,
}

impl Settings {
    /// Resolves `cli` against the config file it names (if any) and the defaults.
    ///
    /// # Errors
    /// An unreadable or invalid config file, or a value that makes no sense.
    pub(crate) fn resolve(cli: Cli) -> Result<Settings> {
        let file = match &cli.config {
            Some(path) => read_config(path)?,
            None => FileConfig::default(),
        };
        let data_dir = match cli.data_dir.or(file.data_dir) {
            Some(dir) => dir,
            None => dirs::data_dir()
                .context("no platform data directory; pass --data-dir")?
                .join("omniforge"),
        };
        // Paths handed to subprocesses (uv runs in other directories, the sandbox binds paths)
        // must not depend on the working directory.
        let data_dir = absolute(data_dir)?;
        let common = Common {
            data_dir,
            log_level: cli.log_level.or(file.log_level).unwrap_or_else(|| {
                // One-shot commands print their own output; only problems are logged.
                let one_shot = matches!(
                    cli.command,
                    Command::Doctor { .. }
                        | Command::Gc
                        | Command::Backup { .. }
                        | Command::Secret(_)
                        | Command::Tool(_)
                        | Command::Resource(_)
                        | Command::Prompt(_)
                        | Command::Pack(_)
                );
                if one_shot {
                    "warn".into()
                } else {
                    "info,rmcp=error".into()
                }
            }),
            log_format: cli
                .log_format
                .or(file.log_format)
                .unwrap_or(LogFormat::Text),
            page_size: cli.page_size.or(file.page_size).unwrap_or(1000),
            schema_profile: cli
                .schema_profile
                .or(file.schema_profile)
                .unwrap_or(SchemaProfileArg::AsAuthored),
            scripts: Scripts {
                python: cli
                    .python
                    .or(file.python)
                    .unwrap_or_else(|| PathBuf::from("python3")),
                uv: cli.uv.or(file.uv).map(absolute).transpose()?,
                allow_source_builds: cli
                    .allow_source_builds
                    .or(file.allow_source_builds)
                    .unwrap_or(false),
                sandbox: cli.sandbox.or(file.sandbox).unwrap_or(SandboxArg::Standard),
                disabled_layers: cli.sandbox_disable_layer,
                authoring: !cli.no_authoring.or(file.no_authoring).unwrap_or(false),
                tool_timeout: cli
                    .tool_timeout
                    .or(file.tool_timeout)
                    .unwrap_or(Duration::from_secs(30)),
                max_tool_timeout: cli
                    .max_tool_timeout
                    .or(file.max_tool_timeout)
                    .unwrap_or(Duration::from_secs(600)),
                memory_limit_bytes: cli
                    .memory_limit_bytes
                    .or(file.memory_limit_bytes)
                    .unwrap_or(2 << 30),
                max_result_bytes: cli
                    .max_result_bytes
                    .or(file.max_result_bytes)
                    .unwrap_or(64 * 1024),
                call_log_rows: cli.call_log_rows.or(file.call_log_rows).unwrap_or(10_000),
                output_ttl: cli
                    .output_ttl
                    .or(file.output_ttl)
                    .unwrap_or(Duration::from_secs(3600)),
            },
            inline_schema_refs: cli
                .inline_schema_refs
                .or(file.inline_schema_refs)
                .unwrap_or(false),
            manifests: manifests(
                &cli.manifest,
                &cli.upstream,
                &cli.upstream_auth,
                cli.upstream_timeout,
                file.manifest,
                file.upstream_timeout,
            )?,
            shutdown_grace: cli
                .shutdown_grace
                .or(file.shutdown_grace)
                .unwrap_or(Duration::from_secs(10)),
        };
        if common.page_size == 0 {
            bail!("--page-size must be at least 1");
        }
        let bridge_only = matches!(cli.command, Command::Bridge);
        let mut maintenance = None;
        let serve = match cli.command {
            Command::Bridge if common.manifests.len() != 1 => {
                bail!("bridge serves exactly one manifest: give --manifest PATH (and --addr URL)")
            }
            Command::Stdio | Command::Bridge => None,
            Command::Doctor { json } => {
                maintenance = Some(Maintenance::Doctor { json });
                None
            }
            Command::Gc => {
                maintenance = Some(Maintenance::Gc);
                None
            }
            Command::Backup { file } => {
                maintenance = Some(Maintenance::Backup(file));
                None
            }
            Command::Secret(command) => {
                maintenance = Some(Maintenance::Secret(command));
                None
            }
            Command::Resource(command) => {
                maintenance = Some(Maintenance::Resource(command));
                None
            }
            Command::Prompt(command) => {
                maintenance = Some(Maintenance::Prompt(command));
                None
            }
            Command::Pack(command) => {
                maintenance = Some(Maintenance::Pack(command));
                None
            }
            Command::Tool(command) => {
                maintenance = Some(Maintenance::Tool(command));
                None
            }
            Command::Serve(args) => {
                let path = args.path.or(file.path).unwrap_or_else(|| "/mcp".into());
                if !path.starts_with('/') || path == "/healthz" {
                    bail!("--path must start with '/' and must not be /healthz (got {path:?})");
                }
                Some(Serve {
                    listen: args
                        .listen
                        .or(file.listen)
                        .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8765))),
                    path,
                    stateless: args.stateless.or(file.stateless).unwrap_or(false),
                    allow_origin: if args.allow_origin.is_empty() {
                        file.allow_origin
                    } else {
                        args.allow_origin
                    },
                    allow_host: if args.allow_host.is_empty() {
                        file.allow_host
                    } else {
                        args.allow_host
                    },
                    token_file: args.token_file.or(file.token_file),
                    insecure_no_auth: args
                        .insecure_no_auth
                        .or(file.insecure_no_auth)
                        .unwrap_or(false),
                    max_body_bytes: args
                        .max_body_bytes
                        .or(file.max_body_bytes)
                        .unwrap_or(4 * 1024 * 1024),
                    session_idle_timeout: args
                        .session_idle_timeout
                        .or(file.session_idle_timeout)
                        .unwrap_or(Duration::from_secs(300)),
                })
            }
        };
        Ok(Settings {
            bridge_only,
            maintenance,
            common,
            serve,
        })
    }
}

/// Pairs each `--manifest` with the `--upstream`/`--upstream-auth` at the same position; the
/// config file's `[[manifest]]` entries apply when no `--manifest` is given.
fn manifests(
    paths: &[PathBuf],
    upstreams: &[String],
    auths: &[String],
    timeout: Option<Duration>,
    file: Vec<FileManifest>,
    file_timeout: Option<Duration>,
) -> Result<Vec<ManifestConfig>> {
    let default_timeout = timeout.or(file_timeout).unwrap_or(Duration::from_secs(30));
    if paths.is_empty() {
        if !upstreams.is_empty() && file.is_empty() {
            bail!(
                "--upstream needs a --manifest (one --upstream per --manifest, in the same order)"
            );
        }
        return Ok(file
            .into_iter()
            .map(|m| ManifestConfig {
                path: m.path,
                upstream: UpstreamConfig {
                    base_url: m.upstream,
                    auth_header: m.auth_header,
                    timeout: timeout.or(m.timeout).unwrap_or(default_timeout),
                    headers: m.headers.into_iter().collect(),
                },
            })
            .collect());
    }
    if upstreams.len() > paths.len() || auths.len() > paths.len() {
        bail!(
            "give at most one --upstream and one --upstream-auth per --manifest, in the same order"
        );
    }
    Ok(paths
        .iter()
        .enumerate()
        .map(|(i, path)| ManifestConfig {
            path: path.clone(),
            upstream: UpstreamConfig {
                base_url: upstreams.get(i).cloned().unwrap_or_default(),
                auth_header: auths.get(i).cloned(),
                timeout: default_timeout,
                headers: Vec::new(),
            },
        })
        .collect())
}

/// `path` made absolute against the working directory (not resolving symlinks).
fn absolute(path: PathBuf) -> Result<PathBuf> {
    std::path::absolute(&path).with_context(|| format!("making {} absolute", path.display()))
}

fn read_config(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &[&str]) -> Result<Settings> {
        Settings::resolve(Cli::try_parse_from(args)?)
    }

    #[test]
    fn defaults() {
        let s = resolve(&["omniforge", "--data-dir", "/tmp/x", "serve"]).unwrap();
        let serve = s.serve.unwrap();
        assert_eq!(serve.listen.to_string(), "127.0.0.1:8765");
        assert_eq!(serve.path, "/mcp");
        assert_eq!(s.common.page_size, 1000);
        assert_eq!(s.common.shutdown_grace, Duration::from_secs(10));
        assert!(!serve.stateless);
    }

    #[test]
    fn flags_beat_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9001\"\npath = \"/x\"\nshutdown_grace = \"1m\"\nallow_origin = [\"https://a.example\"]\n",
        )
        .unwrap();
        let c = file.to_str().unwrap();
        let s = resolve(&[
            "omniforge",
            "--config",
            c,
            "--data-dir",
            "/tmp/x",
            "serve",
            "--path",
            "/y",
        ])
        .unwrap();
        let serve = s.serve.unwrap();
        assert_eq!(serve.listen.to_string(), "127.0.0.1:9001");
        assert_eq!(serve.path, "/y");
        assert_eq!(serve.allow_origin, ["https://a.example"]);
        assert_eq!(s.common.shutdown_grace, Duration::from_secs(60));
    }

    #[test]
    fn bad_values_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "lisen = \"x\"\n").unwrap();
        let err = resolve(&["omniforge", "--config", file.to_str().unwrap(), "stdio"]).unwrap_err();
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
        let err =
            Cli::try_parse_from(["omniforge", "--shutdown-grace", "ten", "stdio"]).unwrap_err();
        assert!(err.to_string().contains("30s"), "{err}");
    }
}
