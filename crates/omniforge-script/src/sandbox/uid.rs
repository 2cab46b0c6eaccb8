//! The `unprivileged-uid` layer without bubblewrap: a root server's runs switch to a uid and
//! gid of their own, leased per run, in a private mount namespace that lets that uid reach
//! exactly what the run needs.
//!
//! Each run leases a uid (also its gid) in [`RUN_UID_BASE`]` .. + `[`RUN_UID_SLOTS`] for its
//! duration: an exclusive `flock` on `UID_LEASE_DIR/<uid>`, machine-wide, so two concurrent
//! runs never share a uid whichever server (or `omniforge tool run`) started them, and neither
//! can read the other's `/proc` entries, signal it, or open its files; a run never shares a uid
//! with the server. A run in slot `n` tries `RUN_UID_BASE + n` first. The range lies above
//! systemd's container ranges (up to 1879048191) and below 2^31 (ids above it confuse some
//! software); no account is expected there. Without `cgroup.kill`, whatever still runs as the
//! uid when the run ends (a `setsid` escapee) is killed before the lease is given back.
//!
//! The private mount namespace (made in the child, as root, before the switch):
//! - `/tmp` and `/dev/shm`: fresh size-capped tmpfs owned by the run's uid (mode 0700), as
//!   under bubblewrap;
//! - each directory the run's uid cannot enter (`/root`, a 0700 data directory, ...): an
//!   empty tmpfs over it, with only the run's paths (the interpreter prefix, the environment,
//!   the run directory, the Landlock helper) bound back at their own paths, read-only except
//!   the run directory; everything else there stays hidden;
//! - `/proc`: a new instance with `hidepid=invisible`, in which the server's and every other
//!   user's processes do not exist (`ENOENT`);
//! - a private IPC namespace (no host System V shared memory or message queues).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::probe::{Unavailable, probe, true_program};
use super::tree::kill_uid;
use crate::sys::{ChildSetup, DropPrivileges, MAX_BINDS, SwitchUid};

/// The first uid and gid of runs without bubblewrap under a root server (see the module doc:
/// each run leases one of `RUN_UID_BASE .. RUN_UID_BASE + RUN_UID_SLOTS`).
pub const RUN_UID_BASE: u32 = 1_900_000_000;

/// The most run slots (and so uids) a runner uses: `RUN_UID_BASE ..
/// RUN_UID_BASE + RUN_UID_SLOTS`.
pub const RUN_UID_SLOTS: u32 = 65_536;

/// Where the uid leases live: one lock file per uid, root's only (0700), on `/run` (a tmpfs,
/// emptied at boot).
pub const UID_LEASE_DIR: &str = "/run/omniforge-uids";

/// Size of the tmpfs laid over a directory the run cannot enter: it only holds the mount
/// points of the paths bound back.
const COVER_DATA: &str = "mode=0755,size=1m";

/// A path a run needs to reach.
#[derive(Debug, Clone)]
pub(crate) struct Needed<'a> {
    pub(crate) path: &'a Path,
    pub(crate) writable: bool,
}

/// The uid switch of a runner: detected once, then planned per run.
#[derive(Debug, Clone)]
pub(crate) struct UidSwitch {
    /// `cap_last_cap`: the bounding set is emptied up to it.
    cap_last: u32,
}

impl UidSwitch {
    /// Works out whether a root server can switch runs to their own uid here: it starts
    /// `true` through the whole child setup (private namespaces, mounts, capabilities, uid)
    /// once.
    pub(crate) fn detect() -> Result<UidSwitch, Unavailable> {
        if !rustix::process::geteuid().is_root() {
            return Err(Unavailable::NotRoot);
        }
        let switch = UidSwitch {
            cap_last: cap_last_cap(),
        };
        let start = |e: std::io::Error| Unavailable::Start {
            what: "the uid switch's self-test".to_owned(),
            error: e.to_string(),
        };
        let lease = switch.lease(0, false).map_err(start)?;
        let mut cmd = std::process::Command::new(true_program()?);
        let setup = switch
            .plan(
                lease.uid(),
                &[],
                &[],
                View::no_bwrap(1 << 20),
                Path::new("/"),
            )
            .map_err(start)?;
        crate::sys::install_std(
            &mut cmd,
            ChildSetup {
                drop_privileges: Some(setup),
                ..ChildSetup::default()
            },
        );
        probe(cmd, "the uid switch (unshare, mount, setresuid)")?;
        drop(lease);
        Ok(switch)
    }

    /// Leases a uid no other run on this machine holds, trying `RUN_UID_BASE + first` first;
    /// with `sweep`, what still runs as it when the lease ends is killed then.
    ///
    /// # Errors
    /// The lease directory is unusable, or every uid of the range is held.
    pub(crate) fn lease(&self, first: usize, sweep: bool) -> std::io::Result<UidLease> {
        let dir = lease_dir()?;
        let count = RUN_UID_SLOTS as usize;
        for i in 0..count {
            let uid = RUN_UID_BASE + ((first + i) % count) as u32;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(uid.to_string()))?;
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {
                    return Ok(UidLease {
                        uid,
                        sweep,
                        _lock: file,
                    });
                }
                Err(rustix::io::Errno::WOULDBLOCK) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(std::io::Error::other("every run uid is in use"))
    }

    /// The child's setup for a run as `uid` that needs `needed` and works in `cwd`, with
    /// `hidden` covered whatever their permissions (all paths canonical), and the private
    /// `/tmp`, `/dev/shm` and `/proc` that `view` asks for.
    ///
    /// # Errors
    /// A path cannot be examined, or more than [`MAX_BINDS`] would be bound.
    pub(crate) fn plan(
        &self,
        uid: u32,
        needed: &[Needed<'_>],
        hidden: &[PathBuf],
        view: View,
        cwd: &Path,
    ) -> std::io::Result<DropPrivileges> {
        let mut covers: Vec<(PathBuf, String)> = Vec::new();
        if let Some(tmp_bytes) = view.private_tmp {
            let private = format!("mode=0700,uid={uid},gid={uid},size={tmp_bytes}");
            covers.push((PathBuf::from("/tmp"), private.clone()));
            if Path::new("/dev/shm").is_dir() {
                covers.push((PathBuf::from("/dev/shm"), private));
            }
        }
        for dir in hidden {
            if dir.is_dir()
                && dir != Path::new("/")
                && !covers.iter().any(|(c, _)| dir.starts_with(c))
            {
                covers.retain(|(c, _)| !c.starts_with(dir));
                covers.push((dir.clone(), COVER_DATA.to_owned()));
            }
        }
        // Each needed path's topmost ancestor the run cannot enter gets a tmpfs over it,
        // unless a cover already hides it.
        for n in needed {
            let mut ancestors: Vec<&Path> = n.path.ancestors().skip(1).collect();
            ancestors.reverse();
            for dir in ancestors {
                if covers.iter().any(|(c, _)| dir.starts_with(c)) {
                    break;
                }
                if !enterable(dir, uid)? {
                    // A cover inside this one would end up hidden under it.
                    covers.retain(|(c, _)| !c.starts_with(dir));
                    covers.push((dir.to_owned(), COVER_DATA.to_owned()));
                    break;
                }
            }
        }
        let mut switch = SwitchUid {
            uid,
            private_proc: view.private_proc,
            chdir: Some(cstring(cwd)?),
            ..SwitchUid::default()
        };
        for (dir, data) in &covers {
            switch
                .tmpfs
                .push((cstring(dir)?, cstring(Path::new(data))?));
        }
        for n in needed {
            // Within another needed path, it comes along with that one.
            if needed
                .iter()
                .any(|o| o.path != n.path && n.path.starts_with(o.path))
            {
                continue;
            }
            let Some((cover, _)) = covers.iter().find(|(c, _)| n.path.starts_with(c)) else {
                continue; // reachable where it is
            };
            for dir in n
                .path
                .ancestors()
                .skip(1)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                if dir.starts_with(cover) && dir != cover {
                    let dir = cstring(dir)?;
                    if !switch.mkdirs.contains(&dir) {
                        switch.mkdirs.push(dir);
                    }
                }
            }
            if std::fs::metadata(n.path)?.is_dir() {
                switch.mkdirs.push(cstring(n.path)?);
            } else {
                switch.mkfiles.push(cstring(n.path)?);
            }
            if switch.binds.len() == MAX_BINDS {
                return Err(std::io::Error::other("too many paths to bind into the run"));
            }
            switch.binds.push((cstring(n.path)?, !n.writable));
        }
        Ok(DropPrivileges {
            bounding_up_to: Some(self.cap_last),
            switch: Some(switch),
        })
    }
}

/// What of its own a run's private mount namespace gets besides the covers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View {
    /// Private size-capped `/tmp` and `/dev/shm` owned by the run's uid, of this many bytes.
    pub(crate) private_tmp: Option<u64>,
    /// A new `/proc` with `hidepid=invisible`.
    pub(crate) private_proc: bool,
}

impl View {
    /// What a run without bubblewrap sees: private `/tmp`, `/dev/shm` and `/proc`.
    pub(crate) fn no_bwrap(tmp_bytes: u64) -> View {
        View {
            private_tmp: Some(tmp_bytes),
            private_proc: true,
        }
    }

    /// What bubblewrap started under a run's uid needs: only the covers that let it reach
    /// the paths it binds (it makes its own `/tmp`, `/dev/shm` and `/proc`).
    pub(crate) fn for_bwrap() -> View {
        View {
            private_tmp: None,
            private_proc: false,
        }
    }
}

/// A run's uid, held until the run ends (see the module doc).
#[derive(Debug)]
pub(crate) struct UidLease {
    uid: u32,
    sweep: bool,
    /// The locked file; closing it gives the uid back.
    _lock: std::fs::File,
}

impl UidLease {
    /// The leased uid (also the gid).
    pub(crate) fn uid(&self) -> u32 {
        self.uid
    }
}

impl Drop for UidLease {
    fn drop(&mut self) {
        if self.sweep {
            let killed = kill_uid(self.uid);
            if killed > 0 {
                tracing::warn!(uid = self.uid, killed, "killed processes a run left behind");
            }
        }
    }
}

/// [`UID_LEASE_DIR`], created root-only if missing; refused when someone else could write
/// into it.
fn lease_dir() -> std::io::Result<&'static Path> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = Path::new(UID_LEASE_DIR);
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(dir)?;
    if !m.is_dir() || m.uid() != 0 || m.mode() & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "{UID_LEASE_DIR} is not a directory only root may write to"
        )));
    }
    Ok(dir)
}

/// What a child gives up when the server is not root: the ambient and inheritable
/// capabilities and, with `no_new_privs`, any way to gain some.
pub(crate) fn drop_only() -> DropPrivileges {
    DropPrivileges {
        bounding_up_to: None,
        switch: None,
    }
}

/// Whether `uid` (also its gid, with no supplementary groups) may enter `dir`.
fn enterable(dir: &Path, uid: u32) -> std::io::Result<bool> {
    let m = std::fs::metadata(dir)?;
    let mode = m.mode();
    Ok(if m.uid() == uid {
        mode & 0o100 != 0
    } else if m.gid() == uid {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    })
}

/// The highest capability number of this kernel (40 on 5.9 and later).
fn cap_last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

fn cstring(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "a path holds a NUL byte")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_directory_inside_a_closed_one_is_not_covered_twice() {
        use std::os::unix::fs::PermissionsExt as _;
        // Outside /tmp, which the run's private /tmp covers anyway.
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
        std::fs::create_dir_all(&base).unwrap();
        let root = tempfile::Builder::new().tempdir_in(base).unwrap();
        let home = root.path().join("home");
        let data = home.join("data");
        let env = data.join("envs/e1");
        std::fs::create_dir_all(&env).unwrap();
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let switch = UidSwitch { cap_last: 40 };
        let drop = switch
            .plan(
                RUN_UID_BASE,
                &[Needed {
                    path: &env,
                    writable: false,
                }],
                std::slice::from_ref(&data),
                View::no_bwrap(1 << 20),
                Path::new("/"),
            )
            .unwrap();
        let s = drop.switch.unwrap();
        let covers: Vec<_> = s
            .tmpfs
            .iter()
            .map(|(c, _)| c.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            covers[2..],
            [home.to_str().unwrap().to_owned()],
            "{covers:?}"
        );
        let dirs: Vec<_> = s
            .mkdirs
            .iter()
            .map(|d| d.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            dirs,
            [data.clone(), data.join("envs"), env.clone()].map(|p| p.to_str().unwrap().to_owned())
        );
    }

    #[test]
    fn a_uid_is_leased_to_one_run_at_a_time() {
        if !rustix::process::geteuid().is_root() {
            return; // the lease directory is root's
        }
        let switch = UidSwitch { cap_last: 40 };
        let a = switch.lease(7, false).unwrap();
        // The same first choice, while `a` holds it: the next free uid.
        let b = switch.lease(7, false).unwrap();
        assert_ne!(a.uid(), b.uid());
        assert!(a.uid() >= RUN_UID_BASE + 7);
        let held = a.uid();
        drop(a);
        let c = switch.lease(7, false).unwrap();
        assert_eq!(c.uid(), held, "given back when dropped");
    }

    #[test]
    fn closed_directories_are_covered_and_needed_paths_bound_back() {
        let root = tempfile::tempdir().unwrap(); // 0700, under /tmp
        let env = root.path().join("data/envs/e1");
        std::fs::create_dir_all(&env).unwrap();
        let switch = UidSwitch { cap_last: 40 };
        let drop = switch
            .plan(
                RUN_UID_BASE + 2,
                &[Needed {
                    path: &env,
                    writable: false,
                }],
                &[],
                View::no_bwrap(1 << 20),
                Path::new("/tmp"),
            )
            .unwrap();
        let s = drop.switch.unwrap();
        assert_eq!(s.uid, RUN_UID_BASE + 2);
        // Under /tmp: the private /tmp covers it, so the way down is made in it.
        assert_eq!(s.tmpfs[0].0.to_str().unwrap(), "/tmp");
        assert!(
            s.tmpfs[0]
                .1
                .to_str()
                .unwrap()
                .contains(&format!("uid={}", RUN_UID_BASE + 2))
        );
        let dirs: Vec<_> = s
            .mkdirs
            .iter()
            .map(|d| d.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(dirs.last().unwrap(), env.to_str().unwrap());
        assert!(dirs.contains(&root.path().to_str().unwrap().to_owned()));
        assert_eq!(s.binds.len(), 1);
        assert!(s.binds[0].1, "read-only");
    }

    #[test]
    fn bubblewrap_under_a_run_uid_gets_only_the_covers_it_needs() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap(); // under the host's /tmp
        let env = root.path().join("envs/e1");
        std::fs::create_dir_all(&env).unwrap();
        let switch = UidSwitch { cap_last: 40 };
        let drop = switch
            .plan(
                RUN_UID_BASE + 3,
                &[Needed {
                    path: &env,
                    writable: false,
                }],
                &[],
                View::for_bwrap(),
                Path::new("/"),
            )
            .unwrap();
        let s = drop.switch.unwrap();
        // No private /tmp, /dev/shm or /proc (bubblewrap makes its own); the closed directory
        // under the host's /tmp is covered, with the environment bound back.
        let covers: Vec<_> = s.tmpfs.iter().map(|(c, _)| c.to_str().unwrap()).collect();
        assert_eq!(covers, [root.path().to_str().unwrap()]);
        assert!(!s.private_proc);
        assert_eq!(s.binds.len(), 1);
    }
}
