//! Issue 11, finding 2: a script never runs privileged, whatever is installed. These tests run
//! without the namespace layer (no bubblewrap) under a root test process, as a fresh machine
//! that never installed bubblewrap runs a root server.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use omniforge_script::*;
use serde_json::Value;

use crate::util::*;

/// Every probe of finding 2, as one JSON object: `{probe: "ok ..." | "ERRNO ..."}`, plus
/// the identity the script sees.
const PROBES: &str = r#"
import ctypes, errno, json, os, socket, stat
A = json.load(open(0))
out = {}
def probe(name, f):
    try:
        out[name] = "ok " + repr(f())[:200]
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno)) + " " + str(e)[:200]
def read(p):
    with open(p, "rb") as f:
        return f.read(4096)
def status(field):
    return [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith(field + ":")][0]
out["uid"], out["gid"], out["groups"] = os.getuid(), os.getgid(), os.getgroups()
out["euid"], out["egid"] = os.geteuid(), os.getegid()
for f in ["CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb", "NoNewPrivs"]:
    out[f] = status(f)
out["cwd owner"] = os.stat(".").st_uid
out["tmp owner"] = os.stat("/tmp").st_uid
for who, pid in [("server", A["server"]), ("concurrent", A["concurrent"])]:
    for entry in ["environ", "cmdline", "mem"]:
        probe(f"{who} {entry}", lambda p=f"/proc/{pid}/{entry}": read(p))
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(addr)
    s.sendall(b"hello from the sandbox")
    return "CONNECTED"
probe("host pathname socket", lambda: unix(A["socket"]))
probe("host abstract socket", lambda: unix("\0" + A["abstract"]))
probe("socketpair (allowed)", lambda: socket.socketpair() and "pair")
probe("SCHED_FIFO", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
probe("nice -20", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
probe("mknod", lambda: os.mknod("/tmp/null2", 0o666 | stat.S_IFCHR, os.makedev(1, 3)))
probe("chroot", lambda: os.chroot("/tmp"))
probe("setuid 0", lambda: os.setuid(0))
probe("setgid 0", lambda: os.setgid(0))
print(json.dumps(out))
"#;

/// A script that sleeps with a secret in its environment, found by the test through the
/// marker in that environment.
const HOLDER: &str = "import time\ntime.sleep(5)\n";

#[tokio::test]
async fn a_script_never_runs_privileged_without_bubblewrap() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test shows what a root server without bubblewrap gives its scripts: run it as root"
    );
    let runner = runner_without(&["namespaces"]);
    assert_layer(&runner, "unprivileged-uid");

    // A concurrent run whose environment holds a secret.
    let (key, marker) = marker();
    let secret = format!("holder-secret-{marker}");
    let mut holder = spec(HOLDER).await;
    holder.env = vec![
        (key, marker.clone()),
        ("HOLDER_SECRET".into(), secret.clone()),
    ];
    let holder_task = tokio::spawn({
        let runner = runner.clone();
        async move { run(&runner, holder).await }
    });
    let concurrent = loop {
        if let Some(pid) = marked_processes(&marker).into_iter().next() {
            break pid;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Control: the host (root) does see that secret.
    let environ = std::fs::read(format!("/proc/{concurrent}/environ")).unwrap();
    assert!(String::from_utf8_lossy(&environ).contains(&secret));

    // Host Unix sockets, one in a directory anyone may enter, one abstract.
    let dir = fresh_data_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("host.sock");
    let listener = UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = format!("omniforge-test-{marker}");
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();

    let mut s = spec(PROBES).await;
    s.arguments = serde_json::json!({
        "server": std::process::id(),
        "concurrent": concurrent,
        "socket": path.display().to_string(),
        "abstract": abstract_name,
    });
    let out = run(&runner, s).await;
    let got: Value =
        serde_json::from_str(stdout(&out).trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    eprintln!("{}", serde_json::to_string_pretty(&got).unwrap());

    let uid = got["uid"].as_u64().unwrap();
    assert_ne!(uid, 0, "{got}");
    assert!(uid >= u64::from(RUN_UID_BASE), "{got}");
    for id in ["euid", "gid", "egid"] {
        assert_eq!(got[id], uid, "{id}: {got}");
    }
    assert_eq!(got["groups"], serde_json::json!([]), "{got}");
    for cap in ["CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"] {
        assert_eq!(got[cap], "0000000000000000", "{cap}: {got}");
    }
    assert_eq!(got["NoNewPrivs"], "1", "{got}");
    // The run's writable directories belong to its uid.
    assert_eq!(got["cwd owner"], uid, "{got}");
    assert_eq!(got["tmp owner"], uid, "{got}");
    for probe in [
        "server environ",
        "server cmdline",
        "server mem",
        "concurrent environ",
        "concurrent cmdline",
        "concurrent mem",
        "host pathname socket",
        "host abstract socket",
        "SCHED_FIFO",
        "nice -20",
        "mknod",
        "chroot",
        "setuid 0",
        "setgid 0",
    ] {
        let r = got[probe].as_str().unwrap_or("(missing)");
        assert!(
            r.starts_with("ENOENT") || r.starts_with("EACCES") || r.starts_with("EPERM"),
            "{probe} was not refused: {r}\n{got}"
        );
    }
    assert!(
        got["socketpair (allowed)"]
            .as_str()
            .unwrap_or("")
            .starts_with("ok"),
        "{got}"
    );
    assert!(
        listener.accept().is_err(),
        "the host socket accepted a connection"
    );
    assert!(abstract_listener.accept().is_err());
    let text = stdout(&out);
    assert!(
        !text.contains(&secret),
        "the concurrent run's secret leaked: {text}"
    );

    let held = holder_task.await.unwrap();
    assert_eq!(held.exit, Exit::Code(0), "{held:?}");
}

/// Concurrent runs get uids of their own; the uid never is the server's.
#[tokio::test]
async fn concurrent_runs_without_bubblewrap_get_distinct_uids() {
    let runner = runner_without(&["namespaces"]);
    assert_layer(&runner, "unprivileged-uid");
    let code = "import os, time\nprint(os.getuid())\ntime.sleep(1)\n";
    let (a, b) = tokio::join!(async { run(&runner, spec(code).await).await }, async {
        run(&runner, spec(code).await).await
    });
    let (a, b) = (stdout(&a), stdout(&b));
    assert_ne!(a, b);
    for uid in [&a, &b] {
        let uid: u32 = uid.trim().parse().unwrap();
        assert_ne!(uid, rustix::process::geteuid().as_raw());
        assert!((RUN_UID_BASE..RUN_UID_BASE + RUN_UID_SLOTS).contains(&uid));
    }
}

/// Without bubblewrap, the run's uid must still reach an environment that lives under a
/// directory only root may enter (a 0700 data directory, like `/root/.local/share`); the rest
/// of that directory stays hidden.
#[tokio::test]
async fn env_in_a_closed_directory_is_reachable_with_a_uid_of_its_own() {
    let data = fresh_data_dir();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(data.path().join("omniforge.db"), "SECRET").unwrap();
    let builder = builder_in(data.path(), false).await;
    let env = builder
        .build(&builder.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    let code = format!(
        "import os, omniforge\nprint(os.getuid() != 0)\ntry:\n    print(open({:?}).read())\nexcept OSError as e:\n    print(type(e).__name__)\n",
        data.path().join("omniforge.db").display().to_string()
    );
    let runner = runner_without(&["namespaces", "landlock"]);
    let out = run(&runner, RunSpec::new(&env, code)).await;
    assert_eq!(stdout(&out), "True\nFileNotFoundError\n", "{out:?}");
}

/// Without bubblewrap, the data directory (its database, the other environments) is hidden
/// from a run with a uid of its own even where its permissions would let anyone in, and even
/// without Landlock; the run's own environment is still there.
#[tokio::test]
async fn the_data_directory_is_hidden_without_bubblewrap() {
    let data = fresh_data_dir();
    std::fs::set_permissions(data.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = data.path().join("omniforge.db");
    std::fs::write(&db, "SECRET").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let builder = builder_in(data.path(), false).await;
    let env = builder
        .build(&builder.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    let code = format!(
        "import os, omniforge\nprint(sorted(os.listdir({envs:?})) == [{id:?}])\ntry:\n    print(open({db:?}).read())\nexcept OSError as e:\n    print(type(e).__name__)\n",
        envs = builder.envs_dir().display().to_string(),
        id = env.env_id,
        db = db.display().to_string(),
    );
    let mut c = config(SandboxLevel::Standard);
    c.disabled_layers = ["namespaces", "landlock"].map(String::from).to_vec();
    c.hidden_dirs = vec![data.path().to_owned()];
    let runner = Runner::new(c).unwrap();
    let out = run(&runner, RunSpec::new(&env, code.clone())).await;
    assert_eq!(stdout(&out), "True\nFileNotFoundError\n", "{out:?}");
    // Control: without hiding it, the same run reads the database.
    let out = run(
        &runner_without(&["namespaces", "landlock"]),
        RunSpec::new(&env, code),
    )
    .await;
    assert!(stdout(&out).ends_with("SECRET\n"), "{out:?}");
}

/// The host uids (real, effective, saved, filesystem) of process `pid`, from its status.
fn host_uids(pid: i32) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|ids| {
            ids.split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Under bubblewrap a script is uid 65534, but bubblewrap maps that onto the uid that started
/// it: under a root server, every process of a run (bubblewrap's included) runs as a uid
/// leased for it on the host, never root, and two concurrent runs never share one.
#[tokio::test]
async fn a_script_in_bubblewrap_is_not_root_on_the_host() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test shows what a root server's bubblewrap gives its scripts: run it as root"
    );
    let runner = sandboxed();
    assert_layer(&runner, "unprivileged-uid");
    let code = "import time\ntime.sleep(30)\n";
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut markers = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (key, marker) = marker();
        let mut s = spec(code).await;
        s.env = vec![(key, marker.clone())];
        markers.push(marker);
        let (runner, cancel) = (runner.clone(), cancel.clone());
        tasks.push(tokio::spawn(
            async move { runner.run(s, cancel).await.unwrap() },
        ));
    }
    let mut uids_of_runs = Vec::new();
    for marker in &markers {
        // bubblewrap, its init and the interpreter all carry the run's environment.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let pids = loop {
            let pids = marked_processes(marker);
            if pids.len() >= 3 || std::time::Instant::now() > deadline {
                break pids;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(pids.len() >= 3, "bubblewrap, its init and python: {pids:?}");
        let mut run_uids = std::collections::BTreeSet::new();
        for pid in pids {
            let uids = host_uids(pid);
            assert_eq!(uids.len(), 4, "{pid}: {uids:?}");
            for uid in uids {
                assert!(
                    (RUN_UID_BASE..RUN_UID_BASE + RUN_UID_SLOTS).contains(&uid),
                    "process {pid} of a run runs as host uid {uid}"
                );
                run_uids.insert(uid);
            }
        }
        assert_eq!(run_uids.len(), 1, "one uid per run: {run_uids:?}");
        uids_of_runs.extend(run_uids);
    }
    assert_ne!(
        uids_of_runs[0], uids_of_runs[1],
        "concurrent runs share a uid"
    );
    cancel.cancel();
    for t in tasks {
        let out = t.await.unwrap();
        assert_eq!(out.exit, Exit::Cancelled, "{out:?}");
    }
}
