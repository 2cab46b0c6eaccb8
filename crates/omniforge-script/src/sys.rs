//! The one place with `unsafe`: what the child does between `fork` and `exec`.
//!
//! Everything here runs in the forked child before it execs the sandbox (bubblewrap) or the
//! interpreter, so it may only make async-signal-safe system calls and must not allocate or
//! take locks. rustix's calls are raw system calls (no libc buffering, no allocation), and
//! converting an `Errno` into `std::io::Error` builds the allocation-free OS-error variant.

#![allow(unsafe_code)]

use std::os::fd::{BorrowedFd, RawFd};

use rustix::io::FdFlags;
use rustix::process::{Resource, Rlimit};

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
    /// A seccomp program the child loads last, right before exec (without bubblewrap, which
    /// otherwise loads it).
    pub(crate) seccomp: Option<seccompiler::BpfProgram>,
}

/// Installs `setup` as the command's `pre_exec` hook.
///
/// The descriptors named in `setup` must stay open until the command has been spawned.
pub(crate) fn install(cmd: &mut tokio::process::Command, setup: ChildSetup) {
    let hook = move || -> std::io::Result<()> {
        for &fd in &setup.cgroup_procs {
            // SAFETY: `fd` is an open descriptor owned by the parent for the duration of
            // `spawn` (documented requirement of `install`); the fork copied it, and we only
            // borrow it for this call.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::io::write(fd, b"0").map_err(to_io)?;
        }
        for &(resource, limit) in &setup.limits {
            rustix::process::setrlimit(resource, limit).map_err(to_io)?;
        }
        for &fd in &setup.inherit_fds {
            // SAFETY: as above, the descriptor is open in the parent during `spawn` and was
            // copied by the fork; borrowing it does not transfer ownership.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            rustix::io::fcntl_setfd(fd, FdFlags::empty()).map_err(to_io)?;
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
    };
    // SAFETY: `pre_exec` requires the closure to be safe to run in a forked child of a
    // multi-threaded process: it only calls async-signal-safe system calls (write,
    // setrlimit, fcntl, prctl, seccomp) through rustix's raw syscall layer, reads data captured by move, and
    // neither allocates nor takes locks (errors are `io::Error::from_raw_os_error`).
    unsafe {
        cmd.pre_exec(hook);
    }
}

fn to_io(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}
