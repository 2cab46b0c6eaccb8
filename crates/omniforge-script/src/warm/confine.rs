//! The Landlock domain of one warm call, built in the server with the crate's Landlock code
//! and applied by the call's child to itself (`_omniforge_warm.restrict_self`) before it says
//! it is ready. It nests inside the template's domain (the helper's, as in a cold call), so a
//! child can only lose rights, and it is the child's own: the signal and abstract-socket
//! scopes then separate it from the template, the other spares and every concurrent call.
//!
//! - read and execute: the system directories and `/etc` entries, the interpreter prefix,
//!   the environment and the tool's code (host handles: bubblewrap binds the same inodes),
//!   the sandbox's `/proc` and each of its `/dev` entries but `shm` (handles the template
//!   sent from inside);
//! - everything but creating Unix sockets: the call's own `/tmp/c-R` and `/dev/shm/c-R`
//!   (handles the child sent), and `/dev/null`, `zero`, `full`;
//! - no TCP bind or connect unless the version allows network; abstract Unix sockets and
//!   signals scoped to the call.
//!
//! Every right is a hard requirement: on a kernel without Landlock ABI 6 (scopes) the
//! ruleset cannot be built and the pool stays off.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetError, Scope,
};

/// The ABI whose rights a call's domain requires (scopes arrived in 6).
const ABI_NEEDED: ABI = ABI::V6;

/// Why a call's ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfineError {
    /// Opening a path for a rule failed.
    #[error("opening {path} for a Landlock rule: {source}")]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused the ruleset or a rule (or lacks Landlock ABI 6).
    #[error("landlock: {0}")]
    Ruleset(#[from] RulesetError),
    /// A handle is neither a directory nor a file.
    #[error("examining a handle for a Landlock rule: {0}")]
    Stat(#[from] std::io::Error),
    /// The kernel gave no ruleset descriptor.
    #[error("landlock is not supported by this kernel")]
    Unsupported,
}

/// The rules every call of one template shares: handles opened once when it starts.
#[derive(Debug, Default)]
pub(crate) struct SharedRules {
    read_only: Vec<OwnedFd>,
    read_write: Vec<OwnedFd>,
}

impl SharedRules {
    /// Read-only host paths (canonical), such as the system directories, the interpreter
    /// prefix, the environment and the tool's code file.
    pub(crate) fn add_host_read_only(&mut self, path: &Path) -> Result<(), ConfineError> {
        self.read_only.push(open(path)?);
        Ok(())
    }

    /// A read-only handle from inside the sandbox (its `/proc`, a `/dev` entry).
    pub(crate) fn add_read_only(&mut self, fd: OwnedFd) {
        self.read_only.push(fd);
    }

    /// A read-write handle from inside the sandbox (`/dev/null`, `zero`, `full`).
    pub(crate) fn add_read_write(&mut self, fd: OwnedFd) {
        self.read_write.push(fd);
    }

    /// The ruleset for one call whose own directories are `own` (its `/tmp/c-R` and
    /// `/dev/shm/c-R`), as a descriptor to hand to the child.
    pub(crate) fn for_call(&self, own: &[OwnedFd], network: bool) -> Result<OwnedFd, ConfineError> {
        let abi = ABI_NEEDED;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))?
            .scope(Scope::from_all(abi))?;
        if !network {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
        }
        let mut created = ruleset.create()?;
        let read = AccessFs::from_read(abi);
        let write = AccessFs::from_all(abi);
        // Named Unix sockets: Landlock does not check connect() on them, and every path shows
        // in the shared /proc/net/unix (seccomp refuses AF_UNIX sockets too).
        let own_access = write & !AccessFs::MakeSock;
        for fd in &self.read_only {
            created = created.add_rule(beneath(fd, read)?)?;
        }
        for fd in &self.read_write {
            created = created.add_rule(beneath(fd, write)?)?;
        }
        for fd in own {
            created = created.add_rule(beneath(fd, own_access)?)?;
        }
        Option::<OwnedFd>::from(created).ok_or(ConfineError::Unsupported)
    }
}

/// A rule for `fd`: `access` for a directory, its file rights for anything else (the kernel
/// refuses directory rights on a file).
fn beneath(
    fd: &OwnedFd,
    access: BitFlags<AccessFs>,
) -> Result<PathBeneath<&OwnedFd>, ConfineError> {
    let is_dir = rustix::fs::fstat(fd.as_fd())
        .map(|st| {
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
        })
        .map_err(std::io::Error::from)?;
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(ABI_NEEDED)
    };
    Ok(PathBeneath::new(fd, access).set_compatibility(CompatLevel::HardRequirement))
}

fn open(path: &Path) -> Result<OwnedFd, ConfineError> {
    rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| ConfineError::Open {
        path: path.to_owned(),
        source: e.into(),
    })
}

/// Whether this kernel can build a call's ruleset (Landlock ABI 6, with scopes).
pub(crate) fn available() -> Result<(), ConfineError> {
    SharedRules::default().for_call(&[], false).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_ruleset_is_built_from_handles() {
        if available().is_err() {
            return; // an old kernel: the pool stays off there
        }
        let mut rules = SharedRules::default();
        rules.add_host_read_only(Path::new("/usr")).unwrap();
        rules.add_host_read_only(Path::new("/etc/hosts")).unwrap();
        let own = [open(&std::env::temp_dir()).unwrap()];
        let fd = rules.for_call(&own, false).unwrap();
        assert!(rustix::fs::fstat(&fd).is_ok());
        // A path that does not exist is an error that names it.
        let err = rules
            .add_host_read_only(Path::new("/nonexistent/x"))
            .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/x"), "{err}");
    }
}
