//! Script tools: the stored tool source, the authoring built-ins that forge tools, and calls
//! of stored tools.
//!
//! The store (`omniforge-store`) keeps tools and their immutable versions; the script crate
//! (`omniforge-script`) resolves and builds one environment per lock and runs each call in
//! its sandbox. This module turns MCP requests into those operations and their outcomes back
//! into MCP results. Every tool-level problem is an `isError` result that says what is wrong
//! and where.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use omniforge_script::{
    Env, EnvBuilder, EnvConfig, Exit, Interpreter, Lock, ProgressEvent, RunOutput, RunSpec, Runner,
    RunnerConfig, SandboxLevel, ScriptMessage, UvTool, pep723_dependencies, prototype_text,
};
use omniforge_store::{
    Annotations, CallOutcome, CallRecord, Limits, NewVersion, Runtime, StoreError, StoredTool,
    ToolStore, ToolVersion,
};
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::{OnceCell, mpsc};

use crate::auth::{Principal, Scope};
use crate::catalog::{Catalog, CatalogTool, Route, ToolSource, object_schema};
use crate::client_requests::{self, ClientLink};

/// Names of the authoring built-ins.
pub mod names {
    /// Create a tool (version 1).
    pub const CREATE: &str = "omniforge_create_tool";
    /// Add a version to a tool.
    pub const UPDATE: &str = "omniforge_update_tool";
    /// Disable (or purge) a tool.
    pub const DELETE: &str = "omniforge_delete_tool";
    /// Show a tool's source, schemas and versions.
    pub const GET: &str = "omniforge_get_tool";
    /// Make an earlier version current.
    pub const ROLLBACK: &str = "omniforge_rollback_tool";
    /// Run code once without saving it.
    pub const TEST: &str = "omniforge_test_tool";
    /// Call any enabled tool by name.
    pub const CALL: &str = "omniforge_call_tool";
    /// Store a secret (`admin` scope).
    pub const SET_SECRET: &str = "omniforge_set_secret";
    /// Delete a secret (`admin` scope).
    pub const DELETE_SECRET: &str = "omniforge_delete_secret";
    /// List secret names and update times (`admin` scope).
    pub const LIST_SECRETS: &str = "omniforge_list_secrets";
}

/// The longest secret value accepted over MCP, in bytes.
const MAX_SECRET_BYTES: usize = 64 * 1024;

/// How script tools are built and run.
#[derive(Debug, Clone)]
pub struct ForgeConfig {
    /// The server's data directory (environments, uv cache, run scratch files).
    pub data_dir: PathBuf,
    /// The Python interpreter to pin; resolved to its real executable (never a shim).
    pub python: PathBuf,
    /// An explicit uv; otherwise PATH, then `<data_dir>/uv`, else installed there.
    pub uv: Option<PathBuf>,
    /// Allow building dependencies from source distributions (wheels only by default).
    pub allow_source_builds: bool,
    /// Required isolation.
    pub sandbox: SandboxLevel,
    /// Timeout of a call when the tool sets none.
    pub default_timeout: Duration,
    /// The largest timeout a tool may set.
    pub max_timeout: Duration,
    /// Address-space limit of a call, bytes.
    pub memory_bytes: u64,
    /// Most bytes of text a call returns to the client; the rest is cut with a marker.
    pub max_result_bytes: usize,
    /// Whether the authoring built-ins are offered.
    pub authoring: bool,
    /// How long the whole output of a cut result stays readable through its resource link.
    pub output_ttl: Duration,
}

/// The stored tool source and the authoring tools.
pub struct Forge {
    store: Arc<dyn ToolStore>,
    catalog: Arc<Catalog>,
    runner: Runner,
    /// Built on first use: resolving the interpreter and finding (or installing) uv takes
    /// time and may need PyPI, which a server that never forges a tool should not pay for.
    envs: OnceCell<EnvBuilder>,
    config: ForgeConfig,
    /// The store's change counter at the last reload (picks up other processes' writes).
    seen_version: AtomicI64,
    /// Whole outputs of calls whose text was cut, by resource URI, with when they were kept.
    /// A std lock: held for map operations only.
    outputs: std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, String)>>,
}

/// The URI prefix of kept outputs.
pub const RUN_OUTPUT_PREFIX: &str = "omniforge://runs/";

/// The forge could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForgeError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sandbox cannot be set up (e.g. `--sandbox strict` without namespaces).
    #[error(transparent)]
    Run(#[from] omniforge_script::RunError),
}

/// Who asks, and how to reach them while the work runs.
pub struct Caller {
    /// Recorded as a version's author: the token's name, `stdio`, or `cli`.
    pub author: String,
    /// Where progress and log notifications go (none for the CLI).
    peer: Option<rmcp::service::Peer<RoleServer>>,
    /// The request's progress token, when the client gave one.
    progress_token: Option<rmcp::model::ProgressToken>,
    /// Fires when the request is cancelled (or the server shuts down).
    pub ct: tokio_util::sync::CancellationToken,
    /// Whether results may carry `resource_link` content (protocol revision 2025-06-18 on).
    resource_links: bool,
    /// How a script's requests (sampling, elicitation, roots) reach the client.
    client: ClientLink,
    /// Also gets every progress message (the command line shows them on stderr).
    progress_sink: Option<ProgressSink>,
}

/// Receives the progress messages of the work done for a [`Caller`] (environment builds, a
/// script's own progress), whether or not an MCP client asked for them.
pub type ProgressSink = Arc<dyn Fn(&str) + Send + Sync>;

impl Caller {
    /// An MCP request by `principal`.
    pub fn request(ctx: &RequestContext<RoleServer>, principal: &Principal) -> Caller {
        Caller {
            author: principal.name.clone(),
            peer: Some(ctx.peer.clone()),
            progress_token: ctx.meta.get_progress_token(),
            ct: ctx.ct.clone(),
            resource_links: ctx
                .peer
                .peer_info()
                .is_none_or(|info| info.protocol_version.as_str() >= "2025-06-18"),
            client: ClientLink::of(ctx),
            progress_sink: None,
        }
    }

    /// The command line (`omniforge tool ...`): no peer to notify.
    pub fn local(author: &str) -> Caller {
        Caller {
            author: author.to_owned(),
            peer: None,
            progress_token: None,
            ct: tokio_util::sync::CancellationToken::new(),
            resource_links: true,
            client: ClientLink::default(),
            progress_sink: None,
        }
    }

    /// The command line, with progress messages going to `sink`.
    pub fn local_with_progress(author: &str, sink: ProgressSink) -> Caller {
        Caller {
            progress_sink: Some(sink),
            ..Caller::local(author)
        }
    }
}

/// What a stored tool's call needs: its current version.
#[derive(Debug)]
pub struct StoredRoute {
    /// Only what a call reads: the input schema, description and title live in the catalog's
    /// `Tool` alone, and the lock and dependency list stay in the store (10,000 stored tools
    /// held every schema twice).
    version: ToolVersion,
    /// The outputSchema, shared with the catalog's `Tool`.
    output_schema: Option<Arc<JsonObject>>,
    /// The version's outputSchema, compiled at the first call that needs it.
    output_validator: std::sync::OnceLock<Option<Result<jsonschema::Validator, String>>>,
}

impl StoredRoute {
    /// The compiled outputSchema, when the version declares one.
    fn output_validator(&self) -> Option<&Result<jsonschema::Validator, String>> {
        self.output_validator
            .get_or_init(|| {
                self.output_schema.as_ref().map(|s| {
                    jsonschema::validator_for(&Value::Object((**s).clone()))
                        .map_err(|e| e.to_string())
                })
            })
            .as_ref()
    }
}

impl Forge {
    /// Starts the stored tool source: publishes the enabled tools and watches the store for
    /// changes made by other processes (polled every second).
    ///
    /// # Errors
    /// The store cannot be read, or the sandbox level cannot be provided.
    pub async fn start(
        catalog: Arc<Catalog>,
        store: Arc<dyn ToolStore>,
        config: ForgeConfig,
    ) -> Result<Arc<Forge>, ForgeError> {
        let mut runner_config = RunnerConfig::new(config.sandbox);
        runner_config.scratch_dir = config.data_dir.join("run");
        std::fs::create_dir_all(&runner_config.scratch_dir).map_err(|source| {
            omniforge_script::RunError::Io {
                context: "creating the run directory".into(),
                source,
            }
        })?;
        // The runner logs each sandbox layer it detected.
        let runner = Runner::new(runner_config)?;
        let forge = Arc::new(Forge {
            store,
            catalog,
            runner,
            envs: OnceCell::new(),
            config,
            seen_version: AtomicI64::new(i64::MIN),
            outputs: std::sync::Mutex::default(),
        });
        forge.reload().await?;
        tokio::spawn(poll_store(Arc::downgrade(&forge)));
        tokio::spawn(collect_garbage(Arc::downgrade(&forge)));
        Ok(forge)
    }

    /// The sandbox layers in force, for `/healthz` and `doctor`.
    pub fn layers(&self) -> &[omniforge_script::Layer] {
        self.runner.layers()
    }

    /// Re-reads the enabled tools and publishes them.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn reload(&self) -> Result<(), StoreError> {
        let version = self.store.data_version().await?;
        let tools = self.store.list_enabled().await?;
        self.seen_version.store(version, Ordering::Release);
        let mut entries: Vec<_> = tools.into_iter().map(stored_entry).collect();
        // The collect reuses the larger `StoredTool` buffer; give the difference back.
        entries.shrink_to_fit();
        self.catalog.replace_source(ToolSource::Stored, entries);
        Ok(())
    }

    async fn reload_if_changed(&self) {
        match self.store.data_version().await {
            Ok(v) if v != self.seen_version.load(Ordering::Acquire) => {
                if let Err(error) = self.reload().await {
                    tracing::warn!(%error, "reloading stored tools failed");
                }
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "reading the store's change counter failed"),
        }
    }

    async fn envs(&self) -> Result<&EnvBuilder, String> {
        self.envs
            .get_or_try_init(|| async {
                let python = Interpreter::resolve(&self.config.python).await.map_err(|e| e.to_string())?;
                let uv = UvTool::locate_or_install(&self.config.data_dir, self.config.uv.clone(), &python)
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::info!(python = %python.executable().display(), uv = %uv.path().display(), "script environments ready");
                Ok(EnvBuilder::new(EnvConfig {
                    data_dir: self.config.data_dir.clone(),
                    uv,
                    python,
                    allow_source_builds: self.config.allow_source_builds,
                    command_timeout: Duration::from_secs(600),
                }))
            })
            .await
    }

    /// Runs an authoring built-in.
    pub async fn call_builtin(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> CallToolResult {
        let outcome = match name {
            names::CREATE => self.create_or_update(arguments, caller, true).await,
            names::UPDATE => self.create_or_update(arguments, caller, false).await,
            names::DELETE => self.delete(arguments).await,
            names::GET => self.get(arguments).await,
            names::ROLLBACK => self.rollback(arguments).await,
            names::TEST => self.test(arguments, caller).await,
            names::SET_SECRET => self.set_secret(arguments, caller).await,
            names::DELETE_SECRET => self.delete_secret(arguments, caller).await,
            names::LIST_SECRETS => self.list_secrets(arguments).await,
            _ => Err("Unknown or inactive tool".to_owned()),
        };
        match outcome {
            Ok(result) => result,
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
    }

    /// Creates a tool (`create`) or adds a version, from the arguments of
    /// `omniforge_create_tool` / `omniforge_update_tool`; for the command line.
    pub async fn create_or_update_tool(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
        create: bool,
    ) -> CallToolResult {
        self.create_or_update(arguments, caller, create)
            .await
            .unwrap_or_else(error_result)
    }

    /// Runs the current version of the stored tool `name` once, enabled or not; for the
    /// command line (`omniforge tool run`).
    pub async fn run_stored(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> CallToolResult {
        let stored = match self.store.get(name).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return error_result(format!("no tool named {name:?}")),
            Err(e) => return error_result(e.to_string()),
        };
        // A disabled tool does not run, from the command line either (as over MCP).
        if !stored.tool.enabled {
            return error_result(format!(
                "tool {name:?} is disabled; enable it first (omniforge tool enable {name})"
            ));
        }
        let entry = stored_entry(stored);
        if let Err(problems) = entry.check_arguments(&Value::Object(arguments.clone())) {
            return error_result(format!("Arguments do not match inputSchema\n{problems}"));
        }
        match &entry.route {
            Route::Stored(route) => self.call_stored(route, arguments, None, caller).await,
            _ => error_result("Unknown or inactive tool".into()),
        }
    }

    async fn create_or_update(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
        create: bool,
    ) -> Result<CallToolResult, String> {
        let draft: Draft = parse(arguments)?;
        if let Err(e) = omniforge_store::validate_tool_name(&draft.name) {
            return Err(format!("name: {e}"));
        }
        if self.catalog.is_reserved(&draft.name) {
            return Err(format!(
                "name: {:?} is taken by a built-in or manifest tool; choose another name",
                draft.name
            ));
        }
        let existing = self
            .store
            .get(&draft.name)
            .await
            .map_err(|e| e.to_string())?;
        let previous = existing.as_ref().map(|t| &t.current);
        match (create, &existing) {
            (true, Some(_)) => {
                return Err(format!(
                    "name: a tool named {:?} already exists; use omniforge_update_tool to add a version",
                    draft.name
                ));
            }
            (false, None) => {
                return Err(format!(
                    "name: no tool named {:?}; use omniforge_create_tool",
                    draft.name
                ));
            }
            _ => {}
        }
        let spec = self.prepare(draft, previous, caller).await?;
        let name = spec.0;
        let version = if create {
            self.store.create_tool(&name, spec.1).await
        } else {
            self.store.add_version(&name, spec.1).await
        }
        .map_err(|e| e.to_string())?;
        self.reload().await.map_err(|e| e.to_string())?;
        let verb = if create { "Created" } else { "Updated" };
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{verb} tool {name} (version {}). It is listed in tools/list now; clients that ignore \
             notifications/tools/list_changed can call it with omniforge_call_tool.",
            version.number
        ))]))
    }

    /// Validates a draft and builds its environment; returns the name and the version to store.
    async fn prepare(
        &self,
        draft: Draft,
        previous: Option<&ToolVersion>,
        caller: &Caller,
    ) -> Result<(String, NewVersion), String> {
        let previous_spec = previous.map(|v| &v.spec);
        let input_schema = match draft.input_schema {
            Some(schema) => schema,
            None => match previous_spec {
                Some(p) => p.input_schema.clone(),
                None => default_input_schema(),
            },
        };
        check_tool_schema("inputSchema", &input_schema)?;
        let output_schema = match draft.output_schema {
            Some(schema) => Some(schema),
            None => previous_spec.and_then(|p| p.output_schema.clone()),
        };
        if let Some(schema) = &output_schema {
            check_tool_schema("outputSchema", schema)?;
        }
        let code = match (draft.code, previous_spec) {
            (Some(code), _) => code,
            (None, Some(p)) => p.code.clone(),
            (None, None) => return Err("code: required to create a tool".into()),
        };
        let description = match (draft.description, previous_spec) {
            (Some(description), _) => description,
            (None, Some(p)) => p.description.clone(),
            (None, None) => return Err("description: required to create a tool".into()),
        };
        let envs = self.envs().await.map_err(|e| format!("environment: {e}"))?;
        check_code(envs.config().python.executable(), &code).await?;
        // An update keeps whatever it leaves out from the current version.
        let mut dependencies = draft
            .dependencies
            .or_else(|| previous_spec.map(|p| p.dependencies.clone()))
            .unwrap_or_default();
        for dep in pep723_dependencies(&code).map_err(|e| format!("code: {e}"))? {
            if !dependencies.contains(&dep) {
                dependencies.push(dep);
            }
        }
        let timeout = match (draft.timeout_s, previous_spec) {
            (None, Some(p)) => Duration::from_millis(p.limits.timeout_ms),
            (seconds, _) => self.timeout(seconds)?,
        };
        let (lock, _env) = self.build_env(envs, &dependencies, caller).await?;
        let previous_annotations = previous_spec.map(|p| p.annotations).unwrap_or_default();
        let annotations = draft
            .annotations
            .map_or(previous_annotations, |a| Annotations {
                read_only_hint: a.read_only_hint,
                destructive_hint: a.destructive_hint,
                idempotent_hint: a.idempotent_hint,
                open_world_hint: a.open_world_hint,
            });
        let version = NewVersion {
            title: draft
                .title
                .or_else(|| previous_spec.and_then(|p| p.title.clone())),
            description,
            input_schema,
            output_schema,
            annotations,
            runtime: Runtime::Python,
            code,
            dependencies,
            limits: Limits {
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                memory_bytes: self.config.memory_bytes,
                network: draft
                    .network
                    .or(previous_spec.map(|p| p.limits.network))
                    .unwrap_or(false),
            },
            lock: lock.requirements,
            env_id: lock.env_id,
            secrets: draft
                .secrets
                .or_else(|| previous_spec.map(|p| p.secrets.clone()))
                .unwrap_or_default(),
            author: caller.author.clone(),
        };
        Ok((draft.name, version))
    }

    fn timeout(&self, seconds: Option<f64>) -> Result<Duration, String> {
        let Some(seconds) = seconds else {
            return Ok(self.config.default_timeout);
        };
        let max = self.config.max_timeout.as_secs_f64();
        if !(seconds > 0.0 && seconds <= max) {
            return Err(format!(
                "timeout_s: must be more than 0 and at most {max} seconds, got {seconds}"
            ));
        }
        Ok(Duration::from_secs_f64(seconds))
    }

    /// Resolves and builds the environment, sending progress notifications while it installs.
    async fn build_env(
        &self,
        envs: &EnvBuilder,
        dependencies: &[String],
        caller: &Caller,
    ) -> Result<(Lock, Env), String> {
        let progress = Progress::new(caller);
        progress.send(0.0, "resolving dependencies".into()).await;
        let lock = envs
            .lock(dependencies)
            .await
            .map_err(|e| format!("dependencies: {e}"))?;
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let building = lock.clone();
        let build = envs.build(&building, move |event| {
            let text = match event {
                ProgressEvent::Reused => "environment already built".to_owned(),
                ProgressEvent::CreatingVenv => "creating the environment".to_owned(),
                ProgressEvent::Installing { packages } => format!("installing {packages} packages"),
                ProgressEvent::Output(line) => line,
                ProgressEvent::Installed { packages } => format!("installed {packages} packages"),
                _ => return,
            };
            let _ = tx.send(text);
        });
        tokio::pin!(build);
        let mut step = 1.0;
        let env = loop {
            tokio::select! {
                result = &mut build => break result.map_err(|e| format!("dependencies: install failed: {e}"))?,
                Some(message) = rx.recv() => {
                    progress.send(step, message).await;
                    step += 1.0;
                }
            }
        };
        Ok((lock, env))
    }

    async fn delete(&self, arguments: Map<String, Value>) -> Result<CallToolResult, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            #[serde(default)]
            purge: bool,
        }
        let args: Args = parse(arguments)?;
        if args.purge {
            self.store
                .purge(&args.name)
                .await
                .map_err(|e| e.to_string())?;
        } else {
            self.store
                .set_enabled(&args.name, false)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.reload().await.map_err(|e| e.to_string())?;
        let text = if args.purge {
            format!("Purged tool {} and its history.", args.name)
        } else {
            format!(
                "Disabled tool {}; its versions are kept (omniforge_get_tool shows them, \
                 omniforge_rollback_tool enables it again).",
                args.name
            )
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    /// `omniforge_set_secret {name, value}`. The value is never echoed, logged or returned;
    /// errors name the secret and the rule, never the value.
    async fn set_secret(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        let (Some(Value::String(name)), Some(Value::String(value)), 2) = (
            arguments.get("name"),
            arguments.get("value"),
            arguments.len(),
        ) else {
            return Err("arguments: exactly `name` and `value`, both strings".into());
        };
        if value.len() > MAX_SECRET_BYTES {
            return Err(format!(
                "value: at most {MAX_SECRET_BYTES} bytes (got {} bytes)",
                value.len()
            ));
        }
        omniforge_store::validate_secret_name(name).map_err(|e| format!("name: {e}"))?;
        let existed = self
            .store
            .secret_names()
            .await
            .map_err(|e| e.to_string())?
            .contains(name);
        self.store
            .set_secret(name, value)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(secret = %name, by = %caller.author, "secret set");
        let verb = if existed { "Replaced" } else { "Stored" };
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{verb} secret {name}. Tools that list it in `secrets` get it as the environment variable {name} from their next call."
        ))]))
    }

    /// `omniforge_delete_secret {name}`.
    async fn delete_secret(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
        }
        let args: Args = parse(arguments)?;
        self.store
            .delete_secret(&args.name)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(secret = %args.name, by = %caller.author, "secret deleted");
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "Deleted secret {}.",
            args.name
        ))]))
    }

    /// `omniforge_list_secrets`: names and update times, never values.
    async fn list_secrets(&self, arguments: Map<String, Value>) -> Result<CallToolResult, String> {
        if !arguments.is_empty() {
            return Err("arguments: none are taken".into());
        }
        let secrets = self.store.secrets().await.map_err(|e| e.to_string())?;
        let list: Vec<Value> = secrets
            .iter()
            .map(|s| json!({"name": s.name, "updatedAtMs": s.updated_at_ms}))
            .collect();
        let structured = json!({"secrets": list});
        let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
        result.structured_content = Some(structured);
        Ok(result)
    }

    async fn rollback(&self, arguments: Map<String, Value>) -> Result<CallToolResult, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
            version: u32,
        }
        let args: Args = parse(arguments)?;
        self.store
            .rollback(&args.name, args.version)
            .await
            .map_err(|e| e.to_string())?;
        self.store
            .set_enabled(&args.name, true)
            .await
            .map_err(|e| e.to_string())?;
        self.reload().await.map_err(|e| e.to_string())?;
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "Tool {} now runs version {} and is enabled.",
            args.name, args.version
        ))]))
    }

    async fn get(&self, arguments: Map<String, Value>) -> Result<CallToolResult, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
        }
        let args: Args = parse(arguments)?;
        let Some(stored) = self
            .store
            .get(&args.name)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Err(format!("name: no tool named {:?}", args.name));
        };
        let versions = self
            .store
            .versions(&args.name)
            .await
            .map_err(|e| e.to_string())?;
        let view = describe_tool(&stored, &versions);
        let mut result = CallToolResult::success(vec![ContentBlock::text(
            serde_json::to_string_pretty(&view).unwrap_or_default(),
        )]);
        result.structured_content = Some(view);
        Ok(result)
    }

    async fn test(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> Result<CallToolResult, String> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            code: String,
            #[serde(default)]
            arguments: Option<Map<String, Value>>,
            #[serde(default)]
            dependencies: Option<Vec<String>>,
            #[serde(default)]
            timeout_s: Option<f64>,
            #[serde(default)]
            network: Option<bool>,
        }
        let args: Args = parse(arguments)?;
        let envs = self.envs().await.map_err(|e| format!("environment: {e}"))?;
        check_code(envs.config().python.executable(), &args.code).await?;
        let mut dependencies = args.dependencies.unwrap_or_default();
        for dep in pep723_dependencies(&args.code).map_err(|e| format!("code: {e}"))? {
            if !dependencies.contains(&dep) {
                dependencies.push(dep);
            }
        }
        let timeout = self.timeout(args.timeout_s)?;
        let (_, env) = self.build_env(envs, &dependencies, caller).await?;
        let mut spec = RunSpec::new(&env, args.code);
        spec.arguments = Value::Object(args.arguments.unwrap_or_default());
        spec.timeout = timeout;
        spec.memory_bytes = self.config.memory_bytes;
        spec.network = args.network.unwrap_or(false);
        let (result, _) = self.run(spec, None, None, &[], caller).await;
        Ok(result)
    }

    /// Calls a stored tool.
    ///
    /// `log_level` is the level the peer set with `logging/setLevel`: script log messages at
    /// or above it are sent as `notifications/message` (default: info and above).
    pub async fn call_stored(
        &self,
        route: &StoredRoute,
        arguments: Map<String, Value>,
        log_level: Option<&str>,
        caller: &Caller,
    ) -> CallToolResult {
        let version = &route.version;
        let spec_v = &version.spec;
        let env = Env {
            path: self.config.data_dir.join("envs").join(&spec_v.env_id),
            env_id: spec_v.env_id.clone(),
        };
        let mut spec = RunSpec::new(&env, spec_v.code.clone());
        spec.arguments = Value::Object(arguments);
        spec.timeout = Duration::from_millis(spec_v.limits.timeout_ms);
        spec.memory_bytes = spec_v.limits.memory_bytes;
        spec.network = spec_v.limits.network;
        let mut secret_values = Vec::new();
        if !spec_v.secrets.is_empty() {
            match self.store.secret_values(&spec_v.secrets).await {
                Ok(values) => {
                    spec.env = values
                        .into_iter()
                        .map(|(k, v)| (k, v.into_inner()))
                        .collect();
                    secret_values = spec.env.iter().map(|(_, v)| v.clone()).collect();
                }
                Err(e) => {
                    return CallToolResult::error(vec![ContentBlock::text(format!(
                        "secrets: {e}"
                    ))]);
                }
            }
        }
        let started_at_ms = now_ms();
        let (mut result, outcome) = self
            .run(spec, Some(route), log_level, &secret_values, caller)
            .await;
        redact(&mut result, &secret_values);
        let bytes_out: usize = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        let record = CallRecord {
            tool: version.tool.clone(),
            version: version.number,
            started_at_ms,
            duration_ms: u64::try_from(now_ms() - started_at_ms).unwrap_or(0),
            outcome,
            bytes_out: bytes_out as u64,
        };
        if let Err(error) = self.store.record_call(record).await {
            tracing::warn!(%error, "recording a call failed");
        }
        result
    }

    /// Runs one script and shapes its result; forwards its progress and log messages.
    async fn run(
        &self,
        mut spec: RunSpec,
        route: Option<&StoredRoute>,
        log_level: Option<&str>,
        secrets: &[String],
        caller: &Caller,
    ) -> (CallToolResult, CallOutcome) {
        let (tx, mut rx) = mpsc::channel::<ScriptMessage>(64);
        spec.messages = Some(tx);
        let progress = Progress::new(caller);
        let threshold = level_rank(log_level.unwrap_or("info")).unwrap_or(1);
        let run = self.runner.run(spec, caller.ct.clone());
        tokio::pin!(run);
        // Clients time out silent requests (often after 60 s): after 15 s without progress,
        // send a heartbeat progress notification ourselves.
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + HEARTBEAT, HEARTBEAT);
        // The script's requests to the client, answered concurrently in this task (so rmcp
        // associates them with the call); `ended` cancels those still waiting when the run ends.
        let ended = tokio_util::sync::CancellationToken::new();
        let mut asks = futures::stream::FuturesUnordered::new();
        let output = loop {
            tokio::select! {
                output = &mut run => break output,
                Some(()) = asks.next(), if !asks.is_empty() => {}
                _ = heartbeat.tick() => progress.heartbeat().await,
                Some(message) = rx.recv() => match message {
                    ScriptMessage::Progress(p) => {
                        heartbeat.reset();
                        let message = p.message.map(|m| scrub(&m, secrets));
                        progress.send_raw(p.done, p.total, message).await;
                    }
                    ScriptMessage::Log(log) => {
                        let rank = level_rank(&log.level);
                        if rank.is_some_and(|r| r >= threshold)
                            && let Ok(level) = serde_json::from_value(Value::String(log.level.clone()))
                        {
                            #[allow(deprecated)] // logging is part of every revision before 2026-07-28
                            let param = rmcp::model::LoggingMessageNotificationParam::new(level, scrub_value(log.data, secrets)).with_logger("script");
                            #[allow(deprecated)]
                            if let Some(peer) = &caller.peer
                                && let Err(error) = peer.notify_logging_message(param).await
                            {
                                tracing::debug!(%error, "log message not delivered");
                            }
                        }
                    }
                    ScriptMessage::Request(request) if asks.len() >= MAX_PENDING_ASKS => {
                        request.respond(Err(omniforge_script::RpcError {
                            code: client_requests::code::INVALID_REQUEST,
                            message: format!(
                                "too many requests to the client at once (at most {MAX_PENDING_ASKS}); \
                                 wait for an answer first"
                            ),
                            data: None,
                        }));
                    }
                    ScriptMessage::Request(request) => {
                        asks.push(client_requests::answer(request, &caller.client, &ended, secrets));
                    }
                    _ => {}
                }
            }
        };
        ended.cancel();
        while asks.next().await.is_some() {}
        drop(asks);
        // A stream the script closed: hold the answer until the client has resumed it.
        if let Some(stream) = &caller.client.stream {
            stream.settle(&caller.ct).await;
        }
        let output = match output {
            Ok(output) => output,
            Err(omniforge_script::RunError::Busy) => {
                return (
                    error_result("busy: too many tool calls are running; try again shortly".into()),
                    CallOutcome::Error,
                );
            }
            Err(e) => {
                return (
                    error_result(format!("the script could not be started: {e}")),
                    CallOutcome::Error,
                );
            }
        };
        let outcome = match output.exit {
            Exit::Code(0) => CallOutcome::Ok,
            Exit::Code(n) => CallOutcome::Exit(n),
            Exit::Signal(s) => CallOutcome::Exit(-s),
            Exit::Timeout => CallOutcome::Timeout,
            Exit::Cancelled => CallOutcome::Cancelled,
        };
        (
            self.shape(&output, route, secrets, caller.resource_links),
            outcome,
        )
    }

    fn shape(
        &self,
        output: &RunOutput,
        route: Option<&StoredRoute>,
        secrets: &[String],
        resource_links: bool,
    ) -> CallToolResult {
        let failed = !output.exit.is_success();
        // A result given through the helper module wins over stdout.
        if !failed && let Some(given) = &output.result {
            return self.given_result(given, route);
        }
        let with_schema = route.and_then(StoredRoute::output_validator);
        if !failed && let Some(validator) = with_schema {
            let stdout = String::from_utf8_lossy(&output.stdout);
            return match serde_json::from_str::<Value>(stdout.trim()) {
                Ok(value @ Value::Object(_)) => match check_output(validator, &value) {
                    Ok(()) => structured_result(value, self.config.max_result_bytes),
                    Err(problems) => error_result(format!(
                        "the result does not match the tool's outputSchema\n{problems}"
                    )),
                },
                _ => error_result(format!(
                    "the tool declares an outputSchema, so its stdout must be one JSON object; got: {}",
                    cut(stdout.trim(), 500)
                )),
            };
        }
        let (text, is_error) = prototype_text(output, None);
        let mut blocks = Vec::new();
        if text.len() > self.config.max_result_bytes {
            // Keep the whole captured output for a while and link to it (WIRE-30: clients cap
            // what they take from one result).
            let uri = self.keep_output(scrub(&text, secrets));
            let cut_text = format!(
                "{}\n[the whole output: {uri}]",
                cut(&text, self.config.max_result_bytes)
            );
            blocks.push(ContentBlock::text(cut_text));
            if resource_links {
                blocks.push(ContentBlock::resource_link(
                    rmcp::model::Resource::new(uri, "output")
                        .with_description("The whole captured output of this tool call")
                        .with_mime_type("text/plain")
                        .with_size(text.len() as u64),
                ));
            }
        } else {
            blocks.push(ContentBlock::text(text));
        }
        let mut result = CallToolResult::success(blocks);
        result.is_error = Some(is_error);
        result
    }

    /// Keeps `text` for [`ForgeConfig::output_ttl`]; returns its `omniforge://runs/{id}/output` URI.
    fn keep_output(&self, text: String) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let uri = format!("{RUN_OUTPUT_PREFIX}{id}/output");
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        let now = std::time::Instant::now();
        let ttl = self.config.output_ttl;
        outputs.retain(|_, (at, _)| now.duration_since(*at) < ttl);
        outputs.insert(uri.clone(), (now, text));
        uri
    }

    /// The kept output a run's resource link points to, while it lasts.
    pub fn read_output(&self, uri: &str) -> Option<String> {
        let outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outputs
            .get(uri)
            .filter(|(at, _)| at.elapsed() < self.config.output_ttl)
            .map(|(_, text)| text.clone())
    }

    /// The result a script gave through the helper module (`omniforge.result`).
    fn given_result(
        &self,
        given: &omniforge_script::ScriptResult,
        route: Option<&StoredRoute>,
    ) -> CallToolResult {
        let content = given.content.clone();
        let structured = given.structured.clone();
        // An error result reports a failure, not the promised structure: its structured
        // content is not checked against the outputSchema.
        if !given.is_error
            && let (Some(value), Some(validator)) =
                (&structured, route.and_then(StoredRoute::output_validator))
            && let Err(problems) = check_output(validator, value)
        {
            return error_result(format!(
                "the result does not match the tool's outputSchema\n{problems}"
            ));
        }
        let mut blocks = Vec::new();
        match content {
            Some(Value::String(text)) => {
                blocks.push(ContentBlock::text(cut(&text, self.config.max_result_bytes)))
            }
            Some(Value::Array(items)) => {
                for (index, item) in items.into_iter().enumerate() {
                    match content_block(item) {
                        Ok(block) => blocks.push(block),
                        Err(why) => {
                            return error_result(format!(
                                "the script's result content item {index} is not valid MCP \
                                 content: {why}"
                            ));
                        }
                    }
                }
            }
            Some(item @ Value::Object(_)) => match content_block(item) {
                Ok(block) => blocks.push(block),
                Err(why) => {
                    return error_result(format!(
                        "the script's result content is not valid MCP content: {why}"
                    ));
                }
            },
            Some(other) => {
                return error_result(format!(
                    "the script's result content must be a list of content items, one item or a \
                     string; got {}",
                    json_kind(&other)
                ));
            }
            None => {}
        }
        if blocks.is_empty()
            && let Some(value) = &structured
        {
            blocks.push(ContentBlock::text(value.to_string()));
        }
        let mut result = CallToolResult::success(blocks);
        result.structured_content = structured.filter(Value::is_object);
        if given.is_error {
            result.is_error = Some(true);
        }
        result
    }
}

/// One content item of a script's result, checked: a known `type` with its required fields,
/// and base64 where MCP says base64. The error says what is wrong.
fn content_block(item: Value) -> Result<ContentBlock, String> {
    use base64::Engine as _;
    let kind = match item.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(other) => {
            return Err(format!(
                "\"type\" must be a string, got {}",
                json_kind(other)
            ));
        }
        None => {
            return Err(
                "it has no \"type\" (one of text, image, audio, resource, resource_link)".into(),
            );
        }
    };
    if !matches!(
        kind.as_str(),
        "text" | "image" | "audio" | "resource" | "resource_link"
    ) {
        return Err(format!(
            "unknown type {kind:?} (one of text, image, audio, resource, resource_link)"
        ));
    }
    let base64_field = |pointer: &str, field: &str| -> Result<(), String> {
        match item.pointer(pointer) {
            Some(Value::String(data)) => base64::engine::general_purpose::STANDARD
                .decode(data)
                .map(|_| ())
                .map_err(|e| format!("{kind}: \"{field}\" is not base64 ({e})")),
            _ => Ok(()),
        }
    };
    match kind.as_str() {
        "image" | "audio" => base64_field("/data", "data")?,
        "resource" => {
            let contents = item.get("resource");
            if contents.is_some_and(|c| c.get("text").is_none() && c.get("blob").is_none()) {
                return Err("resource: \"resource\" needs \"text\" or \"blob\"".into());
            }
            base64_field("/resource/blob", "resource.blob")?;
        }
        _ => {}
    }
    serde_json::from_value::<ContentBlock>(item).map_err(|e| format!("{kind}: {e}"))
}

/// "an object", "a number", ...: for error messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Most requests one run may have waiting for the client at once: a script cannot flood the
/// client (or the user, for elicitation) with requests.
const MAX_PENDING_ASKS: usize = 8;

/// How long a script may be silent before the server sends a heartbeat progress notification.
const HEARTBEAT: Duration = Duration::from_secs(15);

/// The rank of an MCP log level (RFC 5424 order), `None` for an unknown name.
fn level_rank(level: &str) -> Option<u8> {
    [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ]
    .iter()
    .position(|l| *l == level)
    .and_then(|i| u8::try_from(i).ok())
}

/// `text` with every exact secret value of at least 4 bytes replaced by `[redacted]`.
fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .filter(|s| s.len() >= 4)
        .fold(text.to_owned(), |t, s| t.replace(s.as_str(), "[redacted]"))
}

/// `value` with every exact secret value (of at least 4 bytes) in its strings replaced by
/// `[redacted]` (the whole value becomes `"[redacted]"` if the replacement breaks its JSON).
pub(crate) fn scrub_value(value: Value, secrets: &[String]) -> Value {
    if !secrets.iter().any(|s| s.len() >= 4) {
        return value;
    }
    let json = value.to_string();
    let cleaned = scrub(&json, secrets);
    if cleaned == json {
        return value;
    }
    serde_json::from_str(&cleaned).unwrap_or_else(|_| Value::String("[redacted]".into()))
}

/// Replaces every exact secret value (of at least 4 bytes) in the result with `[redacted]`.
fn redact(result: &mut CallToolResult, secrets: &[String]) {
    if !secrets.iter().any(|s| s.len() >= 4) {
        return;
    }
    let scrub = |text: &str| scrub(text, secrets);
    for block in &mut result.content {
        if let Some(text) = block.as_text() {
            let cleaned = scrub(&text.text);
            if cleaned != text.text {
                *block = ContentBlock::text(cleaned);
            }
        } else if let Ok(json) = serde_json::to_string(&*block) {
            // Rich content (an embedded resource's text, a link's uri or name, ...).
            let cleaned = scrub(&json);
            if cleaned != json {
                *block = serde_json::from_str(&cleaned)
                    .unwrap_or_else(|_| ContentBlock::text("[redacted]"));
            }
        }
    }
    if let Some(structured) = &result.structured_content {
        let cleaned = scrub(&structured.to_string());
        result.structured_content = serde_json::from_str(&cleaned)
            .ok()
            .or(Some(Value::Null))
            .filter(|v| !v.is_null());
    }
}

async fn poll_store(forge: std::sync::Weak<Forge>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(forge) = forge.upgrade() else { return };
        forge.reload_if_changed().await;
    }
}

/// Removes environments no version uses any more, every hour (first after ten minutes).
async fn collect_garbage(forge: std::sync::Weak<Forge>) {
    tokio::time::sleep(Duration::from_secs(600)).await;
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tick.tick().await;
        let Some(forge) = forge.upgrade() else { return };
        let envs_dir = forge.config.data_dir.join("envs");
        match forge.store.env_ids_in_use().await {
            Ok(in_use) => match omniforge_script::gc(&envs_dir, &in_use) {
                Ok(removed) if !removed.is_empty() => {
                    tracing::info!(removed = removed.len(), "removed unused environments")
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "removing unused environments failed"),
            },
            Err(error) => tracing::warn!(%error, "reading the environments in use failed"),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn error_result(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn structured_result(value: Value, max_bytes: usize) -> CallToolResult {
    let text = cut(&value.to_string(), max_bytes);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

fn check_output(
    validator: &Result<jsonschema::Validator, String>,
    value: &Value,
) -> Result<(), String> {
    match validator {
        Ok(v) => crate::schema::check(v, value),
        Err(e) => Err(format!("the outputSchema does not compile: {e}")),
    }
}

/// Cuts `text` to at most `max` bytes (at a character boundary) with a marker saying how
/// many bytes were left out.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[{} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
}

/// What `omniforge_get_tool` and `omniforge tool show` print: a stored tool's current version
/// (code, schemas, dependencies, lock, limits, secret names) and its versions. Never secret values.
pub fn describe_tool(stored: &StoredTool, versions: &[ToolVersion]) -> Value {
    let spec = &stored.current.spec;
    json!({
        "name": stored.tool.name,
        "enabled": stored.tool.enabled,
        "currentVersion": stored.tool.current_version,
        "title": spec.title,
        "description": spec.description,
        "code": spec.code,
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema,
        "dependencies": spec.dependencies,
        "lock": spec.lock,
        "limits": {"timeout_s": spec.limits.timeout_ms as f64 / 1000.0, "memory_bytes": spec.limits.memory_bytes, "network": spec.limits.network},
        "secrets": spec.secrets,
        "versions": versions.iter().map(|v| json!({
            "number": v.number,
            "createdAtMs": v.created_at_ms,
            "author": v.spec.author,
            "description": v.spec.description,
        })).collect::<Vec<_>>(),
    })
}

/// A catalog entry for a stored tool's current version.
fn stored_entry(stored: StoredTool) -> CatalogTool {
    let StoredTool {
        tool: row,
        current: mut version,
    } = stored;
    let spec = &mut version.spec;
    // Served as authored, except that an object schema without `properties` gets `{}`:
    // OpenAI-backed clients reject it otherwise (WIRE-24).
    let mut input_schema = std::mem::take(&mut spec.input_schema);
    if !input_schema.contains_key("properties") {
        input_schema.insert("properties".into(), json!({}));
    }
    let mut tool = Tool::new(
        row.name,
        std::mem::take(&mut spec.description),
        Arc::new(input_schema),
    );
    if let Some(title) = spec.title.take() {
        tool = tool.with_title(title);
    }
    let output_schema = spec.output_schema.take().map(Arc::new);
    if let Some(output) = &output_schema {
        tool = tool.with_raw_output_schema(output.clone());
    }
    let a = spec.annotations;
    if a != Annotations::default() {
        let mut annotations = ToolAnnotations::new();
        annotations.read_only_hint = a.read_only_hint;
        annotations.destructive_hint = a.destructive_hint;
        annotations.idempotent_hint = a.idempotent_hint;
        annotations.open_world_hint = a.open_world_hint;
        tool = tool.with_annotations(annotations);
    }
    // A call needs neither of these; `omniforge_get_tool` reads them from the store.
    spec.lock = String::new();
    spec.dependencies = Vec::new();
    let route = StoredRoute {
        version,
        output_schema,
        output_validator: std::sync::OnceLock::new(),
    };
    CatalogTool::new(
        tool,
        ToolSource::Stored,
        Route::Stored(Arc::new(route)),
        Scope::Call,
    )
}

fn default_input_schema() -> JsonObject {
    json!({"type": "object", "properties": {}})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// A tool schema must compile as JSON Schema 2020-12, have root `type: object`, and resolve
/// every reference within itself.
fn check_tool_schema(field: &str, schema: &JsonObject) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "{field}: the root must be {{\"type\": \"object\", ...}} (MCP tools take and return JSON objects); got {}",
            cut(&Value::Object(schema.clone()).to_string(), 200)
        ));
    }
    if let Some(dialect) = schema.get("$schema").and_then(Value::as_str)
        && !dialect.contains("2020-12")
    {
        return Err(format!(
            "{field}: $schema must be JSON Schema 2020-12, got {dialect:?}"
        ));
    }
    jsonschema::draft202012::options()
        .build(&Value::Object(schema.clone()))
        .map(|_| ())
        .map_err(|e| format!("{field}: not a valid JSON Schema 2020-12: {e}"))
}

/// Byte-compiles `code` with the pinned interpreter; the error names the line.
async fn check_code(python: &std::path::Path, code: &str) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    const CHECK: &str = "import sys\nsrc = sys.stdin.read()\ntry:\n    compile(src, 'tool.py', 'exec')\nexcept SyntaxError as e:\n    print(f'line {e.lineno}, column {e.offset}: {e.msg}: {(e.text or \"\").strip()}')\n    sys.exit(1)\n";
    let mut child = tokio::process::Command::new(python)
        .args(["-I", "-c", CHECK])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("code: cannot start {}: {e}", python.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(code.as_bytes()).await;
    }
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .map_err(|_| "code: the syntax check timed out".to_owned())?
        .map_err(|e| format!("code: syntax check failed: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        let detail = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let detail = if detail.is_empty() {
            String::from_utf8_lossy(&output.stderr).trim().to_owned()
        } else {
            detail
        };
        Err(format!("code: does not compile: {detail}"))
    }
}

/// The arguments of create and update.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Draft {
    name: String,
    /// Required to create; an update without it keeps the current version's.
    description: Option<String>,
    /// Required to create; an update without it keeps the current version's.
    code: Option<String>,
    #[serde(rename = "inputSchema")]
    input_schema: Option<JsonObject>,
    #[serde(rename = "outputSchema")]
    output_schema: Option<JsonObject>,
    title: Option<String>,
    dependencies: Option<Vec<String>>,
    annotations: Option<DraftAnnotations>,
    timeout_s: Option<f64>,
    network: Option<bool>,
    secrets: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DraftAnnotations {
    read_only_hint: Option<bool>,
    destructive_hint: Option<bool>,
    idempotent_hint: Option<bool>,
    open_world_hint: Option<bool>,
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments)).map_err(|e| format!("arguments: {e}"))
}

/// Sends `notifications/progress` for the request, when the client gave a progress token.
struct Progress {
    sink: Option<ProgressSink>,
    token: Option<rmcp::model::ProgressToken>,
    peer: Option<rmcp::service::Peer<RoleServer>>,
    last: std::sync::Mutex<f64>,
}

impl Progress {
    fn new(caller: &Caller) -> Progress {
        Progress {
            sink: caller.progress_sink.clone(),
            token: caller.progress_token.clone(),
            peer: caller.peer.clone(),
            last: std::sync::Mutex::new(f64::MIN),
        }
    }

    async fn send(&self, done: f64, message: String) {
        self.send_raw(done, None, Some(message)).await;
    }

    /// A "still running" notification, slightly above the last value sent.
    async fn heartbeat(&self) {
        let next = {
            let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
            if last == f64::MIN { 0.0 } else { last + 0.001 }
        };
        self.send_raw(next, None, Some("still running".to_owned()))
            .await;
    }

    /// Sends a progress value; values that do not increase are dropped (the spec requires
    /// progress to increase with each notification).
    async fn send_raw(&self, done: f64, total: Option<f64>, message: Option<String>) {
        if let (Some(sink), Some(message)) = (&self.sink, &message) {
            sink(message);
        }
        let (Some(token), Some(peer)) = (&self.token, &self.peer) else {
            return;
        };
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if done <= *last {
                return;
            }
            *last = done;
        }
        let mut param = ProgressNotificationParam::new(token.clone(), done);
        if let Some(total) = total {
            param = param.with_total(total);
        }
        if let Some(message) = message {
            param = param.with_message(message);
        }
        if let Err(error) = peer.notify_progress(param).await {
            tracing::debug!(%error, "progress not delivered");
        }
    }
}

/// The authoring built-ins, in catalog order (after `omniforge_instructions`).
pub fn builtin_tools(authoring: bool) -> Vec<CatalogTool> {
    let object = object_schema;
    let draft_properties = json!({
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "Tool name: letters, digits, _ and -, at most 64."},
        "description": {"type": "string", "description": "What the tool does, for the model that will call it."},
        "code": {"type": "string", "description": "Python source. Arguments arrive as JSON on stdin (or omniforge.args()); print the result."},
        "inputSchema": {"type": "object", "description": "JSON Schema 2020-12 of the arguments; root type object. Default: {\"type\":\"object\",\"properties\":{}}."},
        "outputSchema": {"type": "object", "description": "JSON Schema of the result; then stdout must be one JSON object, returned as structuredContent."},
        "title": {"type": "string"},
        "dependencies": {"type": "array", "items": {"type": "string"}, "description": "PEP 508 requirements, e.g. \"python-dateutil>=2.9\"; a PEP 723 # /// script block in the code is read too."},
        "annotations": {"type": "object", "properties": {
            "readOnlyHint": {"type": "boolean"}, "destructiveHint": {"type": "boolean"},
            "idempotentHint": {"type": "boolean"}, "openWorldHint": {"type": "boolean"}}, "additionalProperties": false},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "Wall-clock limit per call, seconds (default 30)."},
        "network": {"type": "boolean", "description": "Allow network access at call time (default false)."},
        "secrets": {"type": "array", "items": {"type": "string"}, "description": "Names of stored secrets to pass as environment variables."}
    });
    let draft_schema = |required: &[&str]| {
        object(json!({
            "type": "object", "properties": draft_properties.clone(), "required": required, "additionalProperties": false
        }))
    };
    let name_only = object(
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
    );
    let write =
        |name: &str, description: &str, schema: Arc<JsonObject>, annotations: ToolAnnotations| {
            CatalogTool::builtin(name, description, schema, annotations, Scope::Write)
        };
    let mut tools = Vec::new();
    if authoring {
        tools.push(write(
            names::CREATE,
            "Create a new tool from Python code (version 1). Validates the name, schemas and code, installs the dependencies (progress is reported), stores it and announces tools/list_changed. Call omniforge_instructions first for the authoring guide.",
            draft_schema(&["name", "description", "code"]),
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
        ));
        tools.push(write(
            names::UPDATE,
            "Add a new version of an existing tool (same fields as omniforge_create_tool; every field left out but name - description, code, schemas, title, dependencies, annotations, timeout_s, network, secrets - is kept from the current version).",
            draft_schema(&["name"]),
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(false).open_world(false),
        ));
        tools.push(write(
            names::DELETE,
            "Disable a tool, keeping its history; with purge: true, remove it and its history for good.",
            object(json!({"type": "object", "properties": {"name": {"type": "string"}, "purge": {"type": "boolean", "default": false}}, "required": ["name"], "additionalProperties": false})),
            ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(false),
        ));
        tools.push(write(
            names::GET,
            "Show a stored tool: its source, schemas, dependencies, lock, limits and versions.",
            name_only,
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ));
        tools.push(write(
            names::ROLLBACK,
            "Make an earlier version of a tool current (and enable the tool).",
            object(json!({"type": "object", "properties": {"name": {"type": "string"}, "version": {"type": "integer", "minimum": 1}}, "required": ["name", "version"], "additionalProperties": false})),
            ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(false),
        ));
        tools.push(write(
            names::TEST,
            "Run Python code once with the given arguments in the same sandbox, without saving anything.",
            object(json!({"type": "object", "properties": {
                "code": {"type": "string"}, "arguments": {"type": "object"},
                "dependencies": {"type": "array", "items": {"type": "string"}},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0}, "network": {"type": "boolean"}},
                "required": ["code"], "additionalProperties": false})),
            ToolAnnotations::new().read_only(true).destructive(false).idempotent(false).open_world(false),
        ));
    }
    if authoring {
        let admin = |name: &str, description: &str, schema: Value, annotations: ToolAnnotations| {
            CatalogTool::builtin(name, description, object(schema), annotations, Scope::Admin)
        };
        tools.push(admin(
            names::SET_SECRET,
            "Store a secret (admin only). Tools that list its name in `secrets` get the value as an environment variable; it never appears in tool definitions, logs or results (an exact value in a tool's output is redacted).",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "Secret name, also the environment variable: letters, digits and _, not starting with a digit, at most 64."},
                "value": {"type": "string", "description": "The secret value (at most 64 KiB)."}},
                "required": ["name", "value"], "additionalProperties": false}),
            ToolAnnotations::new().read_only(false).destructive(true).idempotent(true).open_world(false),
        ));
        tools.push(admin(
            names::DELETE_SECRET,
            "Delete a secret (admin only). Tools that list it no longer get it.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
            ToolAnnotations::new().read_only(false).destructive(true).idempotent(false).open_world(false),
        ));
        tools.push(admin(
            names::LIST_SECRETS,
            "List the stored secrets (admin only): names and when each was last set, never values.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ));
    }
    tools.push(CatalogTool::new(
        Tool::new(
            names::CALL,
            "Call any enabled tool by name with arguments, under your own permissions. For clients that cannot see tools forged during the session.",
            object(json!({"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}}, "required": ["name"], "additionalProperties": false})),
        )
        .with_annotations(ToolAnnotations::new().open_world(true)),
        ToolSource::Builtin,
        Route::Builtin,
        Scope::Call,
    ));
    tools
}

// ---------------------------------------------------------------------------------------
// For resource templates, prompt completions and packs (`crate::content`, `crate::pack`):
// the same validation, environments and sandbox as tools, without storing a tool.
// ---------------------------------------------------------------------------------------

impl Forge {
    /// Validates `omniforge_create_tool` arguments and builds the tool's environment, without
    /// storing anything; returns the name and the version a pack import would store. Fields
    /// left out get their defaults (a pack entry is a whole definition).
    ///
    /// # Errors
    /// The same texts as `omniforge_create_tool` (`name: ...`, `inputSchema: ...`, `code: ...`).
    pub async fn prepare_tool(
        &self,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> Result<(String, NewVersion), String> {
        let draft: Draft = parse(arguments)?;
        if let Err(e) = omniforge_store::validate_tool_name(&draft.name) {
            return Err(format!("name: {e}"));
        }
        if self.catalog.is_reserved(&draft.name) {
            return Err(format!(
                "name: {:?} is taken by a built-in or manifest tool; choose another name",
                draft.name
            ));
        }
        self.prepare(draft, None, caller).await
    }

    /// Checks `code` (it must compile), reads its PEP 723 dependencies, checks the timeout and
    /// builds the environment (with progress notifications to `caller`); the result can run
    /// with [`run_script`](Forge::run_script). `field` names the code in error texts.
    ///
    /// # Errors
    /// A text naming `field`, `dependencies` or `timeout_s`.
    pub async fn prepare_script(
        &self,
        field: &str,
        code: String,
        dependencies: Vec<String>,
        timeout_s: Option<f64>,
        network: Option<bool>,
        caller: &Caller,
    ) -> Result<omniforge_store::ScriptSpec, String> {
        let envs = self.envs().await.map_err(|e| format!("environment: {e}"))?;
        check_code(envs.config().python.executable(), &code)
            .await
            .map_err(|e| e.replacen("code:", &format!("{field}:"), 1))?;
        let mut dependencies = dependencies;
        for dep in pep723_dependencies(&code).map_err(|e| format!("{field}: {e}"))? {
            if !dependencies.contains(&dep) {
                dependencies.push(dep);
            }
        }
        let timeout = self.timeout(timeout_s)?;
        let (lock, _env) = self.build_env(envs, &dependencies, caller).await?;
        Ok(omniforge_store::ScriptSpec {
            code,
            dependencies,
            lock: lock.requirements,
            env_id: lock.env_id,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            memory_bytes: self.config.memory_bytes,
            network: network.unwrap_or(false),
        })
    }

    /// Runs a stored script once in the tools' sandbox with `input` as its JSON stdin; returns
    /// its stdout when it exits 0.
    ///
    /// # Errors
    /// The script could not start, failed (its output, `[stderr]`, `[exit N]`), or timed out.
    pub async fn run_script(
        &self,
        script: &omniforge_store::ScriptSpec,
        input: Value,
        ct: tokio_util::sync::CancellationToken,
    ) -> Result<String, String> {
        let env = Env {
            path: self.config.data_dir.join("envs").join(&script.env_id),
            env_id: script.env_id.clone(),
        };
        let mut spec = RunSpec::new(&env, script.code.clone());
        spec.arguments = input;
        spec.timeout = Duration::from_millis(script.timeout_ms);
        spec.memory_bytes = script.memory_bytes;
        spec.network = script.network;
        let output = match self.runner.run(spec, ct).await {
            Ok(output) => output,
            Err(omniforge_script::RunError::Busy) => {
                return Err("busy: too many scripts are running; try again shortly".into());
            }
            Err(e) => return Err(format!("the script could not be started: {e}")),
        };
        if output.exit.is_success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(prototype_text(&output, None).0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_must_be_objects_and_valid() {
        let ok = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}});
        assert!(check_tool_schema("inputSchema", ok.as_object().unwrap()).is_ok());
        let not_object = json!({"anyOf": [{"type": "object"}]});
        let err = check_tool_schema("inputSchema", not_object.as_object().unwrap()).unwrap_err();
        assert!(err.starts_with("inputSchema: the root must be"), "{err}");
        let dangling = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}});
        let err = check_tool_schema("outputSchema", dangling.as_object().unwrap()).unwrap_err();
        assert!(
            err.starts_with("outputSchema: not a valid JSON Schema"),
            "{err}"
        );
        let remote =
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/x.json"}}});
        assert!(check_tool_schema("inputSchema", remote.as_object().unwrap()).is_err());
    }

    #[test]
    fn secrets_are_redacted_from_text_rich_and_structured_content() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("token=s3cr3t-value ok")]);
        result.structured_content = Some(json!({"t": "s3cr3t-value"}));
        redact(&mut result, &["s3cr3t-value".to_owned(), "ab".to_owned()]);
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some("token=[redacted] ok")
        );
        assert_eq!(result.structured_content, Some(json!({"t": "[redacted]"})));

        let mut result = CallToolResult::success(vec![
            content_block(json!({"type": "resource", "resource": {
                "uri": "test://r", "mimeType": "text/plain", "text": "key s3cr3t-value"}}))
            .unwrap(),
        ]);
        redact(&mut result, &["s3cr3t-value".to_owned()]);
        assert_eq!(
            serde_json::to_value(&result.content[0]).unwrap(),
            json!({"type": "resource", "resource": {
                "uri": "test://r", "mimeType": "text/plain", "text": "key [redacted]"}})
        );
    }

    #[test]
    fn content_items_are_checked() {
        let png = "iVBORw0KGgo=";
        assert!(content_block(json!({"type": "text", "text": "hi"})).is_ok());
        assert!(
            content_block(json!({"type": "image", "data": png, "mimeType": "image/png"})).is_ok()
        );
        assert!(
            content_block(
                json!({"type": "resource", "resource": {"uri": "test://x", "text": "t"}})
            )
            .is_ok()
        );
        let err = |v: Value| content_block(v).unwrap_err();
        assert!(err(json!({"text": "hi"})).contains("no \"type\""));
        assert!(err(json!({"type": "video"})).contains("unknown type \"video\""));
        assert!(
            err(json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}))
                .contains("not base64")
        );
        assert!(err(json!({"type": "image", "data": png})).contains("mimeType"));
        assert!(
            err(json!({"type": "resource", "resource": {"uri": "test://x"}}))
                .contains("needs \"text\" or \"blob\"")
        );
    }

    #[test]
    fn log_levels_are_ordered() {
        assert!(level_rank("debug") < level_rank("info"));
        assert!(level_rank("error") > level_rank("warning"));
        assert_eq!(level_rank("loud"), None);
    }

    #[test]
    fn cut_marks_what_is_left_out() {
        assert_eq!(cut("hello", 10), "hello");
        let out = cut("héllo world", 2);
        assert!(
            out.starts_with('h') && out.contains("more bytes not shown"),
            "{out}"
        );
    }
}
