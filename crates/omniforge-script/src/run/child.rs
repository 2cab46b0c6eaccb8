//! The run's process: its command line (bubblewrap, the Landlock helper, the interpreter),
//! its environment, and what it sets up for itself before exec.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rustix::process::{Resource, Rlimit};
use tokio::process::Command;

use super::spec::{RunError, RunSpec, SINGLE_THREAD_VARS, interpreter_prefix, io_err};
use crate::filter;
use crate::helper::Confine;
use crate::sandbox::{self, BwrapRun, Identity, Needed, Plan, SANDBOX_SCRIPT, View};
use crate::sys::{self, ChildSetup};

/// Open files per process (`RLIMIT_NOFILE`).
const MAX_OPEN_FILES: u64 = 1024;

/// The interpreter's flags: isolated mode (no user site, no `PYTHON*` variables, no script
/// directory on `sys.path`) and unbuffered stdout and stderr, so that what a script printed
/// before a timeout or a kill reaches the result.
const PYTHON_FLAGS: [&str; 2] = ["-I", "-u"];

/// Where a run's files are on the host.
pub(crate) struct RunFiles<'a> {
    /// The run's private directory (its working directory without bubblewrap).
    pub(crate) dir: &'a Path,
    /// The script, inside `dir`.
    pub(crate) script: &'a Path,
}

/// What the process is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Role<'a> {
    /// One call: `python -I -u /omniforge/main.py`, its stdin, stdout and stderr piped, the
    /// side channel's descriptor in `OMNIFORGE_FD`, the spec's environment.
    Run,
    /// A warm template (bubblewrap only): `python -I -u /omniforge/warm/template.py` with the
    /// tool's code bound where a call has it, the driver and its extension module bound
    /// beside, the control socket's descriptor in `OMNIFORGE_WARM_CTL`, none of the spec's
    /// environment (no secret), stdin from `/dev/null`, stdout and stderr piped (its log), no
    /// CPU limit (it lives on).
    Template {
        /// The driver (`template.py`) on the host, inside the run directory.
        driver: &'a Path,
        /// The extension module on the host, inside the run directory.
        native: &'a Path,
    },
}

/// What else the child needs: its uid, the directories to hide, the side channel's (or the
/// template's control socket's) descriptor, the cgroups to join.
pub(crate) struct ChildIo<'a> {
    /// The run's own uid, leased for it (a root server without bubblewrap).
    pub(crate) uid: Option<u32>,
    /// [`RunnerConfig::hidden_dirs`](crate::RunnerConfig::hidden_dirs).
    pub(crate) hidden_dirs: &'a [PathBuf],
    pub(crate) channel_fd: RawFd,
    pub(crate) cgroup_procs: Vec<RawFd>,
    /// Start under `SCHED_IDLE` (a warm template's boot).
    pub(crate) idle: bool,
}

/// Where a warm template's driver is in the sandbox.
pub(crate) const SANDBOX_TEMPLATE: &str = "/omniforge/warm/template.py";
/// Where a warm template's extension module is in the sandbox.
pub(crate) const SANDBOX_NATIVE: &str = "/omniforge/warm/_omniforge_warm.abi3.so";

/// The command for one run and the descriptors that must stay open until it is spawned.
///
/// # Errors
/// [`RunError::Io`] when a file cannot be prepared for the run's uid or a descriptor opened.
pub(crate) fn command(
    plan: &Plan,
    spec: &RunSpec,
    files: &RunFiles<'_>,
    io: ChildIo<'_>,
    role: Role<'_>,
) -> Result<(Command, Vec<OwnedFd>), RunError> {
    let template = match role {
        Role::Run => None,
        Role::Template { driver, native } => {
            Some([(driver, SANDBOX_TEMPLATE), (native, SANDBOX_NATIVE)])
        }
    };
    if template.is_some() && plan.bwrap.is_none() {
        return Err(RunError::InvalidSpec(
            "a warm template needs the namespaces layer".to_owned(),
        ));
    }
    let mut hold: Vec<OwnedFd> = Vec::new();
    let prefix = interpreter_prefix(&spec.python);
    // bubblewrap reads the seccomp program from a descriptor; without bubblewrap the child
    // loads it itself before exec.
    let seccomp_fd = match (&plan.seccomp, &plan.bwrap) {
        (Some(filters), Some(_)) => Some(
            filter::memfd(filters.for_run(spec.network), true)
                .map_err(io_err("holding the seccomp filter"))?,
        ),
        _ => None,
    };
    let mut drop_privileges = None;
    let tmpdir;
    let mut cmd = match &plan.bwrap {
        Some(bwrap) => {
            let args = bwrap.run_args(&BwrapRun {
                network: spec.network,
                env_dir: &spec.env_dir,
                extra_ro: prefix.clone().into_iter().collect(),
                script: files.script,
                tmp_bytes: spec.max_file_bytes,
                seccomp_fd: seccomp_fd.as_ref().map(AsRawFd::as_raw_fd),
                helper: plan.landlock.as_deref(),
                extra_files: template.as_ref().map_or(&[][..], |t| &t[..]),
            });
            if let Identity::BwrapAs(switch) = &plan.identity {
                // A root server starts bubblewrap as the run's own uid: uid 65534 in the
                // sandbox is then that uid on the host, never root.
                let program = Some(bwrap.path.as_path());
                drop_privileges = Some(switch_uid(
                    switch, spec, files, &prefix, plan, &io, program,
                )?);
            }
            // The sandbox's own /tmp; named, as a warm call's TMPDIR is (its own directory).
            tmpdir = template.is_none().then(|| PathBuf::from("/tmp"));
            let mut c = Command::new(&bwrap.path);
            c.args(args)
                .arg(&spec.python)
                .args(PYTHON_FLAGS)
                .arg(if template.is_some() {
                    SANDBOX_TEMPLATE
                } else {
                    SANDBOX_SCRIPT
                });
            c
        }
        None => {
            let private_tmp = matches!(plan.identity, Identity::Switch(_));
            match &plan.identity {
                Identity::Switch(switch) => {
                    drop_privileges =
                        Some(switch_uid(switch, spec, files, &prefix, plan, &io, None)?);
                }
                Identity::ServerUid => drop_privileges = Some(sandbox::drop_only()),
                Identity::Bwrap | Identity::BwrapAs(_) | Identity::Unchanged => {}
            }
            let mut c = match &plan.landlock {
                Some(helper) => {
                    let mut read_only = sandbox::system_paths();
                    read_only.extend(prefix.clone());
                    read_only.push(spec.env_dir.clone());
                    let mut read_write = vec![files.dir.to_owned()];
                    if private_tmp {
                        // The run's own tmpfs, not the host's.
                        read_write.extend(["/tmp", "/dev/shm"].map(PathBuf::from));
                    }
                    read_write.extend(["/dev/null", "/dev/zero", "/dev/full"].map(PathBuf::from));
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
            c.args(PYTHON_FLAGS)
                .arg(files.script)
                .current_dir(files.dir);
            // The host's /tmp is not the run's: with a uid of its own the run has a private
            // /tmp; otherwise temporary files go to the run directory.
            tmpdir = Some(if private_tmp {
                PathBuf::from("/tmp")
            } else {
                files.dir.to_owned()
            });
            c
        }
    };
    cmd.env_clear();
    match template {
        None => {
            cmd.envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .env("OMNIFORGE_FD", io.channel_fd.to_string())
                .stdin(Stdio::piped());
        }
        // A template never holds a call's environment: its secrets go to the call's child.
        Some(_) => {
            cmd.env("OMNIFORGE_WARM_CTL", io.channel_fd.to_string())
                .stdin(Stdio::null());
        }
    }
    cmd.envs(runner_vars(&spec.env_dir))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    if let Some(tmpdir) = tmpdir {
        cmd.env("TMPDIR", tmpdir);
    }
    sys::install(
        &mut cmd,
        ChildSetup {
            limits: rlimits(spec, template.is_none()),
            cgroup_procs: io.cgroup_procs,
            inherit_fds: std::iter::once(io.channel_fd)
                .chain(seccomp_fd.as_ref().map(AsRawFd::as_raw_fd))
                .collect(),
            drop_privileges,
            seccomp: match (&plan.seccomp, &plan.bwrap) {
                (Some(filters), None) => Some(filters.for_run(spec.network).clone()),
                _ => None,
            },
            idle: io.idle,
        },
    );
    hold.extend(seccomp_fd);
    Ok((cmd, hold))
}

/// Hands the run's files to its leased uid and plans its private mounts: for the run itself
/// (no bubblewrap: private `/tmp`, `/dev/shm` and `/proc`, the hidden directories covered),
/// or for `bwrap`, the bubblewrap executable started as that uid (only what it binds made
/// reachable).
fn switch_uid(
    switch: &sandbox::UidSwitch,
    spec: &RunSpec,
    files: &RunFiles<'_>,
    prefix: &Option<PathBuf>,
    plan: &Plan,
    io: &ChildIo<'_>,
    bwrap: Option<&Path>,
) -> Result<sys::DropPrivileges, RunError> {
    let uid = io
        .uid
        .ok_or_else(|| RunError::InvalidSpec("a uid switch without a leased uid".to_owned()))?;
    for p in [files.dir, files.script] {
        std::os::unix::fs::chown(p, Some(uid), Some(uid))
            .map_err(io_err(format!("handing {} to uid {uid}", p.display())))?;
    }
    let canonical =
        |p: &Path| std::fs::canonicalize(p).map_err(io_err(format!("resolving {}", p.display())));
    let env_dir = canonical(&spec.env_dir)?;
    let run_dir = canonical(files.dir)?;
    let helper = plan.landlock.as_deref().map(canonical).transpose()?;
    let bwrap = bwrap.map(canonical).transpose()?;
    let mut needed = vec![
        Needed {
            path: &env_dir,
            writable: false,
        },
        Needed {
            path: &run_dir,
            writable: true,
        },
    ];
    if let Some(prefix) = prefix {
        needed.push(Needed {
            path: prefix,
            writable: false,
        });
    }
    for program in [&helper, &bwrap].into_iter().flatten() {
        needed.push(Needed {
            path: program,
            writable: false,
        });
    }
    // bubblewrap shows the run only what it binds: nothing else needs hiding.
    let (hidden, view): (Vec<PathBuf>, View) = match bwrap {
        Some(_) => (Vec::new(), View::for_bwrap()),
        None => (
            io.hidden_dirs
                .iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .collect(),
            View::no_bwrap(spec.max_file_bytes),
        ),
    };
    switch
        .plan(uid, &needed, &hidden, view, &run_dir)
        .map_err(io_err("planning the run's private mounts"))
}

/// The variables the runner sets for every run (and a warm template), whatever the spec
/// says: `PATH` (the environment's `bin` first), `HOME`, `LANG`, `PYTHONDONTWRITEBYTECODE`
/// and [`SINGLE_THREAD_VARS`]. A warm call's child replaces `HOME` with its own directory.
pub(crate) fn runner_vars(env_dir: &Path) -> Vec<(String, String)> {
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        env_dir.join("bin").display()
    );
    let mut vars = vec![
        ("PATH".to_owned(), path),
        ("HOME".to_owned(), "/tmp".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
    ];
    vars.extend(
        SINGLE_THREAD_VARS
            .iter()
            .map(|v| ((*v).to_owned(), "1".to_owned())),
    );
    vars
}

/// The CPU-time limit of a call (`RLIMIT_CPU`, soft and hard): the timeout rounded up plus
/// one second, the hard limit a second later (SIGXCPU first, then SIGKILL).
pub(crate) fn cpu_limit(timeout: std::time::Duration) -> (u64, u64) {
    let cpu = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0) + 1;
    (cpu, cpu + 1)
}

/// The run's resource limits (with `cpu`, the CPU-time limit of a call). `RLIMIT_NICE` and
/// `RLIMIT_RTPRIO` are 0: without `CAP_SYS_NICE` a script can neither raise its priority nor
/// take a real-time policy.
fn rlimits(spec: &RunSpec, cpu: bool) -> Vec<(Resource, Rlimit)> {
    let (cpu_soft, cpu_hard) = if cpu {
        cpu_limit(spec.timeout)
    } else {
        (u64::MAX, u64::MAX)
    };
    let wanted = [
        (Resource::As, spec.memory_bytes, spec.memory_bytes),
        (Resource::Cpu, cpu_soft, cpu_hard),
        (Resource::Fsize, spec.max_file_bytes, spec.max_file_bytes),
        (Resource::Nofile, MAX_OPEN_FILES, MAX_OPEN_FILES),
        (Resource::Core, 0, 0),
        (Resource::Nice, 0, 0),
        (Resource::Rtprio, 0, 0),
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
