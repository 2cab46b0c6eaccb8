//! Where things live in the server's data directory, and garbage collection of environments.
//!
//! ```text
//! <data_dir>/
//!   envs/<env_id>/     one venv per lock (EnvBuilder::build), shared by identical locks
//!   envs/.tmp-*        environments being built (renamed into place when complete)
//!   uv/                uv installed by UvTool::install, when none was found
//!   uv-cache/          uv's cache for builds outside the build sandbox
//!   run/               per-run scratch directories of a Runner (RunnerConfig::scratch_dir)
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::error::{EnvError, io_err};

/// Name of the file whose presence marks a complete environment.
pub(super) const COMPLETE_MARKER: &str = ".omniforge-env";

/// A built environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// `<data_dir>/envs/<env_id>`: a venv (`bin/python`, `lib/pythonX.Y/site-packages`).
    pub path: PathBuf,
    /// The [`Lock::env_id`](crate::Lock::env_id) it was built from.
    pub env_id: String,
}

impl Env {
    /// The environment's interpreter, `<path>/bin/python`.
    pub fn python(&self) -> PathBuf {
        self.path.join("bin").join("python")
    }

    /// Whether the environment is complete ([`EnvBuilder::build`](crate::EnvBuilder::build)
    /// finished it): its marker file exists. A replica that has not built it yet builds it
    /// from the stored lock before a run uses it.
    pub fn is_built(&self) -> bool {
        self.path.join(COMPLETE_MARKER).is_file()
    }
}

/// The layout of a data directory. Cheap to build; creates nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    data_dir: PathBuf,
}

impl Layout {
    /// The layout below `data_dir` (the server's `--data-dir`).
    pub fn new(data_dir: impl Into<PathBuf>) -> Layout {
        Layout {
            data_dir: data_dir.into(),
        }
    }

    /// The data directory itself.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// `<data_dir>/envs`: every environment, and what [`gc`] sweeps.
    pub fn envs_dir(&self) -> PathBuf {
        self.data_dir.join("envs")
    }

    /// `<data_dir>/envs/<env_id>`: the environment of a lock with this
    /// [`Lock::env_id`](crate::Lock::env_id).
    pub fn env_dir(&self, env_id: &str) -> PathBuf {
        self.envs_dir().join(env_id)
    }

    /// The environment with this id, as a run needs it (it may not have been built).
    pub fn env(&self, env_id: &str) -> Env {
        Env {
            path: self.env_dir(env_id),
            env_id: env_id.to_owned(),
        }
    }

    /// `<data_dir>/uv`: the venv uv is installed into when none is found.
    pub fn uv_venv_dir(&self) -> PathBuf {
        self.data_dir.join("uv")
    }

    /// `<data_dir>/uv-cache`: uv's cache for builds outside the build sandbox.
    pub fn uv_cache_dir(&self) -> PathBuf {
        self.data_dir.join("uv-cache")
    }

    /// `<data_dir>/run`: the runner's per-run scratch directories
    /// ([`RunnerConfig::scratch_dir`](crate::RunnerConfig::scratch_dir)).
    pub fn run_dir(&self) -> PathBuf {
        self.data_dir.join("run")
    }
}

/// Removes every environment directory in [`Layout::envs_dir`] whose name is not in `in_use`,
/// and build directories (`.tmp-*`) left behind more than an hour ago by an interrupted build.
/// Returns the names removed. A missing environments directory is not an error.
///
/// The caller must make sure no run uses a removed environment (e.g. by holding the lock it
/// takes around builds while collecting).
///
/// # Errors
/// [`EnvError::Io`] when the directory cannot be read or an entry cannot be removed.
pub fn gc(layout: &Layout, in_use: &HashSet<String>) -> Result<Vec<String>, EnvError> {
    let envs_dir = &layout.envs_dir();
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
