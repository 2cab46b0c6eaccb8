//! The server library's parts, built from the settings: the store, the tool catalog, the
//! forge (stored tools) and the content (resources and prompts). The only module that maps
//! settings onto the library's configuration types.

use std::sync::Arc;

use anyhow::{Context, Result};
use omniforge_script::SandboxLevel;
use omniforge_server::catalog::Catalog;
use omniforge_server::schema_profile::SchemaProfile;
use omniforge_server::{builtins, content, forge, manifests, peers};
use omniforge_store::{DEFAULT_BUSY_TIMEOUT, DEFAULT_MAX_READERS, SqliteStore, StoreConfig};

use crate::flags::{Common, SandboxArg, SchemaProfileArg};

/// Opens the tool store in the data directory.
pub(super) async fn open_store(common: &Common) -> Result<SqliteStore> {
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

/// The built-in tools: `omniforge_instructions`, then the authoring ones (all of them listed
/// when `authoring`; otherwise only `omniforge_call_tool`).
pub(super) fn builtin_tools(authoring: bool) -> Vec<omniforge_server::catalog::CatalogTool> {
    let mut tools = builtins::tools();
    tools.extend(forge::builtin_tools(authoring));
    tools.extend(content::builtin_tools(authoring));
    tools
}

/// Loads the manifests into `catalog` (and keeps watching them while the result lives).
pub(super) fn load_manifests(
    common: &Common,
    catalog: &Arc<Catalog>,
) -> Result<manifests::ManifestSource> {
    manifests::start(
        catalog.clone(),
        &common.manifests,
        common.inline_schema_refs,
    )
    .context("loading manifests")
}

/// Opens the store and starts the forge (the stored tool source) on `catalog`.
pub(super) async fn start_forge(
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
    };
    let forge = forge::Forge::start(catalog, store.clone(), config)
        .await
        .context("starting script tools")?;
    Ok((forge, store))
}

/// A forge for a one-shot command: built-in and manifest tool names are reserved as in the
/// server. Returns the store it opened too.
pub(super) async fn one_shot_forge(
    common: &Common,
) -> Result<(Arc<forge::Forge>, Arc<SqliteStore>)> {
    let catalog = Arc::new(Catalog::new(builtin_tools(true)));
    let _manifests = load_manifests(common, &catalog)?;
    start_forge(common, catalog).await
}

/// The stored resources, templates and prompts for a one-shot command (no peers to notify:
/// a running server notices the change by itself).
pub(super) async fn one_shot_content(
    common: &Common,
) -> Result<(Arc<content::Content>, Arc<SqliteStore>)> {
    let (forge, store) = one_shot_forge(common).await?;
    let content = content::Content::start(store.clone(), forge, Arc::new(peers::Peers::default()))
        .await
        .context("reading stored resources and prompts")?;
    Ok((content, store))
}
