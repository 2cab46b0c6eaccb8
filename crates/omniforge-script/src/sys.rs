//! The one place with `unsafe`: what the child does between `fork` and `exec`, and the few
//! system calls the server makes that have no safe wrapper (`sched_setscheduler`, a socket
//! registered with tokio's reactor).
//!
//! Everything here runs in the forked child before it execs the sandbox (bubblewrap) or the
//! interpreter, so it may only make async-signal-safe system calls and must not allocate or
//! take locks. rustix's calls are raw system calls (no libc buffering, no allocation), paths
//! are `CString`s built in the parent (so rustix passes them through without copying), and
//! converting an `Errno` into `std::io::Error` builds the allocation-free OS-error variant.
//!
//! The order, for a run without bubblewrap:
//!
//! 1. join the run's cgroups, mark every descriptor above stderr close-on-exec
//!    (`close_range`: whatever the server inherited without the flag never reaches a
//!    script), set the rlimits, keep only the run's own descriptors (as root);
//! 2. with a uid switch: a private mount and IPC namespace; private `/tmp` and `/dev/shm`
//!    owned by the run's uid; tmpfs over each directory that uid cannot enter, with only the
//!    paths the run needs bound back; `/proc` mounted again with `hidepid=invisible`; `chdir`;
//! 3. every capability dropped: the bounding set (root only), the ambient set;
//! 4. with a uid switch: no supplementary groups, then the run's gid and uid (real,
//!    effective and saved), which also clears the permitted and effective sets;
//! 5. the inheritable set cleared (`capset`), `no_new_privs`;
//! 6. the seccomp filter, last.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{BorrowedFd, RawFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::FdFlags;
use rustix::mount::{MountFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags};
use rustix::process::{Resource, Rlimit};
use rustix::thread::{CapabilitySet, CapabilitySets, UnshareFlags};

/// What the child sets up for itself before exec.
///
/// All fields are plain data computed in the parent, so the closure only reads them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildSetup {
    /// Resource limits to set (`setrlimit`), in order.
    pub(crate) limits: Vec<(Resource, Rlimit)>,
    /// Open, writable `cgroup.procs` files; the child writes `0` ("this process") to each,
    /// which moves it into that cgroup before it can fork anything.
    pub(crate) cgroup_procs: Vec<RawFd>,
    /// Descriptors the child must keep across exec (the side channel, bubblewrap's seccomp
    /// program). The parent's copies are close-on-exec, as every descriptor std creates; the
    /// child clears the flag on its copies, so concurrent runs never see each other's.
    pub(crate) inherit_fds: Vec<RawFd>,
    /// Without bubblewrap: give up every privilege before exec (bubblewrap does it itself).
    pub(crate) drop_privileges: Option<DropPrivileges>,
    /// A seccomp program the child loads last, right before exec (without bubblewrap, which
    /// otherwise loads it).
    pub(crate) seccomp: Option<seccompiler::BpfProgram>,
    /// Start under `SCHED_IDLE` (a warm template booting beside calls; the server puts it
    /// back with [`set_normal_scheduling`] once it is ready).
    pub(crate) idle: bool,
}

/// The most paths a run binds back ([`SwitchUid::binds`]): the environment, the run
/// directory, the interpreter prefix and the Landlock helper need four.
pub(crate) const MAX_BINDS: usize = 8;

/// How a child without bubblewrap gives up its privileges.
#[derive(Debug, Clone, Default)]
pub(crate) struct DropPrivileges {
    /// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`),
    /// when the server is root: the child empties its bounding set up to it. `None` for a
    /// server that is not root (it cannot, and its children gain nothing through it with
    /// `no_new_privs`).
    pub(crate) bounding_up_to: Option<u32>,
    /// The server is root: switch to the run's own uid in a private mount namespace.
    pub(crate) switch: Option<SwitchUid>,
}

/// The run's identity and filesystem view, when the server is root and bubblewrap is absent.
#[derive(Debug, Clone, Default)]
pub(crate) struct SwitchUid {
    /// The run's uid, also used as its gid.
    pub(crate) uid: u32,
    /// tmpfs mounts, in order: (target, mount data such as `size=…,mode=0700,uid=…`).
    pub(crate) tmpfs: Vec<(CString, CString)>,
    /// Directories to create (mode 0755, as root) inside those tmpfs: the way down to each
    /// bound path, then the mount points themselves.
    pub(crate) mkdirs: Vec<CString>,
    /// Empty files to create as mount points for files.
    pub(crate) mkfiles: Vec<CString>,
    /// Paths bound back at their own place inside the tmpfs laid over them (at most
    /// [`MAX_BINDS`]), read-only or not. The child clones each (`open_tree`) in its new
    /// namespace before the tmpfs hides it, then moves the clone onto its mount point.
    pub(crate) binds: Vec<(CString, bool)>,
    /// Mount a new `/proc` with `hidepid=invisible`: processes of other users (the server,
    /// other runs) disappear from it.
    pub(crate) private_proc: bool,
    /// The working directory, entered once the mounts are in place.
    pub(crate) chdir: Option<CString>,
}

/// Installs `setup` as the command's `pre_exec` hook.
///
/// The descriptors named in `setup` must stay open until the command has been spawned.
pub(crate) fn install(cmd: &mut tokio::process::Command, setup: ChildSetup) {
    // SAFETY: `pre_exec` requires the closure to be safe to run in a forked child of a
    // multi-threaded process: see `hook`.
    unsafe {
        cmd.pre_exec(hook(setup));
    }
}

/// [`install`] for a `std` command (the detection's self-test).
pub(crate) fn install_std(cmd: &mut std::process::Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: as in `install`.
    unsafe {
        cmd.pre_exec(hook(setup));
    }
}

/// The closure the child runs. It only calls async-signal-safe system calls (write,
/// close_range, setrlimit, fcntl, umask, unshare, mount, open_tree, move_mount, mkdir, open, close,
/// chdir, prctl, setgroups, setresgid, setresuid, capset, seccomp) through rustix's raw syscall layer, reads data
/// captured by move, and neither allocates nor takes locks (errors are
/// `io::Error::from_raw_os_error`).
fn hook(setup: ChildSetup) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || -> std::io::Result<()> {
        for &fd in &setup.cgroup_procs {
            // SAFETY: `fd` is an open descriptor owned by the parent for the duration of
            // `spawn` (documented requirement of `install`); the fork copied it, and we only
            // borrow it for this call.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::io::write(fd, b"0").map_err(to_io)?;
        }
        // Descriptors the server inherited from its own parent without close-on-exec (a
        // shell's, a supervisor's) would otherwise pass through bubblewrap into the script.
        // Before the rlimits: the fallback reads the server's own `RLIMIT_NOFILE`.
        close_on_exec_from_stderr()?;
        for &(resource, limit) in &setup.limits {
            rustix::process::setrlimit(resource, limit).map_err(to_io)?;
        }
        for &fd in &setup.inherit_fds {
            // SAFETY: as above, the descriptor is open in the parent during `spawn` and was
            // copied by the fork; borrowing it does not transfer ownership.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::io::fcntl_setfd(fd, FdFlags::empty()).map_err(to_io)?;
        }
        if setup.idle {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sched_setscheduler on this process with a parameter on our stack;
            // lowering the policy needs no privilege.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if let Some(drop) = &setup.drop_privileges {
            drop_privileges(drop)?;
        }
        if let Some(program) = &setup.seccomp {
            // prctl(NO_NEW_PRIVS) and seccomp(SET_MODE_FILTER) on a program built in the
            // parent: two system calls, no allocation (the error wraps `last_os_error`).
            seccompiler::apply_filter(program).map_err(|e| match e {
                seccompiler::Error::Prctl(io) | seccompiler::Error::Seccomp(io) => io,
                _ => std::io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()),
            })?;
        }
        Ok(())
    }
}

/// Marks every descriptor above 2 close-on-exec: `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`
/// (Linux 5.11), else `fcntl` on each number below the `RLIMIT_NOFILE` hard limit (capped at
/// 2^20). The caller then clears the flag on the descriptors the child must keep.
fn close_on_exec_from_stderr() -> std::io::Result<()> {
    // SAFETY: close_range only changes descriptor flags of this (forked, single-threaded)
    // process; its arguments are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EINVAL) => {}
        _ => return Err(err),
    }
    let max = rustix::process::getrlimit(Resource::Nofile)
        .maximum
        .unwrap_or(1 << 20)
        .min(1 << 20);
    for fd in 3..max as i32 {
        // SAFETY: fcntl on a number that may or may not be open: EBADF for the closed ones,
        // which is ignored; no memory is involved.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

fn drop_privileges(drop: &DropPrivileges) -> std::io::Result<()> {
    if let Some(switch) = &drop.switch {
        private_mounts(switch)?;
    }
    if let Some(last) = drop.bounding_up_to {
        for cap in 0..=last.min(63) {
            match rustix::thread::remove_capability_from_bounding_set(
                CapabilitySet::from_bits_retain(1 << cap),
            ) {
                // A capability this kernel does not know.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(e) => return Err(to_io(e)),
            }
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // Kernels before 4.3 have no ambient set.
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(to_io(e)),
    }
    if let Some(switch) = &drop.switch {
        // Groups first, while still root; then the gid; the uid last (it takes the right to
        // change the others). All three ids of each, so nothing can switch back.
        rustix::thread::set_thread_groups(&[]).map_err(to_io)?;
        let gid = rustix::process::Gid::from_raw_unchecked(switch.uid);
        rustix::thread::set_thread_res_gid(gid, gid, gid).map_err(to_io)?;
        let uid = rustix::process::Uid::from_raw_unchecked(switch.uid);
        rustix::thread::set_thread_res_uid(uid, uid, uid).map_err(to_io)?;
    }
    // Leaving root cleared the permitted and effective sets; the inheritable set stays
    // until cleared here (lowering needs no privilege).
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )
    .map_err(to_io)?;
    rustix::thread::set_no_new_privs(true).map_err(to_io)?;
    Ok(())
}

fn private_mounts(switch: &SwitchUid) -> std::io::Result<()> {
    // The mount points below must be enterable by the run's uid whatever the server's umask;
    // the script inherits the usual 022 too.
    rustix::process::umask(Mode::from_raw_mode(0o022));
    // SAFETY: `unshare` is unsafe because it changes the calling thread's namespaces under
    // other threads of the process; a forked child has exactly one thread.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS | UnshareFlags::NEWIPC) }
        .map_err(to_io)?;
    // Nothing mounted from here on reaches the host's namespace.
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(to_io)?;
    // Detached copies of what is bound back, taken before the tmpfs below hide it (a bind
    // from a descriptor of the old namespace would be refused); a stack array, no allocation.
    let mut trees: [Option<rustix::fd::OwnedFd>; MAX_BINDS] = [const { None }; MAX_BINDS];
    for ((path, _), tree) in switch.binds.iter().zip(trees.iter_mut()) {
        *tree = Some(
            rustix::mount::open_tree(
                rustix::fs::CWD,
                path.as_c_str(),
                OpenTreeFlags::OPEN_TREE_CLONE
                    | OpenTreeFlags::OPEN_TREE_CLOEXEC
                    | OpenTreeFlags::AT_RECURSIVE,
            )
            .map_err(to_io)?,
        );
    }
    let hardened = MountFlags::NOSUID | MountFlags::NODEV;
    for (target, data) in &switch.tmpfs {
        rustix::mount::mount(
            c"tmpfs",
            target.as_c_str(),
            c"tmpfs",
            hardened,
            data.as_c_str(),
        )
        .map_err(to_io)?;
    }
    for dir in &switch.mkdirs {
        match rustix::fs::mkdir(dir.as_c_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(to_io(e)),
        }
    }
    for file in &switch.mkfiles {
        let fd = rustix::fs::open(
            file.as_c_str(),
            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(to_io)?;
        drop(fd);
    }
    for ((target, read_only), tree) in switch.binds.iter().zip(trees.iter_mut()) {
        let Some(tree) = tree.take() else { continue };
        rustix::mount::move_mount(
            &tree,
            c"",
            rustix::fs::CWD,
            target.as_c_str(),
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .map_err(to_io)?;
        let mut flags = MountFlags::BIND | hardened;
        if *read_only {
            flags |= MountFlags::RDONLY;
        }
        rustix::mount::mount_remount(target.as_c_str(), flags, c"").map_err(to_io)?;
    }
    if switch.private_proc {
        rustix::mount::mount(
            c"proc",
            c"/proc",
            c"proc",
            hardened | MountFlags::NOEXEC,
            c"hidepid=invisible",
        )
        .map_err(to_io)?;
    }
    if let Some(dir) = &switch.chdir {
        rustix::process::chdir(dir.as_c_str()).map_err(to_io)?;
    }
    Ok(())
}

/// Registers a socket the crate owns with tokio's reactor (a warm template's control socket,
/// a spare's socket), for both reading and writing.
///
/// # Errors
/// The reactor refused the descriptor.
pub(crate) fn async_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    use tokio::io::Interest;
    // SAFETY: the `OwnedFd` moves into the `AsyncFd`, which owns it until it is dropped: the
    // descriptor stays open, and `as_raw_fd` returns the same number, all that time.
    unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(
            fd,
            Interest::READABLE | Interest::WRITABLE,
        )
    }
    .map_err(|e| e.into_parts().1)
}

/// Puts process `pid` (its main thread) back under `SCHED_OTHER` (root only, once it left
/// `SCHED_IDLE`: `RLIMIT_NICE` is 0 for scripts).
pub(crate) fn set_normal_scheduling(pid: i32) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler with a pid and a parameter on our stack; no memory is kept.
    if unsafe { libc::sched_setscheduler(pid, libc::SCHED_OTHER, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn to_io(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// Writes `bytes` to `path` with mode 0644 whatever the process's umask (a unit file's
/// `UMask=0077` would leave it 0600), for files a run's leased uid must read.
pub(crate) fn write_readable(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644))
}
