//! The pinned interpreter (resolved once, never a shim), its syntax check, and uv (found or
//! installed).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::command::run_captured;
use super::error::{EnvError, SyntaxError, io_err};
use super::layout::Layout;
use crate::host::HostEnv;

/// The uv version installed when none is found (the same pin as `tests/clients/requirements-uv.txt`).
pub const UV_VERSION: &str = "0.13.9";

/// A sensible limit for [`Interpreter::check_syntax`]: 30 s (compiling a large script takes
/// milliseconds; the rest is the interpreter starting on a loaded machine).
pub const SYNTAX_CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// The pinned Python interpreter: a real executable (never a pyenv shim), resolved once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    executable: PathBuf,
    prefix: PathBuf,
    version: String,
}

impl Interpreter {
    /// Runs `program` once and records its real executable path (symlinks and shims
    /// resolved), installation prefix and version.
    ///
    /// This is the one command that inherits the server's whole environment: a pyenv shim
    /// needs it to find its interpreter. Everything later runs the resolved path directly.
    ///
    /// # Errors
    /// [`EnvError::Interpreter`] when it does not run within 60 s or its output is unexpected.
    pub async fn resolve(program: &Path) -> Result<Interpreter, EnvError> {
        const PROBE: &str = "import sys, os, json; print(json.dumps([os.path.realpath(sys.executable), \
                             os.path.realpath(sys.base_prefix), '%d.%d.%d' % sys.version_info[:3]]))";
        let fail = |detail: String| EnvError::Interpreter {
            path: program.to_owned(),
            detail,
        };
        let mut cmd = Command::new(program);
        cmd.args(["-I", "-c", PROBE])
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .map_err(|_| fail("timed out".into()))?
            .map_err(|e| fail(e.to_string()))?;
        if !out.status.success() {
            return Err(fail(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let (executable, prefix, version): (PathBuf, PathBuf, String) =
            serde_json::from_slice(&out.stdout).map_err(|e| fail(e.to_string()))?;
        Ok(Interpreter {
            executable,
            prefix,
            version,
        })
    }

    /// The real interpreter executable.
    pub fn executable(&self) -> &Path {
        &self.executable
    }

    /// `sys.base_prefix`, resolved: the tree the sandbox must expose read-only.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The version, e.g. `3.11.7`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `major.minor`, e.g. `3.11` (the `lib/pythonX.Y` directory name).
    pub(crate) fn short_version(&self) -> &str {
        match self.version.match_indices('.').nth(1) {
            Some((i, _)) => &self.version[..i],
            None => &self.version,
        }
    }

    /// Compiles `code` (without running it) with this interpreter: `python -I` with an empty
    /// environment, the code on stdin, `compile(src, 'tool.py', 'exec')`. Compiling runs no
    /// code of the script or of any package, so this happens outside the sandbox. The process
    /// is killed when `timeout` passes or the future is dropped.
    ///
    /// # Errors
    /// [`SyntaxError::Invalid`] with the line, column and message when the code does not
    /// compile; [`SyntaxError::Timeout`]; [`SyntaxError::Io`] when the interpreter cannot run.
    pub async fn check_syntax(&self, code: &str, timeout: Duration) -> Result<(), SyntaxError> {
        const CHECK: &str = "import sys\nsrc = sys.stdin.read()\ntry:\n    compile(src, 'tool.py', 'exec')\nexcept SyntaxError as e:\n    print(f'line {e.lineno}, column {e.offset}: {e.msg}: {(e.text or \"\").strip()}')\n    sys.exit(1)\n";
        let io = |source| SyntaxError::Io {
            python: self.executable.clone(),
            source,
        };
        let mut child = Command::new(&self.executable)
            .args(["-I", "-c", CHECK])
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(io)?;
        let stdin = child.stdin.take();
        let check = async {
            if let Some(mut stdin) = stdin {
                // A failure here shows up as the interpreter's own error below.
                let _ = stdin.write_all(code.as_bytes()).await;
            }
            child.wait_with_output().await
        };
        let output = tokio::time::timeout(timeout, check)
            .await
            .map_err(|_| SyntaxError::Timeout(timeout))?
            .map_err(io)?;
        if output.status.success() {
            return Ok(());
        }
        let mut detail = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if detail.is_empty() {
            detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
        }
        Err(SyntaxError::Invalid { detail })
    }
}

/// A located, working uv executable.
#[derive(Debug, Clone)]
pub struct UvTool {
    path: PathBuf,
    version: String,
}

impl UvTool {
    /// Finds uv, in this order: `explicit` (the `--uv PATH` option; no fallback when it
    /// fails), `uv` on the host's `PATH` ([`HostEnv::path`]), `<data_dir>/uv/bin/uv`;
    /// otherwise creates the venv `<data_dir>/uv` with `python -m venv` and installs
    /// `uv==`[`UV_VERSION`] into it with pip (a venv, because Debian refuses system-wide pip
    /// installs). Needs the registry only in that last case.
    ///
    /// # Errors
    /// [`EnvError::UvUnavailable`] when the explicit uv does not run, or [`EnvError::Uv`] /
    /// [`EnvError::Timeout`] when installing fails.
    pub async fn locate_or_install(
        data_dir: &Path,
        explicit: Option<PathBuf>,
        python: &Interpreter,
        host: &HostEnv,
    ) -> Result<UvTool, EnvError> {
        if let Some(path) = explicit {
            return UvTool::probe(&path).await;
        }
        if let Some(path) = host.find_program("uv") {
            match UvTool::probe(&path).await {
                Ok(uv) => return Ok(uv),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "uv on PATH does not run")
                }
            }
        }
        let local = Layout::new(data_dir).uv_venv_dir().join("bin/uv");
        if local.exists() {
            match UvTool::probe(&local).await {
                Ok(uv) => return Ok(uv),
                Err(e) => tracing::warn!(path = %local.display(), error = %e, "reinstalling uv"),
            }
        }
        UvTool::install(data_dir, python).await
    }

    /// Installs `uv==`[`UV_VERSION`] into a fresh venv `<data_dir>/uv` (created with the
    /// pinned interpreter's `venv` module, replacing what is there) and returns it. `venv` and
    /// pip inherit the server's environment (pip's own settings, such as `PIP_INDEX_URL`,
    /// apply).
    ///
    /// # Errors
    /// [`EnvError::Uv`] / [`EnvError::Timeout`] when `venv` or pip fails (e.g. no registry),
    /// [`EnvError::UvUnavailable`] when the installed uv does not run.
    pub async fn install(data_dir: &Path, python: &Interpreter) -> Result<UvTool, EnvError> {
        let venv = Layout::new(data_dir).uv_venv_dir();
        let local = venv.join("bin").join("uv");
        tracing::info!(version = UV_VERSION, dir = %venv.display(), "installing uv");
        std::fs::create_dir_all(data_dir)
            .map_err(io_err(format!("creating {}", data_dir.display())))?;
        let timeout = Duration::from_secs(600);
        let mut cmd = Command::new(python.executable());
        cmd.args(["-I", "-m", "venv", "--clear"]).arg(&venv);
        run_captured(cmd, "python -m venv", timeout, &|_| {}).await?;
        let mut cmd = Command::new(venv.join("bin").join("python"));
        cmd.args([
            "-I",
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
        ])
        .arg(format!("uv=={UV_VERSION}"));
        run_captured(cmd, "pip install uv", timeout, &|_| {}).await?;
        UvTool::probe(&local).await
    }

    async fn probe(path: &Path) -> Result<UvTool, EnvError> {
        let fail = |why: String| EnvError::UvUnavailable(format!("{}: {why}", path.display()));
        let mut cmd = Command::new(path);
        cmd.arg("--version")
            .env_clear()
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
            .await
            .map_err(|_| fail("`uv --version` timed out".to_owned()))?
            .map_err(|e| fail(e.to_string()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        match text.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["uv", version, ..] if out.status.success() => Ok(UvTool {
                path: path.to_owned(),
                version: (*version).to_owned(),
            }),
            _ => Err(fail(format!(
                "`uv --version` said {:?} ({})",
                text.trim(),
                out.status
            ))),
        }
    }

    /// The uv executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// uv's version, e.g. `0.13.9`.
    pub fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_version() {
        let i = Interpreter {
            executable: "/x".into(),
            prefix: "/".into(),
            version: "3.11.7".into(),
        };
        assert_eq!(i.short_version(), "3.11");
    }
}
