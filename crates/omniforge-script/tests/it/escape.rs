//! The escape attacks on both paths of a call (issue 15): every attack runs as
//! `ATTACK::cold` (the `Runner`, every layer) and `ATTACK::warm` (the same code on its warm
//! template, which the test first makes sure is ready, and that the call used). Each is
//! judged from the host where it can be (the file is unchanged, the listener accepted
//! nothing, no process carrying the test's marker is left, the canary is not in the output)
//! and by what the script saw (`EACCES`, `EPERM`, `MemoryError`, a timeout...).
//!
//! The end-to-end suite (`crates/omniforge/tests/e2e/escape.rs`) runs the attacks through the
//! server with and without namespaces; it gains its warm mode with the server's
//! `--warm-pool`. These tests drive the crate directly so that the warm path is attacked now.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use omniforge_script::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::util::*;
use crate::warm::{key, pool};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Cold,
    Warm,
}

/// Runs each attack on both paths: `NAME::cold` and `NAME::warm`.
macro_rules! both {
    ($($attack:ident),* $(,)?) => {
        $(
            mod $attack {
                #[tokio::test]
                async fn cold() {
                    super::$attack(super::Way::Cold).await
                }

                #[tokio::test]
                async fn warm() {
                    super::$attack(super::Way::Warm).await
                }
            }
        )*
    };
}

/// The Python every attack starts with: its arguments, and `probe(name, fn)`, which prints
/// one JSON line with what happened.
const PRELUDE: &str = r#"import errno, json, os, sys
ARGS = json.load(sys.stdin)
def note(name, ok, detail="", exc=None):
    rec = {"probe": name, "ok": ok, "detail": str(detail)[:300]}
    if exc is not None:
        code = getattr(exc, "errno", None)
        rec["exc"] = type(exc).__name__
        rec["errno"] = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    print(json.dumps(rec), flush=True)
def probe(name, fn):
    try:
        value = fn()
    except BaseException as e:
        note(name, False, e, exc=e)
        return None
    note(name, True, repr(value))
    return value
"#;

/// One probe line.
#[derive(Debug, Clone)]
struct Obs {
    ok: bool,
    errno: String,
    exc: String,
    detail: String,
}

fn observations(out: &RunOutput) -> BTreeMap<String, Obs> {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            Some((
                v["probe"].as_str()?.to_owned(),
                Obs {
                    ok: v["ok"].as_bool()?,
                    errno: v["errno"].as_str().unwrap_or("").to_owned(),
                    exc: v["exc"].as_str().unwrap_or("").to_owned(),
                    detail: v["detail"].as_str().unwrap_or("").to_owned(),
                },
            ))
        })
        .collect()
}

/// Fails unless every named probe was refused with one of `errnos`.
fn refused(obs: &BTreeMap<String, Obs>, probes: &[&str], errnos: &[&str], out: &RunOutput) {
    for p in probes {
        let o = obs
            .get(*p)
            .unwrap_or_else(|| panic!("probe {p:?} not reported: {out:?}"));
        assert!(!o.ok, "{p} succeeded: {}", o.detail);
        assert!(
            errnos.contains(&o.errno.as_str()),
            "{p} failed with {:?} {} ({}), not one of {errnos:?}",
            o.errno,
            o.exc,
            o.detail
        );
    }
}

/// The attack's path: a pool (used warm, or only for its runner cold) and a key.
struct Scene {
    way: Way,
    pool: WarmPool,
    key: WarmKey,
    calls: u64,
}

impl Scene {
    fn new(way: Way, name: &str) -> Scene {
        Scene {
            way,
            pool: pool(),
            key: key(&format!("escape-{name}")),
            calls: 0,
        }
    }

    /// A spec for `body` after the prelude, in the base environment.
    async fn spec(&self, body: &str, args: Value) -> RunSpec {
        let mut s = spec(&format!("{PRELUDE}{body}")).await;
        s.arguments = args;
        s
    }

    /// Runs the attack cold or warm; warm, the call must have used the template.
    async fn attack(&mut self, spec: RunSpec) -> RunOutput {
        self.attack_with(spec, CancellationToken::new()).await
    }

    async fn attack_with(&mut self, spec: RunSpec, cancel: CancellationToken) -> RunOutput {
        match self.way {
            Way::Cold => self.pool.runner().run(spec, cancel).await.unwrap(),
            Way::Warm => {
                assert_eq!(
                    self.pool.prepare(&self.key, &spec).await,
                    Prepared::Ready,
                    "the attack must run warm"
                );
                let out = self.pool.run(&self.key, spec, cancel).await.unwrap();
                self.calls += 1;
                let ran = self
                    .pool
                    .report()
                    .templates
                    .iter()
                    .find(|t| t.key == self.key)
                    .map_or(0, |t| t.calls);
                assert_eq!(ran, self.calls, "the call did not run on the template");
                out
            }
        }
    }

    /// After the attack: warm, its template still serves (ready, a spare made again); and a
    /// trivial call on the same path answers.
    async fn healthy(&mut self) {
        if self.way == Way::Warm {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let t = self
                    .pool
                    .report()
                    .templates
                    .into_iter()
                    .find(|t| t.key == self.key);
                if t.as_ref()
                    .is_some_and(|t| t.state == TemplateState::Ready && t.spares == 1)
                {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the template did not recover: {t:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let s = self.spec("print('pong')", json!({})).await;
        let ping = WarmKey::new(format!("{}-ping", self.key.version), "alice");
        let out = match self.way {
            Way::Cold => self.pool.runner().run(s, CancellationToken::new()).await,
            Way::Warm => self.pool.run(&ping, s, CancellationToken::new()).await,
        };
        assert_eq!(stdout(&out.unwrap()), "pong\n", "after the attack");
    }
}

/// Pids of processes whose command line holds `marker` (argv[0] of an exec'd program).
fn marked_by_cmdline(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'));
        if !zombie
            && cmdline
                .windows(marker.len())
                .any(|w| w == marker.as_bytes())
        {
            pids.push(pid);
        }
    }
    pids
}

/// The host uids (real, effective, saved, filesystem) of `pid`.
fn host_uids(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

async fn none_left(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left: Vec<i32> = marked_by_cmdline(marker)
            .into_iter()
            .chain(marked_processes(marker))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "processes outlived the call: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A host directory outside /tmp (as a data directory would be), holding a canary file.
fn host_dir() -> (tempfile::TempDir, PathBuf, String) {
    let base = tmp_root();
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("escape-")
        .tempdir_in(&base)
        .unwrap();
    let (_, m) = marker();
    let canary = format!("canary-{m}");
    let file = dir.path().join("omniforge.db");
    std::fs::write(&file, &canary).unwrap();
    (dir, file, canary)
}

// ---------------------------------------------------------------------------------------

async fn read_host_files(way: Way) {
    let mut sc = Scene::new(way, "read");
    let (dir, file, canary) = host_dir();
    let other_env = numpy_env().await;
    let body = r#"
probe("read the database", lambda: open(ARGS["db"]).read())
probe("list the data directory", lambda: os.listdir(ARGS["dir"]))
probe("list another environment", lambda: os.listdir(ARGS["other"]))
probe("read /etc/shadow", lambda: open("/etc/shadow").read())
probe("list /root", lambda: os.listdir("/root"))
envs = os.path.dirname(os.path.dirname(sys.executable))
probe("list envs", lambda: os.listdir(os.path.dirname(envs)))
"#;
    let args = json!({"db": file, "dir": dir.path(), "other": other_env.path});
    let out = sc.attack(sc.spec(body, args).await).await;
    let obs = observations(&out);
    refused(
        &obs,
        &[
            "read the database",
            "list the data directory",
            "list another environment",
            "read /etc/shadow",
            "list /root",
        ],
        &["ENOENT", "EACCES"],
        &out,
    );
    assert!(!stdout(&out).contains(&canary));
    let other_id = other_env
        .path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let envs = &obs["list envs"];
    assert!(
        !envs.detail.contains(&other_id),
        "another environment is listed: {envs:?}"
    );
    sc.healthy().await;
}

async fn read_the_servers_environment(way: Way) {
    let mut sc = Scene::new(way, "environ");
    // A value only this (test, server) process's environment holds.
    let (name, value) = std::env::vars()
        .find(|(k, _)| k == "NEXTEST_RUN_ID")
        .or_else(|| std::env::vars().find(|(k, _)| k == "CARGO_MANIFEST_DIR"))
        .unwrap();
    let own = std::fs::read(format!("/proc/{}/environ", std::process::id())).unwrap();
    assert!(
        own.windows(value.len()).any(|w| w == value.as_bytes()),
        "control"
    );
    let body = r#"
probe("server environ", lambda: open(f"/proc/{ARGS['pid']}/environ", "rb").read())
probe("server cmdline", lambda: open(f"/proc/{ARGS['pid']}/cmdline", "rb").read())
def every():
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if ARGS["value"].encode() in open(f"/proc/{pid}/environ", "rb").read():
                    found.append(pid)
            except OSError:
                pass
    return found
probe("every environ", every)
probe("own environment", lambda: ARGS["name"] in os.environ)
"#;
    let args = json!({"pid": std::process::id(), "name": name, "value": value});
    let out = sc.attack(sc.spec(body, args).await).await;
    let obs = observations(&out);
    refused(
        &obs,
        &["server environ", "server cmdline"],
        &["ENOENT", "EACCES"],
        &out,
    );
    assert_eq!(obs["every environ"].detail, "[]", "{out:?}");
    assert_eq!(obs["own environment"].detail, "False");
    sc.healthy().await;
}

async fn write_outside_its_directory(way: Way) {
    let mut sc = Scene::new(way, "write");
    let (dir, file, canary) = host_dir();
    let (_, m) = marker();
    let env = base_env().await;
    let python = std::fs::canonicalize(env.python()).unwrap();
    let prefix = python.parent().unwrap().parent().unwrap().to_owned();
    let targets: Vec<PathBuf> = vec![
        file.clone(),
        dir.path().join(format!("pwned-{m}")),
        env.path.join(format!("pwned-{m}")),
        env.path.join("pyvenv.cfg"),
        prefix.join(format!("pwned-{m}")),
        PathBuf::from(format!("/usr/pwned-{m}")),
        PathBuf::from(format!("/etc/pwned-{m}")),
        PathBuf::from(format!("/pwned-{m}")),
    ];
    let before: Vec<Option<Vec<u8>>> = targets.iter().map(|p| std::fs::read(p).ok()).collect();
    let body = r#"
for path in ARGS["targets"]:
    def write(path=path):
        with open(path, "ab") as f:
            f.write(b"PWNED")
    probe("write " + path, write)
probe("its own directory", lambda: open(os.path.join(os.environ["TMPDIR"], "ok"), "wb").write(b"x"))
"#;
    let out = sc
        .attack(sc.spec(body, json!({"targets": targets})).await)
        .await;
    let obs = observations(&out);
    let names: Vec<String> = targets
        .iter()
        .map(|p| format!("write {}", p.display()))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    refused(&obs, &names, &["ENOENT", "EACCES", "EROFS", "EPERM"], &out);
    assert!(obs["its own directory"].ok, "{out:?}");
    for (p, b) in targets.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(p).ok(),
            b,
            "{} changed on the host",
            p.display()
        );
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), canary);
    sc.healthy().await;
}

async fn fill_the_sandbox_root(way: Way) {
    let mut sc = Scene::new(way, "fill");
    let body = r#"
def fill(where):
    total = 0
    for i in range(8):
        try:
            with open(f"{where}/fill-{i}", "wb") as f:
                f.write(b"y" * (32 << 20))
        except OSError as e:
            note("fill " + where, False, e, exc=e)
            break
        total += 32 << 20
    return total
note("bytes in /", True, fill(""))
note("bytes in /usr", True, fill("/usr"))
"#;
    let out = sc.attack(sc.spec(body, json!({})).await).await;
    let obs = observations(&out);
    for p in ["bytes in /", "bytes in /usr"] {
        let n: u64 = obs[p].detail.parse().unwrap();
        assert_eq!(n, 0, "{p}: {out:?}");
    }
    refused(
        &obs,
        &["fill ", "fill /usr"],
        &["EROFS", "EACCES", "EPERM"],
        &out,
    );
    sc.healthy().await;
}

async fn connect_while_network_is_off(way: Way) {
    let mut sc = Scene::new(way, "tcp");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = r#"
import socket
def tcp():
    with socket.create_connection(("127.0.0.1", ARGS["port"]), timeout=3) as s:
        s.sendall(b"hello")
probe("tcp to the host", tcp)
probe("unix socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
probe("dns", lambda: socket.getaddrinfo("pypi.org", 443))
"#;
    let out = sc.attack(sc.spec(body, json!({"port": port})).await).await;
    let obs = observations(&out);
    refused(
        &obs,
        &["tcp to the host", "unix socket"],
        &["EPERM", "ENETUNREACH", "EACCES", "ECONNREFUSED"],
        &out,
    );
    assert!(!obs["dns"].ok, "{out:?}");
    assert!(
        listener.accept().is_err(),
        "the host listener accepted a connection"
    );
    sc.healthy().await;
}

async fn fork_bomb(way: Way) {
    let mut sc = Scene::new(way, "forks");
    let (_, marker) = marker();
    let body = r#"
import time
root = os.getpid()
forks, err = 0, None
end = time.time() + 4
while time.time() < end:
    try:
        pid = os.fork()
    except OSError as e:
        err = e
        if os.getpid() == root:
            break
        os.execv("/usr/bin/sleep", [ARGS["marker"], "60"])
    if pid == 0:
        os.execv("/usr/bin/sleep", [ARGS["marker"], "60"])
    forks += 1
note("forks", True, forks)
if err is not None:
    note("fork", False, err, exc=err)
"#;
    let watch = tokio::spawn({
        let marker = marker.clone();
        async move {
            let mut most = 0;
            for _ in 0..200 {
                most = most.max(marked_by_cmdline(&marker).len());
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            most
        }
    });
    let mut s = sc.spec(body, json!({"marker": marker})).await;
    s.max_processes = 32;
    let out = sc.attack(s).await;
    let obs = observations(&out);
    refused(&obs, &["fork"], &["EAGAIN"], &out);
    none_left(&marker).await;
    let most = watch.await.unwrap();
    assert!(most <= 32, "{most} processes at once, over pids.max 32");
    sc.healthy().await;
}

async fn memory_bomb(way: Way) {
    let mut sc = Scene::new(way, "memory");
    let body = r#"
chunks = []
try:
    while len(chunks) < 64:
        chunks.append(b"\x01" * (64 << 20))
    note("allocate", True, len(chunks) * 64)
except MemoryError as e:
    n = len(chunks)
    chunks = None
    note("allocate", False, n * 64, exc=e)
"#;
    let mut s = sc.spec(body, json!({})).await;
    s.memory_bytes = 1 << 30;
    let out = sc.attack(s).await;
    let obs = observations(&out);
    assert_eq!(obs["allocate"].exc, "MemoryError", "{out:?}");
    let mib: u64 = obs["allocate"].detail.parse().unwrap();
    assert!(mib < 1024, "{mib} MiB allocated under a 1 GiB limit");
    sc.healthy().await;
}

async fn infinite_loop_and_closed_stdin(way: Way) {
    let mut sc = Scene::new(way, "loop");
    let body = "if ARGS['how'] == 'spin':\n    while True:\n        pass\nos.close(0)\nimport time\ntime.sleep(100)\n";
    for how in ["spin", "sleep"] {
        let mut s = sc.spec(body, json!({"how": how})).await;
        s.timeout = Duration::from_millis(1500);
        let out = sc.attack(s).await;
        assert_eq!(out.exit, Exit::Timeout, "{how}: {out:?}");
    }
    sc.healthy().await;
}

async fn output_flood(way: Way) {
    let mut sc = Scene::new(way, "flood");
    let body = "chunk = b'z' * (1 << 20)\nfor _ in range(50):\n    sys.stdout.buffer.write(chunk)\n    sys.stderr.buffer.write(chunk)\n";
    let out = sc.attack(sc.spec(body, json!({})).await).await;
    assert_eq!(out.stdout.len(), run::DEFAULT_MAX_CAPTURE_BYTES);
    assert_eq!(
        out.stdout_truncated_bytes,
        50 * (1 << 20) - run::DEFAULT_MAX_CAPTURE_BYTES as u64
    );
    sc.healthy().await;
}

async fn escapees_die_with_the_call(way: Way) {
    let mut sc = Scene::new(way, "escapees");
    let (_, marker) = marker();
    let body = r#"
import subprocess
m = ARGS["marker"]
subprocess.Popen(["setsid", "/bin/sh", "-c", f"exec -a {m} sleep 300"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", [m, "300"])
    os._exit(0)
note("started", True)
"#;
    let out = sc
        .attack(sc.spec(body, json!({"marker": marker})).await)
        .await;
    assert!(observations(&out)["started"].ok, "{out:?}");
    none_left(&marker).await;
    sc.healthy().await;
}

async fn kernel_surface(way: Way) {
    let mut sc = Scene::new(way, "seccomp");
    let body = r#"
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == "x86_64"
def call(nr, *args):
    ctypes.set_errno(0)
    if libc.syscall(nr, *args) < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
probe("unshare", lambda: call(272 if x86 else 97, 0x00020000))
probe("ptrace", lambda: call(101 if x86 else 117, 0, 0, 0, 0))
probe("bpf", lambda: call(321 if x86 else 280, 0, 0, 0))
probe("io_uring_setup", lambda: call(425, 1, None))
probe("mount", lambda: call(165 if x86 else 40, b"none", b"/tmp", b"tmpfs", 0, None))
probe("keyctl", lambda: call(250 if x86 else 219, 0, 0, 0))
"#;
    let out = sc.attack(sc.spec(body, json!({})).await).await;
    refused(
        &observations(&out),
        &[
            "unshare",
            "ptrace",
            "bpf",
            "io_uring_setup",
            "mount",
            "keyctl",
        ],
        &["EPERM"],
        &out,
    );
    sc.healthy().await;
}

async fn what_landlock_closes(way: Way) {
    let mut sc = Scene::new(way, "landlock");
    let body = r#"
probe("init environ", lambda: open("/proc/1/environ", "rb").read())
probe("parent environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read())
probe("parent mem", lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1))
probe("signal init", lambda: os.kill(1, 0))
probe("write /proc/self/attr", lambda: open("/proc/self/attr/current", "w").write("x"))
probe("write /dev/shm", lambda: open("/dev/" + "shm/x", "w").write("x"))
"#;
    let out = sc.attack(sc.spec(body, json!({})).await).await;
    let obs = observations(&out);
    refused(
        &obs,
        &[
            "init environ",
            "parent environ",
            "parent mem",
            "write /proc/self/attr",
            "signal init",
        ],
        &["EACCES", "EPERM", "EINVAL"],
        &out,
    );
    match way {
        // A warm call's /dev/shm is the template's: only its own directory there.
        Way::Warm => refused(&obs, &["write /dev/shm"], &["EACCES"], &out),
        // A cold call's /dev/shm is its own tmpfs.
        Way::Cold => assert!(obs["write /dev/shm"].ok, "{out:?}"),
    }
    sc.healthy().await;
}

async fn never_privileged(way: Way) {
    assert!(rustix::process::geteuid().is_root(), "run as root");
    let mut sc = Scene::new(way, "privilege");
    let (k, marker) = marker();
    let body = r#"
import stat, time
def status(f):
    return [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith(f + ":")][0]
note("ids", True, [os.getuid(), os.geteuid(), os.getgid(), os.getegid()])
for f in ["CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]:
    note(f, True, status(f))
probe("setuid 0", lambda: os.setuid(0))
probe("chroot", lambda: os.chroot("/"))
probe("mknod", lambda: os.mknod(os.path.join(os.environ["TMPDIR"], "n"), 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
probe("nice -20", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
probe("SCHED_FIFO", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
import subprocess
subprocess.Popen(["sleep", "3"])
time.sleep(1)
"#;
    let mut s = sc.spec(body, json!({})).await;
    s.env = vec![(k, marker.clone())];
    // On the host, while it runs: the call's processes (its `sleep` carries the marker, both
    // ways) and, warm, the template run as a leased uid, never root.
    let seen = tokio::spawn({
        let marker = marker.clone();
        async move {
            for _ in 0..200 {
                let pids = marked_processes(&marker);
                if !pids.is_empty() {
                    return pids
                        .into_iter()
                        .map(|p| (p, host_uids(p)))
                        .collect::<Vec<_>>();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Vec::new()
        }
    });
    let out = sc.attack(s).await;
    let mut seen = seen.await.unwrap();
    if way == Way::Warm {
        for t in sc.pool.report().templates {
            if let Some(p) = t.pid {
                seen.push((p as i32, host_uids(p as i32)));
            }
        }
    }
    assert!(!seen.is_empty(), "no process of the call seen on the host");
    for (pid, uids) in seen {
        assert!(!uids.is_empty(), "{pid}");
        for uid in uids {
            assert!(uid >= RUN_UID_BASE, "process {pid} runs as host uid {uid}");
        }
    }
    let obs = observations(&out);
    assert_eq!(obs["ids"].detail, "[65534, 65534, 65534, 65534]", "{out:?}");
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert_eq!(obs[cap].detail, "0000000000000000", "{cap}");
    }
    assert_eq!(obs["NoNewPrivs"].detail, "1");
    assert_eq!(obs["Seccomp"].detail, "2");
    refused(
        &obs,
        &["setuid 0", "chroot", "mknod", "nice -20", "SCHED_FIFO"],
        &["EPERM", "EACCES", "EINVAL"],
        &out,
    );
    sc.healthy().await;
}

async fn reach_a_concurrent_call(way: Way) {
    let mut sc = Scene::new(way, "sibling");
    // One code for both: the victim waits for the attacker (a request the test answers
    // once the attacker is done); both calls run on the same path (warm: the same template).
    let body = r#"
import omniforge, signal
if ARGS.get("victim"):
    secret = os.environ["VICTIM_SECRET"]
    open(os.path.join(os.environ["TMPDIR"], "secret"), "w").write(secret)
    omniforge.request("hold", {"pid": os.getpid(), "dir": os.environ["TMPDIR"]}, timeout=30)
    note("victim alive", True, open(os.path.join(os.environ["TMPDIR"], "secret")).read() == secret)
else:
    pid, d = ARGS["pid"], ARGS["dir"]
    if pid != os.getpid():  # cold, the victim is pid 2 in its own namespace, as this call
        probe("signal", lambda: os.kill(pid, signal.SIGKILL))
        probe("environ", lambda: open(f"/proc/{pid}/environ", "rb").read())
    probe("its file", lambda: open(os.path.join(d, "secret")).read())
    probe("its directory", lambda: os.listdir(d))
    def every():
        found = []
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    if b"victim-secret" in open(f"/proc/{p}/environ", "rb").read():
                        found.append(p)
                except OSError:
                    pass
        return found
    note("environs with the secret", True, every())
"#;
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let mut victim = sc.spec(body, json!({"victim": true})).await;
    victim.env = vec![("VICTIM_SECRET".into(), "victim-secret-7".into())];
    victim.timeout = Duration::from_secs(30);
    let base = victim.clone();
    victim.messages = Some(tx);
    if way == Way::Warm {
        assert_eq!(sc.pool.prepare(&sc.key, &base).await, Prepared::Ready);
    }
    let victim_task = tokio::spawn({
        let (pool, key) = (sc.pool.clone(), sc.key.clone());
        async move {
            match way {
                Way::Cold => pool.runner().run(victim, CancellationToken::new()).await,
                Way::Warm => pool.run(&key, victim, CancellationToken::new()).await,
            }
            .unwrap()
        }
    });
    let (request, held) = loop {
        if let ScriptMessage::Request(r) = rx.recv().await.expect("the victim's request") {
            let held = r.params().clone();
            break (r, held);
        }
    };
    if way == Way::Warm {
        sc.calls += 1; // the victim's call, on the template already
    }
    let mut attacker = base.clone();
    attacker.env = Vec::new();
    attacker.arguments = json!({"pid": held["pid"], "dir": held["dir"]});
    let out = sc.attack(attacker).await;
    let obs = observations(&out);
    match way {
        // Siblings in one template, one PID namespace, one /tmp.
        Way::Warm => refused(
            &obs,
            &["signal", "environ", "its file", "its directory"],
            &["EPERM", "EACCES", "ENOENT"],
            &out,
        ),
        // Separate sandboxes: the victim's pid and TMPDIR (`/tmp`) name the attacker's own.
        Way::Cold => refused(&obs, &["its file"], &["ENOENT"], &out),
    }
    assert_eq!(obs["environs with the secret"].detail, "[]", "{out:?}");
    assert!(!stdout(&out).contains("victim-secret-7"));
    request.respond(Ok(json!({})));
    let victim = victim_task.await.unwrap();
    let vobs = observations(&victim);
    assert_eq!(vobs["victim alive"].detail, "True", "{victim:?}");
    sc.healthy().await;
}

both!(
    read_host_files,
    read_the_servers_environment,
    write_outside_its_directory,
    fill_the_sandbox_root,
    connect_while_network_is_off,
    fork_bomb,
    memory_bomb,
    infinite_loop_and_closed_stdin,
    output_flood,
    escapees_die_with_the_call,
    kernel_surface,
    what_landlock_closes,
    never_privileged,
    reach_a_concurrent_call,
);
