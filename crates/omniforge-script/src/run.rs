//! Running one script call: spawn, sandbox, limits, capture, timeout, kill, reap.
//!
//! A [`Runner`] is built once (it detects the sandbox layers, see [`crate::sandbox`]) and
//! shared; [`Runner::run`] executes one [`RunSpec`]:
//!
//! 1. admission: at most `max_concurrent` runs execute and `queue` more wait; beyond that
//!    [`RunError::Busy`] at once;
//! 2. the code goes to a fresh file in the runner's scratch directory; a socketpair is the
//!    side channel ([`crate::channel`]);
//! 3. the interpreter starts as `<python> -I main.py` (inside bubblewrap when available) in a
//!    new process group, with a cleared environment, rlimits, and the run's cgroups joined
//!    before exec;
//! 4. the arguments are written to stdin as JSON and stdin is closed; stdout and stderr are
//!    read concurrently, each keeping its first `max_capture_bytes` and draining the rest;
//! 5. the timeout (and the cancellation token) cover the wait; when the script exits, times
//!    out or is cancelled, the whole tree is killed (`killpg`, bubblewrap's PID namespace,
//!    `cgroup.kill`) and the interpreter is reaped.

use std::os::fd::AsRawFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Resource, Rlimit};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::channel::{self, ChannelLimits, ScriptMessage, ScriptResult};
use crate::env::Env;
use crate::filter;
use crate::helper::Confine;
use crate::host::HostEnv;
use crate::sandbox::{self, BwrapRun, DetectConfig, Layer, Plan, SANDBOX_SCRIPT, SandboxLevel};
use crate::sys;

/// Default [`RunSpec::timeout`]: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`RunSpec::memory_bytes`]: 2 GiB (numpy needs at least 1 GiB of address space).
pub const DEFAULT_MEMORY_BYTES: u64 = 2 << 30;
/// Default [`RunSpec::max_capture_bytes`]: 1 MiB per stream.
pub const DEFAULT_MAX_CAPTURE_BYTES: usize = 1 << 20;
/// Default [`RunSpec::max_processes`]: 128 processes and threads.
pub const DEFAULT_MAX_PROCESSES: u32 = 128;
/// Default [`RunSpec::max_file_bytes`]: 64 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// Default [`RunnerConfig::queue`]: 64 waiting runs.
pub const DEFAULT_QUEUE: usize = 64;

/// Open files per process (`RLIMIT_NOFILE`).
const MAX_OPEN_FILES: u64 = 1024;
/// Longest side-channel message line, in bytes.
const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// How long to wait for output pipes and the side channel to close once the tree is dead.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Errors of [`Runner::new`] and [`Runner::run`]. A script that fails is not an error: it is
/// a [`RunOutput`] with a non-zero [`Exit`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// All run slots and queue places are taken.
    #[error("too many script runs in progress; try again later")]
    Busy,
    /// This machine lacks a layer the [`SandboxLevel`] requires
    /// ([`SandboxLevel::required_layers`]); the text names each missing layer and why.
    #[error("the script sandbox cannot start: {0}")]
    SandboxUnavailable(String),
    /// The [`RunSpec`] is unusable (e.g. a relative path).
    #[error("invalid run: {0}")]
    InvalidSpec(String),
    /// Setting up or starting the process failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
    let context = context.into();
    move |source| RunError::Io { context, source }
}

/// Settings of a [`Runner`].
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Required isolation.
    pub sandbox: SandboxLevel,
    /// Runs executing at once (default: twice the number of cores).
    pub max_concurrent: usize,
    /// Runs waiting for a slot before [`RunError::Busy`] (default [`DEFAULT_QUEUE`]).
    pub queue: usize,
    /// The bubblewrap executable; `None` looks at `/usr/bin/bwrap`, then the host's `PATH`.
    pub bwrap: Option<PathBuf>,
    /// Where per-run script files go (created if missing, with a private subdirectory per
    /// runner; default `/tmp`; a server uses [`Layout::run_dir`](crate::Layout::run_dir)).
    /// Never exposed to scripts except their own file.
    pub scratch_dir: PathBuf,
    /// The executable that applies Landlock right before the interpreter starts (run as
    /// `<helper> __omniforge-sandbox-exec ...`, see [`crate::main_if_helper`]). Default: the
    /// executable that called [`crate::main_if_helper`], if any; without one the `landlock`
    /// layer is inactive.
    pub landlock_helper: Option<PathBuf>,
    /// Layers to leave out although this machine has them, by [`Layer::name`]:
    /// `namespaces` (no bubblewrap at all), `cgroup-pids`, `cgroup-kill`, `landlock`,
    /// `seccomp`. Default: none. For measuring and testing one layer at a time.
    pub disabled_layers: Vec<String>,
    /// What the runner uses of the server's environment: `PATH` to find `bwrap` (default:
    /// empty).
    pub host: HostEnv,
}

impl RunnerConfig {
    /// `sandbox` with the defaults documented on each field.
    pub fn new(sandbox: SandboxLevel) -> RunnerConfig {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        RunnerConfig {
            sandbox,
            max_concurrent: 2 * cores,
            queue: DEFAULT_QUEUE,
            bwrap: None,
            scratch_dir: PathBuf::from("/tmp"),
            landlock_helper: crate::helper::registered(),
            disabled_layers: Vec::new(),
            host: HostEnv::default(),
        }
    }

    fn detect(&self) -> DetectConfig<'_> {
        DetectConfig {
            level: self.sandbox,
            bwrap: self.bwrap.as_deref(),
            landlock_helper: self.landlock_helper.as_deref(),
            disabled_layers: &self.disabled_layers,
            host: &self.host,
        }
    }
}

/// The layers a runner with `config` would use on this machine, and why the others are
/// inactive, as [`Runner::layers`] reports them (for `omniforge doctor`). Takes tens of
/// milliseconds: it starts bubblewrap and the Landlock helper once, and creates and removes
/// test cgroups.
pub fn doctor(config: &RunnerConfig) -> Vec<Layer> {
    Plan::detect(config.detect()).layers
}

/// One script call.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The environment's interpreter (`<env>/bin/python`); absolute.
    pub python: PathBuf,
    /// The environment directory, exposed read-only in the sandbox; absolute.
    pub env_dir: PathBuf,
    /// The script's source.
    pub code: String,
    /// Written to the script's stdin as JSON, then stdin is closed.
    pub arguments: Value,
    /// Wall-clock limit for the script (default [`DEFAULT_TIMEOUT`]). Also sets the CPU-time
    /// rlimit to this plus one second (SIGXCPU), hard limit one second later (SIGKILL).
    pub timeout: Duration,
    /// Address-space limit per process, in bytes (default [`DEFAULT_MEMORY_BYTES`]).
    pub memory_bytes: u64,
    /// Allow network access (default `false`). Enforced only with the `no-network` layer.
    pub network: bool,
    /// Bytes kept of stdout and of stderr each; the rest is read and counted (default
    /// [`DEFAULT_MAX_CAPTURE_BYTES`]).
    pub max_capture_bytes: usize,
    /// Processes and threads the run may have at once (default [`DEFAULT_MAX_PROCESSES`]).
    /// Enforced only with the `cgroup-pids` layer.
    pub max_processes: u32,
    /// Largest file the script may write, in bytes (`RLIMIT_FSIZE`), and the size of its
    /// private `/tmp` in the sandbox (default [`DEFAULT_MAX_FILE_BYTES`]).
    pub max_file_bytes: u64,
    /// Extra environment variables (e.g. secrets). The runner's own (`PATH`, `HOME`, `LANG`,
    /// `PYTHONDONTWRITEBYTECODE`, `OMNIFORGE_FD`) take precedence.
    pub env: Vec<(String, String)>,
    /// Where the script's side-channel messages go. `None`: requests are answered with an
    /// error; the last `result` still lands in [`RunOutput::result`].
    pub messages: Option<mpsc::Sender<ScriptMessage>>,
}

impl RunSpec {
    /// A run of `code` in `env` with the documented defaults and `{}` as arguments.
    pub fn new(env: &Env, code: impl Into<String>) -> RunSpec {
        RunSpec {
            python: env.python(),
            env_dir: env.path.clone(),
            code: code.into(),
            arguments: Value::Object(Default::default()),
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            network: false,
            max_capture_bytes: DEFAULT_MAX_CAPTURE_BYTES,
            max_processes: DEFAULT_MAX_PROCESSES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            env: Vec::new(),
            messages: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The process exited with this code. Under bubblewrap, a script killed by signal N
    /// shows as code 128 + N (bubblewrap reports it that way).
    Code(i32),
    /// The process was killed by this signal (without bubblewrap).
    Signal(i32),
    /// The timeout expired; the tree was killed.
    Timeout,
    /// The cancellation token fired (before or during the run); the tree was killed.
    Cancelled,
}

impl Exit {
    /// `true` only for `Code(0)`.
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The first [`RunSpec::max_capture_bytes`] of stdout.
    pub stdout: Vec<u8>,
    /// The first [`RunSpec::max_capture_bytes`] of stderr.
    pub stderr: Vec<u8>,
    /// Bytes of stdout read and dropped beyond the cap.
    pub stdout_truncated_bytes: u64,
    /// Bytes of stderr read and dropped beyond the cap.
    pub stderr_truncated_bytes: u64,
    /// How it ended.
    pub exit: Exit,
    /// Wall time from the call to the end of the run, including any wait for a slot.
    pub duration: Duration,
    /// The last `result` the script sent over the side channel.
    pub result: Option<ScriptResult>,
}

impl RunOutput {
    fn empty(exit: Exit, duration: Duration) -> RunOutput {
        RunOutput {
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated_bytes: 0,
            stderr_truncated_bytes: 0,
            exit,
            duration,
            result: None,
        }
    }
}

/// Runs script calls; cheap to clone (clones share slots and the queue).
#[derive(Debug, Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: RunnerConfig,
    plan: Plan,
    /// One permit per run allowed to execute at once.
    slots: Semaphore,
    /// Runs admitted (executing or waiting for a slot); bounded by max_concurrent + queue.
    admitted: AtomicUsize,
    /// Private directory for per-run script files; removed with the runner.
    scratch: tempfile::TempDir,
}

impl Runner {
    /// Detects the sandbox layers and prepares the scratch directory. Blocks for a few
    /// milliseconds (it runs bubblewrap once and creates test cgroups): call it at start-up.
    ///
    /// # Errors
    /// [`RunError::SandboxUnavailable`] when a layer the level requires
    /// ([`SandboxLevel::required_layers`]) is missing, e.g. [`SandboxLevel::Strict`] without
    /// the `namespaces` layer; [`RunError::Io`] when the scratch directory cannot be created.
    pub fn new(config: RunnerConfig) -> Result<Runner, RunError> {
        let plan = Plan::detect(config.detect());
        let missing = config.sandbox.missing_layers(&plan.layers);
        if !missing.is_empty() {
            let why: Vec<String> = missing
                .iter()
                .map(|name| {
                    let detail = plan
                        .layers
                        .iter()
                        .find(|l| l.name == *name)
                        .map_or("", |l| l.detail.as_str());
                    format!("{name}: {detail}")
                })
                .collect();
            return Err(RunError::SandboxUnavailable(format!(
                "missing for --sandbox {}: {}",
                config.sandbox,
                why.join("; ")
            )));
        }
        for layer in &plan.layers {
            tracing::info!(layer = layer.name, active = layer.active, detail = %layer.detail, "script sandbox layer");
        }
        if plan.bwrap.is_none() && config.sandbox == SandboxLevel::Standard {
            tracing::warn!(
                "script sandbox: no namespaces; scripts can read the filesystem and use the network"
            );
        }
        std::fs::create_dir_all(&config.scratch_dir)
            .map_err(io_err(format!("creating {}", config.scratch_dir.display())))?;
        let scratch = tempfile::Builder::new()
            .prefix("omniforge-runs-")
            .tempdir_in(&config.scratch_dir)
            .map_err(io_err(format!(
                "creating a scratch directory in {}",
                config.scratch_dir.display()
            )))?;
        let slots = Semaphore::new(config.max_concurrent.max(1));
        Ok(Runner {
            inner: Arc::new(Inner {
                config,
                plan,
                slots,
                admitted: AtomicUsize::new(0),
                scratch,
            }),
        })
    }

    /// The layers this runner uses (and those it lacks), as [`crate::doctor`] reports them.
    pub fn layers(&self) -> &[Layer] {
        &self.inner.plan.layers
    }

    /// Runs one script call to its end.
    ///
    /// Returns once the script and everything it started are dead and reaped. A timeout or
    /// a cancellation is an [`Exit`], with whatever output was captured until then.
    ///
    /// # Errors
    /// [`RunError::Busy`] when slots and queue are full; [`RunError::InvalidSpec`] for
    /// relative or missing paths; [`RunError::Io`] when the process cannot be set up or started.
    #[tracing::instrument(skip_all, fields(env = %spec.env_dir.display()))]
    pub async fn run(
        &self,
        spec: RunSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let started = Instant::now();
        let inner = &self.inner;
        let limit = inner.config.max_concurrent.max(1) + inner.config.queue;
        if inner.admitted.fetch_add(1, Ordering::AcqRel) >= limit {
            inner.admitted.fetch_sub(1, Ordering::AcqRel);
            return Err(RunError::Busy);
        }
        let _admitted = Admitted(&inner.admitted);
        let _slot = tokio::select! {
            permit = inner.slots.acquire() => permit.map_err(|_| RunError::Busy)?,
            () = cancel.cancelled() => return Ok(RunOutput::empty(Exit::Cancelled, started.elapsed())),
        };
        self.execute(spec, cancel, started).await
    }

    async fn execute(
        &self,
        spec: RunSpec,
        cancel: CancellationToken,
        started: Instant,
    ) -> Result<RunOutput, RunError> {
        check_spec(&spec)?;
        let plan = &self.inner.plan;
        let run_dir = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(self.inner.scratch.path())
            .map_err(io_err("creating the run directory"))?;
        let script = run_dir.path().join("main.py");
        std::fs::write(&script, &spec.code).map_err(io_err("writing the script"))?;

        let (parent_sock, child_sock) =
            std::os::unix::net::UnixStream::pair().map_err(io_err("creating the side channel"))?;
        parent_sock
            .set_nonblocking(true)
            .map_err(io_err("creating the side channel"))?;
        let parent_sock = tokio::net::UnixStream::from_std(parent_sock)
            .map_err(io_err("creating the side channel"))?;
        let child_fd = child_sock.as_raw_fd();

        let mut cgroups = plan.cgroups.create_run(spec.max_processes);

        // bubblewrap reads the seccomp program from a descriptor; without bubblewrap the
        // child loads it itself before exec.
        let seccomp_fd = match (&plan.seccomp, &plan.bwrap) {
            (Some(filters), Some(_)) => Some(
                filter::memfd(filters.for_run(spec.network), true)
                    .map_err(io_err("holding the seccomp filter"))?,
            ),
            _ => None,
        };
        let mut cmd = match &plan.bwrap {
            Some(bwrap) => {
                let mut extra_ro = Vec::new();
                if let Some(prefix) = interpreter_prefix(&spec.python) {
                    extra_ro.push(prefix);
                }
                let args = bwrap.run_args(&BwrapRun {
                    network: spec.network,
                    env_dir: &spec.env_dir,
                    extra_ro,
                    script: &script,
                    tmp_bytes: spec.max_file_bytes,
                    seccomp_fd: seccomp_fd.as_ref().map(AsRawFd::as_raw_fd),
                    helper: plan.landlock.as_deref(),
                });
                let mut c = Command::new(&bwrap.path);
                c.args(args).arg(&spec.python).args(["-I", SANDBOX_SCRIPT]);
                c
            }
            None => {
                let mut c = match &plan.landlock {
                    Some(helper) => {
                        let mut read_only = sandbox::system_paths();
                        read_only.extend(interpreter_prefix(&spec.python));
                        read_only.push(spec.env_dir.clone());
                        let mut read_write = vec![run_dir.path().to_owned()];
                        read_write
                            .extend(["/dev/null", "/dev/zero", "/dev/full"].map(PathBuf::from));
                        let confine = Confine {
                            read_only,
                            read_write,
                            no_network: !spec.network,
                        };
                        let mut c = Command::new(helper);
                        c.args(confine.args()).arg(&spec.python);
                        c
                    }
                    None => Command::new(&spec.python),
                };
                c.arg("-I").arg(&script).current_dir(run_dir.path());
                c
            }
        };
        let path_var = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            spec.env_dir.join("bin").display()
        );
        cmd.env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("PATH", path_var)
            .env("HOME", "/tmp")
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("OMNIFORGE_FD", child_fd.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if plan.bwrap.is_none() {
            // The host's /tmp is not the run's: temporary files go to the run directory.
            cmd.env("TMPDIR", run_dir.path());
        }
        sys::install(
            &mut cmd,
            sys::ChildSetup {
                limits: rlimits(&spec),
                cgroup_procs: cgroups.procs_fds(),
                inherit_fds: std::iter::once(child_fd)
                    .chain(seccomp_fd.as_ref().map(AsRawFd::as_raw_fd))
                    .collect(),
                seccomp: match (&plan.seccomp, &plan.bwrap) {
                    (Some(filters), None) => Some(filters.for_run(spec.network).clone()),
                    _ => None,
                },
            },
        );
        let mut child = cmd
            .spawn()
            .map_err(io_err(format!("starting {}", spec.python.display())))?;
        cgroups.spawned();
        drop(child_sock);
        drop(seccomp_fd);
        let pgid = child.id().unwrap_or(0);
        let group = GroupGuard(pgid);

        // Everything below runs concurrently with the script.
        let stop = CancellationToken::new();
        let cap = spec.max_capture_bytes;
        let out_task = tokio::spawn(capture(child.stdout.take(), cap, stop.clone()));
        let err_task = tokio::spawn(capture(child.stderr.take(), cap, stop.clone()));
        let input = serde_json::to_vec(&spec.arguments).unwrap_or_else(|_| b"{}".to_vec());
        let stdin = child.stdin.take();
        let in_task = tokio::spawn(async move {
            if let Some(mut stdin) = stdin {
                // A script that never reads its stdin makes this fail with EPIPE: fine.
                let _ = stdin.write_all(&input).await;
            } // dropped: stdin closed
        });
        let limits = ChannelLimits {
            max_message_bytes: MAX_MESSAGE_BYTES,
        };
        let chan_task = tokio::spawn(channel::serve(
            parent_sock,
            spec.messages,
            limits,
            stop.clone(),
        ));

        let deadline = tokio::time::Instant::now() + spec.timeout;
        let ended = tokio::select! {
            status = child.wait() => Ended::Exited(status),
            () = tokio::time::sleep_until(deadline) => Ended::Timeout,
            () = cancel.cancelled() => Ended::Cancelled,
        };
        // Whatever happened, nothing the script started outlives the call.
        group.kill();
        cgroups.kill();
        let exit = match ended {
            Ended::Exited(status) => exit_of(status.map_err(io_err("waiting for the script"))?),
            Ended::Timeout | Ended::Cancelled => {
                // Reap the killed leader (bwrap or the interpreter).
                let _ = child.wait().await;
                if matches!(ended, Ended::Timeout) {
                    Exit::Timeout
                } else {
                    Exit::Cancelled
                }
            }
        };
        // With the tree dead, the pipes and the socket reach EOF at once; a process that
        // escaped every kill layer may still hold them, so wait only briefly.
        let timer = tokio::spawn({
            let stop = stop.clone();
            async move {
                tokio::time::sleep(DRAIN_GRACE).await;
                tracing::warn!(
                    "script output still open after the tree was killed; keeping what was read"
                );
                stop.cancel();
            }
        });
        let (out, err, chan) = tokio::join!(out_task, err_task, chan_task);
        timer.abort();
        in_task.abort();
        cgroups.finish(Duration::from_secs(2));
        group.disarm();
        let (stdout, stdout_truncated_bytes) = out.unwrap_or_default();
        let (stderr, stderr_truncated_bytes) = err.unwrap_or_default();
        let output = RunOutput {
            stdout,
            stderr,
            stdout_truncated_bytes,
            stderr_truncated_bytes,
            exit,
            duration: started.elapsed(),
            result: chan.ok().flatten(),
        };
        tracing::debug!(exit = ?output.exit, duration = ?output.duration, "script run finished");
        Ok(output)
    }
}

enum Ended {
    Exited(std::io::Result<std::process::ExitStatus>),
    Timeout,
    Cancelled,
}

/// Releases an admission place when the run ends, however it ends.
struct Admitted<'a>(&'a AtomicUsize);

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Kills the run's process group if the run future is dropped before it finished.
struct GroupGuard(u32);

impl GroupGuard {
    fn kill(&self) {
        if self.0 != 0 {
            sandbox::kill_group(self.0);
        }
    }

    fn disarm(mut self) {
        self.0 = 0;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn check_spec(spec: &RunSpec) -> Result<(), RunError> {
    for (what, p) in [("python", &spec.python), ("env_dir", &spec.env_dir)] {
        if !p.is_absolute() || p == Path::new("/") {
            return Err(RunError::InvalidSpec(format!(
                "{what} must be an absolute path below /: {}",
                p.display()
            )));
        }
    }
    if !spec.env_dir.is_dir() {
        return Err(RunError::InvalidSpec(format!(
            "environment {} does not exist",
            spec.env_dir.display()
        )));
    }
    if !spec.python.exists() {
        return Err(RunError::InvalidSpec(format!(
            "interpreter {} does not exist",
            spec.python.display()
        )));
    }
    Ok(())
}

/// The installation prefix of the interpreter behind `python` (a venv's `bin/python` is a
/// symlink to it): `<prefix>/bin/pythonX.Y` → `<prefix>`. `None` for `/` (never exposed whole).
fn interpreter_prefix(python: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(python).ok()?;
    let prefix = real.parent()?.parent()?;
    (prefix != Path::new("/")).then(|| prefix.to_owned())
}

fn rlimits(spec: &RunSpec) -> Vec<(Resource, Rlimit)> {
    let cpu = spec.timeout.as_secs() + u64::from(spec.timeout.subsec_nanos() > 0) + 1;
    let wanted = [
        (Resource::As, spec.memory_bytes, spec.memory_bytes),
        (Resource::Cpu, cpu, cpu + 1),
        (Resource::Fsize, spec.max_file_bytes, spec.max_file_bytes),
        (Resource::Nofile, MAX_OPEN_FILES, MAX_OPEN_FILES),
        (Resource::Core, 0, 0),
    ];
    wanted
        .into_iter()
        .map(|(resource, soft, hard)| {
            // Never ask for more than the server's own hard limit: that would fail the spawn.
            let max = rustix::process::getrlimit(resource)
                .maximum
                .map_or(hard, |m| m.min(hard));
            (
                resource,
                Rlimit {
                    current: Some(soft.min(max)),
                    maximum: Some(max),
                },
            )
        })
        .collect()
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(-1),
    }
}

/// Reads `pipe` to its end (or until `stop`), keeping the first `cap` bytes and counting the
/// rest.
async fn capture(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
    stop: CancellationToken,
) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let Some(mut pipe) = pipe else {
        return (kept, dropped);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            () = stop.cancelled() => break,
        };
        let take = cap.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..take]);
        dropped += (n - take) as u64;
    }
    (kept, dropped)
}
