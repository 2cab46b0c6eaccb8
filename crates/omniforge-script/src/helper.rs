//! The `landlock` layer: a tiny helper that restricts itself with Landlock, then execs the
//! interpreter.
//!
//! Landlock forbids mounting, so it cannot be applied before bubblewrap sets up its mounts;
//! it is applied inside the sandbox, as the last step before Python starts. The helper is the
//! server's own executable, bound read-only into the sandbox at [`SANDBOX_HELPER`] and run as
//!
//! ```text
//! <helper> __omniforge-sandbox-exec [--ro PATH]... [--rw PATH]... [--no-net] [--probe] -- PROGRAM ARGS...
//! ```
//!
//! The binary calls [`main_if_helper`] first thing in `main` (before argument parsing,
//! logging or the async runtime), which also records the executable as the helper runners
//! use by default ([`RunnerConfig::landlock_helper`](crate::RunnerConfig::landlock_helper)).
//!
//! The ruleset (best effort on older kernels, refused when not enforced at all):
//! - every filesystem access is handled; `--ro` paths get read and execute, `--rw` paths
//!   everything; nothing else is reachable, whatever the mounts show;
//! - `--no-net`: TCP bind and connect are handled with no port allowed (Landlock ABI 4);
//! - scoped (ABI 6): no connecting to abstract Unix sockets created outside the sandbox and
//!   no signals to processes outside it, which bubblewrap's namespaces do not cover when a
//!   run shares the host's network namespace.

use std::ffi::OsString;
use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
    Scope, path_beneath_rules,
};

/// The first argument that turns the executable into the helper.
pub const HELPER_ARG: &str = "__omniforge-sandbox-exec";

/// Where the helper appears inside the bubblewrap sandbox.
pub(crate) const SANDBOX_HELPER: &str = "/omniforge/sandbox-exec";

/// The newest Landlock ABI whose rights are asked for (older kernels get what they support).
const LANDLOCK_ABI: ABI = ABI::V6;

static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// Runs the helper when the first argument is [`HELPER_ARG`] (never returns then);
/// otherwise records this process's executable as the default Landlock helper and returns.
///
/// Call it first thing in `main`: the helper must start fast and touch nothing else.
pub fn main_if_helper() {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().as_deref() == Some(std::ffi::OsStr::new(HELPER_ARG)) {
        let code = match helper(args.collect()) {
            Ok(never) => match never {},
            Err(e) => {
                // stderr is the script's stderr: the reason shows up in the call's result.
                eprintln!("omniforge sandbox: {e}");
                126
            }
        };
        std::process::exit(code);
    }
    if let Ok(exe) = std::env::current_exe() {
        let _ = HELPER.set(exe);
    }
}

/// The executable [`main_if_helper`] recorded, if it was called.
pub(crate) fn registered() -> Option<PathBuf> {
    HELPER.get().cloned()
}

/// What the helper is asked to do.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Confine {
    pub(crate) read_only: Vec<PathBuf>,
    pub(crate) read_write: Vec<PathBuf>,
    pub(crate) no_network: bool,
}

impl Confine {
    /// The helper's arguments after [`HELPER_ARG`], up to and including `--`.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![HELPER_ARG.into()];
        for p in &self.read_only {
            a.extend(["--ro".into(), p.clone().into()]);
        }
        for p in &self.read_write {
            a.extend(["--rw".into(), p.clone().into()]);
        }
        if self.no_network {
            a.push("--no-net".into());
        }
        a.push("--".into());
        a
    }
}

enum Never {}

/// Why the helper could not run the program.
#[derive(Debug, thiserror::Error)]
enum HelperError {
    /// An option without its value.
    #[error("{0} needs a path")]
    MissingValue(&'static str),
    /// An argument the helper does not know.
    #[error("unknown argument {0:?}")]
    UnknownArgument(OsString),
    /// Nothing after `--`.
    #[error("no program to run")]
    NoProgram,
    /// Building or applying the ruleset failed.
    #[error("landlock: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// The kernel has no Landlock, or enforces none of it.
    #[error("landlock is not {0}")]
    NotEnforced(String),
    /// `exec` failed.
    #[error("cannot run {}: {source}", .program.display())]
    Exec {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn helper(args: Vec<OsString>) -> Result<Never, HelperError> {
    let mut confine = Confine::default();
    let mut probe = false;
    let mut it = args.into_iter();
    let mut program = Vec::new();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--ro") => confine
                .read_only
                .push(it.next().ok_or(HelperError::MissingValue("--ro"))?.into()),
            Some("--rw") => confine
                .read_write
                .push(it.next().ok_or(HelperError::MissingValue("--rw"))?.into()),
            Some("--no-net") => confine.no_network = true,
            Some("--probe") => probe = true,
            Some("--") => {
                program = it.collect();
                break;
            }
            _ => return Err(HelperError::UnknownArgument(a)),
        }
    }
    let status = restrict(&confine)?;
    if probe {
        // The runner's detection reads this line.
        let _ = writeln!(std::io::stdout(), "{status}");
        std::process::exit(0);
    }
    let mut program = program.into_iter();
    let exe = program.next().ok_or(HelperError::NoProgram)?;
    let source = std::process::Command::new(&exe).args(program).exec();
    Err(HelperError::Exec {
        program: exe.into(),
        source,
    })
}

/// Restricts this process (and what it execs) as `confine` says; says how well.
fn restrict(confine: &Confine) -> Result<String, HelperError> {
    let abi = LANDLOCK_ABI;
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?;
    if confine.no_network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(
            &confine.read_only,
            AccessFs::from_read(abi),
        ))?
        .add_rules(path_beneath_rules(
            &confine.read_write,
            AccessFs::from_all(abi),
        ))?
        .restrict_self()?;
    let abi = match status.landlock {
        landlock::LandlockStatus::Available { effective_abi, .. } => effective_abi.to_string(),
        other => return Err(HelperError::NotEnforced(format!("available: {other:?}"))),
    };
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(format!("fully enforced, ABI {abi}")),
        RulesetStatus::PartiallyEnforced => Ok(format!("partially enforced, ABI {abi}")),
        RulesetStatus::NotEnforced => Err(HelperError::NotEnforced(
            "enforced by this kernel".to_owned(),
        )),
    }
}
