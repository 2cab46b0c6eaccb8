//! Sandbox layers: what this machine offers, detected once, and how a run uses it.
//!
//! | layer | how | notes |
//! |---|---|---|
//! | `process-group` | `setpgid` at spawn, `killpg(SIGKILL)` | always |
//! | `rlimits` | `setrlimit` in `pre_exec`: AS, CPU (soft < hard: SIGXCPU first), FSIZE, NOFILE, CORE=0, NICE=0 and RTPRIO=0 (no raised priority, no real-time policy) | always |
//! | `namespaces` | bubblewrap: `--unshare-all` (user, pid, mount, net, ipc, uts, cgroup), `--die-with-parent`, `--new-session` | the kill of bwrap takes the whole PID namespace with it, `setsid` escapees included |
//! | `unprivileged-uid` | bwrap `--unshare-user --uid 65534 --gid 65534 --cap-drop ALL --disable-userns`; without bubblewrap under a root server, a uid and gid of the run's own, leased machine-wide (`uid.rs`, from [`RUN_UID_BASE`]) in a private mount and IPC namespace (hidepid `/proc`, private `/tmp` and `/dev/shm`, closed directories covered), every capability dropped, `no_new_privs`; under a server that is not root, its uid without capabilities | without it bwrap started by root keeps all capabilities; `standard` refuses to start without it |
//! | `read-only-root` | only `/usr` (+ `/bin`, `/lib*` symlinks), a few `/etc` files, the interpreter prefix, the environment and the script, all read-only; root and `/dev` remounted read-only; private size-capped tmpfs `/tmp` and `/dev/shm` | the data directory, the database and other environments are not in the sandbox at all |
//! | `no-network` | bwrap's empty network namespace; `--share-net` only when a run allows network | |
//! | `cgroup-pids` | a cgroup per run with `pids.max` (v1 `pids` hierarchy, or v2 with `pids` delegated) | the process limit that holds for root; `RLIMIT_NPROC` does not |
//! | `cgroup-memory` | a cgroup per run with the run's memory limit for the whole tree, swap included (v2 with `memory` delegated, or the v1 `memory` hierarchy); its OOM kills are reported as [`LimitHit::Memory`] | `RLIMIT_AS` caps each process, not the tree: without this layer a run may use `max_processes` times its memory limit, and an allocation past `RLIMIT_AS` fails (`MemoryError`) without a kill to count |
//! | `cgroup-kill` | a v2 cgroup per run, `cgroup.kill` on exit/timeout/cancel | catches `setsid` escapees with or without bwrap; joined in `pre_exec` right after the pids cgroup (the second migration is cheap) |
//! | `landlock` | the helper (`helper.rs`, [`crate::main_if_helper`]) restricts itself, then execs the interpreter | Landlock forbids mounts, so it comes after bwrap's; also without bwrap |
//! | `seccomp` | a filter (`filter.rs`) loaded by bwrap (`--add-seccomp-fd`, a memfd) or in `pre_exec` | socket families (never `AF_UNIX`: no host Unix socket; `socketpair` stays) and a deny list of system calls, `EPERM` |
//!
//! Each layer can be turned off on its own ([`RunnerConfig::disabled_layers`](crate::RunnerConfig::disabled_layers)) to measure it or
//! to show in a test what it alone stops.
//!
//! Detection runs bwrap once with the real flags, creates and removes test cgroups, and never
//! assumes: a production host without a delegated cgroup subtree simply lacks those layers.
//!
//! # Layout
//!
//! - here: [`SandboxLevel`] and the layers each level requires, [`Layer`], and the plan a
//!   runner detects once;
//! - `bwrap`: bubblewrap's arguments for a run, and the build sandbox;
//! - `tree`: the process group and the per-run cgroups that kill a run's whole tree;
//! - `uid`: the uid switch of a root server without bubblewrap, planned per run;
//! - `level`: the levels and the layers each requires; `report`: the start-up warning;
//! - `probe`: why a layer is unavailable, and the self-tests.

mod bwrap;
mod level;
mod probe;
mod report;
mod tree;
mod uid;

use std::path::{Path, PathBuf};

pub use self::bwrap::SANDBOX_UID;
pub(crate) use self::bwrap::{
    Bwrap, BwrapRun, SANDBOX_SCRIPT, build_sandbox, probe_bwrap_as, system_paths,
};
pub use self::level::{Layer, SandboxLevel};
use self::probe::{Unavailable, probe};
pub use self::tree::LimitHit;
pub(crate) use self::tree::{CgroupLimits, Cgroups, RunCgroups, TemplateCgroups, kill_group};
pub(crate) use self::uid::{Needed, UidLease, UidSwitch, View, drop_only};
pub use self::uid::{RUN_UID_BASE, RUN_UID_SLOTS, UID_LEASE_DIR};
use crate::filter::{self, Filters};
use crate::helper::HELPER_ARG;
use crate::host::HostEnv;

/// Marks the calling process (the server) non-dumpable (`PR_SET_DUMPABLE` 0): a process of
/// the same uid can then neither read its `/proc/PID/environ` or `mem` nor attach to it, and
/// it never dumps core. This matters when scripts share the server's uid (a server that is
/// not root, without bubblewrap), and costs nothing otherwise. Children that exec get their
/// own dumpable flag back.
///
/// Call it first thing in `main`, right after [`crate::main_if_helper`], before the process
/// holds any secret worth reading.
///
/// # Errors
/// The `prctl` call failed (not expected on Linux).
pub fn protect_server_process() -> std::io::Result<()> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(std::io::Error::from)
}

/// What detection looks at: the parts of a [`RunnerConfig`](crate::RunnerConfig) that
/// decide the layers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DetectConfig<'a> {
    pub(crate) level: SandboxLevel,
    /// An explicit bubblewrap; `None` looks at `/usr/bin/bwrap`, then the host's `PATH`.
    pub(crate) bwrap: Option<&'a Path>,
    pub(crate) landlock_helper: Option<&'a Path>,
    pub(crate) disabled_layers: &'a [String],
    pub(crate) host: &'a HostEnv,
}

/// Who a script runs as.
#[derive(Debug)]
pub(crate) enum Identity {
    /// bubblewrap started by a server that is not root: uid 65534 in a user namespace, which
    /// is the server's uid on the host, capabilities dropped by bubblewrap (or, with the
    /// `unprivileged-uid` layer disabled, a root server's bubblewrap: host root without
    /// capabilities).
    Bwrap,
    /// bubblewrap started by a root server under a uid leased for each run (switched in the
    /// child before exec, in a private mount namespace that lets that uid reach what the run
    /// binds): uid 65534 in the sandbox is that uid on the host, never root.
    BwrapAs(UidSwitch),
    /// A root server without bubblewrap: a uid leased for each run, in private namespaces.
    Switch(UidSwitch),
    /// A server that is not root, without bubblewrap: its own uid, capabilities dropped.
    ServerUid,
    /// The server's uid and capabilities, unchanged (`off`, or a switch that cannot work).
    Unchanged,
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
    /// Who scripts run as (the `unprivileged-uid` layer).
    pub(crate) identity: Identity,
    pub(crate) layers: Vec<Layer>,
    facts: report::Facts,
}

impl Plan {
    pub(crate) fn detect(config: DetectConfig<'_>) -> Plan {
        let level = config.level;
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
                detail: "AS, CPU (SIGXCPU before SIGKILL), FSIZE, NOFILE, CORE=0, NICE=0, RTPRIO=0"
                    .into(),
            },
        ];
        let bwrap = match level {
            SandboxLevel::Off => Err(Unavailable::LevelOff),
            _ if disabled("namespaces") => Err(Unavailable::Disabled),
            _ => Bwrap::detect(config.bwrap, config.host),
        };
        // Who scripts run as; a root server's bubblewrap must work under a leased uid, or it
        // is not used at all (it would run scripts as host root).
        let (bwrap, identity, uid_layer) = identity(&config, bwrap);
        let (ns_detail, ro_detail, net_detail) = match &bwrap {
            Ok(b) => (
                format!("bubblewrap {}: user, pid, mount, net, ipc, uts, cgroup namespaces; --die-with-parent, --new-session", b.path.display()),
                "read-only /usr, a few /etc files, the interpreter prefix, the environment and the script, all under a read-only root and a read-only /dev; private size-capped tmpfs /tmp and /dev/shm".to_owned(),
                "empty network namespace unless the run allows network".to_owned(),
            ),
            Err(why) => {
                let why = why.to_string();
                (why.clone(), why.clone(), why)
            }
        };
        let ok = bwrap.is_ok();
        let bwrap_not_installed = matches!(bwrap, Err(Unavailable::NotInstalled(_)));
        layers.push(Layer {
            name: "namespaces",
            active: ok,
            detail: ns_detail,
        });
        layers.push(uid_layer);
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
        if disabled("cgroup-memory") {
            cgroups.memory = None;
        }
        layers.push(Layer {
            name: "cgroup-pids",
            active: cgroups.pids.is_some(),
            detail: match &cgroups.pids {
                Some(p) => format!("pids.max per run under {}", p.dir.display()),
                None if level == SandboxLevel::Off => Unavailable::LevelOff.to_string(),
                None if disabled("cgroup-pids") => Unavailable::Disabled.to_string(),
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
                None if level == SandboxLevel::Off => Unavailable::LevelOff.to_string(),
                None if disabled("cgroup-kill") => Unavailable::Disabled.to_string(),
                None => "no writable cgroup v2 with cgroup.kill".into(),
            },
        });
        layers.push(Layer {
            name: "cgroup-memory",
            active: cgroups.memory.is_some(),
            detail: match &cgroups.memory {
                Some(p) => format!("one memory limit per run for the whole tree, swap included, under {}; OOM kills are counted", p.dir.display()),
                None if level == SandboxLevel::Off => Unavailable::LevelOff.to_string(),
                None if disabled("cgroup-memory") => Unavailable::Disabled.to_string(),
                None => "no writable memory cgroup (v2 with memory delegated, or v1); memory is capped per process by RLIMIT_AS only, and a run past it gets MemoryError, not a kill that can be counted".into(),
            },
        });

        let landlock = match (level, config.landlock_helper) {
            (SandboxLevel::Off, _) => Err(Unavailable::LevelOff),
            _ if disabled("landlock") => Err(Unavailable::Disabled),
            (_, None) => Err(Unavailable::NoHelper),
            (_, Some(helper)) => probe_landlock(helper).map(|status| (helper.to_owned(), status)),
        };
        layers.push(Layer {
            name: "landlock",
            active: landlock.is_ok(),
            detail: match &landlock {
                Ok((helper, status)) => format!(
                    "{} restricts the script right before exec ({status}): read and execute only the system directories, the /etc files, /proc, /dev, the interpreter, the environment and the script; write only the run's private /tmp and /dev/shm (without bubblewrap: the run directory, and the private /tmp and /dev/shm of a run with a uid of its own) and /dev/null; no TCP bind or connect without network; abstract Unix sockets and signals scoped to the run",
                    helper.display()
                ),
                Err(why) => why.to_string(),
            },
        });

        let seccomp = match level {
            SandboxLevel::Off => Err(Unavailable::LevelOff),
            _ if disabled("seccomp") => Err(Unavailable::Disabled),
            _ => Filters::compile().map_err(Unavailable::from).and_then(|f| {
                match (&bwrap, &identity) {
                    (Ok(b), Identity::BwrapAs(switch)) => probe_bwrap_as(b, switch, Some(&f))?,
                    (Ok(b), _) => b.probe_seccomp(&f)?,
                    (Err(_), _) => probe_kernel_seccomp()?,
                }
                Ok(f)
            }),
        };
        layers.push(Layer {
            name: "seccomp",
            active: seccomp.is_ok(),
            detail: match &seccomp {
                Ok(_) => format!(
                    "EPERM for every socket() (AF_INET, AF_INET6 and AF_NETLINK allowed when the run allows network; never AF_UNIX, so no host Unix socket, pathname or abstract: socketpair and the inherited side channel still work), for x32 system calls and for {}; loaded {}",
                    filter::denied_names().join(", "),
                    if ok { "by bubblewrap (--add-seccomp-fd) before exec" } else { "in the child before exec" }
                ),
                Err(why) => why.to_string(),
            },
        });
        let facts = report::Facts {
            bwrap_not_installed,
            bwrap_disabled: level != SandboxLevel::Off && disabled("namespaces"),
            server_uid: rustix::process::geteuid().as_raw(),
            uid_switch: matches!(identity, Identity::Switch(_) | Identity::BwrapAs(_)),
        };
        Plan {
            bwrap: bwrap.ok(),
            cgroups,
            seccomp: seccomp.ok(),
            landlock: landlock.ok().map(|(h, _)| h),
            identity,
            layers,
            facts,
        }
    }

    /// What to warn about at start-up (see `report`): the inactive layers, what adds the
    /// ones bubblewrap provides, and what still holds.
    pub(crate) fn warnings(&self, level: SandboxLevel) -> Vec<String> {
        report::warnings(level, &self.layers, self.facts)
    }
}

/// Who scripts run as, and the `unprivileged-uid` layer that says so; `bwrap` comes back
/// unusable when a root server cannot start it under an unprivileged uid.
fn identity(
    config: &DetectConfig<'_>,
    bwrap: Result<Bwrap, Unavailable>,
) -> (Result<Bwrap, Unavailable>, Identity, Layer) {
    let layer = |active, detail: String| Layer {
        name: "unprivileged-uid",
        active,
        detail,
    };
    let server = rustix::process::geteuid().as_raw();
    let uid_disabled = config
        .disabled_layers
        .iter()
        .any(|d| d == "unprivileged-uid");
    let in_userns = format!(
        "uid/gid {SANDBOX_UID} in a user namespace, all capabilities dropped, no nested user namespaces"
    );
    let bwrap = match bwrap {
        Ok(b) if server != 0 => {
            let detail = format!("{in_userns}; on the host that is the server's uid {server}");
            return (Ok(b), Identity::Bwrap, layer(true, detail));
        }
        Ok(b) if uid_disabled => {
            let detail = format!(
                "{}: {in_userns}, which is host root (uid 0) without capabilities",
                Unavailable::Disabled
            );
            return (Ok(b), Identity::Bwrap, layer(false, detail));
        }
        other => other,
    };
    let unchanged = |why: Unavailable| {
        let as_what = if server == 0 {
            "root, with every capability".to_owned()
        } else {
            format!("uid {server}")
        };
        (
            Identity::Unchanged,
            layer(
                false,
                format!("{why}: scripts run as the server does ({as_what})"),
            ),
        )
    };
    if config.level == SandboxLevel::Off {
        let (identity, layer) = unchanged(Unavailable::LevelOff);
        return (bwrap, identity, layer);
    }
    if uid_disabled {
        let (identity, layer) = unchanged(Unavailable::Disabled);
        return (bwrap, identity, layer);
    }
    if server != 0 {
        return (
            bwrap,
            Identity::ServerUid,
            layer(
                true,
                format!(
                    "the server runs as uid {server}, not root, and so do its scripts, without capabilities (ambient and inheritable cleared) and with no_new_privs; a server that is not root cannot give each run a uid of its own, so concurrent runs share uid {server}: Landlock still keeps each run out of the server's and the other runs' /proc environ and mem (they are outside its Landlock domain), but not /proc/PID/cmdline"
                ),
            ),
        );
    }
    let switch = match UidSwitch::detect() {
        Ok(switch) => switch,
        Err(why) => {
            return match bwrap {
                // Never bubblewrap as root: its uid 65534 would be host root.
                Ok(b) => (
                    Ok(b),
                    Identity::Bwrap,
                    layer(
                        false,
                        format!(
                            "{why}: bubblewrap would run scripts as uid {SANDBOX_UID} in a user namespace, which is host root (uid 0) without capabilities"
                        ),
                    ),
                ),
                Err(e) => {
                    let (identity, layer) = unchanged(why);
                    (Err(e), identity, layer)
                }
            };
        }
    };
    let leased = format!(
        "a uid and gid {RUN_UID_BASE} + n (0 ≤ n < {RUN_UID_SLOTS}), leased per run machine-wide ({UID_LEASE_DIR}): never root, never shared by two concurrent runs, never the server's"
    );
    match bwrap.and_then(|b| probe_bwrap_as(&b, &switch, None).map(|()| b)) {
        Ok(b) => (
            Ok(b),
            Identity::BwrapAs(switch),
            layer(
                true,
                format!(
                    "{in_userns}; on the host that is {leased}: bubblewrap itself starts as that uid (switched before exec, with no supplementary groups, no capabilities and no_new_privs, in a private mount namespace where that uid reaches only what the run binds)"
                ),
            ),
        ),
        Err(why) => (
            Err(why),
            Identity::Switch(switch),
            layer(
                true,
                format!(
                    "{leased} on the host; switched in the child before exec (no bubblewrap): no supplementary groups, every capability dropped (bounding, ambient, inheritable, permitted, effective), no_new_privs; in a private mount and IPC namespace: /proc mounted with hidepid=invisible (the server's and other runs' processes do not exist there), private size-capped /tmp and /dev/shm owned by the run's uid, directories that uid cannot enter covered by an empty tmpfs with only the interpreter, the environment, the run directory and the helper bound back"
                ),
            ),
        ),
    }
}

/// Runs the helper in probe mode (Landlock applied to itself, nothing executed); its one
/// line says how well the kernel enforces it.
fn probe_landlock(helper: &Path) -> Result<String, Unavailable> {
    let mut cmd = std::process::Command::new(helper);
    cmd.arg(HELPER_ARG)
        .args(["--ro", "/usr", "--no-net", "--probe", "--"]);
    probe(cmd, &helper.display().to_string()).map(|out| out.trim().to_owned())
}

/// Without bubblewrap the child loads the filter itself: the kernel must have seccomp.
fn probe_kernel_seccomp() -> Result<(), Unavailable> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if status.lines().any(|l| l.starts_with("Seccomp:")) {
        Ok(())
    } else {
        Err(Unavailable::Kernel(
            "the kernel has no seccomp (no Seccomp line in /proc/self/status)",
        ))
    }
}
