//! Where things are: the binary under test, the repository, `.deps/` (what `scripts/bootstrap`
//! installs), the drivers, and fresh temporary data directories.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// The binary under test, built by cargo for this test target.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_omniforge");

/// The repository root (this crate is `crates/omniforge`).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What `scripts/bootstrap` installs: uv, Node 22, the official MCP clients.
pub(crate) fn deps() -> PathBuf {
    repo_root().join(".deps")
}

/// `.deps/bin/uv`.
pub(crate) fn uv() -> PathBuf {
    deps().join("bin/uv")
}

/// The interpreter of PyPI `mcp` 1.x.
pub(crate) fn python1() -> PathBuf {
    deps().join("py-mcp1/bin/python")
}

/// The interpreter of PyPI `mcp` 2.x.
pub(crate) fn python2() -> PathBuf {
    deps().join("py-mcp2/bin/python")
}

/// Node 22.
pub(crate) fn node22() -> PathBuf {
    deps().join("bin/node22")
}

/// The `node_modules` holding `@modelcontextprotocol/sdk`.
pub(crate) fn ts_modules() -> PathBuf {
    deps().join("node/node_modules")
}

/// A folder of this test binary's sources, e.g. `client_drivers`.
pub(crate) fn e2e_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

/// Fails (never skips) when something from `.deps/` is missing.
pub(crate) fn require(paths: &[PathBuf]) {
    for path in paths {
        assert!(
            path.exists(),
            "{} is missing: the test dependencies are not installed. Run `scripts/bootstrap` \
             (from the repository root) to install uv, the MCP clients, Node 22 and the Connect \
             fixture's node_modules into place, then rerun the tests.",
            path.display()
        );
    }
}

/// A fresh temporary directory with an empty `data/` in it.
pub(crate) fn data_home() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    (dir, data)
}

/// `PREFIX` made unique to this process and moment (names, markers).
pub(crate) fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}{}x{nanos}", std::process::id())
}
