//! bubblewrap: the `namespaces`, `unprivileged-uid`, `read-only-root` and `no-network` layers
//! of a run, and the build sandbox for source distributions.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use super::probe::{Unavailable, probe, true_program};
use super::uid::{Needed, UidSwitch, View};
use crate::filter::{self, Filters};
use crate::helper::{Confine, SANDBOX_HELPER};
use crate::host::HostEnv;

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

/// A working bubblewrap and the system part of its arguments.
#[derive(Debug)]
pub(crate) struct Bwrap {
    pub(crate) path: PathBuf,
    /// `--ro-bind`/`--symlink` arguments for the system directories and `/etc` entries.
    system_args: Vec<String>,
}

impl Bwrap {
    /// `explicit`, else `/usr/bin/bwrap`, else `bwrap` on the host's `PATH`; run once with
    /// the flags real runs use.
    pub(crate) fn detect(explicit: Option<&Path>, host: &HostEnv) -> Result<Bwrap, Unavailable> {
        let path = match explicit {
            Some(p) => p.to_owned(),
            None => {
                let default = PathBuf::from("/usr/bin/bwrap");
                if default.is_file() {
                    default
                } else {
                    host.find_program("bwrap")
                        .ok_or(Unavailable::NotInstalled("bubblewrap (bwrap)"))?
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
    pub(crate) fn probe_seccomp(&self, filters: &Filters) -> Result<(), Unavailable> {
        let fd = filter::memfd(filters.for_run(false), false).map_err(|e| Unavailable::Start {
            what: "the seccomp filter (a memory file)".to_owned(),
            error: e.to_string(),
        })?;
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

    /// The arguments of a self-test run of `true` with the flags real runs use (and the
    /// seccomp program at `seccomp_fd`).
    pub(crate) fn probe_args(&self, seccomp_fd: Option<RawFd>) -> Result<Vec<String>, Unavailable> {
        let mut args = self.base_args(false);
        if let Some(fd) = seccomp_fd {
            args.extend(["--add-seccomp-fd".into(), fd.to_string()]);
        }
        args.extend(["--".into(), true_program()?.into()]);
        Ok(args)
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
        for (host, inside) in run.extra_files {
            a.extend(["--ro-bind".into(), (*host).into(), (*inside).into()]);
        }
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
    /// More files bound read-only (host path, path in the sandbox below the script's
    /// directory): a warm template's driver and extension module.
    pub(crate) extra_files: &'a [(&'a Path, &'static str)],
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

/// The sandbox package builds run in (`allow_source_builds`): bubblewrap with the host's
/// network (the registry must be reachable), uid 65534 without capabilities, a read-only view
/// of the system and the interpreter, and writable only what the build is given; the seccomp
/// filter for runs with network when the kernel takes it. Under a root server, bubblewrap
/// starts as a uid leased for each build, as a run's does (uid 65534 in the sandbox is then
/// that uid on the host, never root). Detected once per process.
#[derive(Debug)]
pub(crate) struct BuildSandbox {
    bwrap: Bwrap,
    seccomp: Option<Filters>,
    /// A root server's uid switch (`None` for a server that is not root).
    switch: Option<UidSwitch>,
}

/// Where uv appears inside a build sandbox.
pub(crate) const SANDBOX_UV: &str = "/omniforge/uv";

/// The build sandbox of this process, or why there is none.
///
/// `host` is used the first time only (to find `bwrap` on its `PATH`).
pub(crate) fn build_sandbox(host: &HostEnv) -> Result<&'static BuildSandbox, &'static Unavailable> {
    static SANDBOX: std::sync::OnceLock<Result<BuildSandbox, Unavailable>> =
        std::sync::OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let bwrap = Bwrap::detect(None, host)?;
            let seccomp = Filters::compile()
                .map_err(Unavailable::from)
                .and_then(|f| bwrap.probe_seccomp(&f).map(|()| f))
                .map_err(
                    |why| tracing::warn!(%why, "package builds run without the seccomp filter"),
                )
                .ok();
            // A root server's bubblewrap would run the build as host root (without
            // capabilities): it must work under a leased uid, or there is no build sandbox.
            let switch = if rustix::process::geteuid().is_root() {
                let switch = UidSwitch::detect()?;
                probe_bwrap_as(&bwrap, &switch, None)?;
                Some(switch)
            } else {
                None
            };
            Ok(BuildSandbox {
                bwrap,
                seccomp,
                switch,
            })
        })
        .as_ref()
}

impl BuildSandbox {
    /// The bubblewrap executable builds start.
    pub(crate) fn program(&self) -> &Path {
        &self.bwrap.path
    }

    /// A root server's uid switch, under which each build starts bubblewrap.
    pub(crate) fn switch(&self) -> Option<&UidSwitch> {
        self.switch.as_ref()
    }

    /// The seccomp program for a build (network and Unix sockets), when the layer works here.
    pub(crate) fn seccomp_memfd(&self) -> std::io::Result<Option<OwnedFd>> {
        self.seccomp
            .as_ref()
            .map(|f| filter::memfd(&f.build, true))
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

/// Runs bubblewrap once with the flags real runs use (and the seccomp program, when given)
/// under a uid leased from `switch`, as a root server's runs start it. An error says why
/// bubblewrap cannot run unprivileged here (e.g. unprivileged user namespaces are off).
pub(crate) fn probe_bwrap_as(
    bwrap: &Bwrap,
    switch: &UidSwitch,
    filters: Option<&Filters>,
) -> Result<(), Unavailable> {
    let start = |what: &str, e: std::io::Error| Unavailable::Start {
        what: what.to_owned(),
        error: e.to_string(),
    };
    let lease = switch
        .lease(0, false)
        .map_err(|e| start("a uid lease for bubblewrap's self-test", e))?;
    let program = std::fs::canonicalize(&bwrap.path)
        .map_err(|e| start(&bwrap.path.display().to_string(), e))?;
    let needed = [Needed {
        path: &program,
        writable: false,
    }];
    let setup = switch
        .plan(lease.uid(), &needed, &[], View::for_bwrap(), Path::new("/"))
        .map_err(|e| start("bubblewrap under a run uid", e))?;
    let seccomp = filters
        .map(|f| filter::memfd(f.for_run(false), false))
        .transpose()
        .map_err(|e| start("the seccomp filter (a memory file)", e))?;
    let fd = seccomp.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    let mut cmd = std::process::Command::new(&program);
    cmd.args(bwrap.probe_args(fd)?);
    crate::sys::install_std(
        &mut cmd,
        crate::sys::ChildSetup {
            drop_privileges: Some(setup),
            inherit_fds: fd.into_iter().collect(),
            ..crate::sys::ChildSetup::default()
        },
    );
    let what = format!(
        "{} under an unprivileged uid{}",
        bwrap.path.display(),
        if fd.is_some() {
            " with --add-seccomp-fd"
        } else {
            ""
        }
    );
    probe(cmd, &what).map(drop)
}
