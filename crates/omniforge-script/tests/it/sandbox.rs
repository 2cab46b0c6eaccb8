//! The sandbox: network, filesystem, identity, detection.

use std::time::Duration;

use omniforge_script::*;

use crate::util::*;

#[tokio::test]
async fn doctor_names_every_layer() {
    let layers = doctor(&config(SandboxLevel::Standard));
    let names: Vec<_> = layers.iter().map(|l| l.name).collect();
    assert_eq!(
        names,
        [
            "process-group",
            "rlimits",
            "namespaces",
            "unprivileged-uid",
            "read-only-root",
            "no-network",
            "cgroup-pids",
            "cgroup-kill",
            "cgroup-memory",
            "landlock",
            "seccomp"
        ]
    );
    for l in &layers {
        eprintln!("{:<17} {:<5} {}", l.name, l.active, l.detail);
    }
}

#[tokio::test]
async fn strict_refuses_without_bubblewrap() {
    let mut config = RunnerConfig::new(SandboxLevel::Strict);
    config.bwrap = Some("/nonexistent/bwrap".into());
    match Runner::new(config) {
        Err(RunError::SandboxUnavailable(why)) => {
            assert!(why.contains("/nonexistent/bwrap"), "{why}")
        }
        other => panic!("expected SandboxUnavailable, got {other:?}"),
    }
    // Standard carries on with what it has.
    let mut config = RunnerConfig::new(SandboxLevel::Standard);
    config.bwrap = Some("/nonexistent/bwrap".into());
    let out = run(
        &Runner::new(config).unwrap(),
        spec("print('still runs')").await,
    )
    .await;
    assert_eq!(stdout(&out), "still runs\n");
}

#[tokio::test]
async fn network_is_denied_unless_allowed() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            drop(sock);
        }
    });
    let code = format!(
        "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n    print('connected')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    );
    let runner = sandboxed();
    assert_layer(&runner, "no-network");
    let denied = run(&runner, spec(&code).await).await;
    assert!(stdout(&denied).starts_with("refused"), "{denied:?}");

    let mut s = spec(&code).await;
    s.network = true;
    let allowed = run(&runner, s).await;
    assert_eq!(stdout(&allowed), "connected\n", "{allowed:?}");
}

#[tokio::test]
async fn files_outside_the_sandbox_are_invisible() {
    let runner = sandboxed();
    assert_layer(&runner, "read-only-root");
    let secret_dir = fresh_data_dir();
    let db = secret_dir.path().join("omniforge.db");
    std::fs::write(&db, "SECRET").unwrap();
    let env = base_env().await;
    let code = format!(
        r#"
import os
for path in [{db:?}, {data:?}, "/etc/shadow", "/root/.cargo", {manifest:?}]:
    try:
        open(path).read() if os.path.isfile(path) else os.listdir(path)
        print("READ", path)
    except OSError as e:
        print("denied", type(e).__name__)
# The environment itself is readable but not writable.
try:
    open(os.path.join({env:?}, "x"), "w")
    print("WROTE env")
except OSError as e:
    print("env read-only", e.errno)
open("/tmp/scratch", "w").write("ok")
print("tmp writable")
"#,
        db = db.display().to_string(),
        data = secret_dir.path().display().to_string(),
        env = env.path.display().to_string(),
        manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"),
    );
    let out = run(&runner, spec(&code).await).await;
    let text = stdout(&out);
    assert!(
        !text.contains("READ") && !text.contains("WROTE"),
        "{text}\n{out:?}"
    );
    assert!(text.contains("env read-only 30"), "{text}"); // EROFS
    assert!(text.ends_with("tmp writable\n"), "{text}");
}

#[tokio::test]
async fn other_environments_are_not_visible() {
    // The base env's sibling directories (other envs, build dirs) do not exist in the sandbox
    // (bubblewrap), and the directory holding them cannot even be listed (Landlock).
    let env = base_env().await;
    let envs_dir = env.path.parent().unwrap().to_owned();
    let code = format!(
        "import os\ntry:\n    names = sorted(os.listdir({:?}))\nexcept PermissionError:\n    names = None\nprint(names in (None, [{:?}]))\n",
        envs_dir.display().to_string(),
        env.env_id
    );
    let out = run(&sandboxed(), spec(&code).await).await;
    assert_eq!(stdout(&out), "True\n", "{out:?}");
}

/// The sandbox's private /tmp must not hide an environment that lives under the host's /tmp.
#[tokio::test]
async fn env_under_host_tmp_is_visible() {
    let data = tempfile::Builder::new()
        .prefix("omniforge-test-")
        .tempdir()
        .unwrap();
    assert!(data.path().starts_with("/tmp"));
    let builder = builder_in(data.path(), false).await;
    let env = builder
        .build(&builder.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    let out = run(
        &sandboxed(),
        RunSpec::new(&env, "import omniforge\nprint('ok')"),
    )
    .await;
    assert_eq!(stdout(&out), "ok\n", "{out:?}");
}

#[tokio::test]
async fn runs_as_nobody_without_capabilities() {
    let runner = sandboxed();
    assert_layer(&runner, "unprivileged-uid");
    let code = "import os\ncaps = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1]\nprint(os.getuid(), os.getgid(), caps)\n";
    let out = run(&runner, spec(code).await).await;
    assert_eq!(stdout(&out), "65534 65534 0000000000000000\n");
}

#[tokio::test]
async fn cpu_and_core_limits_are_set() {
    // The CPU rlimit (timeout rounded up + 1 s, hard 1 s later) only backs the wall-clock
    // timeout, which a single busy process always hits first: check the limits from inside.
    let code = "import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_CORE))\n";
    let mut s = spec(code).await;
    s.timeout = Duration::from_millis(2500);
    let out = run(&sandboxed(), s).await;
    assert_eq!(stdout(&out), "(4, 5) (0, 0)\n");
}

/// Lists the script's open descriptors (`number target`), then the side channel's number.
const FDS: &str = r#"
import os
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        print(fd, os.readlink("/proc/self/fd/%d" % fd))
    except OSError:
        pass  # the directory listdir had open
print("chan", os.environ["OMNIFORGE_FD"])
"#;

/// Descriptors the server inherited from its own parent without close-on-exec (a shell's fd,
/// a pipe) never reach a script: it holds only stdin, stdout, stderr and its side channel.
async fn only_the_run_descriptors_reach_a_script(runner: Runner) {
    use std::os::fd::AsFd as _;
    let leaked = std::fs::File::open("/dev/null").unwrap();
    let (pipe_r, pipe_w) = rustix::pipe::pipe().unwrap();
    for fd in [leaked.as_fd(), pipe_r.as_fd(), pipe_w.as_fd()] {
        // What a parent that forgot O_CLOEXEC leaves behind.
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty()).unwrap();
    }
    let out = run(&runner, spec(FDS).await).await;
    assert_eq!(out.exit, Exit::Code(0), "{out:?}");
    let text = stdout(&out);
    let chan = text
        .lines()
        .find_map(|l| l.strip_prefix("chan "))
        .unwrap()
        .to_owned();
    let fds: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("chan "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(fds, ["0", "1", "2", chan.as_str()], "{text}");
    drop((leaked, pipe_r, pipe_w));
}

#[tokio::test]
async fn only_the_run_descriptors_reach_a_script_in_bubblewrap() {
    only_the_run_descriptors_reach_a_script(sandboxed()).await;
}

#[tokio::test]
async fn only_the_run_descriptors_reach_a_script_without_bubblewrap() {
    only_the_run_descriptors_reach_a_script(runner_without(&["namespaces"])).await;
}
