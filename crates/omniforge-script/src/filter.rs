//! The `seccomp` layer: a system-call filter compiled once per runner (with `seccompiler`)
//! and loaded into every run, by bubblewrap (`--add-seccomp-fd`) or, without bubblewrap, in
//! the child's `pre_exec`.
//!
//! Everything is allowed except:
//!
//! - system calls a script never needs and that widen the kernel surface an exploit can use:
//!   `ptrace`, `process_vm_readv`/`writev`, `kexec_*`, `bpf`, `perf_event_open`, the key
//!   ring (`keyctl`, `add_key`, `request_key`), `userfaultfd`, mounting (`mount`, `umount2`,
//!   `pivot_root`, the `fsopen` family, `open_tree`, `move_mount`, `mount_setattr`),
//!   namespaces (`unshare`, `setns`), kernel modules, `reboot`, `swapon`/`swapoff`,
//!   `open_by_handle_at`/`name_to_handle_at`, `io_uring_*` (its socket and connect operations
//!   would bypass the socket rule), `acct`, `settimeofday`/`clock_settime`/`adjtimex`,
//!   `syslog`, `quotactl`, `lookup_dcookie`, `vhangup`: these fail with `EPERM`;
//! - `socket` of every family when the run has no network, and of any family but `AF_INET`,
//!   `AF_INET6` and `AF_NETLINK` (glibc's `getaddrinfo` asks the kernel for the host's
//!   addresses over netlink) when it has: `EPERM`. `AF_UNIX` is refused in both, so a script
//!   can open no Unix socket of the host, pathname or abstract, whatever the mounts and
//!   network namespace show; `socketpair(2)` stays allowed (asyncio's self-pipe and
//!   multiprocessing's pipes use it), and so does the side channel, a socket the runner
//!   created and the script inherits. `AF_PACKET` and raw families are never needed. Package
//!   builds (`--allow-source-builds`) get their own program that still allows `AF_UNIX`: uv
//!   and build back-ends use it, and their sandbox binds no host socket;
//! - on x86-64, every x32 system call (numbers with bit 30 set): the same calls under other
//!   numbers would slip past the rules above.
//!
//! Python's start-up, imports, threads, `subprocess`, `multiprocessing` and asyncio make none
//! of these calls (measured by the tests).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::OwnedFd;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The system calls denied with `EPERM` in every run.
const DENIED: &[(&str, i64)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("kexec_load", libc::SYS_kexec_load),
    #[cfg(any(
        target_arch = "x86_64",
        target_arch = "aarch64",
        target_arch = "riscv64"
    ))]
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("open_tree", libc::SYS_open_tree),
    ("move_mount", libc::SYS_move_mount),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("adjtimex", libc::SYS_adjtimex),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("syslog", libc::SYS_syslog),
    ("quotactl", libc::SYS_quotactl),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("vhangup", libc::SYS_vhangup),
];

/// Socket families a run without network may open: none (`socketpair` is another call).
const FAMILIES_OFFLINE: &[i32] = &[];
/// Socket families a run with network may open.
const FAMILIES_ONLINE: &[i32] = &[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];
/// Socket families a package build may open (it also talks to the registry).
const FAMILIES_BUILD: &[i32] = &[
    libc::AF_UNIX,
    libc::AF_INET,
    libc::AF_INET6,
    libc::AF_NETLINK,
];

/// Why the seccomp programs cannot be built here.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilterError {
    /// `seccompiler` has no backend for this architecture.
    #[error("no seccomp support for {0}")]
    Arch(&'static str),
    /// A rule did not compile.
    #[error("compiling the seccomp filter: {0}")]
    Compile(#[from] seccompiler::BackendError),
}

/// The compiled programs, as the raw `struct sock_filter` arrays bubblewrap reads from
/// `--add-seccomp-fd` (and `seccomp(2)` loads).
#[derive(Debug, Clone)]
pub(crate) struct Filters {
    pub(crate) offline: BpfProgram,
    pub(crate) online: BpfProgram,
    pub(crate) build: BpfProgram,
}

impl Filters {
    /// Compiles the programs for the architecture this binary runs on.
    ///
    /// # Errors
    /// [`FilterError`] when the architecture is not one `seccompiler` supports, or a rule
    /// does not compile.
    pub(crate) fn compile() -> Result<Filters, FilterError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)
            .map_err(|_| FilterError::Arch(std::env::consts::ARCH))?;
        Ok(Filters {
            offline: program(arch, FAMILIES_OFFLINE)?,
            online: program(arch, FAMILIES_ONLINE)?,
            build: program(arch, FAMILIES_BUILD)?,
        })
    }

    /// The program for a run with or without network.
    pub(crate) fn for_run(&self, network: bool) -> &BpfProgram {
        if network { &self.online } else { &self.offline }
    }
}

fn program(arch: TargetArch, families: &[i32]) -> Result<BpfProgram, FilterError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&(_, nr)| (nr, Vec::new())).collect();
    // socket(domain, ...) with a domain outside `families`: all `!=` conditions hold. No
    // family allowed: no rule, so every call matches.
    let conditions = families
        .iter()
        .map(|&f| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, f as u64))
        .collect::<Result<Vec<_>, _>>()?;
    let socket_rules = if conditions.is_empty() {
        Vec::new()
    } else {
        vec![SeccompRule::new(conditions)?]
    };
    rules.insert(libc::SYS_socket, socket_rules);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let compiled: BpfProgram = filter.try_into()?;
    let mut program = Vec::with_capacity(compiled.len() + 3);
    if arch == TargetArch::x86_64 {
        // ld [nr]; jge 0x40000000 → ret ERRNO(EPERM); else fall through to seccompiler's
        // program (which checks the architecture first).
        program.push(stmt(0x20, 0));
        program.push(seccompiler::sock_filter {
            code: 0x35,
            jt: 0,
            jf: 1,
            k: 0x4000_0000,
        });
        program.push(stmt(0x06, 0x0005_0000 | libc::EPERM as u32));
    }
    program.extend(compiled);
    Ok(program)
}

fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// The program as bytes: what `--add-seccomp-fd` reads (native-endian `struct sock_filter`s).
pub(crate) fn to_bytes(program: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for i in program {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// A memory file holding `program`, rewound, for bubblewrap's `--add-seccomp-fd`
/// (close-on-exec when `cloexec`).
pub(crate) fn memfd(program: &BpfProgram, cloexec: bool) -> std::io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SeekFrom};
    let flags = if cloexec {
        MemfdFlags::CLOEXEC
    } else {
        MemfdFlags::empty()
    };
    let fd = rustix::fs::memfd_create("omniforge-seccomp", flags)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&to_bytes(program))?;
    rustix::fs::seek(&file, SeekFrom::Start(0))?;
    Ok(OwnedFd::from(file))
}

/// The names of the denied system calls, for the layer's detail.
pub(crate) fn denied_names() -> Vec<&'static str> {
    DENIED.iter().map(|&(n, _)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_programs_compile_and_serialize_to_whole_instructions() {
        let f = Filters::compile().unwrap();
        for p in [&f.offline, &f.online, &f.build] {
            assert!(p.len() > DENIED.len());
            assert_eq!(to_bytes(p).len(), p.len() * 8);
        }
        assert_ne!(f.offline, f.online);
        assert_ne!(f.online, f.build);
    }
}
