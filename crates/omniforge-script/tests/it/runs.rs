//! Running scripts: I/O, exit, limits, timeout, cancellation, admission.

use std::time::{Duration, Instant};

use omniforge_script::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::util::*;

#[tokio::test]
async fn hello_world() {
    let out = run(&sandboxed(), spec("print('hello')").await).await;
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(stdout(&out), "hello\n");
    assert!(out.stderr.is_empty());
    assert_eq!(prototype_text(&out, None), ("hello".to_owned(), false));
}

/// Issue 30: a traceback names no host path: the interpreter's prefix reads `<python>` and
/// the environment `<env>`.
#[tokio::test]
async fn tracebacks_show_no_host_paths() {
    let s = spec("import json\njson.loads('{bad')\n").await;
    let env_dir = s.env_dir.display().to_string();
    let python = std::fs::canonicalize(&s.python).unwrap();
    let prefix = python
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string();
    let out = run(&sandboxed(), s).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("JSONDecodeError"), "{stderr}");
    assert!(stderr.contains("File \"<python>/lib/"), "{stderr}");
    assert!(
        !stderr.contains(&prefix) && !stderr.contains(&env_dir),
        "a host path ({prefix} or {env_dir}) in {stderr}"
    );
}

#[tokio::test]
async fn arguments_arrive_on_stdin() {
    let code =
        "import json, sys, omniforge\nraw = sys.stdin.read()\nprint(json.loads(raw)['name'])\n";
    let mut s = spec(code).await;
    s.arguments = json!({"name": "Ada", "n": [1, 2]});
    let out = run(&sandboxed(), s).await;
    assert_eq!(
        (stdout(&out).as_str(), out.exit),
        ("Ada\n", Exit::Code(0)),
        "{out:?}"
    );

    // The helper's args() reads the same stdin.
    let mut s = spec("import omniforge\nprint(omniforge.args()['n'][1])\n").await;
    s.arguments = json!({"n": [1, 2]});
    assert_eq!(stdout(&run(&sandboxed(), s).await), "2\n");
}

#[tokio::test]
async fn exit_code_and_stderr() {
    let code = "import sys\nprint('partial')\nsys.stderr.write('bad thing\\n')\nsys.exit(3)\n";
    let out = run(&sandboxed(), spec(code).await).await;
    assert_eq!(out.exit, Exit::Code(3));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "bad thing\n");
    assert_eq!(
        prototype_text(&out, None),
        ("partial\n[stderr] bad thing\n[exit 3]".to_owned(), true)
    );

    let out = run(&sandboxed(), spec("raise ValueError('nope')").await).await;
    assert_eq!(out.exit, Exit::Code(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ValueError: nope"));
}

#[tokio::test]
async fn environment_is_cleared() {
    let code = "import os, sys\nprint(sorted(k for k in os.environ if k != 'LC_CTYPE'))\nprint(os.getcwd(), os.getuid())\n";
    let mut s = spec(code).await;
    s.env = vec![("API_KEY".into(), "s3cret".into())];
    let out = run(&sandboxed(), s).await;
    assert_eq!(
        stdout(&out),
        {
            let mut names = vec![
                "API_KEY",
                "HOME",
                "LANG",
                "OMNIFORGE_FD",
                "PATH",
                "PWD",
                "TMPDIR",
            ];
            names.extend(["PYTHONDONTWRITEBYTECODE"].iter().chain(SINGLE_THREAD_VARS));
            names.sort_unstable();
            let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
            format!("[{}]\n/tmp 65534\n", quoted.join(", "))
        },
        "{out:?}"
    );
}

#[tokio::test]
async fn output_is_capped_and_drained() {
    let code = "import sys\nchunk = b'x' * 1_000_000\nfor _ in range(20):\n    sys.stdout.buffer.write(chunk)\n    sys.stderr.buffer.write(chunk)\n";
    let mut s = spec(code).await;
    s.max_capture_bytes = 64 * 1024;
    let out = run(&sandboxed(), s).await;
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(out.stdout.len(), 64 * 1024);
    assert_eq!(out.stderr.len(), 64 * 1024);
    assert_eq!(out.stdout_truncated_bytes, 20_000_000 - 64 * 1024);
    assert_eq!(out.stderr_truncated_bytes, 20_000_000 - 64 * 1024);
    let (text, _) = prototype_text(&out, None);
    assert!(text.contains(&format!(
        "[stdout truncated: {} bytes]",
        20_000_000 - 64 * 1024
    )));
}

/// A script that starts a `sleep &` grandchild, a `setsid` grandchild (with `setsid`) and then
/// hangs.
const TREE: &str = r#"
import subprocess, time
subprocess.Popen(["/bin/sh", "-c", "sleep 300 & wait"])
subprocess.Popen(["setsid", "/bin/sh", "-c", "sleep 300"])
subprocess.Popen(["/bin/sh", "-c", "sleep 300"], start_new_session=True)
print("started", flush=True)
time.sleep(300)
"#;

async fn timeout_kills_tree(runner: Runner) {
    let (k, v) = marker();
    let mut s = spec(TREE).await;
    s.env = vec![(k, v.clone())];
    s.timeout = Duration::from_millis(1500);
    let out = run(&runner, s).await;
    assert_eq!(out.exit, Exit::Timeout, "{out:?}");
    assert_eq!(stdout(&out), "started\n");
    assert_eq!(
        wait_gone(&v, Duration::from_secs(2)).await,
        Vec::<i32>::new(),
        "processes left behind"
    );
    assert_eq!(
        prototype_text(&out, None),
        ("started\n[timeout]".to_owned(), true)
    );
}

#[tokio::test]
async fn timeout_kills_tree_in_bubblewrap() {
    timeout_kills_tree(sandboxed()).await;
}

/// Without bubblewrap, `setsid` escapees are caught by `cgroup.kill`.
#[tokio::test]
async fn timeout_kills_tree_with_cgroups_only() {
    let mut config = RunnerConfig::new(SandboxLevel::Standard);
    config.bwrap = Some("/nonexistent/bwrap".into());
    let runner = Runner::new(config).unwrap();
    assert!(
        !runner
            .layers()
            .iter()
            .any(|l| l.name == "namespaces" && l.active)
    );
    assert_layer(&runner, "cgroup-kill");
    timeout_kills_tree(runner).await;
}

/// Without bubblewrap and without cgroups, a root server's run has a uid of its own: what
/// still runs as it after the run (a `setsid` escapee) is killed before the slot is reused.
#[tokio::test]
async fn timeout_kills_tree_with_a_uid_of_its_own_only() {
    let runner = runner_without(&["namespaces", "cgroup-pids", "cgroup-kill"]);
    assert_layer(&runner, "unprivileged-uid");
    timeout_kills_tree(runner).await;
}

/// `Off` has only the process group: it catches `sleep &`, not `setsid` (documented).
#[tokio::test]
async fn timeout_kills_process_group_when_off() {
    let (k, v) = marker();
    let code = "import subprocess, time\nsubprocess.Popen(['/bin/sh', '-c', 'sleep 300 & wait'])\ntime.sleep(300)\n";
    let mut s = spec(code).await;
    s.env = vec![(k, v.clone())];
    s.timeout = Duration::from_millis(800);
    let out = run(&runner(SandboxLevel::Off), s).await;
    assert_eq!(out.exit, Exit::Timeout);
    assert_eq!(
        wait_gone(&v, Duration::from_secs(2)).await,
        Vec::<i32>::new()
    );
}

#[tokio::test]
async fn cancellation_kills_the_run() {
    let (k, v) = marker();
    let mut s = spec(TREE).await;
    s.env = vec![(k, v.clone())];
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let watched = v.clone();
    tokio::spawn(async move {
        // Cancel once the whole tree is up.
        wait_until("the tree is up", || marked_processes(&watched).len() >= 4).await;
        trigger.cancel();
    });
    let out = sandboxed().run(s, cancel).await.unwrap();
    assert_eq!(out.exit, Exit::Cancelled);
    assert_eq!(
        wait_gone(&v, Duration::from_secs(2)).await,
        Vec::<i32>::new()
    );
    assert!(prototype_text(&out, None).1);
}

#[tokio::test]
async fn full_queue_is_busy() {
    let mut config = RunnerConfig::new(SandboxLevel::Off);
    config.max_concurrent = 1;
    config.queue = 1;
    let runner = Runner::new(config).unwrap();
    let (k, v) = marker();
    let mut slow = spec("import time\ntime.sleep(1)\n").await;
    slow.env = vec![(k, v.clone())];
    let (a, b, c) = tokio::join!(
        run(&runner, slow.clone()),
        run(&runner, slow.clone()),
        async {
            // The first run holds the only slot and the second the only queue place once the
            // first one's process is up.
            wait_until("the first run is up", || !marked_processes(&v).is_empty()).await;
            runner.run(slow.clone(), CancellationToken::new()).await
        }
    );
    assert_eq!((a.exit, b.exit), (Exit::Code(0), Exit::Code(0)));
    assert!(matches!(c, Err(RunError::Busy)), "{c:?}");
}

#[tokio::test]
async fn memory_bomb_gets_memory_error() {
    let mut s = spec("data = bytearray(1 << 30)\nprint('allocated')\n").await;
    s.memory_bytes = 256 << 20;
    let out = run(&sandboxed(), s).await;
    assert_eq!(out.exit, Exit::Code(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("MemoryError"));

    // A growing list ends the same way, well before the timeout.
    let mut s = spec("xs = []\nwhile True:\n    xs.append(' ' * 1_000_000)\n").await;
    s.memory_bytes = 256 << 20;
    let out = run(&sandboxed(), s).await;
    assert_eq!(out.exit, Exit::Code(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("MemoryError"));
    // A refused allocation is no kill.
    assert_eq!(out.limit, None, "{out:?}");
}

/// `RLIMIT_AS` caps each process; the memory cgroup caps the tree: four children that each
/// stay under the process limit pass it together, and the run reports the OOM kill.
#[tokio::test]
async fn a_tree_past_its_memory_limit_is_oom_killed_and_reported() {
    let runner = sandboxed();
    assert_layer(&runner, "cgroup-memory");
    let code = r#"
import os, time
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = b"x" * (100 << 20)  # written, so resident
        time.sleep(2)
        os._exit(0)
    children.append(pid)
codes = [os.waitpid(pid, 0)[1] for pid in children]
killed = sum(1 for c in codes if os.WIFSIGNALED(c) and os.WTERMSIG(c) == 9)
print(f"killed {killed}", flush=True)
"#;
    let mut s = spec(code).await;
    s.memory_bytes = 256 << 20;
    s.timeout = Duration::from_secs(30);
    let out = run(&runner, s).await;
    assert_eq!(out.limit, Some(LimitHit::Memory), "{out:?}");
    // The OOM killer took a child (SIGKILL) and the run went on: no timeout.
    assert_eq!(out.exit, Exit::Code(0), "{out:?}");
    assert!(stdout(&out).starts_with("killed "), "{out:?}");
    assert_ne!(stdout(&out), "killed 0\n", "{out:?}");
}

#[tokio::test]
async fn fork_bomb_is_contained() {
    let runner = sandboxed();
    assert_layer(&runner, "cgroup-pids");
    let (k, v) = marker();
    let code = r#"
import os, time
refused = False
while True:
    try:
        os.fork()
    except OSError:
        if not refused:
            refused = True
            print("fork refused", flush=True)
        time.sleep(0.01)
"#;
    let mut s = spec(code).await;
    s.env = vec![(k, v.clone())];
    s.timeout = Duration::from_secs(3);
    s.max_processes = 32;
    let mut run = tokio::spawn({
        let runner = runner.clone();
        async move { runner.run(s, CancellationToken::new()).await.unwrap() }
    });
    // Count the bomb's processes all through the run, not at one guessed moment.
    let mut most = 0;
    let out = loop {
        most = most.max(marked_processes(&v).len());
        tokio::select! {
            out = &mut run => break out.unwrap(),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
    };
    assert!(most <= 32, "{most} processes with a limit of 32");
    assert_eq!(out.exit, Exit::Timeout);
    assert!(stdout(&out).starts_with("fork refused"), "{out:?}");
    assert_eq!(out.limit, Some(LimitHit::Processes), "{out:?}");
    assert_eq!(
        wait_gone(&v, Duration::from_secs(2)).await,
        Vec::<i32>::new()
    );
}

#[tokio::test]
async fn dropping_the_run_kills_the_tree() {
    let (k, v) = marker();
    let mut s = spec(TREE).await;
    s.env = vec![(k, v.clone())];
    let runner = sandboxed();
    let task = tokio::spawn(async move { runner.run(s, CancellationToken::new()).await });
    // Wait until the tree is up, then abandon the call.
    let deadline = Instant::now() + Duration::from_secs(10);
    while marked_processes(&v).len() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(marked_processes(&v).len() >= 4, "tree never came up");
    task.abort();
    let _ = task.await;
    assert_eq!(
        wait_gone(&v, Duration::from_secs(3)).await,
        Vec::<i32>::new()
    );
}

#[tokio::test]
async fn death_by_signal() {
    let code = "import os\nos.kill(os.getpid(), 9)\n";
    let off = run(&runner(SandboxLevel::Off), spec(code).await).await;
    assert_eq!(off.exit, Exit::Signal(9));
    assert_eq!(
        prototype_text(&off, None),
        ("(no output)\n[exit -9]".to_owned(), true)
    );
    // bubblewrap reports a child's death by signal N as exit code 128 + N.
    let sandboxed = run(&sandboxed(), spec(code).await).await;
    assert_eq!(sandboxed.exit, Exit::Code(137));
}

/// Issue 11, finding 10: the result text drops only the line ending `print` adds; trailing
/// spaces, tabs, blank lines and no-break spaces stay, byte for byte.
#[tokio::test]
async fn result_text_keeps_trailing_whitespace_byte_for_byte() {
    let runner = runner(SandboxLevel::Standard);
    let code = "print('total: 12  \\u00a0')\nprint('\\tindented\\t')\nprint()\n";
    let out = run(&runner, spec(code).await).await;
    assert_eq!(
        prototype_text(&out, None),
        ("total: 12  \u{a0}\n\tindented\t\n".to_owned(), false),
        "{out:?}"
    );
    // The prototype's add_vat answer is unchanged: one JSON line, its newline dropped.
    let add_vat = "import json, sys\nfrom decimal import Decimal, ROUND_HALF_UP\na = json.load(sys.stdin)\nnet = Decimal(str(a['net']))\nvat = (net * Decimal('0.20')).quantize(Decimal('0.01'), ROUND_HALF_UP)\nprint(json.dumps({'net': str(a['net']), 'rate': '20', 'vat': str(vat), 'gross': str(net + vat)}))";
    let mut s = spec(add_vat).await;
    s.arguments = serde_json::json!({"net": 10});
    let out = run(&runner, s).await;
    assert_eq!(
        prototype_text(&out, None),
        (
            r#"{"net": "10", "rate": "20", "vat": "2.00", "gross": "12.00"}"#.to_owned(),
            false
        )
    );
}

/// Issue 11, finding 10: what a script printed before its timeout is in the result, flushed
/// or not (stdout is unbuffered), with and without bubblewrap.
#[tokio::test]
async fn output_printed_before_a_timeout_is_kept() {
    let code = "import sys, time\nprint('started', end='')\nsys.stdout.write(' and half-way')\ntime.sleep(60)\n";
    for runner in [sandboxed(), runner_without(&["namespaces"])] {
        let mut s = spec(code).await;
        s.timeout = Duration::from_millis(1500);
        let out = run(&runner, s).await;
        assert_eq!(out.exit, Exit::Timeout, "{out:?}");
        assert_eq!(
            prototype_text(&out, None),
            ("started and half-way\n[timeout]".to_owned(), true),
            "{out:?}"
        );
    }
}

/// numpy (OpenBLAS) starts one thread per core at import unless told otherwise; threads
/// count against the run's `pids.max`, and the runner sets the single-thread variables.
#[tokio::test]
async fn numpy_starts_no_thread_pool() {
    let code = r#"
import os, numpy as np
a = np.ones((200, 200))
print(float((a @ a)[0, 0]))
threads = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Threads:")][0]
print("threads", threads, os.environ.get("OPENBLAS_NUM_THREADS"), os.environ.get("OMP_NUM_THREADS"))
"#;
    let mut s = RunSpec::new(&numpy_env().await, code);
    s.timeout = Duration::from_secs(60);
    let out = run(&sandboxed(), s).await;
    assert_eq!(stdout(&out), "200.0\nthreads 1 1 1\n", "{out:?}");
}
