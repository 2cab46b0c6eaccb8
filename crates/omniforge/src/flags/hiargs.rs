//! Resolved settings: the raw flags ([`LowArgs`]) with every gap filled from the config file
//! and then from the defaults, checked, and with credential files read.
//!
//! Precedence: flags > `OMNIFORGE_*` environment > config file > defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use omniforge_server::{DEFAULT_MAX_RESPONSE_BYTES, UpstreamConfig};
use omniforge_server::{HttpSettings, ManifestConfig};
use omniforge_store::TaskSupport;

use super::file::{self, FileConfig, FileManifest};
use super::lowargs::{
    AuditArgs, Command, LowArgs, MigrateArgs, PackCommand, PromptCommand, ResourceCommand,
    SecretCommand, ToolCommand,
};
use super::options::{HttpOptions, LogFormat, ManifestOptions, SandboxArg, SchemaProfileArg};

/// Everything resolved.
#[derive(Debug)]
pub(crate) struct Settings {
    /// Settings every command shares.
    pub(crate) common: Common,
    /// What to do.
    pub(crate) task: Task,
}

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Task {
    /// `serve`: Streamable HTTP.
    Serve(Http),
    /// `stdio`.
    Stdio,
    /// `bridge`: only the manifest's tools, over stdio.
    Bridge,
    /// `doctor [--json]`.
    Doctor {
        /// JSON output.
        json: bool,
    },
    /// `health`: GET this URL (`http://ADDR/healthz`), giving up after the duration.
    Health(String, Duration),
    /// `gc`.
    Gc,
    /// `backup FILE`.
    Backup(PathBuf),
    /// `migrate --from URL --to URL`.
    Migrate(Migrate),
    /// `secret ...`.
    Secret(SecretCommand),
    /// `tool ...` (its option groups are already merged into [`Common`]).
    Tool(ToolCommand),
    /// `resource ...`.
    Resource(ResourceCommand),
    /// `prompt ...`.
    Prompt(PromptCommand),
    /// `pack ...`.
    Pack(PackCommand),
    /// `audit ...`.
    Audit(AuditArgs),
}

/// Settings every command shares.
#[derive(Debug)]
pub(crate) struct Common {
    /// Data directory (created if missing), absolute.
    pub(crate) data_dir: PathBuf,
    /// The store's URL (`sqlite:PATH` or `postgres://...`); may hold a password, so it is
    /// never logged whole.
    pub(crate) database: String,
    /// The keyring file given (absolute); `None`: the SQLite default
    /// (`<data-dir>/secret.key`) or no keyring for PostgreSQL.
    pub(crate) secret_key_file: Option<PathBuf>,
    /// Log filter.
    pub(crate) log_level: String,
    /// Log format.
    pub(crate) log_format: LogFormat,
    /// Tools per tools/list page.
    pub(crate) page_size: usize,
    /// Record metrics.
    pub(crate) metrics: bool,
    /// Distinct `tool` labels in /metrics at most.
    pub(crate) metrics_max_tools: usize,
    /// Where to export trace spans (OTLP/HTTP base URL); `None`: nowhere.
    pub(crate) otlp_endpoint: Option<String>,
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
    /// The interpreter to pin.
    pub(crate) python: PathBuf,
    /// An explicit uv (absolute).
    pub(crate) uv: Option<PathBuf>,
    /// Allow dependencies from source distributions.
    pub(crate) allow_source_builds: bool,
    /// Required isolation.
    pub(crate) sandbox: SandboxArg,
    /// Layers left out for tests (`--sandbox-disable-layer`).
    pub(crate) disabled_layers: Vec<String>,
    /// Whether the authoring built-ins are offered.
    pub(crate) authoring: bool,
    /// Timeout of a call when the tool sets none.
    pub(crate) tool_timeout: Duration,
    /// The largest timeout a tool may set.
    pub(crate) max_tool_timeout: Duration,
    /// Address-space limit of a call, bytes.
    pub(crate) memory_limit_bytes: u64,
    /// Keep versions whose examples fail as drafts.
    pub(crate) keep_failed_drafts: bool,
    /// Versions by principals without `admin` wait for an admin's approval.
    pub(crate) require_approval: bool,
    /// Most bytes of text a call returns.
    pub(crate) max_result_bytes: usize,
    /// Rows kept in the call log.
    pub(crate) call_log_rows: u64,
    /// How the call log is written (queue size at least 1).
    pub(crate) call_log: omniforge_server::CallLogSettings,
    /// How long a cut result's whole output stays readable.
    pub(crate) output_ttl: Duration,
    /// How long audit records are kept; `None`: all of them.
    pub(crate) audit_retention: Option<Duration>,
    /// How durable tasks are timed.
    pub(crate) tasks: omniforge_server::TaskSettings,
    /// The request-state keyring file given (absolute); `None`: `<data-dir>/request-state.key`.
    pub(crate) request_state_key_file: Option<PathBuf>,
    /// Warm templates at most (0: off).
    pub(crate) warm_pool: usize,
    /// Idle expiry of a warm template.
    pub(crate) warm_idle: Duration,
}

/// Settings of `migrate`.
#[derive(Debug)]
pub(crate) struct Migrate {
    /// The source store's URL.
    pub(crate) from: String,
    /// The target store's URL.
    pub(crate) to: String,
    /// The target's keyring file (absolute); `None`: the source's.
    pub(crate) to_secret_key_file: Option<PathBuf>,
}

/// Settings of `serve`.
#[derive(Debug)]
pub(crate) struct Http {
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
    /// Most live sessions.
    pub(crate) max_sessions: usize,
    /// Header read timeout.
    pub(crate) header_read_timeout: Duration,
    /// Keep-alive idle timeout.
    pub(crate) keep_alive_timeout: Duration,
    /// Most open connections.
    pub(crate) max_connections: usize,
    /// Where to write the endpoint URL once the server accepts connections.
    pub(crate) ready_file: Option<PathBuf>,
    /// Where to serve /metrics without authentication.
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// OAuth access tokens; `None` without an issuer. Empty audiences: the endpoint's URL.
    pub(crate) oauth: Option<Box<omniforge_server::OAuthSettings>>,
}

impl Settings {
    /// Resolves `args` against the config file it names (if any) and the defaults.
    ///
    /// # Errors
    /// An unreadable or invalid config file, an unreadable credential file, or a value that
    /// makes no sense.
    pub(crate) fn resolve(args: LowArgs) -> Result<Settings> {
        let LowArgs {
            global,
            options,
            command,
        } = args;
        let mut file = match &global.config {
            Some(path) => file::read(path)?,
            None => FileConfig::default(),
        };
        let data_dir = match global.data_dir.or(file.data_dir.take()) {
            Some(dir) => dir,
            None => dirs::data_dir()
                .context("no platform data directory; pass --data-dir")?
                .join("omniforge"),
        };
        // Paths handed to subprocesses (uv runs in other directories, the sandbox binds paths)
        // must not depend on the working directory.
        let data_dir = absolute(data_dir)?;
        let database = global
            .database
            .or(file.database.take())
            .unwrap_or_else(|| format!("sqlite:{}", data_dir.join("omniforge.db").display()));
        let secret_key_file = global
            .secret_key_file
            .or(file.secret_key_file.take())
            .map(absolute)
            .transpose()?;
        let serves_mcp = matches!(
            command,
            Command::Serve(_) | Command::Stdio(_) | Command::Bridge(_)
        );
        let (server, interpreter, sandbox, authoring, calls, hosting) = (
            options.server,
            options.interpreter,
            options.sandbox,
            options.authoring,
            options.calls,
            options.hosting,
        );
        let common = Common {
            data_dir,
            database,
            secret_key_file,
            // One-shot commands print their own output; only problems are logged.
            log_level: global
                .log_level
                .or(file.log_level.take())
                .unwrap_or_else(|| {
                    if serves_mcp {
                        "info,rmcp=error".into()
                    } else {
                        "warn".into()
                    }
                }),
            log_format: server
                .log_format
                .or(file.log_format)
                .unwrap_or(LogFormat::Text),
            page_size: server.page_size.or(file.page_size).unwrap_or(1000),
            metrics: server.metrics.or(file.metrics).unwrap_or(true),
            metrics_max_tools: server
                .metrics_max_tools
                .or(file.metrics_max_tools)
                .unwrap_or(omniforge_server::DEFAULT_METRICS_MAX_TOOLS),
            otlp_endpoint: server.otlp_endpoint.or(file.otlp_endpoint.take()),
            schema_profile: server
                .schema_profile
                .or(file.schema_profile)
                .unwrap_or(SchemaProfileArg::AsAuthored),
            scripts: Scripts {
                python: interpreter
                    .python
                    .or(file.python.take())
                    .unwrap_or_else(|| PathBuf::from("python3")),
                uv: interpreter
                    .uv
                    .or(file.uv.take())
                    .map(absolute)
                    .transpose()?,
                allow_source_builds: authoring
                    .allow_source_builds
                    .or(file.allow_source_builds)
                    .unwrap_or(false),
                sandbox: sandbox
                    .sandbox
                    .or(file.sandbox)
                    .unwrap_or(SandboxArg::Standard),
                disabled_layers: sandbox.sandbox_disable_layer,
                authoring: !hosting.no_authoring.or(file.no_authoring).unwrap_or(false),
                tool_timeout: authoring
                    .tool_timeout
                    .or(file.tool_timeout)
                    .unwrap_or(Duration::from_secs(30)),
                max_tool_timeout: authoring
                    .max_tool_timeout
                    .or(file.max_tool_timeout)
                    .unwrap_or(Duration::from_secs(600)),
                memory_limit_bytes: authoring
                    .memory_limit_bytes
                    .or(file.memory_limit_bytes)
                    .unwrap_or(2 << 30),
                keep_failed_drafts: authoring
                    .keep_failed_drafts
                    .or(file.keep_failed_drafts)
                    .unwrap_or(false),
                require_approval: hosting
                    .require_approval
                    .or(file.require_approval)
                    .unwrap_or(false),
                max_result_bytes: calls
                    .max_result_bytes
                    .or(file.max_result_bytes)
                    .unwrap_or(64 * 1024),
                call_log_rows: calls.call_log_rows.or(file.call_log_rows).unwrap_or(10_000),
                call_log: omniforge_server::CallLogSettings {
                    queue_rows: calls
                        .call_log_queue
                        .or(file.call_log_queue)
                        .unwrap_or(omniforge_server::DEFAULT_CALL_LOG_QUEUE),
                    batch_wait: calls
                        .call_log_batch_wait
                        .or(file.call_log_batch_wait)
                        .unwrap_or(omniforge_server::DEFAULT_CALL_LOG_BATCH_WAIT),
                },
                output_ttl: hosting
                    .output_ttl
                    .or(file.output_ttl)
                    .unwrap_or(Duration::from_secs(3600)),
                audit_retention: hosting.audit_retention.or(file.audit_retention),
                request_state_key_file: hosting
                    .request_state_key_file
                    .or(file.request_state_key_file.take())
                    .map(absolute)
                    .transpose()?,
                tasks: omniforge_server::TaskSettings {
                    ttl: hosting
                        .task_ttl
                        .or(file.task_ttl)
                        .unwrap_or(omniforge_server::DEFAULT_TASK_TTL),
                    lease: hosting
                        .task_lease
                        .or(file.task_lease)
                        .unwrap_or(omniforge_server::DEFAULT_TASK_LEASE),
                    poll_interval: omniforge_server::DEFAULT_TASK_POLL_INTERVAL,
                },
                warm_pool: hosting
                    .warm_pool
                    .or(file.warm_pool)
                    .unwrap_or(omniforge_script::DEFAULT_MAX_TEMPLATES),
                warm_idle: hosting
                    .warm_idle
                    .or(file.warm_idle)
                    .unwrap_or(omniforge_script::DEFAULT_WARM_IDLE),
            },
            inline_schema_refs: options
                .manifests
                .inline_schema_refs
                .or(file.inline_schema_refs)
                .unwrap_or(false),
            manifests: manifests(
                options.manifests,
                std::mem::take(&mut file.manifest),
                file.upstream_timeout,
                file.upstream_max_response_bytes,
                serves_mcp,
            )?,
            shutdown_grace: server
                .shutdown_grace
                .or(file.shutdown_grace)
                .unwrap_or(Duration::from_secs(10)),
        };
        if common.page_size == 0 {
            bail!("--page-size must be at least 1");
        }
        if common.scripts.call_log.queue_rows == 0 {
            bail!("--call-log-queue must be at least 1");
        }
        if common
            .scripts
            .audit_retention
            .is_some_and(|keep| keep.is_zero())
        {
            // A zero retention would prune the whole audit log at start: refuse it rather than
            // read it as "keep nothing".
            bail!("--audit-retention must be longer than 0 (leave it unset to keep everything)");
        }
        let task = match command {
            Command::Bridge(_) if common.manifests.len() != 1 => {
                bail!("bridge serves exactly one manifest: give --manifest PATH (and --addr URL)")
            }
            Command::Bridge(_) => Task::Bridge,
            Command::Stdio(_) => Task::Stdio,
            Command::Serve(args) => Task::Serve(http(args.http, *args.oauth, &file)?),
            Command::Doctor(args) => Task::Doctor { json: args.json },
            Command::Health(args) => {
                Task::Health(health_url(args.listen.or(file.listen)), args.timeout)
            }
            Command::Gc => Task::Gc,
            Command::Backup { file } => Task::Backup(file),
            Command::Migrate(MigrateArgs {
                from,
                to,
                to_secret_key_file,
            }) => Task::Migrate(Migrate {
                from: from.unwrap_or_else(|| common.database.clone()),
                to,
                to_secret_key_file: to_secret_key_file.map(absolute).transpose()?,
            }),
            Command::Secret(command) => Task::Secret(command),
            Command::Tool(command) => Task::Tool(command),
            Command::Resource(command) => Task::Resource(command),
            Command::Prompt(command) => Task::Prompt(command),
            Command::Pack(command) => Task::Pack(command),
            Command::Audit(args) => Task::Audit(args),
        };
        Ok(Settings { common, task })
    }
}

/// The `/healthz` URL of a server listening on `listen` (default 127.0.0.1:8765); an
/// unspecified address (0.0.0.0, ::) is reached on the loopback address of its family.
fn health_url(listen: Option<SocketAddr>) -> String {
    let mut addr = listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8765)));
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}/healthz")
}

/// The settings of `serve`.
fn http(args: HttpOptions, oauth: super::oauth::OAuthOptions, file: &FileConfig) -> Result<Http> {
    let path = args
        .path
        .or_else(|| file.path.clone())
        .unwrap_or_else(|| "/mcp".into());
    if !path.starts_with('/') || path == "/healthz" {
        bail!("--path must start with '/' and must not be /healthz (got {path:?})");
    }
    let oauth = super::oauth::resolve(oauth, file.oauth.as_ref())?.map(Box::new);
    Ok(Http {
        oauth,
        listen: args
            .listen
            .or(file.listen)
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8765))),
        path,
        stateless: args.stateless.or(file.stateless).unwrap_or(false),
        allow_origin: if args.allow_origin.is_empty() {
            file.allow_origin.clone()
        } else {
            args.allow_origin
        },
        allow_host: if args.allow_host.is_empty() {
            file.allow_host.clone()
        } else {
            args.allow_host
        },
        token_file: args.token_file.or_else(|| file.token_file.clone()),
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
        max_sessions: args
            .max_sessions
            .or(file.max_sessions)
            .map_or(HttpSettings::DEFAULT_MAX_SESSIONS, |n| n as usize),
        header_read_timeout: args
            .header_read_timeout
            .or(file.header_read_timeout)
            .unwrap_or(HttpSettings::DEFAULT_HEADER_READ_TIMEOUT),
        keep_alive_timeout: args
            .keep_alive_timeout
            .or(file.keep_alive_timeout)
            .unwrap_or(HttpSettings::DEFAULT_KEEP_ALIVE_TIMEOUT),
        max_connections: args
            .max_connections
            .or(file.max_connections)
            .map_or(HttpSettings::DEFAULT_MAX_CONNECTIONS, |n| n as usize),
        metrics_listen: args.metrics_listen.or(file.metrics_listen),
        ready_file: args
            .ready_file
            .or_else(|| file.ready_file.clone())
            .map(absolute)
            .transpose()?,
    })
}

/// Pairs each `--manifest` with the `--upstream` and `--upstream-auth`/`--upstream-auth-file` at
/// the same position; the config file's `[[manifest]]` entries apply when no `--manifest` is
/// given. Credential files are read only by the commands that serve MCP (the others only need
/// the manifests' tool names).
fn manifests(
    flags: ManifestOptions,
    file: Vec<FileManifest>,
    file_timeout: Option<Duration>,
    file_max_response_bytes: Option<u64>,
    read_credentials: bool,
) -> Result<Vec<ManifestConfig>> {
    let ManifestOptions {
        manifest: paths,
        upstream: upstreams,
        upstream_auth: auths,
        upstream_auth_file: auth_files,
        upstream_timeout: timeout,
        upstream_max_response_bytes: max_bytes,
        ..
    } = flags;
    let default_timeout = timeout.or(file_timeout).unwrap_or(Duration::from_secs(30));
    let default_max_bytes = max_bytes
        .or(file_max_response_bytes)
        .unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
    if paths.is_empty() {
        if !upstreams.is_empty() && file.is_empty() {
            bail!(
                "--upstream needs a --manifest (one --upstream per --manifest, in the same order)"
            );
        }
        return file
            .into_iter()
            .map(|m| {
                let auth_header = match (m.auth_header, &m.auth_header_file) {
                    (Some(_), Some(_)) => bail!(
                        "[[manifest]] {}: give auth_header or auth_header_file, not both",
                        m.path.display()
                    ),
                    (Some(value), None) => Some(value),
                    (None, Some(path)) if read_credentials => Some(read_credential(path)?),
                    (None, _) => None,
                };
                let task_support = task_support(&m.path, m.task_support)?;
                Ok(ManifestConfig {
                    path: m.path,
                    task_support,
                    upstream: UpstreamConfig {
                        base_url: m.upstream,
                        auth_header,
                        timeout: timeout.or(m.timeout).unwrap_or(default_timeout),
                        headers: m.headers.into_iter().collect(),
                        max_response_bytes: max_bytes
                            .or(m.max_response_bytes)
                            .unwrap_or(default_max_bytes),
                    },
                })
            })
            .collect();
    }
    if !auths.is_empty() && !auth_files.is_empty() {
        bail!("give --upstream-auth or --upstream-auth-file, not both");
    }
    if upstreams.len() > paths.len() || auths.len() > paths.len() || auth_files.len() > paths.len()
    {
        bail!(
            "give at most one --upstream and one --upstream-auth (or --upstream-auth-file) per \
             --manifest, in the same order"
        );
    }
    let mut auths = auths.into_iter();
    let mut auth_files = auth_files.iter();
    paths
        .into_iter()
        .enumerate()
        .map(|(i, path)| {
            let auth_header = match (auths.next(), auth_files.next()) {
                (Some(value), _) => Some(value),
                (None, Some(file)) if read_credentials => Some(read_credential(file)?),
                (None, _) => None,
            };
            Ok(ManifestConfig {
                path,
                task_support: BTreeMap::new(),
                upstream: UpstreamConfig {
                    base_url: upstreams.get(i).cloned().unwrap_or_default(),
                    auth_header,
                    timeout: default_timeout,
                    headers: Vec::new(),
                    max_response_bytes: default_max_bytes,
                },
            })
        })
        .collect()
}

/// A `[[manifest]]`'s `task_support` table, each value checked.
fn task_support(
    path: &Path,
    table: BTreeMap<String, String>,
) -> Result<BTreeMap<String, TaskSupport>> {
    table
        .into_iter()
        .map(|(tool, value)| match TaskSupport::parse(&value) {
            Some(support) => Ok((tool, support)),
            None => bail!(
                "[[manifest]] {}: task_support.{tool} = {value:?}: give \"forbidden\", \
                 \"optional\" or \"required\"",
                path.display()
            ),
        })
        .collect()
}

/// The first line of a credential file (an Authorization header value), without its line
/// ending. The error names the file, never its content.
fn read_credential(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the upstream credential file {}", path.display()))?;
    let value = text.lines().next().unwrap_or("").trim_end();
    if value.is_empty() {
        bail!(
            "the upstream credential file {} is empty: write the Authorization header value \
             (e.g. `Bearer abc`) on its first line",
            path.display()
        );
    }
    Ok(value.to_owned())
}

/// `path` made absolute against the working directory (not resolving symlinks).
fn absolute(path: PathBuf) -> Result<PathBuf> {
    std::path::absolute(&path).with_context(|| format!("making {} absolute", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(args: &[&str]) -> Result<Settings> {
        Settings::resolve(crate::flags::parse_from(args)?)
    }

    fn serve(s: Settings) -> Http {
        match s.task {
            Task::Serve(http) => http,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let s = resolve(&["omniforge", "--data-dir", "/tmp/x", "serve"]).unwrap();
        assert_eq!(s.common.page_size, 1000);
        assert_eq!(s.common.shutdown_grace, Duration::from_secs(10));
        assert_eq!(s.common.log_level, "info,rmcp=error");
        let serve = serve(s);
        assert_eq!(serve.listen.to_string(), "127.0.0.1:8765");
        assert_eq!(serve.path, "/mcp");
        assert!(!serve.stateless);
        assert_eq!(serve.ready_file, None);
        let s = resolve(&["omniforge", "--data-dir", "/tmp/x", "tool", "list"]).unwrap();
        assert_eq!(s.common.log_level, "warn");
    }

    #[test]
    fn flags_beat_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:9001\"\npath = \"/x\"\nshutdown_grace = \"1m\"\nallow_origin = [\"https://a.example\"]\nready_file = \"r\"\n",
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
        assert_eq!(s.common.shutdown_grace, Duration::from_secs(60));
        let serve = serve(s);
        assert_eq!(serve.listen.to_string(), "127.0.0.1:9001");
        assert_eq!(serve.path, "/y");
        assert_eq!(serve.allow_origin, ["https://a.example"]);
        assert!(serve.ready_file.unwrap().is_absolute());
    }

    /// `--database` defaults to the SQLite file in the data directory; the config file sets it,
    /// a flag anywhere on the line beats the file; `migrate --from` defaults to it.
    #[test]
    fn the_database_and_the_keyring() {
        let s = resolve(&["omniforge", "--data-dir", "/tmp/x", "secret", "list"]).unwrap();
        assert_eq!(s.common.database, "sqlite:/tmp/x/omniforge.db");
        assert_eq!(s.common.secret_key_file, None);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(
            &file,
            "database = \"postgres://db/forge\"\nsecret_key_file = \"keys/ring\"\n",
        )
        .unwrap();
        let c = file.to_str().unwrap();
        let s = resolve(&["omniforge", "--config", c, "--data-dir", "/tmp/x", "gc"]).unwrap();
        assert_eq!(s.common.database, "postgres://db/forge");
        assert!(s.common.secret_key_file.unwrap().is_absolute());
        let s = resolve(&[
            "omniforge",
            "--config",
            c,
            "migrate",
            "--to",
            "sqlite:/tmp/y.db",
            "--database",
            "sqlite:/tmp/z.db",
        ])
        .unwrap();
        match s.task {
            Task::Migrate(m) => {
                assert_eq!(m.from, "sqlite:/tmp/z.db");
                assert_eq!(m.to, "sqlite:/tmp/y.db");
                assert_eq!(m.to_secret_key_file, None);
            }
            other => panic!("{other:?}"),
        }
    }

    /// An option given before the subcommand and one given after it: the later one wins, and
    /// either beats the config file.
    #[test]
    fn options_before_and_after_the_subcommand() {
        let s = resolve(&["omniforge", "--page-size", "7", "stdio"]).unwrap();
        assert_eq!(s.common.page_size, 7);
        let s = resolve(&["omniforge", "--page-size", "7", "stdio", "--page-size", "9"]).unwrap();
        assert_eq!(s.common.page_size, 9);
        let s = resolve(&["omniforge", "--sandbox", "off", "tool", "add", "f.json"]).unwrap();
        assert_eq!(s.common.scripts.sandbox, SandboxArg::Off);
        let s = resolve(&["omniforge", "tool", "add", "f.json", "--sandbox", "strict"]).unwrap();
        assert_eq!(s.common.scripts.sandbox, SandboxArg::Strict);
        // A command does not take the options it does not use...
        assert!(
            crate::flags::parse_from(["omniforge", "tool", "list", "--sandbox", "off"]).is_err()
        );
        // ...but they are still accepted before it, as they always were.
        assert!(resolve(&["omniforge", "--manifest", "m.json", "tool", "list"]).is_ok());
    }

    /// `--require-approval` (issue 17): off by default; the flag, or `require_approval` in the
    /// config file, turns it on; `--require-approval=false` beats the file.
    #[test]
    fn the_approval_gate_is_opt_in() {
        let s = resolve(&["omniforge", "serve"]).unwrap();
        assert!(!s.common.scripts.require_approval);
        let s = resolve(&["omniforge", "serve", "--require-approval"]).unwrap();
        assert!(s.common.scripts.require_approval);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "require_approval = true\n").unwrap();
        let c = file.to_str().unwrap();
        let s = resolve(&["omniforge", "--config", c, "serve"]).unwrap();
        assert!(s.common.scripts.require_approval);
        let s = resolve(&[
            "omniforge",
            "--config",
            c,
            "serve",
            "--require-approval=false",
        ])
        .unwrap();
        assert!(!s.common.scripts.require_approval);
    }

    #[test]
    fn bad_values_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "lisen = \"x\"\n").unwrap();
        let err = resolve(&["omniforge", "--config", file.to_str().unwrap(), "stdio"]).unwrap_err();
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
        let err = crate::flags::parse_from(["omniforge", "--shutdown-grace", "ten", "stdio"])
            .unwrap_err();
        assert!(err.to_string().contains("30s"), "{err}");
    }

    #[test]
    fn manifest_tools_may_run_as_tasks_by_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c.toml");
        std::fs::write(
            &config,
            "[[manifest]]\npath = \"m.json\"\ntask_support = { slow_report = \"optional\", export = \"required\" }\n",
        )
        .unwrap();
        let s = resolve(&["omniforge", "--config", config.to_str().unwrap(), "stdio"]).unwrap();
        let support = &s.common.manifests[0].task_support;
        assert_eq!(support.get("slow_report"), Some(&TaskSupport::Optional));
        assert_eq!(support.get("export"), Some(&TaskSupport::Required));
        assert_eq!(support.len(), 2);
        std::fs::write(
            &config,
            "[[manifest]]\npath = \"m.json\"\ntask_support = { slow_report = \"sometimes\" }\n",
        )
        .unwrap();
        let err =
            resolve(&["omniforge", "--config", config.to_str().unwrap(), "stdio"]).unwrap_err();
        assert!(
            err.to_string().contains("task_support.slow_report"),
            "{err:#}"
        );
    }

    #[test]
    fn upstream_credentials_come_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let auth = dir.path().join("auth");
        std::fs::write(&auth, "Bearer from-file\n").unwrap();
        let auth = auth.to_str().unwrap();
        let s = resolve(&[
            "omniforge",
            "stdio",
            "--manifest",
            "m.json",
            "--upstream-auth-file",
            auth,
        ])
        .unwrap();
        assert_eq!(
            s.common.manifests[0].upstream.auth_header.as_deref(),
            Some("Bearer from-file")
        );
        // The config file's form.
        let config = dir.path().join("c.toml");
        std::fs::write(
            &config,
            format!("[[manifest]]\npath = \"m.json\"\nauth_header_file = {auth:?}\n"),
        )
        .unwrap();
        let s = resolve(&["omniforge", "--config", config.to_str().unwrap(), "stdio"]).unwrap();
        assert_eq!(
            s.common.manifests[0].upstream.auth_header.as_deref(),
            Some("Bearer from-file")
        );
        // Both forms for one manifest is a mistake; a missing file names the file.
        let err = resolve(&[
            "omniforge",
            "stdio",
            "--manifest",
            "m.json",
            "--upstream-auth",
            "Bearer x",
            "--upstream-auth-file",
            auth,
        ])
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err:#}");
        let missing = dir.path().join("nope");
        let err = resolve(&[
            "omniforge",
            "stdio",
            "--manifest",
            "m.json",
            "--upstream-auth-file",
            missing.to_str().unwrap(),
        ])
        .unwrap_err();
        assert!(format!("{err:#}").contains("nope"), "{err:#}");
        // A one-shot command only needs the manifests' names: it does not read the credential.
        assert!(
            resolve(&[
                "omniforge",
                "--manifest",
                "m.json",
                "--upstream-auth-file",
                missing.to_str().unwrap(),
                "tool",
                "list"
            ])
            .is_ok()
        );
    }
}
