//! Privilege (issue 11, finding 2): a script never runs privileged.

use super::*;

/// Issue 11, finding 2: a script never runs privileged, whatever is installed. The server is
/// root; without the namespace layer it switches each run to a uid of its own, with it
/// bubblewrap runs the script as 65534 in a user namespace. Either way the script reports a
/// uid that is not 0 and no capability, and every probe of the finding fails: the server's
/// and a concurrent script's `environ`, `cmdline` and `mem`, a host Unix socket (pathname,
/// in a directory anyone may enter, and abstract), SCHED_FIFO, nice -20, mknod, chroot,
/// setuid and setgid.
pub(super) async fn escape_a_script_never_runs_privileged(mode: Mode) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert!(
        // /proc/self belongs to the process's effective uid.
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0),
        "finding 2 is about a root server: run the escape suite as root"
    );
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("privilege: uid, capabilities, /proc, sockets", mode);
    match healthz_layers(&sc).await.get("unprivileged-uid") {
        Some((true, detail)) => v.saw(format!("/healthz unprivileged-uid: {detail}")),
        other => v.problem(format!(
            "/healthz: layer unprivileged-uid is not active: {other:?}"
        )),
    }

    // A concurrent script holding a secret in its environment, found from the host by the
    // marker on its command line.
    let secret = unique("holder-secret-");
    sc.tool(
        "holder",
        r#"
import sys
os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(6)", ARGS["marker"]],
          {"HOLDER_SECRET": ARGS["secret"]})
"#,
        json!({"timeout_s": 20}),
    )
    .await;
    let mut other = session(&server.url).await;
    let holder_args = json!({"marker": sc.marker, "secret": secret});
    let holder = tokio::spawn(async move {
        call_tool(&mut other, "holder", holder_args, Duration::from_secs(30)).await
    });
    let concurrent = support::eventually(
        Duration::from_secs(15),
        "the holder script started",
        async || marked(&sc.marker).into_iter().next().map(|(pid, _)| pid),
    )
    .await;
    let environ = std::fs::read(format!("/proc/{concurrent}/environ")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ).contains(&secret),
        "control: the holder's secret is not in /proc/{concurrent}/environ on the host"
    );

    // Host Unix sockets.
    let dir = fresh_home();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("host.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let abstract_name = unique("omniforge-escape-priv-");
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();

    let body = r#"
import socket, stat
def status(field):
    return [l.split(":", 1)[1].strip() for l in open("/proc/self/status") if l.startswith(field + ":")][0]
note("uid", True, os.getuid())
note("ids", True, [os.getresuid(), os.getresgid(), os.getgroups()])
for f in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd", "NoNewPrivs"]:
    note(f, True, status(f))
def read(p):
    def go():
        with open(p, "rb") as f:
            return f.read(4096).decode(errors="replace")
    return go
for who, pid in [("server", ARGS["server"]), ("concurrent", ARGS["concurrent"])]:
    for entry in ["environ", "cmdline", "mem"]:
        probe(f"{who} {entry}", read(f"/proc/{pid}/{entry}"), limit=None)
def unix(addr):
    def go():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"hello from the sandbox")
        return "CONNECTED"
    return go
probe("host pathname socket", unix(ARGS["socket"]))
probe("host abstract socket", unix("\0" + ARGS["abstract"]))
probe("SCHED_FIFO", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
probe("nice -20", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
probe("mknod", lambda: os.mknod("/tmp/mem2", 0o600 | stat.S_IFCHR, os.makedev(1, 1)))
probe("chroot", lambda: os.chroot("/tmp"))
probe("setuid(0)", lambda: os.setuid(0))
probe("setgid(0)", lambda: os.setgid(0))
"#;
    sc.tool("privileges", body, json!({})).await;
    let args = json!({
        "server": server.pid(),
        "concurrent": concurrent,
        "socket": path.display().to_string(),
        "abstract": abstract_name,
    });
    if let Some(call) = sc
        .attack(&mut v, "privileges", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        if text.contains(&secret) {
            v.leak("the concurrent script's secret is in the output");
        }
        match find(&obs, "uid") {
            Some(o) if o.ok && o.detail != "0" => {
                v.layer(format!("unprivileged-uid (uid {})", o.detail))
            }
            Some(o) => v.leak(format!("the script runs as uid {}", o.detail)),
            None => v.problem(format!("no probe `uid`: {}", short(&text, 2000))),
        }
        for cap in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
            match find(&obs, cap) {
                Some(o) if o.detail == "0000000000000000" => {}
                Some(o) => v.leak(format!("{cap} {}", o.detail)),
                None => v.problem(format!("no probe {cap:?}")),
            }
        }
        if mode == Mode::NoNamespaces {
            // Without bubblewrap the child empties the bounding set itself.
            match find(&obs, "CapBnd") {
                Some(o) if o.detail == "0000000000000000" => {}
                other => v.leak(format!("CapBnd: {:?}", other.map(Obs::what))),
            }
        }
        for p in [
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
            "setuid(0)",
            "setgid(0)",
        ] {
            match find(&obs, p) {
                Some(o) if o.ok => v.leak(format!("{p}: {}", short(&o.detail, 300))),
                Some(o) if o.errno == "ENOENT" => v.layer(mode.hides()),
                Some(o) if o.errno == "EINVAL" && p.starts_with("set") => {
                    v.layer("namespaces (uid and gid 0 are not mapped in the user namespace)")
                }
                Some(o) if o.errno == "EPERM" || o.errno == "EACCES" => v.layer(match p {
                    "host pathname socket" | "host abstract socket" => {
                        "seccomp (no AF_UNIX socket)"
                    }
                    _ => "unprivileged-uid (no capability, rlimits NICE/RTPRIO 0)",
                }),
                Some(o) => v.leak(format!("{p}: unexpected {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&text, 2000))),
            }
        }
    }
    if listener.accept().is_ok() || abstract_listener.accept().is_ok() {
        v.leak("a host Unix socket accepted a connection");
    }
    match holder.await {
        Ok(Ok(call)) if !call.is_error() => {}
        Ok(Ok(call)) => v.problem(format!("the holder failed: {}", short(&call.text(), 400))),
        Ok(Err(e)) => v.problem(format!("the holder's call: {e}")),
        Err(e) => v.problem(format!("the holder's task: {e}")),
    }
    sc.finish(&mut server, v).await;
}
