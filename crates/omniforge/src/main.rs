//! The `omniforge` binary: command line, tracing to stderr, wiring and signals.
//! Everything else lives in the library crates; see ARCHITECTURE.md.

mod config;

/// Prints a line for a one-shot command. A closed stdout (`omniforge tool list | head -1`) ends
/// the output quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

use std::io::{IsTerminal, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::Parser;
use omniforge_script::SandboxLevel;
use omniforge_server::auth::TokenSet;
use omniforge_server::catalog::Catalog;
use omniforge_server::handler::Shared;
use omniforge_server::http::HttpConfig;
use omniforge_server::schema_profile::SchemaProfile;
use omniforge_server::{builtins, content, forge, http, manifests, peers, stdio};
use omniforge_store::{
    DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_READERS, SqliteStore, StoreConfig, ToolStore,
};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use crate::config::{
    Cli, Common, LogFormat, Maintenance, PackCommand, PromptCommand, ResourceCommand, SandboxArg,
    SchemaProfileArg, SecretCommand, Serve, Settings, ToolCommand,
};

fn main() {
    // The sandbox's Landlock helper is this executable: it must start before anything else.
    omniforge_script::main_if_helper();
    // Before anything else: a script that shares the server's uid (no bubblewrap, server not
    // root) must not read its environment or memory.
    if let Err(e) = omniforge_script::protect_server_process() {
        let _ = writeln!(
            std::io::stderr(),
            "omniforge: warning: cannot mark the process non-dumpable: {e}"
        );
    }
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(()) => 0,
        Err(error) => {
            // stderr only: stdout may be the stdio transport. A closed stderr is not a reason to panic.
            let _ = writeln!(std::io::stderr(), "omniforge: error: {}", describe(&error));
            1
        }
    };
    // Exit explicitly: a blocking stdin read must not keep the process alive.
    std::process::exit(code);
}

fn run(cli: Cli) -> Result<()> {
    let settings = Settings::resolve(cli)?;
    init_tracing(&settings.common)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async move {
        let Settings {
            bridge_only,
            maintenance,
            common,
            serve,
        } = settings;
        std::fs::create_dir_all(&common.data_dir)
            .with_context(|| format!("creating data directory {}", common.data_dir.display()))?;
        if let Some(task) = maintenance {
            return run_maintenance(task, &common).await;
        }
        let builtin_tools = if bridge_only {
            Vec::new()
        } else {
            let mut tools = builtins::tools();
            tools.extend(forge::builtin_tools(common.scripts.authoring));
            tools.extend(content::builtin_tools(common.scripts.authoring));
            tools
        };
        let profile = match common.schema_profile {
            SchemaProfileArg::AsAuthored => SchemaProfile::AsAuthored,
            SchemaProfileArg::Conservative => SchemaProfile::Conservative,
        };
        let catalog = Arc::new(Catalog::with_profile(builtin_tools, profile));
        let _manifests = manifests::start(
            catalog.clone(),
            &common.manifests,
            common.inline_schema_refs,
        )
        .context("loading manifests")?;
        let started = if bridge_only {
            None
        } else {
            Some(start_forge(&common, catalog.clone()).await?)
        };
        let shared = Shared::new(
            catalog.clone(),
            common.page_size,
            started.as_ref().map(|(forge, _)| forge.clone()),
        );
        if let Some((forge, store)) = started {
            let content = content::Content::start(store, forge, shared.peers.clone())
                .await
                .context("loading stored resources and prompts")?;
            shared.set_content(content);
        }
        let shutdown = CancellationToken::new();
        tokio::spawn(peers::broadcast_changes(
            shared.peers.clone(),
            catalog.subscribe(),
            shutdown.clone(),
        ));
        tokio::spawn(wait_for_signal(shutdown.clone()));
        match serve {
            Some(serve) => run_http(shared, &common, serve, shutdown).await,
            None => run_stdio(shared, &common, shutdown).await,
        }
    });
    // Do not wait for the blocking thread that reads stdin: it only ends when stdin closes,
    // and a SIGTERM must not wait for that.
    runtime.shutdown_background();
    result
}

/// `doctor`, `gc` and `backup`: one-shot commands that print to stdout (no stdio server runs).
async fn run_maintenance(task: Maintenance, common: &Common) -> Result<()> {
    match task {
        Maintenance::Doctor { json } => {
            // What this machine provides (detected as `standard` would), judged against the
            // chosen level's requirements (the script crate's policy).
            let level = sandbox_level(common.scripts.sandbox);
            let mut detect = omniforge_script::RunnerConfig::new(SandboxLevel::Standard);
            detect.host = omniforge_script::HostEnv::from_vars(std::env::vars_os());
            let layers = omniforge_script::doctor(&detect);
            let missing = level.missing_layers(&layers);
            if json {
                let out = serde_json::json!({
                    "sandbox": level.as_str(),
                    "layers": layers.iter().map(|l| serde_json::json!({"name": l.name, "active": l.active, "detail": l.detail})).collect::<Vec<_>>(),
                    "missing": missing,
                });
                out!("{out}");
            } else {
                for l in &layers {
                    out!(
                        "{:<17} {:<8} {}",
                        l.name,
                        if l.active { "active" } else { "inactive" },
                        l.detail
                    );
                }
                if !missing.is_empty() {
                    out!("missing for --sandbox {level}: {}", missing.join(", "));
                }
            }
            if missing.is_empty() {
                Ok(())
            } else {
                bail!(
                    "the sandbox level needs layers this machine lacks: {}",
                    missing.join(", ")
                )
            }
        }
        Maintenance::Gc => {
            let store = open_store(common).await?;
            let in_use = store
                .env_ids_in_use()
                .await
                .context("reading the environments in use")?;
            let layout = omniforge_script::Layout::new(&common.data_dir);
            let removed =
                omniforge_script::gc(&layout, &in_use).context("removing environments")?;
            out!("removed {} unused environment(s)", removed.len());
            Ok(())
        }
        Maintenance::Secret(command) => {
            let store = open_store(common).await?;
            match command {
                SecretCommand::Set { name } => {
                    let mut value = String::new();
                    std::io::Read::read_to_string(&mut std::io::stdin(), &mut value)
                        .context("reading the secret from stdin")?;
                    let value = value.strip_suffix('\n').unwrap_or(&value);
                    let value = value.strip_suffix('\r').unwrap_or(value);
                    if value.is_empty() {
                        bail!("the secret's value is read from stdin, and stdin was empty");
                    }
                    store
                        .set_secret(&name, value)
                        .await
                        .context("storing the secret")?;
                    out!("stored secret {name}");
                }
                SecretCommand::Rm { name } => {
                    store
                        .delete_secret(&name)
                        .await
                        .context("removing the secret")?;
                    out!("removed secret {name}");
                }
                SecretCommand::List => {
                    for name in store.secret_names().await.context("listing secrets")? {
                        out!("{name}");
                    }
                }
            }
            Ok(())
        }
        Maintenance::Tool(command) => run_tool_command(command, common).await,
        Maintenance::Resource(command) => run_resource_command(command, common).await,
        Maintenance::Prompt(command) => run_prompt_command(command, common).await,
        Maintenance::Pack(command) => run_pack_command(command, common).await,
        Maintenance::Backup(file) => {
            let store = open_store(common).await?;
            store
                .backup(&file)
                .await
                .with_context(|| format!("backing up to {}", file.display()))?;
            out!("backed up the tool database to {}", file.display());
            Ok(())
        }
    }
}

/// `omniforge tool ...`.
async fn run_tool_command(command: ToolCommand, common: &Common) -> Result<()> {
    let store = open_store(common).await?;
    let show_result = |result: rmcp::model::CallToolResult| -> Result<()> {
        for block in &result.content {
            if let Some(text) = block.as_text() {
                out!("{}", text.text);
            }
        }
        if result.is_error == Some(true) {
            bail!("the call ended with isError")
        } else {
            Ok(())
        }
    };
    let read_args = |file: &Path| -> Result<serde_json::Map<String, serde_json::Value>> {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        match serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))? {
            serde_json::Value::Object(map) => Ok(map),
            _ => bail!("{}: expected a JSON object", file.display()),
        }
    };
    match command {
        ToolCommand::List => {
            for t in store.list_enabled().await.context("listing tools")? {
                out!(
                    "{:<40} v{:<4} {}",
                    t.tool.name,
                    t.tool.current_version,
                    t.current.spec.description.lines().next().unwrap_or("")
                );
            }
        }
        ToolCommand::Show { name } => {
            let Some(t) = store.get(&name).await.context("reading the tool")? else {
                bail!("no tool named {name:?}")
            };
            let versions = store.versions(&name).await.context("reading versions")?;
            let view = forge::describe_tool(&t, &versions);
            out!(
                "{}",
                serde_json::to_string_pretty(&view).unwrap_or_default()
            );
        }
        ToolCommand::History { name } => {
            for v in store.versions(&name).await.context("reading versions")? {
                out!(
                    "v{:<4} {:<16} by {:<12} {}",
                    v.number,
                    v.created_at_ms,
                    v.spec.author,
                    v.spec.description.lines().next().unwrap_or("")
                );
            }
        }
        ToolCommand::Enable { name } => store.set_enabled(&name, true).await.context("enabling")?,
        ToolCommand::Disable { name } => {
            store.set_enabled(&name, false).await.context("disabling")?
        }
        ToolCommand::Rm { name } => store.purge(&name).await.context("removing")?,
        ToolCommand::Rollback { name, version } => {
            store
                .rollback(&name, version)
                .await
                .context("rolling back")?;
        }
        ToolCommand::Add { file } => {
            let forge = cli_forge(common).await?;
            show_result(
                forge
                    .create_or_update_tool(read_args(&file)?, &forge::Caller::local("cli"), true)
                    .await,
            )?;
        }
        ToolCommand::Edit { name, file } => {
            let forge = cli_forge(common).await?;
            let mut args = read_args(&file)?;
            args.insert("name".into(), serde_json::Value::String(name));
            show_result(
                forge
                    .create_or_update_tool(args, &forge::Caller::local("cli"), false)
                    .await,
            )?;
        }
        ToolCommand::Run { name, arguments } => {
            let args = match serde_json::from_str(&arguments).context("parsing the arguments")? {
                serde_json::Value::Object(map) => map,
                _ => bail!("arguments must be a JSON object"),
            };
            let forge = cli_forge(common).await?;
            show_result(
                forge
                    .run_stored(&name, args, &forge::Caller::local("cli"))
                    .await,
            )?;
        }
    }
    Ok(())
}

/// Reads a JSON object from `file` (the arguments of a built-in).
fn read_json_object(file: &Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    match serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))? {
        serde_json::Value::Object(map) => Ok(map),
        _ => bail!("{}: expected a JSON object", file.display()),
    }
}

/// The stored resources, templates and prompts for a one-shot command (no peers to notify:
/// a running server notices the change by itself).
async fn cli_content(
    common: &Common,
) -> Result<(Arc<content::Content>, Arc<forge::Forge>, Arc<SqliteStore>)> {
    let (forge, store) = cli_forge_and_store(common).await?;
    let content = content::Content::start(
        store.clone(),
        forge.clone(),
        Arc::new(peers::Peers::default()),
    )
    .await
    .context("reading stored resources and prompts")?;
    Ok((content, forge, store))
}

/// `omniforge resource ...`.
async fn run_resource_command(command: ResourceCommand, common: &Common) -> Result<()> {
    use omniforge_store::ContentStore as _;
    let (content, _forge, store) = cli_content(common).await?;
    let caller = forge::Caller::local("cli");
    match command {
        ResourceCommand::List => {
            for r in store.list_resources().await.context("listing resources")? {
                out!(
                    "{:<48} {:<24} {:>8} B{}",
                    r.uri,
                    r.mime_type.as_deref().unwrap_or("-"),
                    r.size,
                    if r.state.enabled { "" } else { "  (disabled)" }
                );
            }
            for t in store
                .list_templates()
                .await
                .context("listing resource templates")?
            {
                let how = match t.spec.body {
                    omniforge_store::TemplateBody::Text(_) => "template (text)",
                    omniforge_store::TemplateBody::Script(_) => "template (script)",
                };
                out!(
                    "{:<48} {:<24} {how}",
                    t.spec.uri_template,
                    t.spec.mime_type.as_deref().unwrap_or("-")
                );
            }
        }
        ResourceCommand::Show { key } => {
            let found = match content
                .definition(content::Kind::Resource, &key)
                .await
                .map_err(anyhow::Error::msg)?
            {
                Some(map) => Some(map),
                None => content
                    .definition(content::Kind::Template, &key)
                    .await
                    .map_err(anyhow::Error::msg)?,
            };
            let Some(map) = found else {
                bail!("no resource or resource template {key:?}")
            };
            out!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
        }
        ResourceCommand::Add { file } => {
            let args = read_json_object(&file)?;
            let kind = if args.contains_key("uriTemplate") {
                content::Kind::Template
            } else {
                content::Kind::Resource
            };
            let text = content
                .write(kind, args, omniforge_store::WriteMode::Upsert, &caller)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            out!("{text}");
        }
        ResourceCommand::Rm { key } => {
            let kind = if store
                .get_resource(&key)
                .await
                .context("reading the resource")?
                .is_some()
            {
                content::Kind::Resource
            } else if store
                .list_templates()
                .await
                .context("reading the resource templates")?
                .iter()
                .any(|t| t.spec.uri_template == key)
            {
                content::Kind::Template
            } else {
                bail!("no resource or resource template {key:?}")
            };
            let text = content
                .remove(kind, &key)
                .await
                .map_err(anyhow::Error::msg)?;
            out!("{text}");
        }
    }
    Ok(())
}

/// `omniforge prompt ...`.
async fn run_prompt_command(command: PromptCommand, common: &Common) -> Result<()> {
    use omniforge_store::ContentStore as _;
    let (content, _forge, store) = cli_content(common).await?;
    match command {
        PromptCommand::List => {
            for p in store.list_prompts().await.context("listing prompts")? {
                let args: Vec<String> = p
                    .spec
                    .arguments
                    .iter()
                    .map(|a| {
                        if a.required {
                            a.name.clone()
                        } else {
                            format!("[{}]", a.name)
                        }
                    })
                    .collect();
                out!(
                    "{:<40} {:<30} {}",
                    p.spec.name,
                    args.join(" "),
                    p.spec
                        .description
                        .as_deref()
                        .unwrap_or("")
                        .lines()
                        .next()
                        .unwrap_or("")
                );
            }
        }
        PromptCommand::Show { name } => {
            let Some(map) = content
                .definition(content::Kind::Prompt, &name)
                .await
                .map_err(anyhow::Error::msg)?
            else {
                bail!("no prompt {name:?}")
            };
            out!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
        }
        PromptCommand::Add { file } => {
            let args = read_json_object(&file)?;
            let text = content
                .write(
                    content::Kind::Prompt,
                    args,
                    omniforge_store::WriteMode::Upsert,
                    &forge::Caller::local("cli"),
                )
                .await
                .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            out!("{text}");
        }
        PromptCommand::Rm { name } => {
            let text = content
                .remove(content::Kind::Prompt, &name)
                .await
                .map_err(anyhow::Error::msg)?;
            out!("{text}");
        }
    }
    Ok(())
}

/// Whether `path` names a TOML file (else JSON).
fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

/// `omniforge pack ...`.
async fn run_pack_command(command: PackCommand, common: &Common) -> Result<()> {
    match command {
        PackCommand::Import { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let value: serde_json::Value = if is_toml(&file) {
                toml::from_str(&text)
                    .with_context(|| format!("parsing {} as TOML", file.display()))?
            } else {
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {} as JSON", file.display()))?
            };
            let (forge, store) = cli_forge_and_store(common).await?;
            match omniforge_server::pack::import(
                &forge,
                &*store,
                value,
                &forge::Caller::local("cli"),
            )
            .await
            {
                Ok(report) => {
                    for line in &report.changed {
                        out!("{line}");
                    }
                    out!(
                        "imported {}: {} changed, {} unchanged",
                        file.display(),
                        report.changed.len(),
                        report.unchanged
                    );
                    Ok(())
                }
                Err(errors) => {
                    let mut text = format!(
                        "{}: nothing imported; {} error(s):",
                        file.display(),
                        errors.len()
                    );
                    for e in &errors {
                        text.push_str(
                            "
  ",
                        );
                        text.push_str(e);
                    }
                    bail!(text)
                }
            }
        }
        PackCommand::Export { output } => {
            let store = open_store(common).await?;
            let pack = omniforge_server::pack::export(&store)
                .await
                .context("reading the store")?;
            match output {
                None => out!(
                    "{}",
                    serde_json::to_string_pretty(&pack).unwrap_or_default()
                ),
                Some(path) => {
                    let text = if is_toml(&path) {
                        toml::to_string_pretty(&pack).context(
                            "this pack cannot be written as TOML (e.g. a schema holds null); use a .json file",
                        )?
                    } else {
                        serde_json::to_string_pretty(&pack).unwrap_or_default() + "\n"
                    };
                    std::fs::write(&path, text)
                        .with_context(|| format!("writing {}", path.display()))?;
                    out!("exported to {}", path.display());
                }
            }
            Ok(())
        }
    }
}

/// A forge for the command line: built-in and manifest names are reserved as in the server.
async fn cli_forge(common: &Common) -> Result<Arc<forge::Forge>> {
    Ok(cli_forge_and_store(common).await?.0)
}

/// [`cli_forge`] and the store it opened.
async fn cli_forge_and_store(common: &Common) -> Result<(Arc<forge::Forge>, Arc<SqliteStore>)> {
    let mut tools = builtins::tools();
    tools.extend(forge::builtin_tools(true));
    tools.extend(content::builtin_tools(true));
    let catalog = Arc::new(Catalog::new(tools));
    let _manifests = manifests::start(
        catalog.clone(),
        &common.manifests,
        common.inline_schema_refs,
    )
    .context("loading manifests")?;
    start_forge(common, catalog).await
}

async fn open_store(common: &Common) -> Result<SqliteStore> {
    let db = common.data_dir.join("omniforge.db");
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: common.scripts.call_log_rows,
        max_readers: DEFAULT_MAX_READERS,
    };
    SqliteStore::open_with(&db, &config)
        .await
        .with_context(|| format!("opening the tool store {}", db.display()))
}

fn sandbox_level(arg: SandboxArg) -> SandboxLevel {
    match arg {
        SandboxArg::Strict => SandboxLevel::Strict,
        SandboxArg::Standard => SandboxLevel::Standard,
        SandboxArg::Off => SandboxLevel::Off,
    }
}

async fn start_forge(
    common: &Common,
    catalog: Arc<Catalog>,
) -> Result<(Arc<forge::Forge>, Arc<SqliteStore>)> {
    let scripts = &common.scripts;
    let store = Arc::new(open_store(common).await?);
    let config = forge::ForgeConfig {
        data_dir: common.data_dir.clone(),
        python: scripts.python.clone(),
        uv: scripts.uv.clone(),
        allow_source_builds: scripts.allow_source_builds,
        sandbox: sandbox_level(scripts.sandbox),
        default_timeout: scripts.tool_timeout,
        max_timeout: scripts.max_tool_timeout,
        memory_bytes: scripts.memory_limit_bytes,
        max_result_bytes: scripts.max_result_bytes,
        authoring: scripts.authoring,
        output_ttl: scripts.output_ttl,
        host: omniforge_script::HostEnv::from_vars(std::env::vars_os()),
        disabled_layers: scripts.disabled_layers.clone(),
    };
    let forge = forge::Forge::start(catalog, store.clone(), config)
        .await
        .context("starting script tools")?;
    Ok((forge, store))
}

fn init_tracing(common: &Common) -> Result<()> {
    let filter = EnvFilter::try_new(&common.log_level)
        .with_context(|| format!("invalid --log-level {:?}", common.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LossyStderr)
        .with_ansi(std::io::stderr().is_terminal());
    match common.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

/// The error and its causes on one line, leaving out a cause whose text the message already
/// carries (library errors often print their source too).
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// stderr for logs, where a failed write (a closed pipe, a full disk) is dropped: losing a log
/// line must never take a request, or the signal handler, down with it.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(std::io::stderr().write(buf).unwrap_or(buf.len()))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

async fn wait_for_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!(
            "cannot install signal handlers; SIGINT/SIGTERM will end the process abruptly"
        );
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}

async fn run_stdio(
    shared: Arc<Shared>,
    common: &Common,
    shutdown: CancellationToken,
) -> Result<()> {
    tracing::info!(version = env!("CARGO_PKG_VERSION"), "serving MCP on stdio");
    let grace = common.shutdown_grace;
    let serving = stdio::serve(
        shared,
        tokio::io::stdin(),
        tokio::io::stdout(),
        shutdown.clone(),
    );
    tokio::select! {
        result = serving => result.context("stdio transport"),
        () = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!(?grace, "in-flight tool calls outlived the grace period");
            Ok(())
        }
    }
}

async fn run_http(
    shared: Arc<Shared>,
    common: &Common,
    serve: Serve,
    shutdown: CancellationToken,
) -> Result<()> {
    let tokens = match &serve.token_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading token file {}", path.display()))?;
            TokenSet::parse(&text).with_context(|| format!("token file {}", path.display()))?
        }
        None => TokenSet::default(),
    };
    let loopback = serve.listen.ip().is_loopback();
    if tokens.is_empty() && !loopback && !serve.insecure_no_auth {
        bail!(
            "refusing to listen on {} without authentication: give --token-file, bind a loopback \
             address (127.0.0.1 or [::1]), or pass --insecure-no-auth",
            serve.listen
        );
    }
    let listener = tokio::net::TcpListener::bind(serve.listen)
        .await
        .with_context(|| format!("binding {}", serve.listen))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let config = HttpConfig {
        path: serve.path.clone(),
        stateless: serve.stateless,
        check_host: loopback || !serve.allow_host.is_empty(),
        allowed_origins: serve.allow_origin,
        allowed_hosts: serve.allow_host,
        tokens,
        max_body_bytes: serve.max_body_bytes,
        session_idle_timeout: serve.session_idle_timeout,
    };
    tracing::info!(
        url = %format!("http://{addr}{}", serve.path),
        version = env!("CARGO_PKG_VERSION"),
        stateless = config.stateless,
        tokens = config.tokens.len(),
        "listening"
    );
    http::serve(listener, shared, config, shutdown, common.shutdown_grace)
        .await
        .context("HTTP server")
}
