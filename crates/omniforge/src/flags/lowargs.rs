//! The raw command line: what clap parses, before the config file and the defaults apply.
//!
//! Five options are global (`--config`, `--data-dir`, `--log-level`, `--database`,
//! `--secret-key-file`): every command takes them,
//! anywhere on the line. Every other option belongs to the commands that use it, so
//! `omniforge tool add --help` lists only what `tool add` reads. The top level also takes every
//! option (so `omniforge --manifest m.json serve` and `omniforge --no-authoring tool list` keep
//! working); [`LowArgs`] holds the two merged.

use std::mem::take;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use super::options::{
    AuthoringOptions, CallOptions, HostingOptions, HttpOptions, InterpreterOptions,
    ManifestOptions, Options, Overlay, SandboxOptions, ServerOptions,
};

const EXAMPLES: &str = "\
Examples:
  omniforge serve                                   # Streamable HTTP on http://127.0.0.1:8765/mcp
  omniforge serve --listen 127.0.0.1:9000 --path /mcp
  omniforge serve --listen 0.0.0.0:8765 --token-file tokens.txt --allow-origin https://claude.ai
  omniforge stdio                                   # MCP over stdin/stdout (for Claude Code, VS Code, ...)
  OMNIFORGE_LOG_LEVEL=debug omniforge --config omniforge.toml serve

Every flag can also be set with an OMNIFORGE_* environment variable (e.g. OMNIFORGE_LISTEN)
or in the TOML file given with --config (keys are the flag names with '_' for '-').
`omniforge COMMAND --help` lists the options of one command.";

/// OmniForge: an MCP server that hosts tools for AI agents.
#[derive(Debug, Parser)]
#[command(name = "omniforge", version, about, after_help = EXAMPLES)]
pub(crate) struct Cli {
    /// The options every command takes.
    #[command(flatten)]
    pub(crate) global: GlobalOptions,
    #[command(flatten, next_help_heading = "Server options (serve, stdio, bridge)")]
    server: ServerOptions,
    #[command(flatten, next_help_heading = "Manifest tools (serve, stdio, bridge)")]
    manifests: ManifestOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    interpreter: InterpreterOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    sandbox: SandboxOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    authoring: AuthoringOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    calls: CallOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    hosting: HostingOptions,
    /// What to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// `--config`, `--data-dir`, `--log-level`, `--database`, `--secret-key-file`: taken by every
/// command.
#[derive(Debug, Args)]
pub(crate) struct GlobalOptions {
    /// TOML config file; its values sit below flags and environment variables.
    #[arg(long, global = true, env = "OMNIFORGE_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Where OmniForge keeps its data [default: the platform data directory + /omniforge,
    /// e.g. $XDG_DATA_HOME/omniforge].
    #[arg(long, global = true, env = "OMNIFORGE_DATA_DIR", value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives
    /// such as `omniforge_server=debug` [default: info,rmcp=error; warn for one-shot
    /// commands]. Logs go to stderr only.
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_LOG_LEVEL",
        value_name = "FILTER"
    )]
    pub(crate) log_level: Option<String>,
    /// The store: `sqlite:PATH` or `postgres://USER@HOST:PORT/DB` (completed from the standard
    /// `PG*` variables, e.g. PGPASSWORD) [default: sqlite:<data-dir>/omniforge.db]. Replicas
    /// share one PostgreSQL database.
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_DATABASE",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub(crate) database: Option<String>,
    /// The keyring that seals secrets at rest (one `ID BASE64KEY` line per key; new values use
    /// the first). Every replica needs the same file; keep it out of backups [default: with
    /// SQLite, <data-dir>/secret.key, made on first use; with PostgreSQL, none: secrets are
    /// refused].
    #[arg(
        long,
        global = true,
        env = "OMNIFORGE_SECRET_KEY_FILE",
        value_name = "FILE"
    )]
    pub(crate) secret_key_file: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve MCP over Streamable HTTP (also GET /healthz).
    Serve(Box<ServeArgs>),
    /// Serve MCP over stdin/stdout; the parent process is trusted.
    Stdio(Box<StdioArgs>),
    /// Serve one manifest's RPCs, and nothing else, over stdio: the drop-in equivalent of
    /// `forge mcp serve` (`omniforge bridge --manifest gen/mcp/manifest.json --addr http://localhost:8080`).
    Bridge(BridgeArgs),
    /// Report the script sandbox layers this machine provides; exits 0 only when every layer
    /// the chosen --sandbox level needs is present.
    Doctor(DoctorArgs),
    /// GET /healthz of the local server (`--listen`, as `serve` reads it); exits 0 when it
    /// answers 200, else 1: the container image's HEALTHCHECK.
    Health(HealthArgs),
    /// Remove script environments that no tool version uses any more (the server also does
    /// this every hour).
    Gc,
    /// Copy the tool database consistently to FILE (safe while a server runs; FILE must not exist).
    Backup {
        /// Where to write the copy.
        file: PathBuf,
    },
    /// Copy a whole store into an empty one, e.g. from the embedded SQLite file to the
    /// PostgreSQL database replicas share: every table, secrets sealed again under the target
    /// keyring. Stop the servers of the source first.
    Migrate(MigrateArgs),
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
    /// Read the audit log: every authoring and admin action, newest first (time, principal,
    /// action, object, version, definition hash). Never a secret value.
    Audit(AuditArgs),
}

/// Options of `omniforge audit`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AuditArgs {
    /// Only records since this long ago (`1h`, `2days`) or this time (`2026-12-01T10:00:00Z`).
    #[arg(long, value_name = "WHEN")]
    pub(crate) since: Option<String>,
    /// Only records of this principal (`token:NAME`, `cli:USER`, `stdio`, `anonymous`).
    #[arg(long, value_name = "PRINCIPAL")]
    pub(crate) principal: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    pub(crate) json: bool,
    /// At most this many records.
    #[arg(long, default_value_t = 100)]
    pub(crate) limit: u32,
}

/// Options of `omniforge serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    #[command(flatten, next_help_heading = "HTTP options")]
    pub(crate) http: HttpOptions,
    /// Boxed: the largest group, and `serve` is one command of many.
    #[command(flatten, next_help_heading = "OAuth options")]
    pub(crate) oauth: Box<super::oauth::OAuthOptions>,
    #[command(flatten)]
    pub(crate) stdio: StdioArgs,
}

/// Options of `omniforge stdio` (and the non-HTTP part of `serve`).
#[derive(Debug, Args)]
pub(crate) struct StdioArgs {
    #[command(flatten)]
    pub(crate) bridge: BridgeArgs,
    #[command(flatten, next_help_heading = "Script tools")]
    interpreter: InterpreterOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    sandbox: SandboxOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    authoring: AuthoringOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    calls: CallOptions,
    #[command(flatten, next_help_heading = "Script tools")]
    hosting: HostingOptions,
}

/// Options of `omniforge bridge` (and the manifest part of `stdio` and `serve`).
#[derive(Debug, Args)]
pub(crate) struct BridgeArgs {
    #[command(flatten, next_help_heading = "Server options")]
    server: ServerOptions,
    #[command(flatten, next_help_heading = "Manifest tools")]
    manifests: ManifestOptions,
}

/// Options of `omniforge doctor`.
#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    sandbox: SandboxOptions,
}

/// Options of `omniforge health`.
#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The server's listen address, as given to `serve` (an unspecified address such as
    /// 0.0.0.0 is reached on loopback) [default: the config file's `listen`, else 127.0.0.1:8765].
    #[arg(long, env = "OMNIFORGE_LISTEN", value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Give up after this long.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = super::options::parse_duration)]
    pub(crate) timeout: std::time::Duration,
}

/// Options of the commands that write a tool, template or prompt (and so may build its
/// environment): `tool add|edit`, `resource add`, `prompt add`, `pack import`.
#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    interpreter: InterpreterOptions,
    #[command(flatten)]
    sandbox: SandboxOptions,
    #[command(flatten)]
    authoring: AuthoringOptions,
}

/// Options of `omniforge tool run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    interpreter: InterpreterOptions,
    #[command(flatten)]
    sandbox: SandboxOptions,
    #[command(flatten)]
    calls: CallOptions,
}

/// `omniforge resource ...`.
#[derive(Debug, Subcommand)]
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
        #[command(flatten, next_help_heading = "Script tools")]
        options: BuildArgs,
    },
    /// Remove a resource (by URI) or a template (by URI template).
    Rm {
        /// The URI or URI template.
        key: String,
    },
}

/// `omniforge prompt ...`.
#[derive(Debug, Subcommand)]
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
        #[command(flatten, next_help_heading = "Script tools")]
        options: BuildArgs,
    },
    /// Remove a prompt.
    Rm {
        /// Prompt name.
        name: String,
    },
}

/// `omniforge pack ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PackCommand {
    /// Import a pack (.toml or .json): all of it, or nothing when any entry is wrong (every
    /// error is listed). Entries already stored exactly so are left alone.
    Import {
        /// The pack file.
        file: PathBuf,
        #[command(flatten, next_help_heading = "Script tools")]
        options: BuildArgs,
    },
    /// Export every enabled tool, resource, template and prompt as a pack.
    Export {
        /// Write here (.toml or .json by extension) instead of JSON on stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// `omniforge tool ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum ToolCommand {
    /// List the enabled stored tools, most recently updated first.
    List,
    /// Show a tool's current version: code, schemas, dependencies, lock, limits.
    Show {
        /// Tool name.
        name: String,
    },
    /// List a tool's versions: number, time (UTC), author, description; `*` marks the current one.
    History {
        /// Tool name.
        name: String,
    },
    /// Create a tool from a JSON file holding the arguments of omniforge_create_tool
    /// (see examples/tools/). Dependency installs report progress on stderr.
    Add {
        /// The JSON file.
        file: PathBuf,
        #[command(flatten, next_help_heading = "Script tools")]
        options: BuildArgs,
    },
    /// Add a version from a JSON file holding the arguments of omniforge_update_tool; fields
    /// left out are kept. Dependency installs report progress on stderr.
    Edit {
        /// Tool name.
        name: String,
        /// The JSON file.
        file: PathBuf,
        #[command(flatten, next_help_heading = "Script tools")]
        options: BuildArgs,
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
    /// Make an earlier version current (and enable the tool). Its examples run first; a
    /// failing one refuses the rollback unless --force.
    Rollback {
        /// Tool name.
        name: String,
        /// Version number.
        version: u32,
        /// Roll back without running the version's examples.
        #[arg(long)]
        force: bool,
        #[command(flatten, next_help_heading = "Script tools")]
        options: RunArgs,
    },
    /// Run a version's examples again (the current version unless VERSION is given) and
    /// record the results: one line per example; exits 1 when one fails.
    Check {
        /// Tool name.
        name: String,
        /// Version number.
        version: Option<u32>,
        #[command(flatten, next_help_heading = "Script tools")]
        options: RunArgs,
    },
    /// List the tool versions pending approval (`serve --require-approval`): tool, version,
    /// author, the current version, the secrets each requests.
    Pending,
    /// Approve a pending version: it becomes current for everyone (a running server sends
    /// list_changed). Grants only the secrets named with --grant.
    Approve {
        /// Tool name.
        name: String,
        /// Version number.
        version: u32,
        /// A secret the version requests that it may have (repeatable); none unless named.
        #[arg(long = "grant", value_name = "SECRET")]
        grants: Vec<String>,
    },
    /// Reject a pending version; it stays in the history with the reason.
    Reject {
        /// Tool name.
        name: String,
        /// Version number.
        version: u32,
        /// Why (recorded with the version and in the audit log).
        #[arg(long)]
        reason: String,
    },
    /// Show a tool's latest calls, newest first: time (UTC), principal, version, duration,
    /// outcome, error.
    Calls {
        /// Tool name.
        name: String,
        /// At most this many calls.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Run a tool once with JSON arguments and print its result; exits 1 when it is an error.
    Run {
        /// Tool name.
        name: String,
        /// Arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        #[command(flatten, next_help_heading = "Script tools")]
        options: RunArgs,
    },
}

/// `omniforge secret ...`.
#[derive(Debug, Subcommand)]
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
    /// Grant a secret to one version of a tool (default: its current version), which must
    /// declare it. Only that version gets it: a new version asks again.
    Grant {
        /// Secret name.
        name: String,
        /// Tool name.
        tool: String,
        /// Version number (default: the current version).
        version: Option<u32>,
    },
    /// Revoke a secret's grant from one version of a tool (default: its current version).
    Revoke {
        /// Secret name.
        name: String,
        /// Tool name.
        tool: String,
        /// Version number (default: the current version).
        version: Option<u32>,
    },
    /// List the secrets each tool's current version declares: set or not, granted or pending.
    Requests {
        /// Only this tool.
        tool: Option<String>,
    },
    /// Put a new key first in the keyring file (made if missing) and seal every secret under
    /// it; the older keys stay in the file. Running replicas re-read their keyring file when
    /// it changes; replicas with their own copy of the file get the key first (`secret
    /// new-key`, copy the file, then `rotate-key --no-new-key`).
    RotateKey {
        /// Seal under the file's current first key; add no key.
        #[arg(long)]
        no_new_key: bool,
    },
    /// Put a new key first in the keyring file given with --secret-key-file, or make the file
    /// (mode 0600) with one key; the older keys stay. Opens no store.
    NewKey,
}

/// Options of `omniforge migrate`.
#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// The store to copy: `sqlite:PATH` or `postgres://...` [default: --database].
    #[arg(long, value_name = "URL")]
    pub(crate) from: Option<String>,
    /// The empty store to fill: `sqlite:PATH` or `postgres://...` (its schema is made).
    #[arg(long, value_name = "URL")]
    pub(crate) to: String,
    /// The keyring that seals secrets in the target [default: the source's keyring].
    #[arg(long, value_name = "FILE")]
    pub(crate) to_secret_key_file: Option<PathBuf>,
}

/// The command line, with the options given before the subcommand and after it merged
/// (after wins).
#[derive(Debug)]
pub(crate) struct LowArgs {
    /// `--config`, `--data-dir`, `--log-level`, `--database`, `--secret-key-file`.
    pub(crate) global: GlobalOptions,
    /// Every other option except the HTTP ones.
    pub(crate) options: Options,
    /// The subcommand; its option groups have been moved into `options` (what is left there
    /// is empty).
    pub(crate) command: Command,
}

impl LowArgs {
    /// Whether the command serves MCP (`serve`, `stdio`, `bridge`): a long-running process that
    /// holds credentials, rather than a one-shot command.
    pub(crate) fn serves_mcp(&self) -> bool {
        matches!(
            self.command,
            Command::Serve(_) | Command::Stdio(_) | Command::Bridge(_)
        )
    }
}

impl Cli {
    /// Merges the options given to the subcommand onto those given before it.
    pub(crate) fn into_low_args(self) -> LowArgs {
        let Cli {
            global,
            server,
            manifests,
            interpreter,
            sandbox,
            authoring,
            calls,
            hosting,
            mut command,
        } = self;
        let mut options = Options {
            server,
            manifests,
            interpreter,
            sandbox,
            authoring,
            calls,
            hosting,
        };
        match &mut command {
            Command::Serve(serve) => serve.stdio.move_into(&mut options),
            Command::Stdio(stdio) => stdio.move_into(&mut options),
            Command::Bridge(bridge) => bridge.move_into(&mut options),
            Command::Doctor(doctor) => options.sandbox.overlay(take(&mut doctor.sandbox)),
            Command::Tool(ToolCommand::Add { options: build, .. })
            | Command::Tool(ToolCommand::Edit { options: build, .. })
            | Command::Resource(ResourceCommand::Add { options: build, .. })
            | Command::Prompt(PromptCommand::Add { options: build, .. })
            | Command::Pack(PackCommand::Import { options: build, .. }) => {
                options.interpreter.overlay(take(&mut build.interpreter));
                options.sandbox.overlay(take(&mut build.sandbox));
                options.authoring.overlay(take(&mut build.authoring));
            }
            Command::Tool(ToolCommand::Run { options: run, .. })
            | Command::Tool(ToolCommand::Rollback { options: run, .. })
            | Command::Tool(ToolCommand::Check { options: run, .. }) => {
                options.interpreter.overlay(take(&mut run.interpreter));
                options.sandbox.overlay(take(&mut run.sandbox));
                options.calls.overlay(take(&mut run.calls));
            }
            Command::Gc
            | Command::Health(_)
            | Command::Backup { .. }
            | Command::Migrate(_)
            | Command::Secret(_)
            | Command::Tool(_)
            | Command::Resource(_)
            | Command::Prompt(_)
            | Command::Pack(_)
            | Command::Audit(_) => {}
        }
        LowArgs {
            global,
            options,
            command,
        }
    }
}

impl StdioArgs {
    fn move_into(&mut self, options: &mut Options) {
        self.bridge.move_into(options);
        options.interpreter.overlay(take(&mut self.interpreter));
        options.sandbox.overlay(take(&mut self.sandbox));
        options.authoring.overlay(take(&mut self.authoring));
        options.calls.overlay(take(&mut self.calls));
        options.hosting.overlay(take(&mut self.hosting));
    }
}

impl BridgeArgs {
    fn move_into(&mut self, options: &mut Options) {
        options.server.overlay(take(&mut self.server));
        options.manifests.overlay(take(&mut self.manifests));
    }
}
