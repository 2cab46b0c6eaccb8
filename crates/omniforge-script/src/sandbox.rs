//! Sandbox layers: what this machine offers, detected once, and how a run uses it.
//!
//! | layer | how | notes |
//! |---|---|---|
//! | `process-group` | `setpgid` at spawn, `killpg(SIGKILL)` | always |
//! | `rlimits` | `setrlimit` in `pre_exec`: AS, CPU (soft < hard: SIGXCPU first), FSIZE, NOFILE, CORE=0 | always |
//! | `namespaces` | bubblewrap: `--unshare-all` (user, pid, mount, net, ipc, uts, cgroup), `--die-with-parent`, `--new-session` | the kill of bwrap takes the whole PID namespace with it, `setsid` escapees included |
//! | `unprivileged-uid` | bwrap `--unshare-user --uid 65534 --gid 65534 --cap-drop ALL --disable-userns` | without it bwrap started by root keeps all capabilities |
//! | `read-only-root` | only `/usr` (+ `/bin`, `/lib*` symlinks), a few `/etc` files, the interpreter prefix, the environment and the script, all read-only; root and `/dev` remounted read-only; private size-capped tmpfs `/tmp` and `/dev/shm` | the data directory, the database and other environments are not in the sandbox at all |
//! | `no-network` | bwrap's empty network namespace; `--share-net` only when a run allows network | |
//! | `cgroup-pids` | a cgroup per run with `pids.max` (v1 `pids` hierarchy, or v2 with `pids` delegated) | the process limit that holds for root; `RLIMIT_NPROC` does not |
//! | `cgroup-kill` | a v2 cgroup per run, `cgroup.kill` on exit/timeout/cancel | catches `setsid` escapees with or without bwrap; joined in `pre_exec` right after the pids cgroup (the second migration is cheap) |
//! | `landlock` | the helper (`helper.rs`, [`crate::main_if_helper`]) restricts itself, then execs the interpreter | Landlock forbids mounts, so it comes after bwrap's; also without bwrap |
//! | `seccomp` | a filter (`filter.rs`) loaded by bwrap (`--add-seccomp-fd`, a memfd) or in `pre_exec` | socket families and a deny list of system calls, `EPERM` |
//!
//! Each layer can be turned off on its own ([`RunnerConfig::disabled_layers`]) to measure it or
//! to show in a test what it alone stops.
//!
//! Detection runs bwrap once with the real flags, creates and removes test cgroups, and never
//! assumes: a production host without a delegated cgroup subtree simply lacks those layers.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::filter::{self, Filters};
use crate::helper::{Confine, HELPER_ARG, SANDBOX_HELPER};
use crate::run::RunnerConfig;

/// The uid and gid a sandboxed script runs as (`nobody`).
pub const SANDBOX_UID: u32 = 65534;

/// Where the script file appears inside the bubblewrap sandbox.
pub(crate) const SANDBOX_SCRIPT: &str = "/omniforge/main.py";

/// `/etc` entries exposed read-only in the sandbox when they exist (TLS roots, name
/// resolution, time zone, MIME types).
const ETC_ENTRIES: &[&str] = &[
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/ld.so.cache",
];

/// Top-level system directories exposed when they exist: as symlinks where the host has
/// symlinks (merged `/usr`), read-only binds otherwise.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32",
];

/// How much isolation a [`Runner`](crate::Runner) insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxLevel {
    /// Refuse to start without the `namespaces` layer (bubblewrap working).
    Strict,
    /// Use the best layers available and log which.
    Standard,
    /// Process group and rlimits only: for trusted code and for measuring overhead.
    Off,
}

/// One isolation layer and whether this runner uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Stable name: `process-group`, `rlimits`, `namespaces`, `unprivileged-uid`,
    /// `read-only-root`, `no-network`, `cgroup-pids`, `cgroup-kill`, `landlock`, `seccomp`.
    pub name: &'static str,
    /// Whether runs use it.
    pub active: bool,
    /// How, or why not.
    pub detail: String,
}

/// Detects the layers a [`SandboxLevel::Standard`] runner with the default
/// [`RunnerConfig`] would use on this machine: bubblewrap looked up at `/usr/bin/bwrap` or
/// on `PATH`, the Landlock helper recorded by [`crate::main_if_helper`]. Takes tens of
/// milliseconds (it starts bubblewrap and the helper once).
pub fn doctor() -> Vec<Layer> {
    Plan::detect(&RunnerConfig::new(SandboxLevel::Standard)).layers
}

/// What a runner uses, decided once.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) bwrap: Option<Bwrap>,
    pub(crate) cgroups: Cgroups,
    /// The seccomp programs, when the `seccomp` layer is active.
    pub(crate) seccomp: Option<Filters>,
    /// The Landlock helper executable, when the `landlock` layer is active.
    pub(crate) landlock: Option<PathBuf>,
    pub(crate) layers: Vec<Layer>,
}

impl Plan {
    pub(crate) fn detect(config: &RunnerConfig) -> Plan {
        let level = config.sandbox;
        let disabled = |name: &str| config.disabled_layers.iter().any(|d| d == name);
        let mut layers = vec![
            Layer {
                name: "process-group",
                active: true,
                detail: "setpgid at spawn, killpg(SIGKILL) on exit, timeout and cancel".into(),
            },
            Layer {
                name: "rlimits",
                active: true,
                detail: "AS, CPU (SIGXCPU before SIGKILL), FSIZE, NOFILE, CORE=0".into(),
            },
        ];
        let bwrap = match level {
            SandboxLevel::Off => Err("sandbox level is off".to_owned()),
            _ if disabled("namespaces") => Err(DISABLED.to_owned()),
            _ => Bwrap::detect(config.bwrap.as_deref()),
        };
        let (ns_detail, uid_detail, ro_detail, net_detail) = match &bwrap {
            Ok(b) => (
                format!("bubblewrap {}: user, pid, mount, net, ipc, uts, cgroup namespaces; --die-with-parent, --new-session", b.path.display()),
                format!("uid/gid {SANDBOX_UID} in a user namespace, all capabilities dropped, no nested user namespaces"),
                "read-only /usr, a few /etc files, the interpreter prefix, the environment and the script, all under a read-only root and a read-only /dev; private size-capped tmpfs /tmp and /dev/shm".to_owned(),
                "empty network namespace unless the run allows network".to_owned(),
            ),
            Err(why) => (why.clone(), why.clone(), why.clone(), why.clone()),
        };
        let ok = bwrap.is_ok();
        layers.push(Layer {
            name: "namespaces",
            active: ok,
            detail: ns_detail,
        });
        layers.push(Layer {
            name: "unprivileged-uid",
            active: ok,
            detail: uid_detail,
        });
        layers.push(Layer {
            name: "read-only-root",
            active: ok,
            detail: ro_detail,
        });
        layers.push(Layer {
            name: "no-network",
            active: ok,
            detail: net_detail,
        });
        let mut cgroups = match level {
            SandboxLevel::Off => Cgroups::default(),
            _ => Cgroups::detect(),
        };
        if disabled("cgroup-pids") {
            cgroups.pids = None;
        }
        if disabled("cgroup-kill") {
            cgroups.kill = None;
        }
        layers.push(Layer {
            name: "cgroup-pids",
            active: cgroups.pids.is_some(),
            detail: match &cgroups.pids {
                Some(p) => format!("pids.max per run under {}", p.dir.display()),
                None if level == SandboxLevel::Off => "sandbox level is off".into(),
                None if disabled("cgroup-pids") => DISABLED.into(),
                None => format!(
                    "no writable pids cgroup; process count is unbounded{}",
                    if rustix::process::geteuid().is_root() {
                        " (RLIMIT_NPROC does not bind root)"
                    } else {
                        ""
                    }
                ),
            },
        });
        layers.push(Layer {
            name: "cgroup-kill",
            active: cgroups.kill.is_some(),
            detail: match &cgroups.kill {
                Some(p) => format!("cgroup.kill per run under {} on exit, timeout and cancel: takes down what escaped the process group, inside or outside a PID namespace", p.dir.display()),
                None if level == SandboxLevel::Off => "sandbox level is off".into(),
                None if disabled("cgroup-kill") => DISABLED.into(),
                None => "no writable cgroup v2 with cgroup.kill".into(),
            },
        });

        let landlock = match (level, &config.landlock_helper) {
            (SandboxLevel::Off, _) => Err("sandbox level is off".to_owned()),
            _ if disabled("landlock") => Err(DISABLED.to_owned()),
            (_, None) => {
                Err("no helper executable to apply it (the runner was given none)".to_owned())
            }
            (_, Some(helper)) => probe_landlock(helper).map(|status| (helper.clone(), status)),
        };
        layers.push(Layer {
            name: "landlock",
            active: landlock.is_ok(),
            detail: match &landlock {
                Ok((helper, status)) => format!(
                    "{} restricts the script right before exec ({status}): read and execute only the system directories, the /etc files, /proc, /dev, the interpreter, the environment and the script; write only the private /tmp (the run directory without bubblewrap), /dev/shm and /dev/null; no TCP bind or connect without network; abstract Unix sockets and signals scoped to the run",
                    helper.display()
                ),
                Err(why) => why.clone(),
            },
        });

        let seccomp = match level {
            SandboxLevel::Off => Err("sandbox level is off".to_owned()),
            _ if disabled("seccomp") => Err(DISABLED.to_owned()),
            _ => Filters::compile().and_then(|f| {
                match &bwrap {
                    Ok(b) => b.probe_seccomp(&f)?,
                    Err(_) => probe_kernel_seccomp()?,
                }
                Ok(f)
            }),
        };
        layers.push(Layer {
            name: "seccomp",
            active: seccomp.is_ok(),
            detail: match &seccomp {
                Ok(_) => format!(
                    "EPERM for sockets other than AF_UNIX (AF_INET, AF_INET6 and AF_NETLINK too when the run allows network), for x32 system calls and for {}; loaded {}",
                    filter::denied_names().join(", "),
                    if ok { "by bubblewrap (--add-seccomp-fd) before exec" } else { "in the child before exec" }
                ),
                Err(why) => why.clone(),
            },
        });
        Plan {
            bwrap: bwrap.ok(),
            cgroups,
            seccomp: seccomp.ok(),
            landlock: landlock.ok().map(|(h, _)| h),
            layers,
        }
    }
}

/// The detail of a layer the runner's configuration turned off.
const DISABLED: &str = "disabled by the runner's configuration";

/// Runs the helper in probe mode (Landlock applied to itself, nothing executed); its one
/// line says how well the kernel enforces it.
fn probe_landlock(helper: &Path) -> Result<String, String> {
    let mut cmd = std::process::Command::new(helper);
    cmd.arg(HELPER_ARG)
        .args(["--ro", "/usr", "--no-net", "--probe", "--"]);
    probe(cmd, &helper.display().to_string()).map(|out| out.trim().to_owned())
}

/// Without bubblewrap the child loads the filter itself: the kernel must have seccomp.
fn probe_kernel_seccomp() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if status.lines().any(|l| l.starts_with("Seccomp:")) {
        Ok(())
    } else {
        Err("the kernel has no seccomp (no Seccomp line in /proc/self/status)".into())
    }
}

/// Runs `cmd` with a cleared environment and a 10 s limit; its stdout when it succeeds.
fn probe(mut cmd: std::process::Command, what: &str) -> Result<String, String> {
    let mut child = cmd
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                let mut err = String::new();
                if let Some(mut s) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut out);
                }
                if let Some(mut s) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut err);
                }
                return if status.success() {
                    Ok(out)
                } else {
                    Err(format!(
                        "{what} does not work here ({status}): {}",
                        err.trim()
                    ))
                };
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish its self-test"));
            }
        }
    }
}

/// A memory file holding a seccomp program, rewound, for `--add-seccomp-fd`.
pub(crate) fn seccomp_memfd(
    program: &seccompiler::BpfProgram,
    cloexec: bool,
) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SeekFrom};
    let flags = if cloexec {
        MemfdFlags::CLOEXEC
    } else {
        MemfdFlags::empty()
    };
    let fd = rustix::fs::memfd_create("omniforge-seccomp", flags)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&filter::to_bytes(program))?;
    rustix::fs::seek(&file, SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// A working bubblewrap and the system part of its arguments.
#[derive(Debug)]
pub(crate) struct Bwrap {
    pub(crate) path: PathBuf,
    /// `--ro-bind`/`--symlink` arguments for the system directories and `/etc` entries.
    system_args: Vec<String>,
}

impl Bwrap {
    fn detect(explicit: Option<&Path>) -> Result<Bwrap, String> {
        let path = match explicit {
            Some(p) => p.to_owned(),
            None => {
                let default = PathBuf::from("/usr/bin/bwrap");
                if default.is_file() {
                    default
                } else {
                    find_program("bwrap")
                        .ok_or_else(|| "bubblewrap (bwrap) is not installed".to_owned())?
                }
            }
        };
        let bwrap = Bwrap {
            path,
            system_args: system_args(),
        };
        // Probe with the flags real runs use: a kernel or container may refuse user or
        // network namespaces even though the binary exists.
        let mut args = bwrap.base_args(false);
        args.extend(["--".into(), true_program()?.into()]);
        let mut cmd = std::process::Command::new(&bwrap.path);
        cmd.args(&args);
        probe(cmd, &bwrap.path.display().to_string())?;
        Ok(bwrap)
    }

    /// Runs bubblewrap once with the seccomp filter loaded: the kernel and this bubblewrap
    /// must accept it.
    fn probe_seccomp(&self, filters: &Filters) -> Result<(), String> {
        let fd = seccomp_memfd(filters.for_run(false), false)
            .map_err(|e| format!("cannot hold the seccomp filter in memory: {e}"))?;
        let mut args = self.base_args(false);
        args.extend([
            "--add-seccomp-fd".into(),
            fd.as_raw_fd().to_string(),
            "--".into(),
            true_program()?.into(),
        ]);
        let mut cmd = std::process::Command::new(&self.path);
        cmd.args(&args);
        let result = probe(cmd, &format!("{} --add-seccomp-fd", self.path.display()));
        drop(fd);
        result.map(drop)
    }

    /// Namespace, identity and system-file arguments shared by every run.
    fn base_args(&self, network: bool) -> Vec<String> {
        let mut a: Vec<String> = ["--unshare-all"].map(String::from).to_vec();
        if network {
            a.push("--share-net".into());
        }
        let uid = SANDBOX_UID.to_string();
        a.extend(
            [
                "--unshare-user",
                "--uid",
                &uid,
                "--gid",
                &uid,
                "--disable-userns",
                "--cap-drop",
                "ALL",
                "--die-with-parent",
                "--new-session",
                "--hostname",
                "omniforge",
            ]
            .map(String::from),
        );
        a.extend(self.system_args.iter().cloned());
        a.extend(["--proc", "/proc", "--dev", "/dev"].map(String::from));
        a
    }

    /// The full argument list for one run, up to the program: the Landlock helper and its
    /// arguments when the run uses it, then the interpreter and its arguments follow.
    pub(crate) fn run_args(&self, run: &BwrapRun<'_>) -> Vec<OsString> {
        let mut a: Vec<OsString> = self
            .base_args(run.network)
            .into_iter()
            .map(OsString::from)
            .collect();
        if let Some(fd) = run.seccomp_fd {
            a.extend(["--add-seccomp-fd".into(), fd.to_string().into()]);
        }
        // The private /tmp first: binds below come after it, so an environment or interpreter
        // that lives under the host's /tmp is mounted on top of it instead of being hidden.
        // /dev/shm (POSIX shared memory, multiprocessing's semaphores) gets the same cap.
        for dir in ["/tmp", "/dev/shm"] {
            a.extend([
                "--size".into(),
                run.tmp_bytes.to_string().into(),
                "--tmpfs".into(),
                dir.into(),
            ]);
        }
        // Read-only binds of the interpreter's prefix and the environment, at their own paths
        // (the venv's `bin/python` is an absolute symlink into the prefix). Sorted, so a
        // parent is mounted before anything inside it.
        let mut ro: BTreeSet<&Path> = BTreeSet::new();
        ro.extend(run.extra_ro.iter().map(PathBuf::as_path));
        ro.insert(run.env_dir);
        for p in ro {
            if p.starts_with("/usr") {
                continue;
            }
            a.extend(["--ro-bind".into(), p.into(), p.into()]);
        }
        a.extend(["--ro-bind".into(), run.script.into(), SANDBOX_SCRIPT.into()]);
        if run.helper.is_some() {
            a.extend([
                "--ro-bind".into(),
                run.helper.map(OsString::from).unwrap_or_default(),
                SANDBOX_HELPER.into(),
            ]);
        }
        // bubblewrap's own root and /dev are writable tmpfs without a size cap: make them
        // read-only once everything is mounted, so the size-capped /tmp and /dev/shm are the
        // only places a script can write (device nodes such as /dev/null stay writable).
        a.extend(["--remount-ro".into(), "/dev".into()]);
        a.extend(["--remount-ro".into(), "/".into()]);
        a.extend(["--chdir".into(), "/tmp".into(), "--".into()]);
        if run.helper.is_some() {
            a.push(SANDBOX_HELPER.into());
            let mut read_only: Vec<PathBuf> = system_paths();
            read_only.extend(run.extra_ro.iter().cloned());
            read_only.push(run.env_dir.to_owned());
            read_only.push(
                PathBuf::from(SANDBOX_SCRIPT)
                    .parent()
                    .map(Path::to_owned)
                    .unwrap_or_default(),
            );
            let confine = Confine {
                read_only,
                read_write: ["/tmp", "/dev/shm", "/dev/null", "/dev/zero", "/dev/full"]
                    .map(PathBuf::from)
                    .to_vec(),
                no_network: !run.network,
            };
            a.extend(confine.args());
        }
        a
    }
}

/// What Landlock leaves readable of the system: the directories and `/etc` entries exposed
/// in the sandbox, `/proc` and `/dev`.
pub(crate) fn system_paths() -> Vec<PathBuf> {
    SYSTEM_DIRS
        .iter()
        .chain(ETC_ENTRIES)
        .chain(&["/proc", "/dev"])
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

/// Per-run inputs of [`Bwrap::run_args`].
pub(crate) struct BwrapRun<'a> {
    pub(crate) network: bool,
    pub(crate) env_dir: &'a Path,
    pub(crate) extra_ro: Vec<PathBuf>,
    pub(crate) script: &'a Path,
    pub(crate) tmp_bytes: u64,
    /// A descriptor holding the seccomp program (`seccomp` layer).
    pub(crate) seccomp_fd: Option<RawFd>,
    /// The Landlock helper on the host (`landlock` layer).
    pub(crate) helper: Option<&'a Path>,
}

fn system_args() -> Vec<String> {
    let mut a = Vec::new();
    for dir in SYSTEM_DIRS {
        let p = Path::new(dir);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    a.extend([
                        "--symlink".into(),
                        target.display().to_string(),
                        (*dir).into(),
                    ]);
                }
            }
            Ok(m) if m.is_dir() => a.extend(["--ro-bind".into(), (*dir).into(), (*dir).into()]),
            _ => {}
        }
    }
    for entry in ETC_ENTRIES {
        if Path::new(entry).exists() {
            a.extend(["--ro-bind".into(), (*entry).into(), (*entry).into()]);
        }
    }
    a
}

fn true_program() -> Result<&'static str, String> {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| "no `true` program to test the sandbox with".to_owned())
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Sends SIGKILL to process group `pgid`; a group that is already gone is not an error.
pub(crate) fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if let Err(e) = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
        && e != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid, error = %e, "killpg failed");
    }
}

/// The cgroup parents this runner creates its per-run cgroups in.
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    pub(crate) pids: Option<Arc<CgroupParent>>,
    pub(crate) kill: Option<Arc<CgroupParent>>,
    counter: AtomicU64,
}

/// A directory `omniforge-<server pid>-<runner number>` this process created in one cgroup hierarchy.
#[derive(Debug)]
pub(crate) struct CgroupParent {
    dir: PathBuf,
    /// cgroup v2 (`cgroup.kill`, `pids.max` when delegated) rather than v1.
    v2: bool,
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Cgroups {
    fn detect() -> Cgroups {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        // Unique per runner: several runners in one process must not remove each other's.
        static RUNNERS: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "omniforge-{}-{}",
            std::process::id(),
            RUNNERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut cg = Cgroups::default();
        // cgroup v2: the unified hierarchy, mounted at /sys/fs/cgroup or (hybrid) below it.
        let v2_mount = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(PathBuf::from)
            .find(|m| m.join("cgroup.controllers").is_file() && m.join("cgroup.procs").is_file());
        let v2_own = own.lines().find_map(|l| l.strip_prefix("0::"));
        if let (Some(mount), Some(own)) = (v2_mount, v2_own) {
            let base = mount.join(own.trim_start_matches('/'));
            remove_stale(&base);
            let dir = base.join(&name);
            if std::fs::create_dir(&dir).is_ok() || dir.is_dir() {
                let parent = Arc::new(CgroupParent { dir, v2: true });
                let controllers = std::fs::read_to_string(parent.dir.join("cgroup.controllers"))
                    .unwrap_or_default();
                let pids = controllers.split_whitespace().any(|c| c == "pids")
                    && std::fs::write(parent.dir.join("cgroup.subtree_control"), "+pids").is_ok();
                if parent.dir.join("cgroup.kill").is_file() {
                    if pids {
                        cg.pids = Some(Arc::clone(&parent));
                    }
                    cg.kill = Some(parent);
                }
            }
        }
        // cgroup v1 `pids` hierarchy, when v2 cannot limit processes.
        if cg.pids.is_none()
            && let Some(own) = own.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
                ctrl.split(',').any(|c| c == "pids").then_some(path)
            })
        {
            let base = Path::new("/sys/fs/cgroup/pids").join(own.trim_start_matches('/'));
            remove_stale(&base);
            let dir = base.join(&name);
            if (std::fs::create_dir(&dir).is_ok() || dir.is_dir()) && dir.join("pids.max").is_file()
            {
                cg.pids = Some(Arc::new(CgroupParent { dir, v2: false }));
            }
        }
        cg
    }

    /// Creates this run's cgroups, each limited to `max_processes` where it limits processes.
    pub(crate) fn create_run(&self, max_processes: u32) -> RunCgroups {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut dirs = Vec::new();
        let same = matches!((&self.pids, &self.kill), (Some(p), Some(k)) if Arc::ptr_eq(p, k));
        for (parent, limit) in [(&self.pids, true), (&self.kill, false)] {
            let Some(parent) = parent else { continue };
            if same && !limit {
                continue; // one v2 cgroup does both
            }
            let dir = parent.dir.join(format!("run-{n}"));
            let created = std::fs::create_dir(&dir)
                .and_then(|()| {
                    if limit {
                        std::fs::write(dir.join("pids.max"), max_processes.to_string())
                    } else {
                        Ok(())
                    }
                })
                .and_then(|()| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(dir.join("cgroup.procs"))
                });
            match created {
                Ok(procs) => dirs.push(RunCgroup {
                    dir,
                    v2: parent.v2,
                    procs: Some(procs),
                    _parent: Arc::clone(parent),
                }),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot create a run cgroup");
                    let _ = std::fs::remove_dir(&dir);
                }
            }
        }
        RunCgroups { dirs }
    }
}

/// Removes `omniforge-<pid>-<n>` cgroups left by server processes that no longer exist.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("omniforge-")?.split('-').next())
        else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        if let Ok(runs) = std::fs::read_dir(e.path()) {
            for r in runs.flatten().filter(|r| r.path().is_dir()) {
                let _ = std::fs::remove_dir(r.path());
            }
        }
        let _ = std::fs::remove_dir(e.path());
    }
}

/// One run's cgroups.
#[derive(Debug)]
pub(crate) struct RunCgroups {
    dirs: Vec<RunCgroup>,
}

#[derive(Debug)]
struct RunCgroup {
    dir: PathBuf,
    v2: bool,
    /// Open `cgroup.procs`, written by the child before exec; closed after spawn.
    procs: Option<std::fs::File>,
    /// Keeps the parent directory until this run's cgroup is gone (the parent is removed
    /// when its runner and all its runs have been dropped).
    _parent: Arc<CgroupParent>,
}

impl RunCgroups {
    /// Raw descriptors of the open `cgroup.procs` files, for the child's `pre_exec`.
    pub(crate) fn procs_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.dirs
            .iter()
            .filter_map(|d| d.procs.as_ref().map(AsRawFd::as_raw_fd))
            .collect()
    }

    /// Closes the `cgroup.procs` files once the child is spawned.
    pub(crate) fn spawned(&mut self) {
        for d in &mut self.dirs {
            d.procs = None;
        }
    }

    /// Kills every process in the run's cgroups (`cgroup.kill`, or SIGKILL to each member on
    /// v1). Synchronous and quick; safe to call repeatedly.
    pub(crate) fn kill(&self) {
        for d in &self.dirs {
            if d.v2 {
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.dir.join("cgroup.kill"))
                {
                    let _ = f.write_all(b"1");
                }
            } else {
                for pid in members(&d.dir) {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
        }
    }

    /// Kills what is left and removes the cgroups. A cgroup whose killed processes have not
    /// all been released yet (often the case right after the leader is reaped: its removal
    /// fails with `EBUSY` for a few milliseconds) is removed by a background task that
    /// retries for up to `grace`, so the call does not wait for it.
    pub(crate) fn finish(mut self, grace: Duration) {
        self.kill();
        self.dirs.retain(|d| std::fs::remove_dir(&d.dir).is_err());
        if self.dirs.is_empty() {
            return;
        }
        let mut left = RunCgroups {
            dirs: std::mem::take(&mut self.dirs),
        };
        let removal = async move {
            let deadline = Instant::now() + grace;
            while !left.dirs.is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
                left.kill();
                left.dirs.retain(|d| std::fs::remove_dir(&d.dir).is_err());
            }
            for d in &left.dirs {
                tracing::warn!(dir = %d.dir.display(), "run cgroup did not empty in time; left behind");
            }
            left.dirs.clear();
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(removal);
            }
            // No runtime (not the case in `Runner::run`): dropping the future drops `left`,
            // whose `Drop` starts the cleanup thread.
            Err(_) => drop(removal),
        }
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        if self.dirs.is_empty() {
            return;
        }
        // Dropped mid-run (the caller abandoned the future): kill now; the processes take a
        // moment to exit, so a short-lived thread removes the cgroups once they are empty.
        self.kill();
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.retain(|d| std::fs::remove_dir(&d.dir).is_err());
        if dirs.is_empty() {
            return;
        }
        let spawned = std::thread::Builder::new().name("omniforge-cgroup-cleanup".into()).spawn(move || {
            let mut left = RunCgroups { dirs };
            let deadline = Instant::now() + Duration::from_secs(5);
            while !left.dirs.is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                left.kill();
                left.dirs.retain(|d| std::fs::remove_dir(&d.dir).is_err());
            }
            for d in &left.dirs {
                tracing::warn!(dir = %d.dir.display(), "run cgroup did not empty in time; left behind");
            }
            left.dirs.clear();
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the cgroup cleanup thread");
        }
    }
}

fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The sandbox package builds run in (`allow_source_builds`): bubblewrap with the host's
/// network (the registry must be reachable), uid 65534 without capabilities, a read-only view
/// of the system and the interpreter, and writable only what the build is given; the seccomp
/// filter for runs with network when the kernel takes it. Detected once per process.
#[derive(Debug)]
pub(crate) struct BuildSandbox {
    bwrap: Bwrap,
    seccomp: Option<Filters>,
}

/// Where uv appears inside a build sandbox.
pub(crate) const SANDBOX_UV: &str = "/omniforge/uv";

/// The build sandbox of this process, or why there is none.
pub(crate) fn build_sandbox() -> Result<&'static BuildSandbox, String> {
    static SANDBOX: std::sync::OnceLock<Result<BuildSandbox, String>> = std::sync::OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let bwrap = Bwrap::detect(None)?;
            let seccomp = Filters::compile()
                .and_then(|f| bwrap.probe_seccomp(&f).map(|()| f))
                .map_err(
                    |why| tracing::warn!(%why, "package builds run without the seccomp filter"),
                )
                .ok();
            Ok(BuildSandbox { bwrap, seccomp })
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl BuildSandbox {
    /// The seccomp program for a build (with network), when the layer works here.
    pub(crate) fn seccomp_memfd(&self) -> std::io::Result<Option<OwnedFd>> {
        self.seccomp
            .as_ref()
            .map(|f| seccomp_memfd(f.for_run(true), true))
            .transpose()
    }

    /// bubblewrap's path and arguments to run `uv` (bound at [`SANDBOX_UV`]) in `cwd` with
    /// `read_only` and `writable` host paths bound at their own paths; the uv arguments follow.
    pub(crate) fn uv_args(
        &self,
        uv: &Path,
        read_only: &[PathBuf],
        writable: &[&Path],
        cwd: &Path,
        seccomp_fd: Option<RawFd>,
    ) -> (PathBuf, Vec<OsString>) {
        let mut a: Vec<OsString> = self
            .bwrap
            .base_args(true)
            .into_iter()
            .map(OsString::from)
            .collect();
        if let Some(fd) = seccomp_fd {
            a.extend(["--add-seccomp-fd".into(), fd.to_string().into()]);
        }
        a.extend([
            "--size".into(),
            (256u64 << 20).to_string().into(),
            "--tmpfs".into(),
            "/tmp".into(),
        ]);
        let mut ro: BTreeSet<&Path> = read_only.iter().map(PathBuf::as_path).collect();
        ro.retain(|p| !p.starts_with("/usr"));
        for p in ro {
            a.extend(["--ro-bind".into(), p.into(), p.into()]);
        }
        for p in writable {
            a.extend(["--bind".into(), (*p).into(), (*p).into()]);
        }
        a.extend(["--ro-bind".into(), uv.into(), SANDBOX_UV.into()]);
        a.extend([
            "--remount-ro".into(),
            "/dev".into(),
            "--remount-ro".into(),
            "/".into(),
        ]);
        a.extend(["--chdir".into(), cwd.into(), "--".into(), SANDBOX_UV.into()]);
        (self.bwrap.path.clone(), a)
    }
}
