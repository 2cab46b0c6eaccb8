//! One warm template: started with a cold call's sandbox, talked to over its control socket,
//! keeping spare children ready (forked, confined, moved into their call's cgroups) and
//! stopped with everything it started.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::confine::SharedRules;
use super::types::{WarmConfig, WarmError};
use super::wire::{self, Received};
use crate::run::child::{self, ChildIo, Role, RunFiles};
use crate::run::{RunSpec, Runner};
use crate::sandbox::{CgroupLimits, Identity, RunCgroups, TemplateCgroups, UidLease, system_paths};
use crate::sys::write_readable;

/// The driver the template runs.
const DRIVER: &str = include_str!("template.py");
/// The extension module it loads (built by `build.rs` from `native/warm_ext.rs`).
const NATIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/warm_ext.so"));
/// Processes and threads of a template itself (bubblewrap, its init, the interpreter and
/// spares not yet moved into their call's cgroups).
const TEMPLATE_MAX_PROCESSES: u32 = 64;
/// How long a spare may take to be forked, confined and moved.
const SPARE_TIMEOUT: Duration = Duration::from_secs(20);
/// How much of a template's own output (imports that print, a crash) is logged.
const MAX_LOG_BYTES: usize = 16 << 10;

/// What the template says when it is ready.
#[derive(Debug, Deserialize)]
struct Boot {
    eligible: bool,
    reason: Option<String>,
    threads: i64,
    preloaded: u64,
    failed: u64,
    dev: Vec<String>,
    boot_ms: u64,
}

/// The template's other messages.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum FromTemplate {
    /// A spare was forked (its socket attached), or could not be.
    Spare { id: u64, error: Option<String> },
    /// A child exited: its wait status.
    Exit { id: u64, status: i32 },
}

/// Messages of a spare child.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromSpare {
    /// Its private directories (handles attached).
    Dirs { tag: String },
    /// Confined and waiting for a call.
    Ready,
    /// Received its call; tool code runs from here on.
    Started,
    /// The tool's code and the interpreter's shutdown work are done.
    Done { code: i32 },
}

/// What a template's start ended in.
pub(crate) enum Started {
    /// Ready for calls.
    Ready(Arc<Template>),
    /// The code must run cold (the reason says why); the template was stopped.
    Cold(String),
}

/// The parts of a call's spec a template is made for (never its arguments or environment).
#[derive(Debug, Clone)]
pub(crate) struct TemplateSpec {
    pub(crate) python: PathBuf,
    pub(crate) env_dir: PathBuf,
    pub(crate) code: String,
    pub(crate) network: bool,
    pub(crate) memory_bytes: u64,
    pub(crate) max_processes: u32,
    pub(crate) max_file_bytes: u64,
}

impl TemplateSpec {
    pub(crate) fn of(spec: &RunSpec) -> TemplateSpec {
        TemplateSpec {
            python: spec.python.clone(),
            env_dir: spec.env_dir.clone(),
            code: spec.code.clone(),
            network: spec.network,
            memory_bytes: spec.memory_bytes,
            max_processes: spec.max_processes,
            max_file_bytes: spec.max_file_bytes,
        }
    }

    /// The spec the template starts with: a call's, without arguments or environment.
    fn run_spec(&self) -> RunSpec {
        let mut spec = RunSpec::new(
            &crate::Env {
                path: self.env_dir.clone(),
                env_id: String::new(),
            },
            self.code.clone(),
        );
        spec.python = self.python.clone();
        spec.network = self.network;
        spec.memory_bytes = self.memory_bytes;
        spec.max_processes = self.max_processes;
        spec.max_file_bytes = self.max_file_bytes;
        spec
    }
}

/// A spare child: forked, confined, in its call's cgroups, waiting for a call.
#[derive(Debug)]
pub(crate) struct Spare {
    /// Its pid on the host (from the kernel's credentials).
    pub(crate) pid: i32,
    /// Its end of the spare's socket pair.
    pub(crate) sock: AsyncFd<OwnedFd>,
    /// The name of its directories (`/tmp/c-<tag>`, `/dev/shm/c-<tag>`).
    pub(crate) tag: String,
    /// Its call's cgroups.
    pub(crate) cgroups: RunCgroups,
    /// Its wait status, when the template reaps it.
    pub(crate) exit: oneshot::Receiver<i32>,
}

/// A running template.
#[derive(Debug)]
pub(crate) struct Template {
    pub(crate) spec: TemplateSpec,
    ctl: AsyncFd<OwnedFd>,
    /// bubblewrap, until the template is stopped.
    process: Mutex<Option<tokio::process::Child>>,
    bwrap_pid: u32,
    /// The template interpreter's pid on the host.
    pid: i32,
    cgroups: Mutex<Option<(TemplateCgroups, RunCgroups)>>,
    rules: SharedRules,
    /// The template's host uid, held until its processes are dead.
    lease: Mutex<Option<UidLease>>,
    /// Its files (the code, the driver, the extension module).
    _dir: tempfile::TempDir,
    spares: Mutex<VecDeque<Spare>>,
    making: AtomicUsize,
    target_spares: usize,
    call_cgroups: bool,
    call_landlock: bool,
    replies: Mutex<HashMap<u64, oneshot::Sender<Received>>>,
    exits: Mutex<HashMap<u64, oneshot::Sender<i32>>>,
    next_id: AtomicU64,
    /// Fires when the template died or was stopped.
    pub(crate) dead: CancellationToken,
    stopped: AtomicBool,
    pub(crate) boot_time: Duration,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) calls: AtomicU64,
    last_used: Mutex<Instant>,
}

impl Template {
    /// Starts a template for `spec` with `runner`'s sandbox and waits until it is ready (or
    /// says the code must run cold).
    ///
    /// # Errors
    /// [`WarmError`] when the template cannot be started or does not become ready.
    pub(crate) async fn start(
        runner: &Runner,
        spec: &TemplateSpec,
        config: &WarmConfig,
    ) -> Result<Started, WarmError> {
        let started = Instant::now();
        let plan = runner.plan();
        let dir = tempfile::Builder::new()
            .prefix("tpl-")
            .tempdir_in(runner.scratch())
            .map_err(WarmError::io("creating the template's directory"))?;
        let script = dir.path().join("main.py");
        let driver = dir.path().join("template.py");
        let native = dir.path().join("_omniforge_warm.abi3.so");
        // 0644 whatever the umask: the template's leased uid reads them (`write_readable`).
        write_readable(&script, spec.code.as_bytes()).map_err(WarmError::io("writing the code"))?;
        write_readable(&driver, DRIVER.as_bytes()).map_err(WarmError::io("writing the driver"))?;
        write_readable(&native, NATIVE).map_err(WarmError::io("writing the extension module"))?;
        let lease = match &plan.identity {
            Identity::BwrapAs(switch) => Some(
                switch
                    .lease(crate::RUN_UID_SLOTS as usize / 2, false)
                    .map_err(WarmError::io("taking a uid for the template"))?,
            ),
            _ => None,
        };
        let (cgroups, mut main) = plan
            .cgroups
            .create_template(TEMPLATE_MAX_PROCESSES)
            .ok_or_else(|| WarmError::Start("cannot create the template's cgroups".to_owned()))?;
        let (ours, theirs) = wire::seqpacket_pair().map_err(WarmError::io("a control socket"))?;
        let ctl = wire::async_socket(ours).map_err(WarmError::io("a control socket"))?;
        let idle = rustix::process::geteuid().is_root();
        let run_spec = spec.run_spec();
        let files = RunFiles {
            dir: dir.path(),
            script: &script,
        };
        let io = ChildIo {
            uid: lease.as_ref().map(UidLease::uid),
            hidden_dirs: &[],
            channel_fd: theirs.as_raw_fd(),
            cgroup_procs: main.procs_fds(),
            idle,
        };
        let role = Role::Template {
            driver: &driver,
            native: &native,
        };
        let (mut cmd, hold) = child::command(plan, &run_spec, &files, io, role)
            .map_err(|e| WarmError::Start(e.to_string()))?;
        let mut process = cmd
            .spawn()
            .map_err(WarmError::io("starting the template"))?;
        main.spawned();
        drop((theirs, hold));
        let bwrap_pid = process.id().unwrap_or(0);
        let log = Arc::new(Mutex::new(String::new()));
        for pipe in [
            process
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn AsyncRead + Send + Unpin>),
            process
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            tokio::spawn(keep_log(pipe, Arc::clone(&log)));
        }
        let init = json!({
            "op": "init",
            "budget_s": config.preload_budget.as_secs_f64(),
            "submodules": config.preload_submodules,
        });
        let ready = async {
            wire::send(&ctl, &init, &[]).await?;
            wire::recv(&ctl).await
        };
        let ready = match tokio::time::timeout(config.boot_timeout, ready).await {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) | Ok(Err(_)) => {
                abandon(process, bwrap_pid, cgroups).await;
                let said = lock(&log).clone();
                return Err(WarmError::Start(format!(
                    "the template exited before it was ready: {}",
                    tail(&said)
                )));
            }
            Err(_) => {
                abandon(process, bwrap_pid, cgroups).await;
                return Err(WarmError::Start(format!(
                    "the template was not ready within {:?}",
                    config.boot_timeout
                )));
            }
        };
        let boot = match ready.parse::<Boot>() {
            Ok(boot) if boot.eligible => boot,
            Ok(boot) => {
                abandon(process, bwrap_pid, cgroups).await;
                return Ok(Started::Cold(
                    boot.reason
                        .unwrap_or_else(|| "the template refused".to_owned()),
                ));
            }
            Err(e) => {
                abandon(process, bwrap_pid, cgroups).await;
                return Err(WarmError::Start(e.to_string()));
            }
        };
        let pid = ready.pid.unwrap_or(0);
        let rules = match shared_rules(spec, &script, &boot, ready.fds) {
            Ok(r) => r,
            Err(e) => {
                abandon(process, bwrap_pid, cgroups).await;
                return Err(e);
            }
        };
        if idle {
            // Booted beside calls at SCHED_IDLE; spares must not inherit it.
            for p in main_pids(bwrap_pid, pid) {
                if let Err(e) = crate::sys::set_normal_scheduling(p) {
                    tracing::debug!(pid = p, error = %e, "cannot reset a template's scheduling");
                }
            }
        }
        tracing::debug!(
            preloaded = boot.preloaded,
            failed = boot.failed,
            threads = boot.threads,
            boot_ms = boot.boot_ms,
            "warm template ready"
        );
        let template = Arc::new(Template {
            spec: spec.clone(),
            ctl,
            process: Mutex::new(Some(process)),
            bwrap_pid,
            pid,
            cgroups: Mutex::new(Some((cgroups, main))),
            rules,
            lease: Mutex::new(lease),
            _dir: dir,
            spares: Mutex::new(VecDeque::new()),
            making: AtomicUsize::new(0),
            target_spares: config.spares,
            call_cgroups: !config.disabled_call_layers.iter().any(|l| l == "cgroups"),
            call_landlock: !config.disabled_call_layers.iter().any(|l| l == "landlock"),
            replies: Mutex::new(HashMap::new()),
            exits: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            dead: CancellationToken::new(),
            stopped: AtomicBool::new(false),
            boot_time: started.elapsed(),
            in_flight: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        tokio::spawn(read_control(
            Arc::downgrade(&template),
            template.dead.clone(),
        ));
        tokio::spawn(watch_process(Arc::downgrade(&template)));
        template.replenish();
        Ok(Started::Ready(template))
    }

    /// A ready spare, or a new one made now (fork, confinement and cgroup moves on the
    /// caller's time).
    ///
    /// # Errors
    /// [`WarmError`] when the template is gone or the spare cannot be made.
    pub(crate) async fn take_spare(self: &Arc<Self>) -> Result<Spare, WarmError> {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let ready = self
            .spares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        match ready {
            Some(spare) => Ok(spare),
            None => self.make_spare().await,
        }
    }

    /// Makes spares until `target_spares` are ready or being made (in the background).
    pub(crate) fn replenish(self: &Arc<Self>) {
        loop {
            let have = self
                .spares
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len()
                + self.making.load(Ordering::Acquire);
            if have >= self.target_spares || self.dead.is_cancelled() {
                return;
            }
            self.making.fetch_add(1, Ordering::AcqRel);
            let template = Arc::clone(self);
            tokio::spawn(async move {
                let spare = template.make_spare().await;
                template.making.fetch_sub(1, Ordering::AcqRel);
                match spare {
                    Ok(spare) if !template.dead.is_cancelled() => template
                        .spares
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push_back(spare),
                    Ok(_) => {}
                    Err(e) if !template.dead.is_cancelled() => {
                        tracing::warn!(error = %e, "a warm template could not make a spare");
                    }
                    Err(_) => {}
                }
            });
        }
    }

    /// Forks a spare, has it confined, and moves it into its call's cgroups.
    async fn make_spare(self: &Arc<Self>) -> Result<Spare, WarmError> {
        let made = tokio::time::timeout(SPARE_TIMEOUT, self.make_spare_now());
        tokio::select! {
            r = made => r.map_err(|_| WarmError::Spare("the spare was not ready in time".to_owned()))?,
            () = self.dead.cancelled() => Err(WarmError::Gone),
        }
    }

    async fn make_spare_now(self: &Arc<Self>) -> Result<Spare, WarmError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, reply_rx) = oneshot::channel();
        let (exit_tx, exit_rx) = oneshot::channel();
        lock(&self.replies).insert(id, reply_tx);
        lock(&self.exits).insert(id, exit_tx);
        let forget = |t: &Self| {
            lock(&t.replies).remove(&id);
            lock(&t.exits).remove(&id);
        };
        let sent = wire::send(&self.ctl, &json!({"op": "spare", "id": id}), &[]).await;
        if let Err(e) = sent {
            forget(self);
            return Err(WarmError::Spare(format!("asking for a spare: {e}")));
        }
        let mut reply = reply_rx.await.map_err(|_| WarmError::Gone)?;
        let Some(fd) = reply.fds.pop() else {
            forget(self);
            let said = reply.parse::<FromTemplate>().ok();
            return Err(WarmError::Spare(match said {
                Some(FromTemplate::Spare {
                    error: Some(error), ..
                }) => format!("the template could not fork: {error}"),
                _ => "no socket came with the spare".to_owned(),
            }));
        };
        let sock = wire::async_socket(fd).map_err(WarmError::io("the spare's socket"))?;
        // Its directories, then its confinement; meanwhile its call's cgroups.
        let dirs = expect(&sock, None).await?;
        let pid = dirs.pid.filter(|p| *p > 0).ok_or_else(|| {
            WarmError::Spare("no credentials on the spare's first message".to_owned())
        })?;
        let tag = match dirs.parse::<FromSpare>() {
            Ok(FromSpare::Dirs { tag })
                if tag.len() == 24 && tag.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                tag
            }
            _ => return Err(WarmError::Spare("an unexpected first message".to_owned())),
        };
        if dirs.fds.len() != 2 {
            return Err(WarmError::Spare(
                "the spare sent no directory handles".to_owned(),
            ));
        }
        let limits = CgroupLimits::run(self.spec.max_processes, self.spec.memory_bytes);
        let cgroups = self.call_cgroups.then(|| {
            let guard = lock(&self.cgroups);
            guard.as_ref().map(|(t, _)| t.create_call(limits))
        });
        let moved = cgroups.flatten().map(|c| {
            tokio::task::spawn_blocking(move || {
                let result = c.move_in(pid);
                (c, result)
            })
        });
        if self.call_landlock {
            let ruleset = self
                .rules
                .for_call(&dirs.fds, self.spec.network)
                .map_err(|e| WarmError::Spare(e.to_string()))?;
            wire::send(&sock, &json!({"op": "confine"}), &[ruleset.as_fd()])
                .await
                .map_err(WarmError::io("confining the spare"))?;
        } else {
            // Measurements only (`WarmConfig::disabled_call_layers`): no call domain.
            wire::send(&sock, &json!({"op": "confine", "skip": true}), &[])
                .await
                .map_err(WarmError::io("readying the spare"))?;
        }
        drop(dirs);
        let ready = expect(&sock, Some(pid)).await?;
        if !matches!(ready.parse::<FromSpare>(), Ok(FromSpare::Ready)) {
            return Err(WarmError::Spare("the spare was not confined".to_owned()));
        }
        let cgroups = match moved {
            Some(task) => {
                let (c, result) = task
                    .await
                    .map_err(|e| WarmError::Spare(format!("moving the spare: {e}")))?;
                result.map_err(WarmError::io("moving the spare into its call's cgroups"))?;
                c
            }
            None => RunCgroups::none(),
        };
        Ok(Spare {
            pid,
            sock,
            tag,
            cgroups,
            exit: exit_rx,
        })
    }

    /// Tells the template to remove a finished call's directories.
    pub(crate) async fn cleanup(&self, tag: &str) {
        let _ = wire::send(&self.ctl, &json!({"op": "cleanup", "tag": tag}), &[]).await;
    }

    /// Stops the template: kills it and everything it started, removes its cgroups, gives
    /// back its uid once its processes are gone. Idempotent.
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.dead.cancel();
        crate::sandbox::kill_group(self.bwrap_pid);
        let cgroups = lock(&self.cgroups).take();
        if let Some((t, _)) = &cgroups {
            t.kill();
        }
        lock(&self.spares).clear();
        let process = lock(&self.process).take();
        let lease = lock(&self.lease).take();
        let finish = async move {
            if let Some(mut p) = process {
                let _ = p.start_kill();
                let _ = p.wait().await;
            }
            if let Some((t, main)) = cgroups {
                drop(main);
                t.finish(Duration::from_secs(5));
            }
            drop(lease);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(finish);
            }
            // No runtime: the processes are killed; the rest is dropped.
            Err(_) => drop(finish),
        }
    }

    /// The template interpreter's pid on the host.
    pub(crate) fn pid(&self) -> Option<u32> {
        u32::try_from(self.pid).ok().filter(|p| *p > 0)
    }

    /// Whether the template was stopped (rather than having died).
    pub(crate) fn was_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// When it was last used for a call.
    pub(crate) fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Ready spares now.
    pub(crate) fn ready_spares(&self) -> usize {
        lock(&self.spares).len()
    }

    /// Resident and proportional memory (bytes) of the template's own processes
    /// (bubblewrap, its init, the interpreter) and of its ready spares.
    pub(crate) fn memory(&self) -> (Memory, Memory) {
        let mut own = Memory::default();
        for pid in main_pids(self.bwrap_pid, self.pid) {
            own += Memory::of(pid);
        }
        let mut spares = Memory::default();
        for s in lock(&self.spares).iter() {
            spares += Memory::of(s.pid);
        }
        (own, spares)
    }
}

impl Drop for Template {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Resident (RSS) and proportional (PSS, shared pages divided among their users) memory.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    pub(crate) rss: u64,
    pub(crate) pss: u64,
}

impl Memory {
    fn of(pid: i32) -> Memory {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        Memory {
            rss: field("Rss:"),
            pss: field("Pss:"),
        }
    }
}

impl std::ops::AddAssign for Memory {
    fn add_assign(&mut self, other: Memory) {
        self.rss += other.rss;
        self.pss += other.pss;
    }
}

/// Kills a template that will not be used and removes its cgroups.
async fn abandon(mut process: tokio::process::Child, bwrap_pid: u32, cgroups: TemplateCgroups) {
    crate::sandbox::kill_group(bwrap_pid);
    cgroups.kill();
    let _ = process.start_kill();
    let _ = process.wait().await;
    // Let the output readers take what the template printed before it died.
    tokio::time::sleep(Duration::from_millis(20)).await;
    cgroups.finish(Duration::from_secs(5));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// bubblewrap, its children (its init in the sandbox) and the template interpreter.
fn main_pids(bwrap: u32, template: i32) -> Vec<i32> {
    let bwrap = bwrap as i32;
    let mut pids = vec![bwrap];
    let children =
        std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children")).unwrap_or_default();
    pids.extend(
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok()),
    );
    if template > 0 && !pids.contains(&template) {
        pids.push(template);
    }
    pids
}

/// Reads the next message of a spare, which must come from `pid` when given.
async fn expect(sock: &AsyncFd<OwnedFd>, pid: Option<i32>) -> Result<Received, WarmError> {
    let m = wire::recv(sock)
        .await
        .map_err(WarmError::io("reading the spare"))?
        .ok_or_else(|| WarmError::Spare("the spare exited".to_owned()))?;
    if pid.is_some() && m.pid != pid {
        return Err(WarmError::Spare(
            "a message from another process".to_owned(),
        ));
    }
    Ok(m)
}

/// The rules every call of the template shares (see `confine`).
fn shared_rules(
    spec: &TemplateSpec,
    script: &Path,
    boot: &Boot,
    fds: Vec<OwnedFd>,
) -> Result<SharedRules, WarmError> {
    let bad = |what: String| WarmError::Start(what);
    if fds.len() != boot.dev.len() + 1 {
        return Err(bad(
            "the template sent the wrong number of handles".to_owned()
        ));
    }
    let mut rules = SharedRules::default();
    let mut host: Vec<PathBuf> = system_paths()
        .into_iter()
        .filter(|p| p != Path::new("/proc") && p != Path::new("/dev"))
        .collect();
    if let Some(prefix) = std::fs::canonicalize(&spec.python)
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.to_owned()))
        .filter(|p| p != Path::new("/"))
    {
        host.push(prefix);
    }
    host.push(spec.env_dir.clone());
    host.push(script.to_owned());
    for p in &host {
        rules
            .add_host_read_only(p)
            .map_err(|e| bad(e.to_string()))?;
    }
    let mut fds = fds.into_iter();
    if let Some(proc_fd) = fds.next() {
        rules.add_read_only(proc_fd);
    }
    for (name, fd) in boot.dev.iter().zip(fds) {
        match name.as_str() {
            "null" | "zero" | "full" => rules.add_read_write(fd),
            _ => rules.add_read_only(fd),
        }
    }
    Ok(rules)
}

/// Routes the template's messages until it closes its control socket or is stopped.
async fn read_control(template: std::sync::Weak<Template>, dead: CancellationToken) {
    loop {
        let Some(t) = template.upgrade() else { return };
        let message = tokio::select! {
            m = wire::recv(&t.ctl) => m,
            () = dead.cancelled() => return,
        };
        let message = match message {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                t.dead.cancel();
                return;
            }
        };
        match message.parse::<FromTemplate>() {
            Ok(FromTemplate::Spare { id, .. }) => {
                if let Some(tx) = lock(&t.replies).remove(&id) {
                    let _ = tx.send(message);
                }
            }
            Ok(FromTemplate::Exit { id, status }) => {
                if let Some(tx) = lock(&t.exits).remove(&id) {
                    let _ = tx.send(status);
                }
            }
            Err(e) => tracing::debug!(error = %e, "warm template: message ignored"),
        }
    }
}

/// Marks the template dead when bubblewrap exits.
async fn watch_process(template: std::sync::Weak<Template>) {
    loop {
        let Some(t) = template.upgrade() else { return };
        let exited = {
            let mut guard = lock(&t.process);
            match guard.as_mut() {
                Some(p) => !matches!(p.try_wait(), Ok(None)),
                None => true,
            }
        };
        if exited {
            t.dead.cancel();
            return;
        }
        let dead = t.dead.clone();
        drop(t);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
            () = dead.cancelled() => return,
        }
    }
}

/// Keeps the start of a template's output (logged at debug level) and drains the rest.
async fn keep_log(mut pipe: Box<dyn AsyncRead + Send + Unpin>, log: Arc<Mutex<String>>) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&buf[..n]);
        tracing::debug!(output = %text.trim_end(), "warm template output");
        let mut kept = lock(&log);
        if kept.len() < MAX_LOG_BYTES {
            kept.push_str(&text);
        }
    }
}

fn tail(text: &str) -> String {
    let t = text.trim();
    let mut start = t.len().saturating_sub(2000);
    while !t.is_char_boundary(start) {
        start += 1;
    }
    if t.is_empty() {
        "(no output)".to_owned()
    } else {
        t[start..].to_owned()
    }
}
