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
//! - `probe`: why a layer is unavailable, and the self-tests.

mod bwrap;
mod probe;
mod tree;

use std::path::{Path, PathBuf};

pub use self::bwrap::SANDBOX_UID;
pub(crate) use self::bwrap::{Bwrap, BwrapRun, SANDBOX_SCRIPT, build_sandbox, system_paths};
use self::probe::{Unavailable, probe};
pub(crate) use self::tree::{Cgroups, kill_group};
use crate::filter::{self, Filters};
use crate::helper::HELPER_ARG;
use crate::host::HostEnv;

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

impl SandboxLevel {
    /// The level's name as people type it: `strict`, `standard`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxLevel::Strict => "strict",
            SandboxLevel::Standard => "standard",
            SandboxLevel::Off => "off",
        }
    }

    /// The layers (by [`Layer::name`]) a runner at this level must have: without one of
    /// them [`Runner::new`](crate::Runner::new) fails with
    /// [`RunError::SandboxUnavailable`](crate::RunError::SandboxUnavailable), and `omniforge
    /// doctor` exits non-zero.
    ///
    /// - `strict`: `process-group`, `rlimits`, `namespaces`, `unprivileged-uid`,
    ///   `read-only-root`, `no-network`;
    /// - `standard`, `off`: `process-group`, `rlimits`.
    pub fn required_layers(self) -> &'static [&'static str] {
        match self {
            SandboxLevel::Strict => &[
                "process-group",
                "rlimits",
                "namespaces",
                "unprivileged-uid",
                "read-only-root",
                "no-network",
            ],
            SandboxLevel::Standard | SandboxLevel::Off => &["process-group", "rlimits"],
        }
    }

    /// The [`required_layers`](Self::required_layers) that are not active in `layers` (as
    /// [`doctor`](crate::doctor) or [`Runner::layers`](crate::Runner::layers) report them),
    /// in the order of the requirement.
    pub fn missing_layers(self, layers: &[Layer]) -> Vec<&'static str> {
        self.required_layers()
            .iter()
            .copied()
            .filter(|n| !layers.iter().any(|l| l.name == *n && l.active))
            .collect()
    }
}

impl std::fmt::Display for SandboxLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
                detail: "AS, CPU (SIGXCPU before SIGKILL), FSIZE, NOFILE, CORE=0".into(),
            },
        ];
        let bwrap = match level {
            SandboxLevel::Off => Err(Unavailable::LevelOff),
            _ if disabled("namespaces") => Err(Unavailable::Disabled),
            _ => Bwrap::detect(config.bwrap, config.host),
        };
        let (ns_detail, uid_detail, ro_detail, net_detail) = match &bwrap {
            Ok(b) => (
                format!("bubblewrap {}: user, pid, mount, net, ipc, uts, cgroup namespaces; --die-with-parent, --new-session", b.path.display()),
                format!("uid/gid {SANDBOX_UID} in a user namespace, all capabilities dropped, no nested user namespaces"),
                "read-only /usr, a few /etc files, the interpreter prefix, the environment and the script, all under a read-only root and a read-only /dev; private size-capped tmpfs /tmp and /dev/shm".to_owned(),
                "empty network namespace unless the run allows network".to_owned(),
            ),
            Err(why) => {
                let why = why.to_string();
                (why.clone(), why.clone(), why.clone(), why)
            }
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
                    "{} restricts the script right before exec ({status}): read and execute only the system directories, the /etc files, /proc, /dev, the interpreter, the environment and the script; write only the private /tmp (the run directory without bubblewrap), /dev/shm and /dev/null; no TCP bind or connect without network; abstract Unix sockets and signals scoped to the run",
                    helper.display()
                ),
                Err(why) => why.to_string(),
            },
        });

        let seccomp = match level {
            SandboxLevel::Off => Err(Unavailable::LevelOff),
            _ if disabled("seccomp") => Err(Unavailable::Disabled),
            _ => Filters::compile().map_err(Unavailable::from).and_then(|f| {
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
                Err(why) => why.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(name: &'static str, active: bool) -> Layer {
        Layer {
            name,
            active,
            detail: String::new(),
        }
    }

    #[test]
    fn each_level_names_what_it_requires() {
        let layers = [
            layer("process-group", true),
            layer("rlimits", true),
            layer("namespaces", false),
            layer("unprivileged-uid", false),
            layer("read-only-root", false),
            layer("no-network", false),
        ];
        assert_eq!(
            SandboxLevel::Strict.missing_layers(&layers),
            [
                "namespaces",
                "unprivileged-uid",
                "read-only-root",
                "no-network"
            ]
        );
        assert!(SandboxLevel::Off.missing_layers(&layers).is_empty());
        // A layer that is not reported at all is missing too.
        assert_eq!(
            SandboxLevel::Off.missing_layers(&layers[1..]),
            ["process-group"]
        );
        assert_eq!(
            [
                SandboxLevel::Strict,
                SandboxLevel::Standard,
                SandboxLevel::Off
            ]
            .map(|l| l.to_string()),
            ["strict", "standard", "off"]
        );
    }
}
