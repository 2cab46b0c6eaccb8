//! The syntax check of a script's code: byte-compiled by the pinned interpreter, so an
//! author learns of a syntax error when the tool is created, not when it is called.

use std::path::Path;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

/// Why code was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyntaxError {
    /// The interpreter could not be started.
    #[error("cannot start {python}: {source}")]
    Start {
        /// The interpreter.
        python: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The check took more than 30 s.
    #[error("the syntax check timed out")]
    Timeout,
    /// The check could not be completed.
    #[error("syntax check failed: {0}")]
    Failed(#[source] std::io::Error),
    /// The code does not compile: line, column and message.
    #[error("does not compile: {0}")]
    Invalid(String),
}

/// Byte-compiles `code` with `python`; the error names the line.
///
/// # Errors
/// The code does not compile, or the check could not run.
pub(crate) async fn check_code(python: &Path, code: &str) -> Result<(), SyntaxError> {
    const CHECK: &str = "import sys\nsrc = sys.stdin.read()\ntry:\n    compile(src, 'tool.py', 'exec')\nexcept SyntaxError as e:\n    print(f'line {e.lineno}, column {e.offset}: {e.msg}: {(e.text or \"\").strip()}')\n    sys.exit(1)\n";
    let mut child = tokio::process::Command::new(python)
        .args(["-I", "-c", CHECK])
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| SyntaxError::Start {
            python: python.display().to_string(),
            source,
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(code.as_bytes()).await;
    }
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .map_err(|_| SyntaxError::Timeout)?
        .map_err(SyntaxError::Failed)?;
    if output.status.success() {
        Ok(())
    } else {
        let detail = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let detail = if detail.is_empty() {
            String::from_utf8_lossy(&output.stderr).trim().to_owned()
        } else {
            detail
        };
        Err(SyntaxError::Invalid(detail))
    }
}
