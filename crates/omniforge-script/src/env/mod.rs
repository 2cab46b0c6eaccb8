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
//! the proxy and CA variables pass through; `UV_SYSTEM_CERTS=1` (the system trust store, with
//! `SSL_CERT_FILE`'s CA) unless the operator set it; `UV_PYTHON` is the pinned interpreter,
//! `UV_PYTHON_DOWNLOADS=never`, `UV_NO_CONFIG=1` (no `uv.toml`/`pyproject.toml` from anywhere),
//! and the cache is `<data_dir>/uv-cache`.
//!
//! # Layout
//!
//! - `error`: [`EnvError`] and [`SyntaxError`];
//! - `layout`: [`Layout`], where environments and the rest live in the data directory, and
//!   [`gc`];
//! - `python`: the pinned [`Interpreter`] (and its syntax check) and [`UvTool`];
//! - `deps`: dependency specifiers and [`pep723_dependencies`];
//! - `command`: one uv/pip command run to its end, with a timeout;
//! - here: [`EnvBuilder`], which locks and builds.

mod command;
mod deps;
mod error;
mod layout;
mod python;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::process::Command;

use self::command::run_captured;
use self::deps::validate_dependency;
pub use self::deps::{pep723_dependencies, pep723_tool_table};
use self::error::io_err;
pub use self::error::{EnvError, SyntaxError};
pub use self::layout::{Env, Layout, gc};
pub use self::python::{Interpreter, SYNTAX_CHECK_TIMEOUT, UV_VERSION, UvTool};
use crate::host::HostEnv;

/// The helper module installed into every environment as `omniforge.py`.
pub const HELPER_MODULE: &str = include_str!("../omniforge.py");

use layout::COMPLETE_MARKER;

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
    /// What uv gets of the server's environment (`HOME`, proxies, CA bundles, package
    /// index) and where temporary directories go.
    pub host: HostEnv,
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

impl std::fmt::Display for ProgressEvent {
    /// A short line for people: `installing 1 package`, `installing 3 packages`, uv's own
    /// line for [`ProgressEvent::Output`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let packages = |n: &usize| if *n == 1 { "package" } else { "packages" };
        match self {
            ProgressEvent::Reused => f.write_str("environment already built"),
            ProgressEvent::CreatingVenv => f.write_str("creating the environment"),
            ProgressEvent::Installing { packages: n } => {
                write!(f, "installing {n} {}", packages(n))
            }
            ProgressEvent::Output(line) => f.write_str(line),
            ProgressEvent::Installed { packages: n } => {
                write!(f, "installed {n} {}", packages(n))
            }
        }
    }
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

    /// Where this builder's environments live.
    pub fn layout(&self) -> Layout {
        Layout::new(&self.config.data_dir)
    }

    /// `<data_dir>/envs`: the directory [`gc`] sweeps.
    pub fn envs_dir(&self) -> PathBuf {
        self.layout().envs_dir()
    }

    /// `<data_dir>/envs/<env_id>`: where the environment of a lock with this id is (or will
    /// be) built.
    pub fn env_dir(&self, env_id: &str) -> PathBuf {
        self.layout().env_dir(env_id)
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
            .tempdir_in(self.config.host.temp_dir())
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
        cmd.args(["-I", "-S", "-m", "py_compile"])
            .arg(&helper)
            .env_clear();
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
        // Runs without bubblewrap under a root server use a uid of their own: they must be
        // able to read the environment whatever the server's umask was (it holds no secret).
        readable_by_all(dir).map_err(io_err(format!("opening {} to run uids", dir.display())))?;
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
        let host = &self.config.host;
        let sandbox = crate::sandbox::build_sandbox(host)
            .map_err(|e| EnvError::BuildSandbox(e.to_string()))?;
        let private = tempfile::Builder::new()
            .prefix("omniforge-build-")
            .tempdir_in(host.temp_dir())
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
        // The operator's CA bundle, which uv reads with the system trust store.
        for var in ["SSL_CERT_FILE", "SSL_CERT_DIR"] {
            if let Some(v) = host.var(var).map(PathBuf::from)
                && v.is_absolute()
                && v.exists()
            {
                read_only.push(v);
            }
        }
        // A local directory named as the operator's package source must be visible.
        for var in crate::host::INDEX_VARS {
            if let Some(v) = host.var(var) {
                // `file:///srv/wheels` or a plain path (a `Path` prefix would strip whole
                // components: `file:`, leaving a relative path).
                let v = match v.to_str().and_then(|s| s.strip_prefix("file://")) {
                    Some(rest) => PathBuf::from(rest),
                    None => PathBuf::from(v),
                };
                if v.is_absolute() && v.exists() {
                    read_only.push(v);
                }
            }
        }
        let mut rw: Vec<&Path> = writable.to_vec();
        rw.push(private.path());
        // A root server starts the build's bubblewrap as a uid leased for it, which owns
        // what the build may write until the build has finished (see `BuildScratch`).
        let mut leased = None;
        let mut drop_privileges = None;
        if let Some(switch) = sandbox.switch() {
            let lease = switch
                .lease(0, true)
                .map_err(|e| EnvError::BuildSandbox(format!("leasing a uid for the build: {e}")))?;
            let uid = lease.uid();
            let mut guard = HandedOver {
                lease: Some(lease),
                paths: Vec::new(),
            };
            let canonical = |p: &Path| {
                std::fs::canonicalize(p).map_err(io_err(format!("resolving {}", p.display())))
            };
            let program = canonical(sandbox.program())?;
            let mut needed_ro = vec![program, uv.clone()];
            for p in &read_only {
                needed_ro.push(canonical(p)?);
            }
            let mut needed_rw = Vec::new();
            for p in &rw {
                let p = canonical(p)?;
                guard.paths.push(p.clone());
                hand_over(&p, uid)
                    .map_err(io_err(format!("handing {} to uid {uid}", p.display())))?;
                needed_rw.push(p);
            }
            let needed: Vec<crate::sandbox::Needed<'_>> = needed_ro
                .iter()
                .map(|p| (p, false))
                .chain(needed_rw.iter().map(|p| (p, true)))
                .map(|(path, writable)| crate::sandbox::Needed { path, writable })
                .collect();
            drop_privileges = Some(
                switch
                    .plan(
                        uid,
                        &needed,
                        &[],
                        crate::sandbox::View::for_bwrap(),
                        &canonical(cwd)?,
                    )
                    .map_err(io_err("planning the build's private mounts"))?,
            );
            leased = Some(guard);
        }
        let seccomp = sandbox
            .seccomp_memfd()
            .map_err(io_err("holding the seccomp filter"))?;
        let fd = seccomp.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        let (bwrap, args) = sandbox.uv_args(&uv, &read_only, &rw, cwd, fd);
        let mut cmd = Command::new(bwrap);
        cmd.args(args)
            .env_clear()
            .envs(host.uv_vars())
            .env("HOME", "/tmp")
            .env("TMPDIR", private.path().join("tmp"))
            .env("UV_CACHE_DIR", private.path().join("cache"))
            .env("UV_PYTHON", self.config.python.executable())
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_CONFIG", "1")
            .env("UV_NO_PROGRESS", "1")
            .env("NO_COLOR", "1");
        system_certs(&mut cmd, host);
        crate::sys::install(
            &mut cmd,
            crate::sys::ChildSetup {
                inherit_fds: fd.into_iter().collect(),
                drop_privileges,
                ..crate::sys::ChildSetup::default()
            },
        );
        Ok((
            cmd,
            Some(BuildScratch {
                _leased: leased,
                _private: private,
                _seccomp: seccomp,
            }),
        ))
    }

    fn uv_command(&self, cwd: &Path) -> Command {
        let mut cmd = Command::new(self.config.uv.path());
        cmd.current_dir(cwd)
            .env_clear()
            .envs(self.config.host.uv_vars())
            .env("UV_CACHE_DIR", self.layout().uv_cache_dir())
            .env("UV_PYTHON", self.config.python.executable())
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_CONFIG", "1")
            .env("UV_NO_PROGRESS", "1")
            .env("NO_COLOR", "1");
        system_certs(&mut cmd, &self.config.host);
        cmd
    }
}

/// uv verifies package indexes with the system trust store (where `SSL_CERT_FILE` adds a
/// private CA), unless the operator set `UV_SYSTEM_CERTS` (passed through) themselves: behind
/// a TLS-intercepting proxy, a client that starts `omniforge stdio` with a minimal environment
/// cannot pass uv's `--system-certs`.
fn system_certs(cmd: &mut Command, host: &crate::HostEnv) {
    if host.var("UV_SYSTEM_CERTS").is_none() {
        cmd.env("UV_SYSTEM_CERTS", "1");
    }
}

/// What a sandboxed build step holds until its command has finished: the private cache and
/// temporary directory, the descriptor bubblewrap reads the seccomp program from, and under a
/// root server the build's uid lease with what was handed to that uid. Dropped in that
/// order: the lease first (whatever still runs as the uid is killed, the paths go back to
/// root), then the private directory.
struct BuildScratch {
    _leased: Option<HandedOver>,
    _private: tempfile::TempDir,
    _seccomp: Option<std::os::fd::OwnedFd>,
}

/// A build's leased uid and the paths it owns for the build; dropping it kills what still
/// runs as the uid, gives the paths back to root (without following links) and returns the
/// uid.
struct HandedOver {
    lease: Option<crate::sandbox::UidLease>,
    paths: Vec<PathBuf>,
}

impl Drop for HandedOver {
    fn drop(&mut self) {
        // The lease's sweep first: nothing of the build may still write while the files
        // change owner.
        drop(self.lease.take());
        for p in &self.paths {
            if let Err(e) = hand_over(p, 0) {
                tracing::warn!(path = %p.display(), error = %e, "giving a build's files back to root");
            }
        }
    }
}

/// Makes `uid` (also the gid) the owner of `path` and everything under it, never following
/// a symbolic link (`lchown`; a link itself changes owner). Changing the owner clears set-id
/// bits.
fn hand_over(path: &Path, uid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))?;
    if std::fs::symlink_metadata(path)?.is_dir() {
        for entry in std::fs::read_dir(path)? {
            hand_over(&entry?.path(), uid)?;
        }
    }
    Ok(())
}

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

/// Adds read permission for everyone to every file under `dir`, and search permission to
/// every directory and to files someone may already execute; symlinks are left alone.
fn readable_by_all(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let meta = std::fs::symlink_metadata(&d)?;
        let mode = meta.permissions().mode();
        if mode & 0o005 != 0o005 {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode | 0o555))?;
        }
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let mode = entry.metadata()?.permissions().mode();
                let wanted = if mode & 0o111 != 0 {
                    mode | 0o555
                } else {
                    mode | 0o444
                };
                if wanted != mode {
                    std::fs::set_permissions(
                        entry.path(),
                        std::fs::Permissions::from_mode(wanted),
                    )?;
                }
            }
        }
    }
    Ok(())
}

fn is_requirement_line(line: &str) -> bool {
    let l = line.trim_start();
    !l.is_empty() && !l.starts_with('#') && !l.starts_with('-')
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_is_readable_by_every_run_uid() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("lib");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("m.py"), "x = 1\n").unwrap();
        std::fs::write(dir.path().join("tool"), "#!/bin/sh\n").unwrap();
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        mode(&sub.join("m.py"), 0o600).unwrap();
        mode(&dir.path().join("tool"), 0o700).unwrap();
        mode(&sub, 0o700).unwrap();
        readable_by_all(dir.path()).unwrap();
        let got = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(got(&sub), 0o755);
        assert_eq!(got(&sub.join("m.py")), 0o644);
        assert_eq!(got(&dir.path().join("tool")), 0o755);
    }

    #[test]
    fn progress_lines_count_packages_in_words() {
        let cases = [
            (
                ProgressEvent::Installing { packages: 1 },
                "installing 1 package",
            ),
            (
                ProgressEvent::Installing { packages: 3 },
                "installing 3 packages",
            ),
            (
                ProgressEvent::Installed { packages: 1 },
                "installed 1 package",
            ),
            (
                ProgressEvent::Installed { packages: 0 },
                "installed 0 packages",
            ),
            (ProgressEvent::Reused, "environment already built"),
            (
                ProgressEvent::Output("Prepared 1 package".into()),
                "Prepared 1 package",
            ),
        ];
        for (event, text) in cases {
            assert_eq!(event.to_string(), text);
        }
    }

    #[test]
    fn layout_names_every_place() {
        let l = Layout::new("/var/lib/omniforge");
        assert_eq!(l.envs_dir(), Path::new("/var/lib/omniforge/envs"));
        assert_eq!(l.env_dir("ab12"), Path::new("/var/lib/omniforge/envs/ab12"));
        assert_eq!(
            l.env("ab12").python(),
            Path::new("/var/lib/omniforge/envs/ab12/bin/python")
        );
        assert_eq!(l.uv_venv_dir(), Path::new("/var/lib/omniforge/uv"));
        assert_eq!(l.uv_cache_dir(), Path::new("/var/lib/omniforge/uv-cache"));
        assert_eq!(l.run_dir(), Path::new("/var/lib/omniforge/run"));
    }

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
}
