//! Running one script call: spawn, sandbox, limits, capture, timeout, kill, reap.
//!
//! A [`Runner`] is built once (it detects the sandbox layers, see [`crate::sandbox`]) and
//! shared; [`Runner::run`] executes one [`RunSpec`]:
//!
//! 1. admission: at most `max_concurrent` runs execute and `queue` more wait; beyond that
//!    [`RunError::Busy`] at once;
//! 2. the code goes to a fresh file in the runner's scratch directory; a socketpair is the
//!    side channel ([`crate::channel`]);
//! 3. the interpreter starts as `<python> -I -u main.py` (inside bubblewrap when available;
//!    without it, as a uid leased for the run under a root server) in a new process group, with
//!    a cleared environment, rlimits, and the run's cgroups joined before exec (`child`);
//! 4. the capture pipeline (`capture`, shared with warm calls) writes the arguments to stdin
//!    as JSON and closes it, reads stdout and stderr concurrently, each keeping its first
//!    `max_capture_bytes` and draining the rest, and serves the side channel;
//! 5. the timeout (and the cancellation token) cover the wait; when the script exits, times
//!    out or is cancelled, the whole tree is killed (`killpg`, bubblewrap's PID namespace,
//!    `cgroup.kill`) and the interpreter is reaped; the capture is drained and joined into
//!    the [`RunOutput`].

pub(crate) mod capture;
pub(crate) mod child;
mod spec;

use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_util::sync::CancellationToken;

use self::capture::{Capture, Streams, side_channel};
use self::child::{ChildIo, RunFiles};
pub use self::spec::{
    DEFAULT_MAX_CAPTURE_BYTES, DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_PROCESSES, DEFAULT_MEMORY_BYTES,
    DEFAULT_QUEUE, DEFAULT_TIMEOUT, Exit, RunError, RunOutput, RunSpec, SINGLE_THREAD_VARS,
};
pub(crate) use self::spec::{check_spec, io_err};
use crate::host::HostEnv;
use crate::sandbox::{CgroupLimits, DetectConfig, Identity, Layer, Plan, SandboxLevel, UidLease};

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
    /// `namespaces` (no bubblewrap at all), `unprivileged-uid` (without bubblewrap: scripts
    /// run as the server does), `cgroup-pids`, `cgroup-kill`, `cgroup-memory`, `landlock`, `seccomp`.
    /// Default: none. For measuring and testing one layer at a time: a layer disabled here is
    /// not required by [`SandboxLevel::Standard`], while [`SandboxLevel::Strict`] still
    /// refuses to start without each of its layers.
    pub disabled_layers: Vec<String>,
    /// What the runner uses of the server's environment: `PATH` to find `bwrap` (default:
    /// empty).
    pub host: HostEnv,
    /// Directories a run with a uid of its own (no bubblewrap, root server) must not see even
    /// where their permissions would let that uid in, such as the data directory (its
    /// database, other environments): each is covered by an empty tmpfs in the run's mount
    /// namespace, with only what the run needs bound back. Default: none. (Under bubblewrap
    /// nothing is visible that is not bound in.)
    pub hidden_dirs: Vec<PathBuf>,
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
            hidden_dirs: Vec::new(),
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

/// Runs script calls; cheap to clone (clones share slots and the queue).
#[derive(Debug, Clone)]
pub struct Runner {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: RunnerConfig,
    plan: Plan,
    /// The run slots: at most `max_concurrent` runs execute at once, each in a slot of its
    /// own (which also gives it its uid under a uid switch).
    slots: Slots,
    /// Runs admitted (executing or waiting for a slot); bounded by max_concurrent + queue.
    admitted: AtomicUsize,
    /// Private directory for per-run script files; removed with the runner.
    scratch: tempfile::TempDir,
}

impl Runner {
    /// At shutdown: kills whatever still runs in this runner's cgroups and removes them all,
    /// waiting up to `grace` for killed processes to be released. Returns how many cgroups
    /// are left (each logged).
    pub fn clear_cgroups(&self, grace: Duration) -> usize {
        self.inner.plan.cgroups.clear(grace)
    }

    /// Detects the sandbox layers and prepares the scratch directory. Blocks for a few
    /// milliseconds (it runs bubblewrap once and creates test cgroups): call it at start-up.
    ///
    /// # Errors
    /// [`RunError::SandboxUnavailable`] when a layer the level requires
    /// ([`SandboxLevel::required_layers`]) is missing, e.g. [`SandboxLevel::Strict`] without
    /// the `namespaces` layer; [`RunError::Io`] when the scratch directory cannot be created.
    pub fn new(config: RunnerConfig) -> Result<Runner, RunError> {
        let plan = Plan::detect(config.detect());
        let mut missing = config.sandbox.missing_layers(&plan.layers);
        if config.sandbox != SandboxLevel::Strict {
            missing.retain(|m| !config.disabled_layers.iter().any(|d| d == m));
        }
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
            tracing::debug!(layer = layer.name, active = layer.active, detail = %layer.detail, "script sandbox layer");
        }
        // One line at info: the layers in force (`omniforge doctor` and debug logs say how).
        let missing: Vec<&str> = plan
            .layers
            .iter()
            .filter(|l| !l.active)
            .map(|l| l.name)
            .collect();
        tracing::info!(
            active = plan.layers.len() - missing.len(),
            of = plan.layers.len(),
            missing = %missing.join(","),
            "script sandbox layers"
        );
        for warning in plan.warnings(config.sandbox) {
            tracing::warn!("{warning}");
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
        if matches!(plan.identity, Identity::Switch(_) | Identity::BwrapAs(_)) {
            // Runs under their own uid must reach their own directory in it; they may not
            // list it (0711).
            std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o711))
                .map_err(io_err("opening the scratch directory to run uids"))?;
        }
        let slots = Slots::new(config.max_concurrent.max(1));
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

    /// How busy the runner is right now: runs executing, and runs admitted that wait for a
    /// slot (the run queue). For metrics: two relaxed reads, no lock.
    pub fn load(&self) -> Load {
        let inner = &self.inner;
        let slots = inner.config.max_concurrent.max(1);
        let running = slots.saturating_sub(inner.slots.permits.available_permits());
        let admitted = inner.admitted.load(Ordering::Relaxed);
        Load {
            running,
            queued: admitted.saturating_sub(running),
        }
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
        let Some(admission) = self.admit(&cancel).await? else {
            return Ok(RunOutput::empty(Exit::Cancelled, started.elapsed()));
        };
        self.run_admitted(&admission, spec, cancel, started).await
    }

    /// Admission: a place among the runs admitted (at most `max_concurrent + queue`, else
    /// [`RunError::Busy`] at once), then a slot (at most `max_concurrent` execute). `None`
    /// when `cancel` fired while waiting for the slot. Warm calls are admitted the same way.
    pub(crate) async fn admit(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<Admission<'_>>, RunError> {
        let inner = &self.inner;
        let limit = inner.config.max_concurrent.max(1) + inner.config.queue;
        if inner.admitted.fetch_add(1, Ordering::AcqRel) >= limit {
            inner.admitted.fetch_sub(1, Ordering::AcqRel);
            return Err(RunError::Busy);
        }
        let admitted = Admitted(&inner.admitted);
        let slot = tokio::select! {
            slot = inner.slots.acquire() => slot?,
            () = cancel.cancelled() => return Ok(None),
        };
        Ok(Some(Admission {
            slot,
            _admitted: admitted,
        }))
    }

    /// Runs `spec` cold in the slot of `admission`.
    pub(crate) async fn run_admitted(
        &self,
        admission: &Admission<'_>,
        spec: RunSpec,
        cancel: CancellationToken,
        started: Instant,
    ) -> Result<RunOutput, RunError> {
        let inner = &self.inner;
        // Under a root server, the run's own uid (bubblewrap starts as it, or, without
        // bubblewrap, the script), held until it ends; with no cgroup.kill to catch an
        // escapee, what still runs as it then is killed.
        let lease = match &inner.plan.identity {
            Identity::Switch(switch) | Identity::BwrapAs(switch) => Some(
                switch
                    .lease(admission.slot.index, inner.plan.cgroups.kill.is_none())
                    .map_err(io_err("taking a uid for the run"))?,
            ),
            _ => None,
        };
        self.execute(spec, cancel, started, lease.as_ref().map(UidLease::uid))
            .await
    }

    /// What the runner detected.
    pub(crate) fn plan(&self) -> &Plan {
        &self.inner.plan
    }

    /// The runner's private scratch directory (per-run and per-template files).
    pub(crate) fn scratch(&self) -> &std::path::Path {
        self.inner.scratch.path()
    }

    async fn execute(
        &self,
        mut spec: RunSpec,
        cancel: CancellationToken,
        started: Instant,
        uid: Option<u32>,
    ) -> Result<RunOutput, RunError> {
        check_spec(&spec)?;
        let plan = &self.inner.plan;
        let run_dir = tempfile::Builder::new()
            .prefix("run-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(self.inner.scratch.path())
            .map_err(io_err("creating the run directory"))?;
        let script = run_dir.path().join("main.py");
        std::fs::write(&script, &spec.code).map_err(io_err("writing the script"))?;

        let (parent_sock, child_sock) =
            side_channel().map_err(io_err("creating the side channel"))?;

        let limits = CgroupLimits::run(spec.max_processes, spec.memory_bytes);
        let mut cgroups = plan.cgroups.create_run(limits);
        let files = RunFiles {
            dir: run_dir.path(),
            script: &script,
        };
        let io = ChildIo {
            uid,
            hidden_dirs: &self.inner.config.hidden_dirs,
            channel_fd: child_sock.as_raw_fd(),
            cgroup_procs: cgroups.procs_fds(),
            idle: false,
        };
        let (mut cmd, hold) = child::command(plan, &spec, &files, io, child::Role::Run)?;
        let mut child = cmd
            .spawn()
            .map_err(io_err(format!("starting {}", spec.python.display())))?;
        cgroups.spawned();
        drop(child_sock);
        drop(hold);
        let pgid = child.id().unwrap_or(0);
        let group = GroupGuard(pgid);

        // Everything below runs concurrently with the script.
        let streams = Streams {
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            stdin: child.stdin.take(),
            channel: parent_sock,
        };
        let messages = spec.messages.take();
        let capture = Capture::start(streams, &spec, messages);

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
        let captured = capture.drain().await;
        let limit = cgroups.limit_hit();
        cgroups.finish(Duration::from_secs(2));
        group.disarm();
        let mut output = captured.output(exit, limit, started);
        output.hide_host_paths(&spec);
        tracing::debug!(exit = ?output.exit, limit = ?output.limit, duration = ?output.duration, "script run finished");
        Ok(output)
    }
}

/// An admitted run: its place among the admitted runs and its slot, both given back when
/// it is dropped.
pub(crate) struct Admission<'a> {
    slot: Slot<'a>,
    _admitted: Admitted<'a>,
}

/// A runner's load at one moment ([`Runner::load`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// Runs holding a slot (executing).
    pub running: usize,
    /// Runs admitted and waiting for a slot.
    pub queued: usize,
}

/// The run slots of a runner.
#[derive(Debug)]
struct Slots {
    /// One permit per run allowed to execute at once.
    permits: Semaphore,
    /// The free slot numbers; a run takes one with its permit.
    free: Mutex<Vec<usize>>,
}

/// A run's slot, given back when the run ends, however it ends.
struct Slot<'a> {
    index: usize,
    slots: &'a Slots,
    _permit: SemaphorePermit<'a>,
}

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            permits: Semaphore::new(n),
            free: Mutex::new((0..n).rev().collect()),
        }
    }

    async fn acquire(&self) -> Result<Slot<'_>, RunError> {
        let permit = self.permits.acquire().await.map_err(|_| RunError::Busy)?;
        // A permit guarantees a free number: there are as many numbers as permits.
        let index = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .ok_or(RunError::Busy)?;
        Ok(Slot {
            index,
            slots: self,
            _permit: permit,
        })
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.index);
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
            crate::sandbox::kill_group(self.0);
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

fn exit_of(status: std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(-1),
    }
}
