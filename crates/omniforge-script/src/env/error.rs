//! The errors of environment resolution, building and the syntax check.

use std::path::PathBuf;
use std::time::Duration;

/// Errors of environment resolution and building.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// A dependency specifier is not a plain registry requirement (`name[extras] specifiers ;
    /// markers`). URLs, paths and pip options are refused: dependencies come from the registry.
    #[error("invalid dependency {dependency:?}: {reason}")]
    InvalidDependency {
        /// The specifier as given.
        dependency: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// The PEP 723 `# /// script` block is malformed.
    #[error("invalid PEP 723 script metadata: {0}")]
    Pep723(String),
    /// The interpreter could not be run or reported nonsense.
    #[error("python interpreter {path:?} is not usable: {detail}")]
    Interpreter {
        /// The program that was tried.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// uv was not found and could not be installed, or the one given does not run.
    #[error("uv is not usable: {0}")]
    UvUnavailable(String),
    /// A uv (or pip) command failed. `stderr` is the end of its error output, trimmed.
    #[error("{step} failed ({status}): {stderr}")]
    Uv {
        /// Which step: `uv pip compile`, `uv venv`, `uv pip install`, `pip install uv`, ….
        step: &'static str,
        /// Exit status, as text.
        status: String,
        /// The end of the command's stderr, trimmed.
        stderr: String,
    },
    /// A command did not finish within [`EnvConfig::command_timeout`](crate::EnvConfig::command_timeout).
    #[error("{step} timed out after {timeout:?}")]
    Timeout {
        /// Which step.
        step: &'static str,
        /// The limit that was hit.
        timeout: Duration,
    },
    /// Source builds are allowed, but the sandbox they must run in is not available.
    #[error("source builds run inside bubblewrap, which is not usable here: {0}")]
    BuildSandbox(String),
    /// A sandboxed build left the environment in a state the server will not use (e.g. its
    /// interpreter replaced).
    #[error("the build tampered with the environment: {0}")]
    Tampered(String),
    /// A filesystem or process error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

pub(crate) fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnvError {
    let context = context.into();
    move |source| EnvError::Io { context, source }
}
/// Why [`Interpreter::check_syntax`](crate::Interpreter::check_syntax) refused code, or could
/// not tell.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyntaxError {
    /// The code does not compile; `detail` names the line and column
    /// (`line 2, column 5: invalid syntax: x = = 1`).
    #[error("does not compile: {detail}")]
    Invalid {
        /// What the compiler said, with the position.
        detail: String,
    },
    /// The check did not finish within its time limit.
    #[error("the syntax check timed out after {0:?}")]
    Timeout(Duration),
    /// The interpreter could not be started or waited for.
    #[error("syntax check failed: cannot run {}: {source}", .python.display())]
    Io {
        /// The interpreter.
        python: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
