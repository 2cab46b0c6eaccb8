//! Warm templates (issue 15): a call forks a child of a template that started in the full
//! sandbox. What a warm call answers is what a cold call answers; nothing of one call reaches
//! the next or a concurrent one; the pool falls back to cold starts and retires templates.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use omniforge_script::*;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::util::*;

/// A pool in front of a sandboxed runner.
pub(crate) fn pool_with(config: WarmConfig) -> WarmPool {
    let p = WarmPool::new(sandboxed(), config);
    assert!(p.is_on(), "{:?}", p.report().off);
    p
}

pub(crate) fn pool() -> WarmPool {
    pool_with(WarmConfig::default())
}

/// A key unique to the calling test.
pub(crate) fn key(name: &str) -> WarmKey {
    WarmKey::new(format!("{name}@1"), "alice")
}

pub(crate) async fn warm(pool: &WarmPool, key: &WarmKey, spec: RunSpec) -> RunOutput {
    pool.run(key, spec, CancellationToken::new()).await.unwrap()
}

/// Prepares `key` for `spec` and fails unless its calls will run warm.
pub(crate) async fn ready(pool: &WarmPool, key: &WarmKey, spec: &RunSpec) {
    assert_eq!(pool.prepare(key, spec).await, Prepared::Ready);
}

/// How many calls `key`'s template runs now.
fn running_of(pool: &WarmPool, key: &WarmKey) -> usize {
    pool.report()
        .templates
        .iter()
        .filter(|t| &t.key == key)
        .map(|t| t.running)
        .sum()
}

fn calls_of(pool: &WarmPool, key: &WarmKey) -> u64 {
    pool.report()
        .templates
        .iter()
        .find(|t| &t.key == key)
        .map_or(0, |t| t.calls)
}

/// Scripts whose answer must be the same, byte for byte, cold and warm.
const SAME_ANSWER: &[&str] = &[
    "print('hello')",
    "import omniforge\nprint(omniforge.args())",
    "import json, sys\nprint(json.load(sys.stdin)['n'] * 2)",
    "import sys\nprint('partial')\nsys.stderr.write('bad thing\\n')\nsys.exit(3)",
    "raise ValueError('nope')",
    "def f():\n    raise KeyError('deep')\nf()",
    "import sys\nsys.exit('a message')",
    "import sys\nsys.exit(300)",
    "import sys\nsys.exit()",
    "import os\nprint('x', end='', flush=True)\nos._exit(7)",
    "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
    "raise KeyboardInterrupt",
    "print('trailing  \\u00a0 ', end='')",
    "import sys\nprint(__name__, __file__, sys.argv, __spec__, __package__)",
    "import atexit\natexit.register(lambda: print('bye'))\nprint('hi')",
    "import threading, time\nt = threading.Thread(target=lambda: (time.sleep(0.2), print('late')))\nt.start()\nprint('early')",
    "class C:\n    def __del__(self):\n        print('finalized')\nc = C()\nprint('made')",
    "import sys\nsys.stdout.write('no newline')",
    "print(undefined_name)",
];

#[tokio::test]
async fn a_warm_call_answers_as_a_cold_call_does() {
    let pool = pool();
    let cold = sandboxed();
    for (i, code) in SAME_ANSWER.iter().enumerate() {
        let key = key(&format!("same-{i}"));
        let mut s = spec(code).await;
        s.arguments = json!({"n": 21});
        ready(&pool, &key, &s).await;
        let w = warm(&pool, &key, s.clone()).await;
        let c = run(&cold, s).await;
        assert_eq!(
            calls_of(&pool, &key),
            1,
            "{code}: the call did not run warm"
        );
        let show = |o: &RunOutput| {
            format!(
                "{:?} stdout {:?} stderr {:?}",
                o.exit,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        assert_eq!(show(&w), show(&c), "{code}");
        assert_eq!(prototype_text(&w, None), prototype_text(&c, None), "{code}");
    }
}

#[tokio::test]
async fn code_that_needs_a_private_tmp_runs_cold() {
    let pool = pool();
    for (code, why) in [
        (
            "open('/tmp/x', 'w').write('y')\nprint(open('/tmp/x').read())",
            "/tmp",
        ),
        (
            "import multiprocessing\nprint(multiprocessing.Lock() is not None)",
            "multiprocessing",
        ),
        (
            "from concurrent.futures import ProcessPoolExecutor\nprint('ok')",
            "ProcessPoolExecutor",
        ),
    ] {
        let key = key(&format!("cold-{why}"));
        let s = spec(code).await;
        match pool.prepare(&key, &s).await {
            Prepared::Cold(reason) => assert!(reason.contains(why), "{reason}"),
            other => panic!("{code}: {other:?}"),
        }
        let out = warm(&pool, &key, s).await;
        assert_eq!(out.exit, Exit::Code(0), "{code}: {out:?}");
        assert_eq!(calls_of(&pool, &key), 0);
    }
}

/// Writes files, a module global, the environment, a builtin, and the random state; then
/// reports what it found of an earlier call's.
const LEFTOVERS: &str = r#"
import builtins, json, os, random, sys
found = {
    "tmp entries": sorted(os.listdir(os.environ["TMPDIR"])),
    "json marker": getattr(json, "_marker", None),
    "builtins marker": getattr(builtins, "_marker", None),
    "module": "leftover_module" in sys.modules,
    "env": os.environ.get("LEFTOVER"),
    "cwd entries": sorted(os.listdir(".")),
}
for name, path in [("earlier dir", json.load(sys.stdin).get("earlier", "/nonexistent"))]:
    try:
        found[name] = sorted(os.listdir(path))
    except OSError as e:
        found[name] = e.strerror
try:
    os.listdir("/" + "tmp")
    found["list tmp"] = "ok"
except OSError as e:
    found["list tmp"] = e.strerror
open(os.path.join(os.environ["TMPDIR"], "left-file"), "w").write("x")
json._marker = builtins._marker = "set"
sys.modules["leftover_module"] = json
os.environ["LEFTOVER"] = "set"
random.seed(1)
found["tmpdir"] = os.environ["TMPDIR"]
found["random"] = random.random()
print(json.dumps(found))
"#;

#[tokio::test]
async fn nothing_of_a_call_reaches_the_next() {
    let pool = pool();
    let key = key("leftovers");
    let s = spec(LEFTOVERS).await;
    ready(&pool, &key, &s).await;
    let first: Value = serde_json::from_slice(&warm(&pool, &key, s.clone()).await.stdout).unwrap();
    let mut second = s.clone();
    second.arguments = json!({"earlier": first["tmpdir"]});
    let out = warm(&pool, &key, second).await;
    let second: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(calls_of(&pool, &key), 2);
    for found in [&first, &second] {
        assert_eq!(found["tmp entries"], json!([]), "{found}");
        assert_eq!(found["cwd entries"], json!([]), "{found}");
        assert_eq!(found["json marker"], Value::Null, "{found}");
        assert_eq!(found["builtins marker"], Value::Null, "{found}");
        assert_eq!(found["module"], false, "{found}");
        assert_eq!(found["env"], Value::Null, "{found}");
        assert_eq!(found["list tmp"], "Permission denied", "{found}");
    }
    // The first call's directory is gone, or at least out of reach.
    let earlier = second["earlier dir"].as_str().unwrap_or("listed");
    assert!(
        earlier == "Permission denied" || earlier == "No such file or directory",
        "{second}"
    );
    assert_ne!(first["tmpdir"], second["tmpdir"]);
}

#[tokio::test]
async fn each_call_draws_its_own_random_numbers() {
    let pool = pool();
    let key = key("random");
    let code =
        "import random, uuid, numpy\nprint(random.random(), numpy.random.random(), uuid.uuid4())\n";
    let mut s = RunSpec::new(&numpy_env().await, code);
    s.timeout = Duration::from_secs(60);
    ready(&pool, &key, &s).await;
    let mut seen = BTreeSet::new();
    for _ in 0..3 {
        let out = warm(&pool, &key, s.clone()).await;
        assert_eq!(out.exit, Exit::Code(0), "{out:?}");
        for value in stdout(&out).split_whitespace() {
            assert!(seen.insert(value.to_owned()), "{value} came twice");
        }
    }
    assert_eq!(calls_of(&pool, &key), 3);
}

/// Host-side search of every process of the pool's templates (bubblewrap, its init, the
/// template, its spares: everything whose command line names the driver) for `needle`, in
/// its environment and in every readable mapping of its memory.
fn templates_holding(needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut searched = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmdline).contains("/omniforge/warm/template.py") {
            continue;
        }
        searched += 1;
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if environ.windows(needle.len()).any(|w| w == needle) {
            found.push(format!("{pid} environ"));
        }
        if memory_holds(pid, needle) {
            found.push(format!("{pid} memory"));
        }
    }
    assert!(
        searched >= 3,
        "found only {searched} template processes to search"
    );
    found
}

fn memory_holds(pid: i32, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let Ok(mut mem) = std::fs::File::open(format!("/proc/{pid}/mem")) else {
        return false;
    };
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.starts_with('r') || line.contains("[vvar") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(SeekFrom::Start(a)).is_err() || mem.read_exact(&mut buf).is_err() {
            continue;
        }
        if buf.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn a_secret_reaches_only_its_call() {
    assert!(
        rustix::process::geteuid().is_root(),
        "the template's memory is searched from the host: run as root"
    );
    let pool = pool();
    let key = key("secrets");
    let code = "import os\nprint(os.environ['API_KEY'])\nx = os.environ['API_KEY'] * 3\n";
    let (_, m) = marker();
    let (first, second) = (format!("first-{m}"), format!("second-{m}"));
    let mut s = spec(code).await;
    ready(&pool, &key, &s).await;
    for secret in [&first, &second] {
        s.env = vec![("API_KEY".into(), secret.clone())];
        let out = warm(&pool, &key, s.clone()).await;
        assert_eq!(
            stdout(&out),
            format!("{secret}\n"),
            "only its own value: {out:?}"
        );
        // Look once the call's child is gone and the template has its next spare.
        wait_until("the template is idle with a spare", || {
            pool.report()
                .templates
                .iter()
                .any(|t| t.key == key && t.running == 0 && t.spares >= 1)
        })
        .await;
        for needle in [&first, &second] {
            assert_eq!(
                templates_holding(needle.as_bytes()),
                Vec::<String>::new(),
                "{needle} is in a template's environment or memory"
            );
        }
    }
    assert_eq!(calls_of(&pool, &key), 2);
}

#[tokio::test]
async fn nothing_a_call_started_outlives_it() {
    let pool = pool();
    let key = key("tree");
    let code = r#"
import os, subprocess
subprocess.Popen(["setsid", "sleep", "300"])
subprocess.Popen(["/bin/sh", "-c", "sleep 300 & exit 0"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", ["sleep", "300"])
    os._exit(0)
print("started")
"#;
    let mut s = spec(code).await;
    ready(&pool, &key, &s).await;
    for _ in 0..2 {
        let (k, v) = marker();
        s.env = vec![(k, v.clone())];
        let out = warm(&pool, &key, s.clone()).await;
        assert_eq!(stdout(&out), "started\n", "{out:?}");
        assert_eq!(
            wait_gone(&v, Duration::from_secs(3)).await,
            Vec::<i32>::new(),
            "processes left behind"
        );
    }
    assert_eq!(calls_of(&pool, &key), 2);
}

/// Reports its pid and directory through the side channel, then waits for the test's
/// answer to a request before it exits: an attacker runs meanwhile.
const VICTIM: &str = r#"
import json, os, omniforge
secret = os.environ["VICTIM_SECRET"]
os.makedirs(os.path.join(os.environ["TMPDIR"], "sub"))
open(os.path.join(os.environ["TMPDIR"], "secret.txt"), "w").write(secret)
omniforge.request("hold", {"pid": os.getpid(), "dir": os.environ["TMPDIR"]}, timeout=30)
print("alive", open(os.path.join(os.environ["TMPDIR"], "secret.txt")).read() == secret)
"#;

/// Tries every way to a concurrent call of the same template.
const ATTACKER: &str = r#"
import errno, json, os, signal, sys
a = json.load(sys.stdin)
pid, d = a["pid"], a["dir"]
out = {}
def probe(name, f):
    try:
        out[name] = "ok " + repr(f())[:120]
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
probe("signal 0", lambda: os.kill(pid, 0))
probe("SIGKILL", lambda: os.kill(pid, signal.SIGKILL))
probe("SIGKILL template", lambda: os.kill(os.getppid(), signal.SIGKILL))
for entry in ["environ", "mem", "cwd", "root"]:
    probe("/proc " + entry, lambda e=entry: os.listdir(f"/proc/{pid}/{e}") if e in ("cwd", "root") else open(f"/proc/{pid}/{e}", "rb").read(64))
# Its descriptors' numbers can be listed (as its pid and command line can be seen: see the
# module doc of `warm`), not what they are.
probe("/proc fd target", lambda: os.readlink(f"/proc/{pid}/fd/1"))
probe("template environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read(64))
probe("list dir", lambda: os.listdir(d))
probe("read file", lambda: open(d + "/secret.txt").read())
probe("write file", lambda: open(d + "/mine.txt", "w").write("x"))
def rename_into():
    mine = os.path.join(os.environ["TMPDIR"], "f")
    open(mine, "w").close()
    os.rename(mine, d + "/f")
probe("rename into", rename_into)
probe("shm dir", lambda: os.listdir(d.replace("/" + "tmp/", "/dev/" + "shm/")))
print(json.dumps(out))
"#;

#[tokio::test]
async fn concurrent_calls_cannot_reach_each_other() {
    let pool = pool();
    let key = key("siblings");
    let victim_spec = spec(VICTIM).await;
    let attacker_spec = spec(ATTACKER).await;
    // One template for both (the same key and code would be usual; two codes, one key each,
    // share nothing): the attacker must be a sibling, so both codes run in one template.
    let both = format!(
        "import json, sys\nA = json.loads(sys.stdin.read() or '{{}}')\nsys.stdin = __import__('io').StringIO(json.dumps(A))\nif A.get('attack'):\n    exec(compile({ATTACKER:?}, '/omniforge/main.py', 'exec'))\nelse:\n    exec(compile({VICTIM:?}, '/omniforge/main.py', 'exec'))\n"
    );
    let _ = (victim_spec, attacker_spec);
    let mut base = spec(&both).await;
    base.timeout = Duration::from_secs(30);
    ready(&pool, &key, &base).await;
    let (tx, mut rx) = mpsc::channel(8);
    let mut victim = base.clone();
    victim.env = vec![("VICTIM_SECRET".into(), "victim-secret-42".into())];
    victim.messages = Some(tx);
    let victim_task = tokio::spawn({
        let (pool, key) = (pool.clone(), key.clone());
        async move { warm(&pool, &key, victim).await }
    });
    let (request, held) = loop {
        match rx.recv().await.expect("the victim's request") {
            ScriptMessage::Request(r) => {
                let params = r.params().clone();
                break (r, params);
            }
            _ => continue,
        }
    };
    let mut attacker = base.clone();
    attacker.arguments = json!({"attack": true, "pid": held["pid"], "dir": held["dir"]});
    let out = warm(&pool, &key, attacker).await;
    let got: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    eprintln!("{got:#}");
    for (probe, result) in got.as_object().unwrap() {
        let r = result.as_str().unwrap();
        assert!(
            r.starts_with("EPERM") || r.starts_with("EACCES") || r.starts_with("ENOENT"),
            "{probe} reached the concurrent call: {r}"
        );
    }
    assert!(!stdout(&out).contains("victim-secret-42"));
    request.respond(Ok(json!({})));
    let victim = victim_task.await.unwrap();
    assert_eq!(stdout(&victim), "alive True\n", "{victim:?}");
    assert_eq!(calls_of(&pool, &key), 2);
}

#[tokio::test]
async fn concurrent_calls_each_fork_a_child() {
    let pool = pool();
    let key = key("concurrent");
    let s = spec("import os, time\ntime.sleep(0.3)\nprint(os.getpid())\n").await;
    ready(&pool, &key, &s).await;
    let outs = futures_join(&pool, &key, &s, 4).await;
    let pids: BTreeSet<String> = outs.iter().map(stdout).collect();
    assert_eq!(pids.len(), 4, "{pids:?}");
    assert_eq!(calls_of(&pool, &key), 4);
}

async fn futures_join(pool: &WarmPool, key: &WarmKey, s: &RunSpec, n: usize) -> Vec<RunOutput> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (pool, key, s) = (pool.clone(), key.clone(), s.clone());
            tokio::spawn(async move { warm(&pool, &key, s).await })
        })
        .collect();
    let mut outs = Vec::new();
    for t in tasks {
        let out = t.await.unwrap();
        assert_eq!(out.exit, Exit::Code(0), "{out:?}");
        outs.push(out);
    }
    outs
}

#[tokio::test]
async fn warm_calls_are_admitted_as_cold_ones() {
    let mut config = config(SandboxLevel::Standard);
    config.max_concurrent = 1;
    config.queue = 0;
    let pool = WarmPool::new(Runner::new(config).unwrap(), WarmConfig::default());
    let key = key("busy");
    let s = spec("import time\ntime.sleep(1)\nprint('done')\n").await;
    ready(&pool, &key, &s).await;
    let first = tokio::spawn({
        let (pool, key, s) = (pool.clone(), key.clone(), s.clone());
        async move { warm(&pool, &key, s).await }
    });
    wait_until("the first call runs", || running_of(&pool, &key) == 1).await;
    match pool.run(&key, s, CancellationToken::new()).await {
        Err(RunError::Busy) => {}
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(stdout(&first.await.unwrap()), "done\n");
}

#[tokio::test]
async fn a_warm_timeout_keeps_the_output_and_kills_the_tree() {
    let pool = pool();
    let key = key("timeout");
    let code = "import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '300'])\nprint('started', flush=True)\ntime.sleep(300)\n";
    let (k, v) = marker();
    let mut s = spec(code).await;
    s.env = vec![(k, v.clone())];
    s.timeout = Duration::from_millis(1500);
    ready(&pool, &key, &s).await;
    let out = warm(&pool, &key, s.clone()).await;
    assert_eq!(out.exit, Exit::Timeout, "{out:?}");
    assert_eq!(
        prototype_text(&out, None),
        ("started\n[timeout]".to_owned(), true)
    );
    assert_eq!(
        wait_gone(&v, Duration::from_secs(3)).await,
        Vec::<i32>::new()
    );
    // Cancellation too, and the template goes on serving.
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (pool, key, s, cancel) = (pool.clone(), key.clone(), s.clone(), cancel.clone());
        async move { pool.run(&key, s, cancel).await.unwrap() }
    });
    wait_until("the call's tree is up", || !marked_processes(&v).is_empty()).await;
    cancel.cancel();
    assert_eq!(task.await.unwrap().exit, Exit::Cancelled);
    assert_eq!(calls_of(&pool, &key), 2);
}

#[tokio::test]
async fn a_warm_call_output_is_capped() {
    let pool = pool();
    let key = key("caps");
    let code = "import sys\nchunk = b'x' * 1_000_000\nfor _ in range(20):\n    sys.stdout.buffer.write(chunk)\n    sys.stderr.buffer.write(chunk)\n";
    let mut s = spec(code).await;
    s.max_capture_bytes = 64 * 1024;
    ready(&pool, &key, &s).await;
    let out = warm(&pool, &key, s).await;
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!((out.stdout.len(), out.stderr.len()), (64 * 1024, 64 * 1024));
    assert_eq!(out.stdout_truncated_bytes, 20_000_000 - 64 * 1024);
    assert_eq!(calls_of(&pool, &key), 1);
}

#[tokio::test]
async fn the_side_channel_works_warm() {
    let pool = pool();
    let key = key("channel");
    let code = r#"
import omniforge
a = omniforge.args()
omniforge.progress(1, 2, "half")
omniforge.log("info", {"k": a["k"]})
answer = omniforge.request("ask", {"q": 1})
omniforge.result(content=[omniforge.text("t" + str(answer["v"]))], structured={"k": a["k"]})
"#;
    let s = spec(code).await;
    ready(&pool, &key, &s).await;
    for k in 0..2 {
        let (tx, mut rx) = mpsc::channel(16);
        let mut call = s.clone();
        call.arguments = json!({"k": k});
        call.messages = Some(tx);
        let task = tokio::spawn({
            let (pool, key) = (pool.clone(), key.clone());
            async move { warm(&pool, &key, call).await }
        });
        let mut seen = Vec::new();
        while let Some(m) = rx.recv().await {
            match m {
                ScriptMessage::Progress(p) => seen.push(format!("progress {}", p.done)),
                ScriptMessage::Log(l) => seen.push(format!("log {}", l.data)),
                ScriptMessage::Request(r) => {
                    seen.push(format!("request {}", r.method()));
                    r.respond(Ok(json!({"v": k})));
                }
                ScriptMessage::Result(_) => seen.push("result".into()),
                _ => {}
            }
        }
        let out = task.await.unwrap();
        assert_eq!(out.exit, Exit::Code(0), "{out:?}");
        assert_eq!(
            seen,
            [
                "progress 1",
                &format!("log {{\"k\":{k}}}"),
                "request ask",
                "result"
            ]
        );
        let result = out.result.unwrap();
        assert_eq!(result.structured, Some(json!({"k": k})));
    }
    assert_eq!(calls_of(&pool, &key), 2);
}

#[tokio::test]
async fn only_its_own_descriptors_reach_a_warm_call() {
    let pool = pool();
    let key = key("fds");
    let code = r#"
import os, stat
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        print(fd, os.readlink("/proc/self/fd/%d" % fd))
    except OSError:
        pass
print("chan", os.environ["OMNIFORGE_FD"])
"#;
    let s = spec(code).await;
    ready(&pool, &key, &s).await;
    let out = warm(&pool, &key, s).await;
    let text = stdout(&out);
    let chan = text.lines().find_map(|l| l.strip_prefix("chan ")).unwrap();
    let mut others = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with("chan ")) {
        let (fd, target) = line.split_once(' ').unwrap();
        if !["0", "1", "2", chan].contains(&fd) {
            others.push(target.to_owned());
        }
    }
    // Besides stdin, stdout, stderr and the side channel: only the child's own socket to
    // the server, which ends its call.
    assert_eq!(others.len(), 1, "{text}");
    assert!(others[0].starts_with("socket:"), "{text}");
}

#[tokio::test]
async fn retiring_a_version_stops_its_template() {
    let pool = pool();
    let key = key("retire");
    let other = WarmKey::new("retire@1", "bob");
    let s = spec("print('v1')").await;
    ready(&pool, &key, &s).await;
    ready(&pool, &other, &s).await;
    let pid = pool.report().templates[0].pid.unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(pool.retire("retire@1"), 2, "both partitions");
    assert!(pool.report().templates.is_empty());
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the template lives on"
    );
    // The next call runs cold, then starts a new template for the calls after it.
    let out = warm(&pool, &key, s.clone()).await;
    assert_eq!(stdout(&out), "v1\n");
    wait_for_ready(&pool, &key).await;
    let out = warm(&pool, &key, s).await;
    assert_eq!(stdout(&out), "v1\n");
    assert_eq!(calls_of(&pool, &key), 1);
    // A version whose code changed under the same key gets a new template.
    let v2 = spec("print('v2')").await;
    assert_eq!(stdout(&warm(&pool, &key, v2).await), "v2\n");
    wait_for_ready(&pool, &key).await;
    assert_eq!(pool.retire_env(&spec("").await.env_dir), 1);
}

async fn wait_for_ready(pool: &WarmPool, key: &WarmKey) -> TemplateReport {
    wait_for_ready_but(pool, key, None).await
}

/// Waits for `key`'s template to be ready (another one than `not`).
async fn wait_for_ready_but(pool: &WarmPool, key: &WarmKey, not: Option<u32>) -> TemplateReport {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = pool.report().templates.into_iter().find(|t| &t.key == key)
            && t.state == TemplateState::Ready
            && t.pid != not
            && t.pid
                .is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "no ready template: {:?}",
            pool.report()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_crashed_template_is_replaced_and_its_calls_run_cold() {
    let pool = pool();
    let key = key("crash");
    let s = spec("import time\ntime.sleep(0.5)\nprint('answered')\n").await;
    ready(&pool, &key, &s).await;
    // A crash between calls: the next call runs cold, the template is replaced.
    let pid = wait_for_ready(&pool, &key).await.pid.unwrap();
    kill(pid);
    let out = warm(&pool, &key, s.clone()).await;
    assert_eq!(stdout(&out), "answered\n", "{out:?}");
    let replaced = wait_for_ready_but(&pool, &key, Some(pid)).await;
    // A crash during a call: the call is answered all the same (run again cold).
    let task = tokio::spawn({
        let (pool, key, s) = (pool.clone(), key.clone(), s.clone());
        async move { warm(&pool, &key, s).await }
    });
    wait_until("the call runs", || running_of(&pool, &key) == 1).await;
    kill(replaced.pid.unwrap());
    let out = task.await.unwrap();
    assert_eq!(
        (stdout(&out).as_str(), out.exit),
        ("answered\n", Exit::Code(0)),
        "{out:?}"
    );
    wait_for_ready_but(&pool, &key, replaced.pid).await;
}

fn kill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
}

#[tokio::test]
async fn the_pool_is_off_without_what_isolation_needs() {
    let off = WarmPool::new(
        sandboxed(),
        WarmConfig {
            max_templates: 0,
            ..WarmConfig::default()
        },
    );
    assert!(!off.is_on());
    let no_landlock = WarmPool::new(runner_without(&["landlock"]), WarmConfig::default());
    assert!(no_landlock.report().off.unwrap().contains("landlock"));
    let key = key("off");
    let s = spec("print('cold')").await;
    for pool in [&off, &no_landlock] {
        assert!(matches!(pool.prepare(&key, &s).await, Prepared::Cold(_)));
        assert_eq!(stdout(&warm(pool, &key, s.clone()).await), "cold\n");
        assert!(pool.report().templates.is_empty());
    }
}

#[tokio::test]
async fn the_pool_keeps_its_templates_within_bounds() {
    let pool = pool_with(WarmConfig {
        max_templates: 1,
        idle: Duration::from_secs(1),
        ..WarmConfig::default()
    });
    let (a, b) = (key("bound-a"), key("bound-b"));
    let s = spec("print(1)").await;
    ready(&pool, &a, &s).await;
    ready(&pool, &b, &s).await;
    let keys: Vec<WarmKey> = pool.report().templates.into_iter().map(|t| t.key).collect();
    assert_eq!(
        keys,
        std::slice::from_ref(&b),
        "the least recently used one made room"
    );
    // Idle expiry.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !pool.report().templates.is_empty() {
        assert!(
            Instant::now() < deadline,
            "never expired: {:?}",
            pool.report()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_report_counts_template_and_spare_memory() {
    let pool = pool();
    let key = key("memory");
    let s = spec("import json\nprint(1)").await;
    ready(&pool, &key, &s).await;
    warm(&pool, &key, s).await;
    let t = wait_for_ready(&pool, &key).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let report = loop {
        let r = pool.report();
        if r.templates[0].spares == 1 || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let t2 = &report.templates[0];
    assert_eq!(t2.spares, 1, "{report:?}");
    assert!(t2.template_rss_bytes > 4 << 20, "{report:?}");
    assert!(t2.spares_rss_bytes > 1 << 20, "{report:?}");
    assert!(
        report.pss_bytes > 0 && report.pss_bytes < report.rss_bytes,
        "{report:?}"
    );
    assert!(t.boot.is_some());
}

/// Call directories in a template's /tmp, seen from the host.
fn call_dirs(template: u32) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(format!("/proc/{template}/root/tmp"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// However a call ends (`done`, its own exit, a timeout), its directories are removed and a
/// new spare is made.
#[tokio::test]
async fn every_call_is_cleaned_up_after() {
    let pool = pool();
    let key = key("cleanup");
    let code = "import json, os, sys, time\nopen(os.environ['TMPDIR'] + '/f', 'w').write('x')\nhow = json.load(sys.stdin)['how']\nif how == 'exit':\n    os._exit(3)\nif how == 'hang':\n    time.sleep(60)\nprint('done')\n";
    let mut s = spec(code).await;
    s.timeout = Duration::from_secs(2);
    ready(&pool, &key, &s).await;
    let pid = wait_for_ready(&pool, &key).await.pid.unwrap();
    for (how, exit) in [
        ("done", Exit::Code(0)),
        ("exit", Exit::Code(3)),
        ("hang", Exit::Timeout),
    ] {
        s.arguments = json!({"how": how});
        let out = warm(&pool, &key, s.clone()).await;
        assert_eq!(out.exit, exit, "{how}: {out:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let t = wait_for_ready(&pool, &key).await;
            let dirs = call_dirs(pid);
            if t.spares == 1 && dirs.len() == 1 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{how}: spares {}, call dirs {dirs:?}",
                t.spares
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
