//! Why a layer is unavailable, and the self-tests that find out.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::filter::FilterError;

/// Why a layer is not used. Its text becomes the layer's detail in `doctor` and `/healthz`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unavailable {
    /// The runner's sandbox level is `off`.
    #[error("sandbox level is off")]
    LevelOff,
    /// [`RunnerConfig::disabled_layers`](crate::RunnerConfig::disabled_layers) names it.
    #[error("disabled by the runner's configuration")]
    Disabled,
    /// A program the layer needs is not installed.
    #[error("{0} is not installed")]
    NotInstalled(&'static str),
    /// Switching uids needs root.
    #[error("the server is not root")]
    NotRoot,
    /// No Landlock helper executable was given or recorded.
    #[error("no helper executable to apply it (the runner was given none)")]
    NoHelper,
    /// The kernel lacks what the layer needs.
    #[error("{0}")]
    Kernel(&'static str),
    /// A self-test program could not be started.
    #[error("cannot start {what}: {error}")]
    Start {
        /// The program.
        what: String,
        /// The error, as text.
        error: String,
    },
    /// A self-test failed.
    #[error("{what} does not work here ({status}): {stderr}")]
    Failed {
        /// The program.
        what: String,
        /// Its exit status.
        status: String,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// A self-test did not finish within 10 s.
    #[error("{what} did not finish its self-test")]
    Hung {
        /// The program.
        what: String,
    },
    /// The seccomp programs do not compile for this machine.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

/// Runs `cmd` with a cleared environment and a 10 s limit; its stdout when it succeeds.
pub(crate) fn probe(mut cmd: std::process::Command, what: &str) -> Result<String, Unavailable> {
    let mut child = cmd
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Unavailable::Start {
            what: what.to_owned(),
            error: e.to_string(),
        })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                let mut err = String::new();
                if let Some(mut s) = child.stdout.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut out);
                }
                if let Some(mut s) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut s, &mut err);
                }
                return if status.success() {
                    Ok(out)
                } else {
                    Err(Unavailable::Failed {
                        what: what.to_owned(),
                        status: status.to_string(),
                        stderr: err.trim().to_owned(),
                    })
                };
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Unavailable::Hung {
                    what: what.to_owned(),
                });
            }
        }
    }
}

/// The `true` program the self-tests run.
pub(crate) fn true_program() -> Result<&'static str, Unavailable> {
    ["/usr/bin/true", "/bin/true"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .ok_or(Unavailable::NotInstalled(
            "`true` (needed to test the sandbox)",
        ))
}
