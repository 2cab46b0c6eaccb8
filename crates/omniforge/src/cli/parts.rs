//! The server library's parts, built from the settings: the store and the [`Server`]. The only
//! module that maps settings onto the library's configuration types.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use omniforge_script::SandboxLevel;
use omniforge_server::{SchemaProfile, ScriptSettings, Server, StoreSettings};
use omniforge_store::{
    Backend, DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_STATS_MAX_AGE, DEFAULT_CHANGE_LOG_MAX_ROWS,
    DEFAULT_MAX_READERS, Keyring, PgEnv, Store, StoreConfig, StoreUrl,
};

use crate::flags::{Common, SandboxArg, SchemaProfileArg};

/// Opens the store of the settings (`--database`) with its keyring (see [`keyring`]).
pub(super) async fn open_store(common: &Common) -> Result<Arc<dyn Backend>> {
    let keyring = keyring(common, &common.database, common.secret_key_file.as_deref())?;
    open_url(common, &common.database, keyring).await
}

/// Opens the store at `url` (applying its migrations) with `keyring`.
pub(super) async fn open_url(
    common: &Common,
    url: &str,
    keyring: Option<Keyring>,
) -> Result<Arc<dyn Backend>> {
    let shown = StoreUrl::parse(url)
        .map(|u| u.redacted())
        .context("reading the database URL")?;
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: common.scripts.call_log_rows,
        max_readers: DEFAULT_MAX_READERS,
        change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
        keyring,
    };
    // Only the binary reads the environment: the standard PG* variables complete the URL.
    let env = PgEnv::from_vars(std::env::vars());
    let store = omniforge_store::open(url, &env, &config)
        .await
        .with_context(|| format!("opening the store {shown}"))?;
    Ok(store)
}

/// The keyring that seals the secrets of the store at `url`: the `file` given (it must exist:
/// replicas must share one keyring, so none is made up here); without one, for a SQLite store,
/// `<data-dir>/secret.key`, made with mode 0600 on first use (the embedded default); for
/// PostgreSQL none, and the store refuses secrets with a clear error.
pub(super) fn keyring(common: &Common, url: &str, file: Option<&Path>) -> Result<Option<Keyring>> {
    if let Some(file) = file {
        return Keyring::load(file)
            .map(Some)
            .with_context(|| format!("loading the secret keyring {}", file.display()));
    }
    match StoreUrl::parse(url).context("reading the database URL")? {
        StoreUrl::Sqlite(_) => {
            let file = common.data_dir.join("secret.key");
            Keyring::load_or_generate(&file)
                .map(Some)
                .with_context(|| format!("loading the secret key {}", file.display()))
        }
        // Once, and only where secrets matter: a read-only command on PostgreSQL has no use
        // for a keyring.
        _ if common.warn_without_keyring => {
            tracing::warn!(
                "no --secret-key-file: secrets cannot be set or given to tools on this store"
            );
            Ok(None)
        }
        _ => {
            tracing::debug!("no --secret-key-file: this command reads no secrets");
            Ok(None)
        }
    }
}

/// The keys that sign input-required request states: `--request-state-key-file` (it must
/// exist: replicas must share it, so none is made up), else `<data-dir>/request-state.key`,
/// made with one key and mode 0600 on first use. Same file format as the secret keyring.
fn request_state_keys(common: &Common) -> Result<Vec<(String, Vec<u8>)>> {
    let file = match &common.scripts.request_state_key_file {
        Some(file) => file.clone(),
        None => {
            let file = common.data_dir.join("request-state.key");
            Keyring::load_or_generate(&file)
                .with_context(|| format!("making the request-state key {}", file.display()))?;
            file
        }
    };
    let keys = Keyring::load_key_material(&file)
        .with_context(|| format!("loading the request-state keyring {}", file.display()))?;
    Ok(keys
        .into_iter()
        .map(|(id, key)| (id, key.to_vec()))
        .collect())
}

/// The script sandbox level of the settings.
pub(super) fn sandbox_level(sandbox: SandboxArg) -> SandboxLevel {
    match sandbox {
        SandboxArg::Strict => SandboxLevel::Strict,
        SandboxArg::Standard => SandboxLevel::Standard,
        SandboxArg::Off => SandboxLevel::Off,
    }
}

/// How the catalog serves tool schemas.
pub(super) fn schema_profile(common: &Common) -> SchemaProfile {
    match common.schema_profile {
        SchemaProfileArg::AsAuthored => SchemaProfile::AsAuthored,
        SchemaProfileArg::Conservative => SchemaProfile::Conservative,
    }
}

/// Which tools a server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tools {
    /// Built-ins, manifest tools, stored tools, resources and prompts.
    All,
    /// The manifest's tools only (`bridge`).
    ManifestOnly,
}

/// Builds the server library's [`Server`] from the settings: the manifests always; the store,
/// the script tools, stored content and the built-ins with [`Tools::All`] (the authoring
/// built-ins when `authoring`).
pub(super) async fn server(common: &Common, tools: Tools, authoring: bool) -> Result<Server> {
    build(common, tools, authoring, false).await
}

async fn build(common: &Common, tools: Tools, authoring: bool, once: bool) -> Result<Server> {
    let store = match tools {
        Tools::ManifestOnly => None,
        Tools::All => {
            let scripts = &common.scripts;
            let store: Arc<dyn Store> = open_store(common).await?;
            Some(StoreSettings {
                store,
                scripts: ScriptSettings {
                    data_dir: common.data_dir.clone(),
                    python: scripts.python.clone(),
                    uv: scripts.uv.clone(),
                    allow_source_builds: scripts.allow_source_builds,
                    sandbox: sandbox_level(scripts.sandbox),
                    default_timeout: scripts.tool_timeout,
                    max_timeout: scripts.max_tool_timeout,
                    memory_bytes: scripts.memory_limit_bytes,
                    host: omniforge_script::HostEnv::from_vars(std::env::vars_os()),
                    disabled_layers: scripts.disabled_layers.clone(),
                    // A one-shot command answers once and exits: no template to keep warm.
                    warm_pool: if once { 0 } else { scripts.warm_pool },
                    warm_idle: scripts.warm_idle,
                },
                authoring,
                max_result_bytes: scripts.max_result_bytes,
                output_ttl: scripts.output_ttl,
                // A one-shot command does not stay for the hourly prune.
                audit_retention: if once { None } else { scripts.audit_retention },
                keep_failed_drafts: scripts.keep_failed_drafts,
                require_approval: scripts.require_approval,
                tasks: scripts.tasks,
                call_log: scripts.call_log,
                // A one-shot command answers no MCP request: it needs no request-state key.
                request_state_keys: if once {
                    Vec::new()
                } else {
                    request_state_keys(common)?
                },
            })
        }
    };
    let settings = omniforge_server::Settings {
        page_size: common.page_size,
        schema_profile: schema_profile(common),
        manifests: common.manifests.clone(),
        inline_schema_refs: common.inline_schema_refs,
        store,
        metrics_max_tools: common.metrics_max_tools,
        metrics: common.metrics,
    };
    Ok(Server::start(settings).await?)
}

/// A server for a one-shot command: built-in and manifest tool names are reserved as in the
/// server, and every write goes through the same validation.
pub(super) async fn one_shot(common: &Common) -> Result<Server> {
    build(common, Tools::All, true, true).await
}
