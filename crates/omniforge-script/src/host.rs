//! What this crate uses of the server's own process environment, handed in by the caller.
//!
//! The crate never reads environment variables itself (only the binary does): the binary
//! builds a [`HostEnv`] once, e.g. with `HostEnv::from_vars(std::env::vars_os())`, and passes
//! it in [`EnvConfig::host`](crate::EnvConfig::host) and
//! [`RunnerConfig::host`](crate::RunnerConfig::host).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Variables passed through to uv (and pip) when they are set: proxies, CA bundles, and the
/// operator's package index (a mirror, a private index, a local directory of files).
pub const PASSTHROUGH_VARS: &[&str] = &[
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
    "UV_SYSTEM_CERTS",
    "UV_DEFAULT_INDEX",
    "UV_INDEX",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
];

/// The uv variables that may name a local directory of packages, which a sandboxed build must
/// then see.
pub(crate) const INDEX_VARS: &[&str] = &[
    "UV_FIND_LINKS",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
];

/// The parts of the server's environment this crate uses. The default is an empty
/// environment: no `PATH` (programs are found only at their explicit or standard paths), no
/// `HOME`, no pass-through variables, `/tmp` as the temporary directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostEnv {
    /// `PATH`: where `uv` and `bwrap` are looked up when no explicit path is given.
    pub path: Option<OsString>,
    /// `HOME`, passed on to uv outside the build sandbox.
    pub home: Option<OsString>,
    /// `TMPDIR`: where locks are resolved and sandboxed builds keep their private cache
    /// (default `/tmp`).
    pub temp_dir: Option<PathBuf>,
    /// The [`PASSTHROUGH_VARS`] that are set, with their values.
    pub passthrough: Vec<(OsString, OsString)>,
}

impl HostEnv {
    /// Picks the variables this crate uses from `vars` (typically `std::env::vars_os()`);
    /// everything else is ignored.
    pub fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> HostEnv {
        let mut host = HostEnv::default();
        for (key, value) in vars {
            match key.to_str() {
                Some("PATH") => host.path = Some(value),
                Some("HOME") => host.home = Some(value),
                Some("TMPDIR") if !value.is_empty() => host.temp_dir = Some(value.into()),
                Some(k) if PASSTHROUGH_VARS.contains(&k) => host.passthrough.push((key, value)),
                _ => {}
            }
        }
        host.passthrough.sort();
        host
    }

    /// The value of a pass-through variable, when it is set.
    pub(crate) fn var(&self, name: &str) -> Option<&OsStr> {
        self.passthrough
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    /// The temporary directory (`TMPDIR`, default `/tmp`).
    pub fn temp_dir(&self) -> &Path {
        self.temp_dir.as_deref().unwrap_or(Path::new("/tmp"))
    }

    /// The first executable file `name` in a directory of [`HostEnv::path`], as a shell
    /// would find it.
    pub fn find_program(&self, name: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path.as_ref()?;
        std::env::split_paths(path)
            .map(|dir| dir.join(name))
            .find(|p| {
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// The variables uv gets outside any sandbox: the pass-through variables, a standard
    /// `PATH`, and `HOME` when known.
    pub(crate) fn uv_vars(&self) -> Vec<(OsString, OsString)> {
        let mut vars = self.passthrough.clone();
        vars.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        if let Some(home) = &self.home {
            vars.push(("HOME".into(), home.clone()));
        }
        vars
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_only_what_it_uses() {
        let host = HostEnv::from_vars(
            [
                ("PATH", "/usr/bin:/bin"),
                ("HOME", "/root"),
                ("OMNIFORGE_UPSTREAM_AUTH", "Bearer secret"),
                ("UV_INDEX_URL", "https://mirror.example/simple"),
                ("https_proxy", "http://proxy:3128"),
                ("TMPDIR", ""),
            ]
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        );
        assert_eq!(host.path.as_deref(), Some(OsStr::new("/usr/bin:/bin")));
        assert_eq!(host.home.as_deref(), Some(OsStr::new("/root")));
        assert_eq!(host.temp_dir(), Path::new("/tmp"));
        assert_eq!(
            host.var("UV_INDEX_URL"),
            Some(OsStr::new("https://mirror.example/simple"))
        );
        assert!(
            !host
                .passthrough
                .iter()
                .any(|(k, _)| k == "OMNIFORGE_UPSTREAM_AUTH")
        );
        assert!(host.find_program("sh").is_some());
        assert!(HostEnv::default().find_program("sh").is_none());
    }
}
