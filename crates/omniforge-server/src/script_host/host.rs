//! [`ScriptHost`]: the sandbox [`Runner`] and the [`EnvBuilder`], shared by every script run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use omniforge_script::{
    Env, EnvBuilder, EnvConfig, EnvError, Exit, HostEnv, Interpreter, Layout, LimitHit, RunError,
    RunOutput, RunSpec, Runner, RunnerConfig, SandboxLevel, UvTool, WarmConfig, prototype_text,
};
use omniforge_store::{ScriptSpec, StoreError};
use serde_json::Value;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use crate::context::progress::Progress;
use crate::error::{InstallError, ScriptError};
use crate::script_host::install::Installs;
use crate::script_host::warm::Warm;
use crate::telemetry::metrics::{KillCause, Load, Metrics};
use crate::telemetry::spans;
use tracing::Instrument as _;

/// Which stored call a run is, for the warm pool: a tool's version and the calling principal.
pub(crate) struct WarmCall<'a> {
    /// The tool's name.
    pub(crate) tool: &'a str,
    /// Its version's key ([`version_key`](crate::script_host::warm::version_key)).
    pub(crate) version: String,
    /// The calling principal (the partition of the pool's key).
    pub(crate) principal: &'a str,
}

/// How scripts are built and run.
#[derive(Debug, Clone)]
pub struct ScriptSettings {
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
    /// What the script crate uses of the server's environment (`PATH`, `HOME`, proxies, uv's
    /// index variables), read by the binary.
    pub host: HostEnv,
    /// Sandbox layers to leave out although the machine has them (tests only).
    pub disabled_layers: Vec<String>,
    /// Warm templates at most (one per tool version and calling principal); 0 turns the
    /// pool off and every call runs cold (`--warm-pool`, default
    /// [`omniforge_script::DEFAULT_MAX_TEMPLATES`]).
    pub warm_pool: usize,
    /// A warm template unused for this long is stopped (`--warm-idle`, default
    /// [`omniforge_script::DEFAULT_WARM_IDLE`]).
    pub warm_idle: Duration,
}

/// The sandbox runner (behind the warm pool) and the environment builder.
pub(crate) struct ScriptHost {
    settings: ScriptSettings,
    warm: Warm,
    /// Built on first use: resolving the interpreter and finding (or installing) uv takes
    /// time and may need PyPI, which a server that never forges a tool should not pay for.
    envs: OnceCell<EnvBuilder>,
    /// Environments being installed from stored locks (`install.rs`).
    installs: Arc<Installs>,
    /// Where builds, kills and busy refusals are counted.
    metrics: Arc<Metrics>,
}

impl ScriptHost {
    /// Sets up the runner (it logs each sandbox layer it detected). Runs never see the data
    /// directory (other tools' environments, the store).
    ///
    /// # Errors
    /// The run directory cannot be created, or the sandbox level cannot be provided (e.g.
    /// `strict` without namespaces).
    pub(crate) fn new(
        settings: ScriptSettings,
        metrics: Arc<Metrics>,
    ) -> Result<ScriptHost, RunError> {
        let mut runner_config = RunnerConfig::new(settings.sandbox);
        runner_config.scratch_dir = Layout::new(&settings.data_dir).run_dir();
        runner_config.host = settings.host.clone();
        runner_config.disabled_layers = settings.disabled_layers.clone();
        runner_config.hidden_dirs = vec![settings.data_dir.clone()];
        let warm = WarmConfig {
            max_templates: settings.warm_pool,
            idle: settings.warm_idle,
            ..WarmConfig::default()
        };
        Ok(ScriptHost {
            warm: Warm::new(Runner::new(runner_config)?, warm),
            settings,
            envs: OnceCell::new(),
            installs: Arc::new(Installs::new(metrics.clone())),
            metrics,
        })
    }

    /// The metrics this host counts into.
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs executing and waiting for a slot, now (read at each metrics scrape).
    pub(crate) fn load(&self) -> Load {
        let load = self.warm.runner().load();
        Load {
            running: load.running,
            queued: load.queued,
        }
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &ScriptSettings {
        &self.settings
    }

    /// The sandbox layers in force, for `/healthz`.
    pub(crate) fn layers(&self) -> &[omniforge_script::Layer] {
        self.warm.runner().layers()
    }

    /// Where environments, uv and run directories live (the script crate's layout).
    pub(crate) fn layout(&self) -> Layout {
        Layout::new(&self.settings.data_dir)
    }

    /// Starts installing environment `env_id` from the stored `lock` (requirements text) unless
    /// it is built or being installed; returns at once. For versions made through another
    /// replica (`install.rs`).
    pub(crate) fn install_in_background(self: &Arc<Self>, env_id: &str, lock: &str) {
        if env_id.is_empty() || self.env(env_id).is_built() {
            return;
        }
        let host = self.clone();
        let _ =
            self.installs
                .join_or_start(env_id, lock, async move { host.envs().await.cloned() });
    }

    /// Waits until environment `env_id` is built, installing it from `lock` if nobody is
    /// (`lock` is asked for only then: the catalog keeps no locks); sends the install's lines
    /// to `progress`.
    ///
    /// # Errors
    /// The lock cannot be read, or the install failed.
    pub(crate) async fn ready<F>(
        self: &Arc<Self>,
        env_id: &str,
        lock: F,
        progress: &Progress,
    ) -> Result<(), InstallError>
    where
        F: AsyncFnOnce() -> Result<String, StoreError>,
    {
        if self.env(env_id).is_built() {
            return Ok(());
        }
        let host = self.clone();
        self.installs
            .wait(
                env_id,
                lock,
                async move { host.envs().await.cloned() },
                progress,
            )
            .await
    }

    /// The built environment with id `env_id`.
    pub(crate) fn env(&self, env_id: &str) -> Env {
        self.layout().env(env_id)
    }

    /// The environment builder, made on first use.
    ///
    /// # Errors
    /// The interpreter cannot be resolved, or uv cannot be found or installed.
    pub(crate) async fn envs(&self) -> Result<&EnvBuilder, EnvError> {
        self.envs
            .get_or_try_init(|| async {
                let python = Interpreter::resolve(&self.settings.python).await?;
                let uv = UvTool::locate_or_install(
                    &self.settings.data_dir,
                    self.settings.uv.clone(),
                    &python,
                    &self.settings.host,
                )
                .await?;
                tracing::debug!(python = %python.executable().display(), uv = %uv.path().display(), "script environments ready");
                Ok(EnvBuilder::new(EnvConfig {
                    data_dir: self.settings.data_dir.clone(),
                    uv,
                    python,
                    allow_source_builds: self.settings.allow_source_builds,
                    command_timeout: Duration::from_secs(600),
                    host: self.settings.host.clone(),
                }))
            })
            .await
    }

    /// The warm templates of stored calls.
    pub(crate) fn warm(&self) -> &Warm {
        &self.warm
    }

    /// Runs one script to its end, cold; with `warm`, a call of a stored version, on its
    /// template when one is ready.
    ///
    /// # Errors
    /// [`RunError::Busy`] when every slot and queue place is taken, or the sandbox failed.
    pub(crate) async fn run(
        &self,
        spec: RunSpec,
        warm: Option<&WarmCall<'_>>,
        ct: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let span = spans::sandbox_run();
        let result = match warm {
            Some(w) => {
                self.warm
                    .run(w.tool, &w.version, w.principal, spec, ct)
                    .instrument(span.clone())
                    .await
            }
            None => {
                self.warm
                    .runner()
                    .run(spec, ct)
                    .instrument(span.clone())
                    .await
            }
        };
        let outcome = match &result {
            Ok(output) => match (output.limit, output.exit) {
                (Some(LimitHit::Memory), _) => "memory",
                (Some(LimitHit::Processes), _) => "pids",
                (None, Exit::Code(0)) => "ok",
                (None, Exit::Code(_) | Exit::Signal(_)) => "exit",
                (None, Exit::Timeout) => "timeout",
                (None, Exit::Cancelled) => "cancelled",
            },
            Err(RunError::Busy) => "busy",
            Err(_) => "not_started",
        };
        span.record("omniforge.sandbox.outcome", outcome);
        // Once per run: the limit it hit (what stopped a fork bomb before its timeout), else
        // how it was killed.
        let kill = match &result {
            Err(RunError::Busy) => {
                self.metrics.busy();
                None
            }
            Err(_) => None,
            Ok(output) => match (output.limit, output.exit) {
                (Some(LimitHit::Memory), _) => Some(KillCause::Memory),
                (Some(LimitHit::Processes), _) => Some(KillCause::Pids),
                (None, Exit::Timeout) => Some(KillCause::Timeout),
                (None, Exit::Cancelled) => Some(KillCause::Cancel),
                (None, Exit::Code(_) | Exit::Signal(_)) => None,
            },
        };
        if let Some(cause) = kill {
            self.metrics.kill(cause);
        }
        result
    }

    /// Runs a stored script (a template's or a completion's) once with `input` as its JSON
    /// stdin; returns its stdout when it exits 0.
    ///
    /// # Errors
    /// The script could not start, failed (its output, `[stderr]`, `[exit N]`), or timed out.
    pub(crate) async fn run_script(
        self: &Arc<Self>,
        script: &ScriptSpec,
        input: Value,
        ct: CancellationToken,
    ) -> Result<String, ScriptError> {
        let spec = self.script_spec(script, input).await?;
        let output = match self.run(spec, None, ct).await {
            Ok(output) => output,
            Err(RunError::Busy) => return Err(ScriptError::Busy),
            Err(e) => return Err(ScriptError::NotStarted(e)),
        };
        script_text(&output)
    }

    /// The run of a stored script (a template's, a completion's) with `input` as its JSON
    /// stdin, once its environment is ready here.
    ///
    /// # Errors
    /// Its environment could not be installed.
    pub(crate) async fn script_spec(
        self: &Arc<Self>,
        script: &ScriptSpec,
        input: Value,
    ) -> Result<RunSpec, ScriptError> {
        // Made through another replica: install it here first (no one to report progress to).
        self.ready(
            &script.env_id,
            async || Ok(script.lock.clone()),
            &Progress::new(None, None),
        )
        .await
        .map_err(ScriptError::Environment)?;
        let mut spec = RunSpec::new(&self.env(&script.env_id), script.code.clone());
        spec.arguments = input;
        spec.timeout = Duration::from_millis(script.timeout_ms);
        spec.memory_bytes = script.memory_bytes;
        spec.network = script.network;
        Ok(spec)
    }
}

/// A stored script's stdout when it exited 0.
///
/// # Errors
/// It failed: its output, `[stderr]`, `[exit N]` or `[timeout]`.
pub(crate) fn script_text(output: &RunOutput) -> Result<String, ScriptError> {
    if output.exit.is_success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(ScriptError::Failed(prototype_text(output, None).0))
    }
}
