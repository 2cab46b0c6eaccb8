//! Processes that try to outlive the call: setsid, a double-fork daemon, closed pipes.

use super::*;

pub(super) async fn escape_setsid_grandchild(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("setsid grandchild", mode);
    // setsid(1) puts python in a new session; python becomes `sleep` with the marker as argv[0].
    // It keeps the script's stdout open.
    let body = r#"
import subprocess, time
m = ARGS["marker"]
p = subprocess.Popen(["setsid", sys.executable, "-c",
                      "import os, sys; os.execv('/usr/bin/sleep', [sys.argv[1], '60'])", m])
time.sleep(0.6)
def info(pid=p.pid):
    return {"pid": pid, "sid": os.getsid(pid), "pgid": os.getpgid(pid), "my sid": os.getsid(0),
            "my pgid": os.getpgid(0), "cmdline": open(f"/proc/{pid}/cmdline").read().replace("\0", " ")}
probe("escapee", info)
"#;
    sc.tool("setsid_child", body, json!({})).await;
    escapee_test(&mut sc, &mut v, "setsid_child").await;
    sc.finish(&mut server, v).await;
}

pub(super) async fn escape_double_fork_daemon(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("double fork + setsid daemon", mode);
    let body = r#"
import time
m = ARGS["marker"]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    gpid = os.fork()
    if gpid == 0:
        os.chdir("/")
        os.umask(0)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        os.execv("/usr/bin/sleep", [m, "60"])
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
daemon = int(os.read(r, 32))
time.sleep(0.6)
def info(pid=daemon):
    return {"pid": pid, "sid": os.getsid(pid), "pgid": os.getpgid(pid), "my sid": os.getsid(0),
            "my pgid": os.getpgid(0), "ppid": open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1],
            "cmdline": open(f"/proc/{pid}/cmdline").read().replace("\0", " ")}
probe("escapee", info)
"#;
    sc.tool("daemon", body, json!({})).await;
    escapee_test(&mut sc, &mut v, "daemon").await;
    sc.finish(&mut server, v).await;
}

/// Calls a tool that leaves a marked process in its own session; it must be gone after.
async fn escapee_test(sc: &mut Scene, v: &mut Verdict, tool: &str) {
    let watch = Watch::start(&sc.marker);
    let call = sc
        .attack(
            v,
            tool,
            json!({"marker": sc.marker}),
            Duration::from_secs(10),
        )
        .await;
    let ended = Instant::now();
    let most = watch.finish();
    v.saw(format!(
        "marked processes seen on the host during the call: {most}"
    ));
    let mut layer = None;
    if let Some(call) = call {
        let obs = observations(&call.text());
        absorb(v, &obs);
        match find(&obs, "escapee") {
            Some(o) if o.ok && o.detail.contains(&sc.marker) => {
                // It ran in its own session and process group: killpg of the run's group
                // cannot reach it, so what kills it (if anything) is the PID namespace teardown.
                let own_group = Regex::new(r"'pgid': (\d+), 'my sid': \d+, 'my pgid': (\d+)")
                    .unwrap()
                    .captures(&o.detail)
                    .is_some_and(|c| c[1] == c[2]);
                layer = Some(match (own_group, sc.mode) {
                    (true, _) => "timeout+process-group (killpg)",
                    (false, Mode::Namespaces) => {
                        "namespaces (PID ns: killing bwrap's init kills the escapee)"
                    }
                    (false, Mode::NoNamespaces) => {
                        "cgroup-kill (cgroup.kill takes what left the process group)"
                    }
                    (false, Mode::Warm) => {
                        "cgroup-kill (the call's own cgroup, killed when the call ends)"
                    }
                });
            }
            Some(o) => v.problem(format!(
                "the escapee did not start as planned: {}",
                o.what()
            )),
            None => v.problem(format!("no probe `escapee`: {}", short(&call.text(), 2000))),
        }
    }
    if most == 0 {
        v.problem("the host never saw the marked escapee: the attack did not run");
    }
    let left = leftovers(&sc.marker, Duration::from_secs(3)).await;
    if left.is_empty() {
        v.saw(format!(
            "no marked process left {:.0} ms after the call",
            ended.elapsed().as_secs_f64() * 1000.0
        ));
        if let Some(layer) = layer {
            v.layer(layer);
        }
    } else {
        v.leak(format!(
            "the escapee outlived the call by 3 s (killed now): {left:?}"
        ));
    }
}

pub(super) async fn escape_closed_stdin_sleeps(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("close stdin and sleep", mode);
    sc.tool(
        "no_stdin",
        "import time\nos.close(0)\nprint('stdin closed', flush=True)\ntime.sleep(60)\n",
        json!({"timeout_s": 1}),
    )
    .await;
    // Also closes stdout and stderr: the server sees EOF on every pipe at once.
    sc.tool(
        "no_fds",
        "import time\nfor fd in (0, 1, 2):\n    os.close(fd)\ntime.sleep(60)\n",
        json!({"timeout_s": 1}),
    )
    .await;
    let bound = Duration::from_secs(6);
    let mut calls = Vec::new();
    for tool in ["no_stdin", "no_fds"] {
        if let Some(call) = sc.attack(&mut v, tool, json!({}), bound).await {
            v.saw(format!("{tool}: {:?}", short(&call.text(), 200)));
            calls.push(call);
        }
    }
    for call in &calls {
        timeout_layer(&mut v, call);
    }
    sc.finish(&mut server, v).await;
}
