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

/// A folder of this test binary's sources, e.g. `support/py`.
pub(crate) fn e2e_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/e2e")
        .join(name)
}

/// A Python driver: `support/py/NAME`.
pub(crate) fn py_driver(name: &str) -> PathBuf {
    e2e_dir("support/py").join(name)
}

/// A Node driver: `support/node/NAME`.
pub(crate) fn node_script(name: &str) -> PathBuf {
    e2e_dir("support/node").join(name)
}

/// The environment variable under which a missing test dependency fails a test instead of
/// skipping it (`scripts/test` sets it).
pub(crate) const ALL_TIERS: &str = "OMNIFORGE_E2E_ALL";

/// What `scripts/bootstrap` installs and the slow tier needs: `.deps/` (uv, the Python SDKs,
/// the observability venv, Node 22 and the npm clients) and the fixtures' `node_modules`.
pub(crate) fn slow_tier_deps() -> Vec<PathBuf> {
    let root = repo_root();
    vec![
        uv(),
        python1(),
        python2(),
        deps().join("py-obs/bin/python"),
        node22(),
        ts_modules().join("@modelcontextprotocol/sdk/package.json"),
        root.join("tests/fixtures/connect/node_modules/@connectrpc/connect-node/package.json"),
        root.join("tests/fixtures/oidc/node_modules/oidc-provider/package.json"),
        root.join("tests/console/node_modules/playwright-core"),
    ]
}

/// The slow tier's gate, behind [`needs_deps!`](crate::support::needs_deps): whether the
/// calling test may run. With every [`slow_tier_deps`] path present: `true`. Without one:
/// under `OMNIFORGE_E2E_ALL=1` (what `scripts/test` sets) the test fails here, naming what is
/// missing; otherwise it prints why it skips (to the real stderr, past the test harness's
/// capture) and the caller returns: `cargo test` without `.deps/` runs the fast tier.
pub(crate) fn slow_tier_may_run() -> bool {
    let missing: Vec<String> = slow_tier_deps()
        .into_iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let all = std::env::var(ALL_TIERS).is_ok_and(|v| v == "1");
    assert!(
        !all,
        "{ALL_TIERS}=1 and the test dependencies are not installed (missing: {}). Run \
         `scripts/bootstrap` (from the repository root) to install uv, the MCP clients, Node 22 \
         and the fixtures' node_modules, then rerun the tests.",
        missing.join(", ")
    );
    let test = std::thread::current()
        .name()
        .unwrap_or("an e2e test")
        .to_owned();
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: needs .deps/ (missing {}); run scripts/bootstrap, or set {ALL_TIERS}=1 to \
         make this a failure",
        missing[0]
    );
    false
}

/// Starts a test of the slow tier: returns from it (a skip, with the reason printed) when
/// `.deps/` is missing, unless `OMNIFORGE_E2E_ALL=1` makes that a failure. See
/// [`slow_tier_may_run`].
macro_rules! needs_deps {
    () => {
        if !$crate::support::paths::slow_tier_may_run() {
            return;
        }
    };
}
pub(crate) use needs_deps;

/// Fails (never skips) when something from `.deps/` is missing: for the helpers a slow test
/// calls after its [`needs_deps!`] (a fast test that reaches one is in the wrong tier).
pub(crate) fn require(paths: &[PathBuf]) {
    for path in paths {
        assert!(
            path.exists(),
            "{} is missing: the test dependencies are not installed. Run `scripts/bootstrap` \
             (from the repository root) to install uv, the MCP clients, Node 22 and the Connect \
             fixture's node_modules into place, then rerun the tests. (A test that needs them \
             starts with `support::needs_deps!()`, which skips it without `.deps/`.)",
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
