//! Shared fixtures: the interpreter, uv, builders, runners, process markers.

use std::path::{Path, PathBuf};
use std::time::Duration;

use omniforge_script::*;

/// Where tests keep persistent state (`$CARGO_TARGET_TMPDIR`).
pub(crate) fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("omniforge-script")
}

/// The real interpreter behind `python3`, resolved through the shim once and cached in a file.
pub(crate) async fn python() -> Interpreter {
    let root = tmp_root();
    std::fs::create_dir_all(&root).unwrap();
    let cache = root.join("python-path.txt");
    if let Ok(path) = std::fs::read_to_string(&cache)
        && let Ok(i) = Interpreter::resolve(Path::new(path.trim())).await
    {
        return i;
    }
    let i = Interpreter::resolve(Path::new("python3")).await.unwrap();
    std::fs::write(&cache, i.executable().display().to_string()).unwrap();
    i
}

/// The test process's environment, as the binary hands it to the crate.
pub(crate) fn host() -> HostEnv {
    HostEnv::from_vars(std::env::vars_os())
}

/// The repository's `.deps/bin/uv` when bootstrap installed it, else whatever the product finds.
pub(crate) async fn uv(data_dir: &Path, python: &Interpreter) -> UvTool {
    let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/bin/uv");
    let explicit = deps.exists().then_some(deps);
    UvTool::locate_or_install(data_dir, explicit, python, &host())
        .await
        .unwrap()
}

/// A builder on `data_dir`.
pub(crate) async fn builder_in(data_dir: &Path, allow_source_builds: bool) -> EnvBuilder {
    let python = python().await;
    let uv = uv(data_dir, &python).await;
    EnvBuilder::new(EnvConfig {
        data_dir: data_dir.to_owned(),
        uv,
        python,
        allow_source_builds,
        command_timeout: Duration::from_secs(300),
        host: host(),
    })
}

/// The shared data directory's builder (wheels only).
pub(crate) async fn shared_builder() -> EnvBuilder {
    builder_in(&tmp_root().join("data"), false).await
}

/// The shared environment without dependencies (only the helper module).
pub(crate) async fn base_env() -> Env {
    let b = shared_builder().await;
    let lock = b.lock(&[]).await.unwrap();
    b.build(&lock, |_| {}).await.unwrap()
}

/// The shared environment with numpy (from PyPI the first time, then reused).
pub(crate) async fn numpy_env() -> Env {
    let b = shared_builder().await;
    let lock = b.lock(&["numpy".to_owned()]).await.unwrap();
    b.build(&lock, |_| {}).await.unwrap()
}

/// A fresh data directory under the target directory (removed on drop).
pub(crate) fn fresh_data_dir() -> tempfile::TempDir {
    let root = tmp_root();
    std::fs::create_dir_all(&root).unwrap();
    tempfile::Builder::new()
        .prefix("data-")
        .tempdir_in(root)
        .unwrap()
}

/// The crate's Landlock helper executable.
pub(crate) fn helper() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_omniforge-sandbox-exec"))
}

/// A runner configuration at `level` with the crate's Landlock helper.
pub(crate) fn config(level: SandboxLevel) -> RunnerConfig {
    let mut c = RunnerConfig::new(level);
    c.landlock_helper = Some(helper());
    c.host = host();
    c
}

/// A runner at `level` (with the Landlock helper).
pub(crate) fn runner(level: SandboxLevel) -> Runner {
    Runner::new(config(level)).unwrap()
}

/// A `Standard` runner without the named layers.
pub(crate) fn runner_without(layers: &[&str]) -> Runner {
    let mut c = config(SandboxLevel::Standard);
    c.disabled_layers = layers.iter().map(|l| (*l).to_owned()).collect();
    let r = Runner::new(c).unwrap();
    for l in layers {
        assert!(
            !r.layers().iter().any(|x| x.name == *l && x.active),
            "{l} should be off"
        );
    }
    r
}

/// A runner at `Standard` that must have bubblewrap.
pub(crate) fn sandboxed() -> Runner {
    let r = runner(SandboxLevel::Standard);
    assert_layer(&r, "namespaces");
    r
}

/// Fails unless `runner` has the layer active.
pub(crate) fn assert_layer(runner: &Runner, name: &str) {
    let layer = runner
        .layers()
        .iter()
        .find(|l| l.name == name)
        .expect("known layer");
    assert!(
        layer.active,
        "layer {name} is required by this test: {}",
        layer.detail
    );
}

/// A spec for `code` in the base env, with a short timeout.
pub(crate) async fn spec(code: &str) -> RunSpec {
    let mut s = RunSpec::new(&base_env().await, code);
    s.timeout = Duration::from_secs(20);
    s
}

/// Runs `spec` to its end.
pub(crate) async fn run(runner: &Runner, spec: RunSpec) -> RunOutput {
    runner
        .run(spec, tokio_util::sync::CancellationToken::new())
        .await
        .unwrap()
}

/// Stdout as text.
pub(crate) fn stdout(out: &RunOutput) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A unique environment variable that every process of a run inherits, to find them in /proc.
pub(crate) fn marker() -> (String, String) {
    let value = format!("m{}x{}", std::process::id(), rand_suffix());
    ("OMNIFORGE_TEST_MARKER".to_owned(), value)
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// Pids of live (non-zombie) processes whose environment contains `marker`.
pub(crate) fn marked_processes(marker: &str) -> Vec<i32> {
    let needle = format!("OMNIFORGE_TEST_MARKER={marker}");
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

/// Waits up to `within` for no process to carry `marker`; returns the stragglers otherwise.
pub(crate) async fn wait_gone(marker: &str, within: Duration) -> Vec<i32> {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = marked_processes(marker);
        if left.is_empty() || std::time::Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to 30 s for `condition` to hold, checking every 20 ms; panics with `what` otherwise.
/// Tests wait for a state this way rather than sleeping for a guessed time.
pub(crate) async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
