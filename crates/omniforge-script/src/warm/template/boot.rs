//! How a template starts, in four steps: its files are written (`TemplateFiles`), it is
//! launched with a cold call's sandbox (`launch`), it answers the `init` handshake with its
//! boot report (`handshake`), and the rules its calls share are built from the handles it sent
//! (`shared_rules`). A template that fails a step, or says its code must run cold, is
//! abandoned with everything it started.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

use super::control::{read_control, watch_process};
use super::{Started, Template, TemplateSpec, lock, main_pids};
use crate::run::Runner;
use crate::run::child::{self, ChildIo, Role, RunFiles};
use crate::sandbox::{Identity, RunCgroups, TemplateCgroups, UidLease, system_paths};
use crate::sys::write_readable;
use crate::warm::confine::SharedRules;
use crate::warm::types::{WarmConfig, WarmError};
use crate::warm::wire::{self, Received};

/// The driver the template runs.
const DRIVER: &str = include_str!("../template.py");
/// The extension module it loads (built by `build.rs` from `native/warm_ext.rs`).
const NATIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/warm_ext.so"));
/// Processes and threads of a template itself (bubblewrap, its init, the interpreter and
/// spares not yet moved into their call's cgroups).
const TEMPLATE_MAX_PROCESSES: u32 = 64;
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
        let files = TemplateFiles::write(runner, spec)?;
        let launched = launch(runner, spec, &files)?;
        let ready = match handshake(&launched, config).await {
            Ok(ready) => ready,
            Err(not_ready) => {
                let log = Arc::clone(&launched.log);
                launched.abandon().await;
                // Read after the abandon: the output readers then have what it printed.
                return Err(not_ready.error(&lock(&log), config.boot_timeout));
            }
        };
        let boot = match ready.parse::<Boot>() {
            Ok(boot) if boot.eligible => boot,
            Ok(boot) => {
                launched.abandon().await;
                let why = boot.reason;
                return Ok(Started::Cold(
                    why.unwrap_or_else(|| "the template refused".to_owned()),
                ));
            }
            Err(e) => {
                launched.abandon().await;
                return Err(WarmError::Start(e.to_string()));
            }
        };
        let pid = ready.pid.unwrap_or(0);
        let rules = match shared_rules(spec, &files.script, &boot, ready.fds) {
            Ok(r) => r,
            Err(e) => {
                launched.abandon().await;
                return Err(e);
            }
        };
        if launched.idle {
            // Booted beside calls at SCHED_IDLE; spares must not inherit it.
            for p in main_pids(launched.bwrap_pid, pid) {
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
        let template = Arc::new(Template::ready(
            spec, config, launched, files, pid, rules, started,
        ));
        tokio::spawn(read_control(
            Arc::downgrade(&template),
            template.dead.clone(),
        ));
        tokio::spawn(watch_process(Arc::downgrade(&template)));
        template.replenish();
        Ok(Started::Ready(template))
    }

    /// The running template, once it said it is ready.
    fn ready(
        spec: &TemplateSpec,
        config: &WarmConfig,
        launched: Launched,
        files: TemplateFiles,
        pid: i32,
        rules: SharedRules,
        started: Instant,
    ) -> Template {
        let disabled = |layer: &str| config.disabled_call_layers.iter().any(|l| l == layer);
        Template {
            spec: spec.clone(),
            ctl: launched.ctl,
            process: Mutex::new(Some(launched.process)),
            bwrap_pid: launched.bwrap_pid,
            pid,
            cgroups: Mutex::new(Some((launched.cgroups, launched.main))),
            rules,
            lease: Mutex::new(launched.lease),
            _dir: files.dir,
            spares: Mutex::new(VecDeque::new()),
            making: AtomicUsize::new(0),
            target_spares: config.spares,
            call_cgroups: !disabled("cgroups"),
            call_landlock: !disabled("landlock"),
            replies: Mutex::new(HashMap::new()),
            exits: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            dead: CancellationToken::new(),
            stopped: AtomicBool::new(false),
            boot_time: started.elapsed(),
            in_flight: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            last_used: Mutex::new(Instant::now()),
        }
    }
}

/// A template's files, in a private directory of the runner's scratch directory: the code,
/// the driver, the extension module.
struct TemplateFiles {
    dir: tempfile::TempDir,
    script: PathBuf,
    driver: PathBuf,
    native: PathBuf,
}

impl TemplateFiles {
    fn write(runner: &Runner, spec: &TemplateSpec) -> Result<TemplateFiles, WarmError> {
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
        Ok(TemplateFiles {
            dir,
            script,
            driver,
            native,
        })
    }
}

/// A template process, started and not yet ready.
struct Launched {
    /// bubblewrap.
    process: tokio::process::Child,
    bwrap_pid: u32,
    /// The template's cgroups, and the one its own processes run in.
    cgroups: TemplateCgroups,
    main: RunCgroups,
    /// Our end of the control socket.
    ctl: AsyncFd<OwnedFd>,
    /// Its host uid under a root server, held until its processes are dead.
    lease: Option<UidLease>,
    /// The start of what it printed (for the error when it dies before it is ready).
    log: Arc<Mutex<String>>,
    /// Started at SCHED_IDLE (a root server: beside the calls it must not slow down).
    idle: bool,
}

/// Starts the template's process with the cold call's sandbox (`child::command` with
/// `Role::Template`), in cgroups of its own, its output logged.
fn launch(
    runner: &Runner,
    spec: &TemplateSpec,
    files: &TemplateFiles,
) -> Result<Launched, WarmError> {
    let plan = runner.plan();
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
    let run_files = RunFiles {
        dir: files.dir.path(),
        script: &files.script,
    };
    let io = ChildIo {
        uid: lease.as_ref().map(UidLease::uid),
        hidden_dirs: &[],
        channel_fd: theirs.as_raw_fd(),
        cgroup_procs: main.procs_fds(),
        idle,
    };
    let role = Role::Template {
        driver: &files.driver,
        native: &files.native,
    };
    let (mut cmd, hold) = child::command(plan, &run_spec, &run_files, io, role)
        .map_err(|e| WarmError::Start(e.to_string()))?;
    let mut process = cmd
        .spawn()
        .map_err(WarmError::io("starting the template"))?;
    main.spawned();
    drop((theirs, hold));
    let bwrap_pid = process.id().unwrap_or(0);
    let log = Arc::new(Mutex::new(String::new()));
    let stdout = process.stdout.take().map(boxed);
    let stderr = process.stderr.take().map(boxed);
    for pipe in [stdout, stderr].into_iter().flatten() {
        tokio::spawn(keep_log(pipe, Arc::clone(&log)));
    }
    Ok(Launched {
        process,
        bwrap_pid,
        cgroups,
        main,
        ctl,
        lease,
        log,
        idle,
    })
}

/// Why a launched template is not ready.
enum NotReady {
    /// It closed its control socket (it exited) first.
    Exited,
    /// It did not answer within the boot timeout.
    Late,
}

impl NotReady {
    fn error(self, log: &str, boot_timeout: Duration) -> WarmError {
        WarmError::Start(match self {
            NotReady::Exited => format!("the template exited before it was ready: {}", tail(log)),
            NotReady::Late => format!("the template was not ready within {boot_timeout:?}"),
        })
    }
}

/// Sends the template its `init` (the preload budget) and waits, at most
/// `config.boot_timeout`, for its boot report.
async fn handshake(launched: &Launched, config: &WarmConfig) -> Result<Received, NotReady> {
    let init = json!({
        "op": "init",
        "budget_s": config.preload_budget.as_secs_f64(),
        "submodules": config.preload_submodules,
    });
    let ready = async {
        wire::send(&launched.ctl, &init, &[]).await?;
        wire::recv(&launched.ctl).await
    };
    match tokio::time::timeout(config.boot_timeout, ready).await {
        Ok(Ok(Some(m))) => Ok(m),
        Ok(Ok(None)) | Ok(Err(_)) => Err(NotReady::Exited),
        Err(_) => Err(NotReady::Late),
    }
}

impl Launched {
    /// Kills a template that will not be used and removes its cgroups.
    async fn abandon(mut self) {
        crate::sandbox::kill_group(self.bwrap_pid);
        self.cgroups.kill();
        let _ = self.process.start_kill();
        let _ = self.process.wait().await;
        // Let the output readers take what the template printed before it died.
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.cgroups.finish(Duration::from_secs(5));
    }
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

fn boxed(pipe: impl AsyncRead + Send + Unpin + 'static) -> Box<dyn AsyncRead + Send + Unpin> {
    Box::new(pipe)
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
