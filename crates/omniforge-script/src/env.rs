//! Python environments for script tools, built with uv at tool-creation time.
//!
//! The flow is [`Interpreter::resolve`] and [`UvTool::locate_or_install`] once at start-up,
//! then per tool [`EnvBuilder::lock`] (resolve dependencies to a hash-pinned requirements
//! text and an [`Lock::env_id`]) and [`EnvBuilder::build`] (a venv at
//! `<data_dir>/envs/<env_id>/`). Identical locks share one environment. Nothing here runs at
//! call time: a call only executes the environment's interpreter (see [`crate::run`]).
//!
//! Locking uses `uv pip compile --generate-hashes` rather than `uv lock --script` +
//! `uv export`: one command, fed from a requirements file, resolving for the exact pinned
//! interpreter (not a universal lock), whose output is directly what
//! `uv pip install --require-hashes` consumes. PEP 723 blocks are read here
//! ([`pep723_dependencies`]) and their dependency list goes through the same path.
//!
//! uv and the builds run outside the sandbox, with a cleared environment: `PATH`, `HOME`,
//! the proxy and CA variables pass through; `UV_PYTHON` is the pinned interpreter,
//! `UV_PYTHON_DOWNLOADS=never`, `UV_NO_CONFIG=1` (no `uv.toml`/`pyproject.toml` from anywhere),
//! and the cache is `<data_dir>/uv-cache`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

/// The uv version installed when none is found (the same pin as `tests/clients/requirements-uv.txt`).
pub const UV_VERSION: &str = "0.13.9";

/// The helper module installed into every environment as `omniforge.py`.
pub const HELPER_MODULE: &str = include_str!("omniforge.py");

/// Name of the file whose presence marks a complete environment.
const COMPLETE_MARKER: &str = ".omniforge-env";

/// Longest accepted dependency specifier, in bytes.
const MAX_DEPENDENCY_BYTES: usize = 200;

/// How much of uv's stderr an [`EnvError::Uv`] keeps (the end of it), in bytes.
const MAX_STDERR_BYTES: usize = 4000;

/// Environment variables passed through to uv and pip (proxies and CA bundles).
const PASSTHROUGH_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    // The operator's package index (a mirror, a private index, a local directory of files).
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
];

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
    /// A command did not finish within [`EnvConfig::command_timeout`].
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

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnvError {
    let context = context.into();
    move |source| EnvError::Io { context, source }
}

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
    /// # Errors
    /// [`EnvError::Interpreter`] when it does not run within 60 s or its output is unexpected.
    pub async fn resolve(program: &Path) -> Result<Interpreter, EnvError> {
        const PROBE: &str = "import sys, os, json; print(json.dumps([os.path.realpath(sys.executable), \
                             os.path.realpath(sys.base_prefix), '%d.%d.%d' % sys.version_info[:3]]))";
        let fail = |detail: String| EnvError::Interpreter {
            path: program.to_owned(),
            detail,
        };
        // The one command that keeps the server's environment: a pyenv shim needs it to
        // find its interpreter. Everything later runs the resolved path directly.
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
    fn short_version(&self) -> &str {
        match self.version.match_indices('.').nth(1) {
            Some((i, _)) => &self.version[..i],
            None => &self.version,
        }
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
    /// fails), `uv` on the server's `PATH`, `<data_dir>/uv/bin/uv`; otherwise creates the venv
    /// `<data_dir>/uv` with `python -m venv` and installs `uv==`[`UV_VERSION`] into it with
    /// pip (a venv, because Debian refuses system-wide pip installs). Needs the registry only
    /// in that last case.
    ///
    /// # Errors
    /// [`EnvError::UvUnavailable`] when the explicit uv does not run, or [`EnvError::Uv`] /
    /// [`EnvError::Timeout`] when installing fails.
    pub async fn locate_or_install(
        data_dir: &Path,
        explicit: Option<PathBuf>,
        python: &Interpreter,
    ) -> Result<UvTool, EnvError> {
        if let Some(path) = explicit {
            return UvTool::probe(&path)
                .await
                .map_err(|e| EnvError::UvUnavailable(format!("{}: {e}", path.display())));
        }
        if let Some(path) = find_on_path("uv") {
            match UvTool::probe(&path).await {
                Ok(uv) => return Ok(uv),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "uv on PATH does not run")
                }
            }
        }
        let venv = data_dir.join("uv");
        let local = venv.join("bin").join("uv");
        if local.exists() {
            match UvTool::probe(&local).await {
                Ok(uv) => return Ok(uv),
                Err(e) => tracing::warn!(path = %local.display(), error = %e, "reinstalling uv"),
            }
        }
        UvTool::install(data_dir, python).await
    }

    /// Installs `uv==`[`UV_VERSION`] into a fresh venv `<data_dir>/uv` (created with the
    /// pinned interpreter's `venv` module, replacing what is there) and returns it.
    ///
    /// # Errors
    /// [`EnvError::Uv`] / [`EnvError::Timeout`] when `venv` or pip fails (e.g. no registry),
    /// [`EnvError::UvUnavailable`] when the installed uv does not run.
    pub async fn install(data_dir: &Path, python: &Interpreter) -> Result<UvTool, EnvError> {
        let venv = data_dir.join("uv");
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
        UvTool::probe(&local).await.map_err(EnvError::UvUnavailable)
    }

    async fn probe(path: &Path) -> Result<UvTool, String> {
        let mut cmd = Command::new(path);
        cmd.arg("--version")
            .env_clear()
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(30), cmd.output())
            .await
            .map_err(|_| "`uv --version` timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        match text.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["uv", version, ..] if out.status.success() => Ok(UvTool {
                path: path.to_owned(),
                version: (*version).to_owned(),
            }),
            _ => Err(format!(
                "`uv --version` said {:?} ({})",
                text.trim(),
                out.status
            )),
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

fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // Looking a program up on PATH, as a shell would: the one read of the server's
    // environment in this crate besides the pass-through variables.
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Settings of an [`EnvBuilder`].
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// The server's data directory: environments go to `envs/`, uv's cache to `uv-cache/`.
    pub data_dir: PathBuf,
    /// The uv to run.
    pub uv: UvTool,
    /// The pinned interpreter every environment uses.
    pub python: Interpreter,
    /// Allow building packages from source distributions. `false` (the recommended
    /// setting) passes `--only-binary :all:`, so resolution and installs use wheels only and
    /// no package's build code ever runs on the server.
    pub allow_source_builds: bool,
    /// Time limit for each uv command (recommended: 10 minutes; a cold numpy install takes
    /// seconds, a source build can take minutes).
    pub command_timeout: Duration,
}

/// A resolved, hash-pinned set of dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// `requirements.txt` text with `--hash` pins, as `uv pip install --require-hashes` reads it.
    pub requirements: String,
    /// Hex SHA-256 over the requirements, the interpreter (version and path), the build
    /// flags and the helper module: the environment's directory name.
    pub env_id: String,
}

/// A built environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// `<data_dir>/envs/<env_id>`: a venv (`bin/python`, `lib/pythonX.Y/site-packages`).
    pub path: PathBuf,
    /// The [`Lock::env_id`] it was built from.
    pub env_id: String,
}

impl Env {
    /// The environment's interpreter, `<path>/bin/python`.
    pub fn python(&self) -> PathBuf {
        self.path.join("bin").join("python")
    }
}

/// What [`EnvBuilder::build`] reports while it works.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressEvent {
    /// A complete environment with this id already exists; nothing to do.
    Reused,
    /// Creating the venv.
    CreatingVenv,
    /// Installing this many pinned packages.
    Installing {
        /// Number of packages in the lock.
        packages: usize,
    },
    /// One line uv printed while installing (e.g. `Prepared 1 package in 120ms`).
    Output(String),
    /// The environment is complete.
    Installed {
        /// Number of packages installed.
        packages: usize,
    },
}

/// Resolves and builds environments under one data directory.
#[derive(Debug, Clone)]
pub struct EnvBuilder {
    config: EnvConfig,
}

impl EnvBuilder {
    /// A builder; creates no directory until it builds.
    pub fn new(config: EnvConfig) -> EnvBuilder {
        EnvBuilder { config }
    }

    /// `<data_dir>/envs`: the directory [`gc`] sweeps.
    pub fn envs_dir(&self) -> PathBuf {
        self.config.data_dir.join("envs")
    }

    /// The settings.
    pub fn config(&self) -> &EnvConfig {
        &self.config
    }

    /// Resolves `deps` (PEP 508 registry requirements, e.g. `humanize>=4`) to a hash-pinned
    /// lock with `uv pip compile --generate-hashes` for the pinned interpreter. No
    /// dependencies give an empty lock without running uv.
    ///
    /// # Errors
    /// [`EnvError::InvalidDependency`] for URLs, paths, options or odd characters;
    /// [`EnvError::Uv`] when resolution fails (unknown package, no wheel under wheels-only,
    /// no network), with uv's explanation.
    pub async fn lock(&self, deps: &[String]) -> Result<Lock, EnvError> {
        for dep in deps {
            validate_dependency(dep)?;
        }
        if deps.is_empty() {
            return Ok(self.lock_from_requirements(String::new()));
        }
        let work = tempfile::Builder::new()
            .prefix("omniforge-lock-")
            .tempdir()
            .map_err(io_err("creating a temporary directory"))?;
        let input = work.path().join("requirements.in");
        let mut text = deps.join("\n");
        text.push('\n');
        std::fs::write(&input, text).map_err(io_err("writing requirements.in"))?;
        // Resolving may build a source distribution to read its metadata: with source builds
        // allowed, in the sandbox.
        let (mut cmd, _private) = self.build_command(work.path(), &[work.path()])?;
        cmd.args([
            "pip",
            "compile",
            "--generate-hashes",
            "--no-header",
            "--no-annotate",
            "--quiet",
        ])
        .arg("--python")
        .arg(self.config.python.executable());
        if !self.config.allow_source_builds {
            cmd.args(["--only-binary", ":all:"]);
        }
        cmd.arg(&input);
        let requirements =
            run_captured(cmd, "uv pip compile", self.config.command_timeout, &|_| {}).await?;
        drop(_private);
        Ok(self.lock_from_requirements(requirements))
    }

    /// The [`Lock`] for an already pinned requirements text (e.g. one stored with a tool
    /// version): recomputes the `env_id` for this builder's interpreter and flags.
    pub fn lock_from_requirements(&self, requirements: String) -> Lock {
        let mut h = Sha256::new();
        h.update(b"omniforge-env v1\n");
        h.update(format!(
            "python {} {}\nallow_source_builds {}\nhelper ",
            self.config.python.version(),
            self.config.python.executable().display(),
            self.config.allow_source_builds
        ));
        h.update(Sha256::digest(HELPER_MODULE.as_bytes()));
        h.update(b"\nrequirements\n");
        h.update(requirements.as_bytes());
        Lock {
            requirements,
            env_id: hex(&h.finalize()),
        }
    }

    /// Builds the environment for `lock` at `<data_dir>/envs/<env_id>/`, or reuses it when a
    /// complete one exists. Builds in a temporary sibling directory and renames it into place,
    /// so an environment directory is either complete or absent; of two concurrent builds of
    /// the same lock, the first rename wins and the other's work is discarded.
    ///
    /// Steps: `uv venv --relocatable --python <interp>`, `uv pip install --require-hashes
    /// --compile-bytecode --link-mode copy` (plus `--only-binary :all:` unless
    /// [`EnvConfig::allow_source_builds`]), then the helper module `omniforge.py` into
    /// site-packages (byte-compiled). `progress` sees each step and every line uv prints.
    ///
    /// # Errors
    /// [`EnvError::Uv`] with uv's stderr when a step fails, [`EnvError::Timeout`], or
    /// [`EnvError::Io`].
    pub async fn build(
        &self,
        lock: &Lock,
        progress: impl Fn(ProgressEvent) + Send + Sync,
    ) -> Result<Env, EnvError> {
        let envs = self.envs_dir();
        let target = envs.join(&lock.env_id);
        let env = Env {
            path: target.clone(),
            env_id: lock.env_id.clone(),
        };
        if target.join(COMPLETE_MARKER).is_file() {
            progress(ProgressEvent::Reused);
            return Ok(env);
        }
        std::fs::create_dir_all(&envs).map_err(io_err(format!("creating {}", envs.display())))?;
        let tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempdir_in(&envs)
            .map_err(io_err(format!(
                "creating a build directory in {}",
                envs.display()
            )))?;
        let dir = tmp.path();
        let timeout = self.config.command_timeout;
        let python = self.config.python.executable();

        progress(ProgressEvent::CreatingVenv);
        let mut cmd = self.uv_command(dir);
        cmd.args(["venv", "--quiet", "--relocatable", "--python"])
            .arg(python)
            .arg(dir);
        run_captured(cmd, "uv venv", timeout, &|_| {}).await?;

        // The helper module first, with the pinned interpreter and no site-packages: nothing
        // runs from the environment outside the sandbox after packages were installed into it.
        let site = dir
            .join("lib")
            .join(format!("python{}", self.config.python.short_version()))
            .join("site-packages");
        let helper = site.join("omniforge.py");
        std::fs::write(&helper, HELPER_MODULE)
            .map_err(io_err(format!("writing {}", helper.display())))?;
        let mut cmd = Command::new(python);
        cmd.args(["-I", "-S", "-m", "py_compile"]).arg(&helper);
        run_captured(cmd, "py_compile omniforge.py", timeout, &|_| {}).await?;

        let packages = lock
            .requirements
            .lines()
            .filter(|l| is_requirement_line(l))
            .count();
        let requirements = dir.join("requirements.txt");
        std::fs::write(&requirements, &lock.requirements)
            .map_err(io_err("writing requirements.txt"))?;
        if packages > 0 {
            progress(ProgressEvent::Installing { packages });
            let (mut cmd, private) = self.build_command(dir, &[dir])?;
            cmd.args([
                "pip",
                "install",
                "--require-hashes",
                "--compile-bytecode",
                "--link-mode",
                "copy",
            ])
            .arg("--python")
            .arg(dir.join("bin").join("python"));
            if !self.config.allow_source_builds {
                cmd.args(["--only-binary", ":all:"]);
            }
            cmd.arg("-r").arg(&requirements);
            let report = |line: &str| progress(ProgressEvent::Output(line.to_owned()));
            run_captured(cmd, "uv pip install", timeout, &report).await?;
            drop(private);
        }
        check_interpreter(dir, python)?;
        // `create_new`: never through a link the installed packages may have left there.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(COMPLETE_MARKER))
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, format!("{}\n", lock.env_id).as_bytes())
            })
            .map_err(io_err("writing the completion marker"))?;

        match std::fs::rename(dir, &target) {
            Ok(()) => {
                // The directory now lives at `target`; nothing left to clean up.
                let _ = tmp.keep();
            }
            Err(e) if target.join(COMPLETE_MARKER).is_file() => {
                tracing::debug!(error = %e, env = %lock.env_id, "environment built concurrently; keeping the other");
            }
            Err(e) => {
                return Err(io_err(format!(
                    "moving the environment to {}",
                    target.display()
                ))(e));
            }
        }
        progress(ProgressEvent::Installed { packages });
        Ok(env)
    }

    /// A uv command for a step that may run a package's build code (resolving or installing):
    /// plain [`Self::uv_command`] when only wheels are allowed; with source builds, uv inside
    /// the build sandbox (see [`crate::sandbox`]), the host network shared, writable only
    /// `writable` and a private cache and temporary directory (returned: keep it until the
    /// command has finished), nothing of the data directory, database or secrets visible.
    ///
    /// # Errors
    /// [`EnvError::BuildSandbox`] when source builds are allowed and bubblewrap does not work.
    fn build_command(
        &self,
        cwd: &Path,
        writable: &[&Path],
    ) -> Result<(Command, Option<BuildScratch>), EnvError> {
        if !self.config.allow_source_builds {
            return Ok((self.uv_command(cwd), None));
        }
        let sandbox = crate::sandbox::build_sandbox().map_err(EnvError::BuildSandbox)?;
        let private = tempfile::Builder::new()
            .prefix("omniforge-build-")
            .tempdir()
            .map_err(io_err("creating the build's private directory"))?;
        for sub in ["cache", "tmp"] {
            std::fs::create_dir(private.path().join(sub))
                .map_err(io_err("creating the build's private directory"))?;
        }
        let uv = std::fs::canonicalize(self.config.uv.path()).map_err(io_err(format!(
            "resolving {}",
            self.config.uv.path().display()
        )))?;
        let mut read_only = vec![self.config.python.prefix().to_owned()];
        // A local directory named as the operator's package source must be visible.
        for var in [
            "UV_FIND_LINKS",
            "UV_INDEX_URL",
            "UV_DEFAULT_INDEX",
            "UV_EXTRA_INDEX_URL",
        ] {
            if let Some(v) = std::env::var_os(var) {
                let v = PathBuf::from(v);
                let v = v.strip_prefix("file://").map(Path::to_owned).unwrap_or(v);
                if v.is_absolute() && v.exists() {
                    read_only.push(v);
                }
            }
        }
        let mut rw: Vec<&Path> = writable.to_vec();
        rw.push(private.path());
        let seccomp = sandbox
            .seccomp_memfd()
            .map_err(io_err("holding the seccomp filter"))?;
        let fd = seccomp.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        let (bwrap, args) = sandbox.uv_args(&uv, &read_only, &rw, cwd, fd);
        let mut cmd = Command::new(bwrap);
        cmd.args(args)
            .env_clear()
            .envs(passthrough_env())
            .env("HOME", "/tmp")
            .env("TMPDIR", private.path().join("tmp"))
            .env("UV_CACHE_DIR", private.path().join("cache"))
            .env("UV_PYTHON", self.config.python.executable())
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_CONFIG", "1")
            .env("UV_NO_PROGRESS", "1")
            .env("NO_COLOR", "1");
        crate::sys::install(
            &mut cmd,
            crate::sys::ChildSetup {
                limits: Vec::new(),
                cgroup_procs: Vec::new(),
                inherit_fds: fd.into_iter().collect(),
                seccomp: None,
            },
        );
        Ok((cmd, Some((private, seccomp))))
    }

    fn uv_command(&self, cwd: &Path) -> Command {
        let mut cmd = Command::new(self.config.uv.path());
        cmd.current_dir(cwd)
            .env_clear()
            .envs(passthrough_env())
            .env("UV_CACHE_DIR", self.config.data_dir.join("uv-cache"))
            .env("UV_PYTHON", self.config.python.executable())
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_CONFIG", "1")
            .env("UV_NO_PROGRESS", "1")
            .env("NO_COLOR", "1");
        cmd
    }
}

fn passthrough_env() -> Vec<(OsString, OsString)> {
    let mut vars: Vec<(OsString, OsString)> = PASSTHROUGH_VARS
        .iter()
        .filter_map(|k| std::env::var_os(k).map(|v| (OsString::from(k), v)))
        .collect();
    vars.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    if let Some(home) = std::env::var_os("HOME") {
        vars.push(("HOME".into(), home));
    }
    vars
}

/// What a sandboxed build step holds until its command has finished: the private cache and
/// temporary directory, and the descriptor bubblewrap reads the seccomp program from.
type BuildScratch = (tempfile::TempDir, Option<std::os::fd::OwnedFd>);

/// Every `bin/python*` of the environment still resolves to the pinned interpreter: installed
/// packages (a wheel's scripts, a build's code) may have replaced it, and the runner derives
/// what it mounts from it.
fn check_interpreter(dir: &Path, pinned: &Path) -> Result<(), EnvError> {
    let pinned =
        std::fs::canonicalize(pinned).map_err(io_err(format!("resolving {}", pinned.display())))?;
    let bin = dir.join("bin");
    let entries = std::fs::read_dir(&bin).map_err(io_err(format!("reading {}", bin.display())))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("python") {
            continue;
        }
        match std::fs::canonicalize(entry.path()) {
            Ok(real) if real == pinned => {}
            other => {
                return Err(EnvError::Tampered(format!(
                    "bin/{} resolves to {:?}, not the pinned interpreter {}",
                    name.to_string_lossy(),
                    other.map(|p| p.display().to_string()),
                    pinned.display()
                )));
            }
        }
    }
    Ok(())
}

fn is_requirement_line(line: &str) -> bool {
    let l = line.trim_start();
    !l.is_empty() && !l.starts_with('#') && !l.starts_with('-')
}

/// Runs `cmd` (in its own process group, killed with it on timeout), feeding each stderr line
/// to `on_line`; returns stdout on success.
async fn run_captured(
    mut cmd: Command,
    step: &'static str,
    timeout: Duration,
    on_line: &(dyn Fn(&str) + Send + Sync),
) -> Result<String, EnvError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(io_err(format!("starting {step}")))?;
    let pgid = child.id();
    let mut stdout = child.stdout.take().expect("stdout was set to piped above");
    let stderr = child.stderr.take().expect("stderr was set to piped above");
    let work = async {
        let mut out = Vec::new();
        let mut err_tail = String::new();
        let read_out = stdout.read_to_end(&mut out);
        let read_err = async {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                on_line(&line);
                err_tail.push_str(&line);
                err_tail.push('\n');
                if err_tail.len() > 4 * MAX_STDERR_BYTES {
                    err_tail.drain(..err_tail.len() - MAX_STDERR_BYTES);
                }
            }
        };
        let (r, ()) = tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (r, status, out, err_tail)
    };
    let (read, status, out, err_tail) = match tokio::time::timeout(timeout, work).await {
        Ok(v) => v,
        Err(_) => {
            if let Some(pgid) = pgid {
                crate::sandbox::kill_group(pgid);
            }
            return Err(EnvError::Timeout { step, timeout });
        }
    };
    read.map_err(io_err(format!("reading {step} output")))?;
    let status: ExitStatus = status.map_err(io_err(format!("waiting for {step}")))?;
    tracing::debug!(step, elapsed = ?started.elapsed(), %status, "environment command finished");
    if !status.success() {
        return Err(EnvError::Uv {
            step,
            status: status.to_string(),
            stderr: tail(&err_tail),
        });
    }
    String::from_utf8(out).map_err(|_| EnvError::Uv {
        step,
        status: status.to_string(),
        stderr: "output is not UTF-8".into(),
    })
}

fn tail(text: &str) -> String {
    let t = text.trim();
    if t.len() <= MAX_STDERR_BYTES {
        return t.to_owned();
    }
    let mut start = t.len() - MAX_STDERR_BYTES;
    while !t.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &t[start..])
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Refuses anything but a registry requirement: it must start with a letter or digit (no
/// options, no `.`/paths), and contain no URL or path characters (`@ / \ :`), no newline or
/// other control character, no `#`.
fn validate_dependency(dep: &str) -> Result<(), EnvError> {
    let fail = |reason| {
        Err(EnvError::InvalidDependency {
            dependency: dep.to_owned(),
            reason,
        })
    };
    if dep.len() > MAX_DEPENDENCY_BYTES {
        return fail("longer than 200 bytes");
    }
    if !dep.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail("must start with a package name");
    }
    if dep
        .chars()
        .any(|c| c.is_control() || matches!(c, '@' | '/' | '\\' | ':' | '#'))
    {
        return fail("only registry requirements are allowed (no URLs, paths or comments)");
    }
    Ok(())
}

/// The `dependencies` of a PEP 723 `# /// script` block in `code`; empty when there is none.
///
/// # Errors
/// [`EnvError::Pep723`] when there are two `script` blocks, a block is not closed, a line
/// inside it is not a comment, or its TOML is invalid.
pub fn pep723_dependencies(code: &str) -> Result<Vec<String>, EnvError> {
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        dependencies: Vec<String>,
    }
    let mut blocks = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let Some(kind) = line.trim_end().strip_prefix("# /// ") else {
            continue;
        };
        if kind != "script" {
            continue;
        }
        let mut toml_text = String::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            let inner = inner.trim_end_matches('\r');
            if inner.trim_end() == "# ///" {
                closed = true;
                break;
            }
            let content = if inner == "#" {
                ""
            } else if let Some(rest) = inner.strip_prefix("# ") {
                rest
            } else {
                return Err(EnvError::Pep723(format!(
                    "line {inner:?} inside the block is not a `# ` comment"
                )));
            };
            toml_text.push_str(content);
            toml_text.push('\n');
        }
        if !closed {
            return Err(EnvError::Pep723(
                "the `# /// script` block is not closed by `# ///`".into(),
            ));
        }
        blocks.push(toml_text);
    }
    match blocks.as_slice() {
        [] => Ok(Vec::new()),
        [one] => {
            let meta: Metadata =
                toml::from_str(one).map_err(|e| EnvError::Pep723(e.to_string()))?;
            Ok(meta.dependencies)
        }
        _ => Err(EnvError::Pep723(
            "more than one `# /// script` block".into(),
        )),
    }
}

/// Removes every environment directory in `envs_dir` whose name is not in `in_use`, and
/// build directories (`.tmp-*`) left behind more than an hour ago by an interrupted build.
/// Returns the names removed. A missing `envs_dir` is not an error.
///
/// The caller must make sure no run uses a removed environment (e.g. by holding the lock it
/// takes around builds while collecting).
///
/// # Errors
/// [`EnvError::Io`] when the directory cannot be read or an entry cannot be removed.
pub fn gc(envs_dir: &Path, in_use: &HashSet<String>) -> Result<Vec<String>, EnvError> {
    let entries = match std::fs::read_dir(envs_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(format!("reading {}", envs_dir.display()))(e)),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err(format!("reading {}", envs_dir.display())))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if in_use.contains(&name) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if name.starts_with(".tmp-") {
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok());
            if age.is_none_or(|a| a < Duration::from_secs(3600)) {
                continue;
            }
        }
        let path = entry.path();
        std::fs::remove_dir_all(&path).map_err(io_err(format!("removing {}", path.display())))?;
        removed.push(name);
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_interpreter_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let pinned = std::fs::canonicalize("/bin/sh").unwrap();
        std::os::unix::fs::symlink(&pinned, bin.join("python")).unwrap();
        std::fs::write(bin.join("activate"), "").unwrap();
        check_interpreter(dir.path(), &pinned).unwrap();
        // A package replaced python3 with its own program.
        std::fs::write(bin.join("python3"), "#!/bin/sh\n").unwrap();
        let err = check_interpreter(dir.path(), &pinned).unwrap_err();
        assert!(err.to_string().contains("bin/python3"), "{err}");
    }

    #[test]
    fn pep723_blocks() {
        let code = "# /// script\n# requires-python = \">=3.11\"\n# dependencies = [\n#   \"humanize>=4\",\n#   \"rich\",\n# ]\n# ///\nprint(1)\n";
        assert_eq!(pep723_dependencies(code).unwrap(), ["humanize>=4", "rich"]);
        assert!(pep723_dependencies("print(1)\n").unwrap().is_empty());
        assert!(pep723_dependencies("# /// script\n# dependencies = []\n").is_err());
        assert!(pep723_dependencies("# /// script\nx = 1\n# ///\n").is_err());
        let two = "# /// script\n# ///\n# /// script\n# ///\n";
        assert!(pep723_dependencies(two).is_err());
        // Other block types are ignored.
        assert!(
            pep723_dependencies("# /// other\n# x = 1\n# ///\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn dependency_validation() {
        for ok in [
            "humanize",
            "python-dateutil>=2.8",
            "requests[socks]==2.32.3",
            "numpy; python_version >= \"3.10\"",
        ] {
            assert!(validate_dependency(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-e .",
            ".",
            "--index-url=x",
            "pkg @ https://x/y.whl",
            "file:///etc/passwd",
            "a\nb",
            "../x",
            "x # y",
        ] {
            assert!(validate_dependency(bad).is_err(), "{bad}");
        }
    }

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
