//! One run's inputs and outputs, its defaults, and the errors of running.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::channel::{ScriptMessage, ScriptResult};
use crate::env::Env;
use crate::sandbox::LimitHit;

/// Default [`RunSpec::timeout`]: 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`RunSpec::memory_bytes`]: 2 GiB (numpy needs at least 1 GiB of address space).
pub const DEFAULT_MEMORY_BYTES: u64 = 2 << 30;
/// Default [`RunSpec::max_capture_bytes`]: 1 MiB per stream.
pub const DEFAULT_MAX_CAPTURE_BYTES: usize = 1 << 20;
/// Default [`RunSpec::max_processes`]: 128 processes and threads.
pub const DEFAULT_MAX_PROCESSES: u32 = 128;
/// Default [`RunSpec::max_file_bytes`]: 64 MiB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
/// Default [`RunnerConfig::queue`](crate::RunnerConfig::queue): 64 waiting runs.
pub const DEFAULT_QUEUE: usize = 64;

/// Variables every run gets set to `1`, so that numeric libraries start no thread pools of
/// their own: OpenBLAS (numpy's default BLAS, which otherwise starts one thread per core at
/// import), OpenMP, MKL, BLIS, numexpr, Apple's vecLib, Rayon, Polars and Numba. Threads
/// count against [`RunSpec::max_processes`] (`pids.max`), so a script could not rely on a
/// pool sized for the machine anyway, and a warm template must be single-threaded when it
/// forks. A script that wants more threads sets the variable itself before the import.
pub const SINGLE_THREAD_VARS: &[&str] = &[
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "RAYON_NUM_THREADS",
    "POLARS_MAX_THREADS",
    "NUMBA_NUM_THREADS",
];

/// Errors of [`Runner::new`](crate::Runner::new) and [`Runner::run`](crate::Runner::run). A script that fails is not an error: it is
/// a [`RunOutput`] with a non-zero [`Exit`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// All run slots and queue places are taken.
    #[error("too many script runs in progress; try again later")]
    Busy,
    /// This machine lacks a layer the [`SandboxLevel`](crate::SandboxLevel) requires
    /// ([`SandboxLevel::required_layers`](crate::SandboxLevel::required_layers)); the text names each missing layer and why.
    #[error("the script sandbox cannot start: {0}")]
    SandboxUnavailable(String),
    /// The [`RunSpec`] is unusable (e.g. a relative path).
    #[error("invalid run: {0}")]
    InvalidSpec(String),
    /// Setting up or starting the process failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RunError {
    let context = context.into();
    move |source| RunError::Io { context, source }
}

/// One script call.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The environment's interpreter (`<env>/bin/python`); absolute.
    pub python: PathBuf,
    /// The environment directory, exposed read-only in the sandbox; absolute.
    pub env_dir: PathBuf,
    /// The script's source.
    pub code: String,
    /// Written to the script's stdin as JSON, then stdin is closed.
    pub arguments: Value,
    /// Wall-clock limit for the script (default [`DEFAULT_TIMEOUT`]). Also sets the CPU-time
    /// rlimit to this plus one second (SIGXCPU), hard limit one second later (SIGKILL).
    pub timeout: Duration,
    /// Address-space limit per process (`RLIMIT_AS`), and with the `cgroup-memory` layer the
    /// memory limit of the run's whole tree, in bytes (default [`DEFAULT_MEMORY_BYTES`]).
    pub memory_bytes: u64,
    /// Allow network access (default `false`). Enforced only with the `no-network` layer.
    pub network: bool,
    /// Bytes kept of stdout and of stderr each; the rest is read and counted (default
    /// [`DEFAULT_MAX_CAPTURE_BYTES`]).
    pub max_capture_bytes: usize,
    /// Processes and threads the run may have at once (default [`DEFAULT_MAX_PROCESSES`]).
    /// Enforced only with the `cgroup-pids` layer.
    pub max_processes: u32,
    /// Largest file the script may write, in bytes (`RLIMIT_FSIZE`), and the size of its
    /// private `/tmp` in the sandbox (default [`DEFAULT_MAX_FILE_BYTES`]).
    pub max_file_bytes: u64,
    /// Extra environment variables (e.g. secrets). The runner's own (`PATH`, `HOME`, `LANG`,
    /// `PYTHONDONTWRITEBYTECODE`, `OMNIFORGE_FD`, [`SINGLE_THREAD_VARS`], and `TMPDIR` where
    /// it sets one) take precedence.
    pub env: Vec<(String, String)>,
    /// Where the script's side-channel messages go. `None`: requests are answered with an
    /// error; the last `result` still lands in [`RunOutput::result`].
    pub messages: Option<mpsc::Sender<ScriptMessage>>,
}

impl RunSpec {
    /// A run of `code` in `env` with the documented defaults and `{}` as arguments.
    pub fn new(env: &Env, code: impl Into<String>) -> RunSpec {
        RunSpec {
            python: env.python(),
            env_dir: env.path.clone(),
            code: code.into(),
            arguments: Value::Object(Default::default()),
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            network: false,
            max_capture_bytes: DEFAULT_MAX_CAPTURE_BYTES,
            max_processes: DEFAULT_MAX_PROCESSES,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            env: Vec::new(),
            messages: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The process exited with this code. Under bubblewrap, a script killed by signal N
    /// shows as code 128 + N (bubblewrap reports it that way).
    Code(i32),
    /// The process was killed by this signal (without bubblewrap).
    Signal(i32),
    /// The timeout expired; the tree was killed.
    Timeout,
    /// The cancellation token fired (before or during the run); the tree was killed.
    Cancelled,
}

impl Exit {
    /// `true` only for `Code(0)`.
    pub fn is_success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// The first [`RunSpec::max_capture_bytes`] of stdout.
    pub stdout: Vec<u8>,
    /// The first [`RunSpec::max_capture_bytes`] of stderr.
    pub stderr: Vec<u8>,
    /// Bytes of stdout read and dropped beyond the cap.
    pub stdout_truncated_bytes: u64,
    /// Bytes of stderr read and dropped beyond the cap.
    pub stderr_truncated_bytes: u64,
    /// How it ended.
    pub exit: Exit,
    /// Wall time from the call to the end of the run, including any wait for a slot.
    pub duration: Duration,
    /// The last `result` the script sent over the side channel.
    pub result: Option<ScriptResult>,
    /// A limit of the run's cgroups it hit (OOM kill, refused fork), whatever its exit; `None`
    /// also where the layer that would see it is missing (`cgroup-memory`, `cgroup-pids`).
    pub limit: Option<LimitHit>,
}

impl RunOutput {
    /// Replaces the host paths a traceback shows in stderr with short names: the interpreter's
    /// prefix becomes `<python>` and the environment `<env>` (the script itself already reads
    /// `/omniforge/main.py`), so a result says nothing of where the server keeps its data or
    /// its interpreter.
    pub(crate) fn hide_host_paths(&mut self, spec: &RunSpec) {
        let prefix = interpreter_prefix(&spec.python);
        let mut paths: Vec<(String, &str)> = vec![(spec.env_dir.display().to_string(), "<env>")];
        if let Ok(real) = std::fs::canonicalize(&spec.env_dir) {
            paths.push((real.display().to_string(), "<env>"));
        }
        if let Some(prefix) = prefix {
            paths.push((prefix.display().to_string(), "<python>"));
        }
        // Longest first: an environment inside the interpreter's prefix keeps its own name.
        paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        for (path, name) in paths {
            if path.len() > 1 {
                self.stderr = replace_bytes(&self.stderr, path.as_bytes(), name.as_bytes());
            }
        }
    }

    pub(crate) fn empty(exit: Exit, duration: Duration) -> RunOutput {
        RunOutput {
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_truncated_bytes: 0,
            stderr_truncated_bytes: 0,
            exit,
            duration,
            result: None,
            limit: None,
        }
    }
}

/// The installation prefix of the interpreter behind `python` (a venv's `bin/python` is a
/// symlink to it): `<prefix>/bin/pythonX.Y` → `<prefix>`. `None` for `/` (never exposed whole).
pub(crate) fn interpreter_prefix(python: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(python).ok()?;
    let prefix = real.parent()?.parent()?;
    (prefix != Path::new("/")).then(|| prefix.to_owned())
}

/// `haystack` with every `needle` replaced by `with`.
fn replace_bytes(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = rest.windows(needle.len()).position(|w| w == needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(with);
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

pub(crate) fn check_spec(spec: &RunSpec) -> Result<(), RunError> {
    for (what, p) in [("python", &spec.python), ("env_dir", &spec.env_dir)] {
        if !p.is_absolute() || p == Path::new("/") {
            return Err(RunError::InvalidSpec(format!(
                "{what} must be an absolute path below /: {}",
                p.display()
            )));
        }
    }
    if !spec.env_dir.is_dir() {
        return Err(RunError::InvalidSpec(format!(
            "environment {} does not exist",
            spec.env_dir.display()
        )));
    }
    if !spec.python.exists() {
        return Err(RunError::InvalidSpec(format!(
            "interpreter {} does not exist",
            spec.python.display()
        )));
    }
    Ok(())
}
