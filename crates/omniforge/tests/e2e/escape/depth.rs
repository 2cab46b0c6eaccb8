//! Defence in depth: what seccomp and Landlock stop that bubblewrap alone does not.

use super::*;

/// The layers `/healthz` reports, by name: (active, detail).
pub(super) async fn healthz_layers(
    sc: &Scene,
) -> std::collections::BTreeMap<String, (bool, String)> {
    let body: Value = support::http_client()
        .get(format!("{}/healthz", sc.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["sandbox_layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            (
                l["name"].as_str().unwrap_or("").to_owned(),
                (
                    l["active"] == true,
                    l["detail"].as_str().unwrap_or("").to_owned(),
                ),
            )
        })
        .collect()
}

/// Kernel surface a script never needs. Inside bubblewrap's empty network namespace
/// `socket(AF_INET)` succeeds (only a connect fails) and `unshare(0)` is a harmless no-op
/// that succeeds: `EPERM` for them is the seccomp filter's answer, no other layer's.
pub(super) async fn escape_kernel_surface_stopped_by_seccomp(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("socket families and syscalls", mode);
    let layers = healthz_layers(&sc).await;
    let wanted: &[&str] = match mode {
        Mode::Namespaces | Mode::Warm => &["seccomp", "namespaces", "no-network"],
        Mode::NoNamespaces => &["seccomp"],
    };
    for &name in wanted {
        match layers.get(name) {
            Some((true, _)) => {}
            other => v.problem(format!("/healthz: layer {name} is not active: {other:?}")),
        }
    }
    let body = r#"
import ctypes, platform, socket
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == "x86_64"
def sys(nr, *args):
    def go():
        ctypes.set_errno(0)
        r = libc.syscall(nr, *args)
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return f"returned {r}"
    return go
def sock(family, kind=socket.SOCK_DGRAM):
    def go():
        socket.socket(family, kind).close()
        return "OPENED"
    return go
probe("socket AF_INET", sock(socket.AF_INET))
probe("socket AF_INET6", sock(socket.AF_INET6))
probe("socket AF_NETLINK", sock(socket.AF_NETLINK))
probe("socket AF_PACKET", sock(socket.AF_PACKET, socket.SOCK_RAW))
probe("unshare(0)", sys(272 if x86 else 97, 0))
probe("io_uring_setup", sys(425, 1, None))
probe("ptrace(PTRACE_TRACEME)", sys(101 if x86 else 117, 0, 0, 0, 0))
probe("keyctl", sys(250 if x86 else 219, 0, 0, 0, 0))
if x86:
    probe("x32 unshare(0)", sys(0x40000000 | 272, 0))
probe("socket AF_UNIX", sock(socket.AF_UNIX, socket.SOCK_STREAM))
probe("socket AF_UNIX datagram", sock(socket.AF_UNIX, socket.SOCK_DGRAM))
probe("socketpair (allowed)", lambda: socket.socketpair() and "PAIR")
"#;
    sc.tool("kernel", body, json!({})).await;
    sc.tool("kernel_net", body, json!({"network": true})).await;
    let mut probes = vec![
        "socket AF_INET",
        "socket AF_INET6",
        "socket AF_NETLINK",
        "socket AF_PACKET",
        "socket AF_UNIX",
        "socket AF_UNIX datagram",
        "unshare(0)",
        "io_uring_setup",
        "ptrace(PTRACE_TRACEME)",
        "keyctl",
    ];
    if std::env::consts::ARCH == "x86_64" {
        probes.push("x32 unshare(0)");
    }
    if let Some(call) = sc
        .attack(&mut v, "kernel", json!({}), Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        for p in &probes {
            match find(&obs, p) {
                Some(o) if o.errno == "EPERM" => v.layer("seccomp (EPERM filter)"),
                Some(o) => v.leak(format!("{p}: not refused by seccomp: {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
        if !find(&obs, "socketpair (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: socket pairs (asyncio, multiprocessing) must stay allowed");
        }
    }
    // With network allowed, the Internet families open; the system calls stay denied.
    if let Some(call) = sc
        .attack(&mut v, "kernel_net", json!({}), Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        for o in &obs {
            v.saw(format!("network: true: {}", o.what()));
        }
        for p in ["socket AF_INET", "socket AF_INET6"] {
            if !find(&obs, p).is_some_and(|o| o.ok) {
                v.problem(format!("control: with network: true, {p} must open"));
            }
        }
        for p in [
            "socket AF_PACKET",
            "socket AF_UNIX",
            "unshare(0)",
            "io_uring_setup",
        ] {
            if find(&obs, p).is_none_or(|o| o.errno != "EPERM") {
                v.leak(format!("with network: true, {p} was not refused"));
            }
        }
    }
    sc.finish(&mut server, v).await;
}

/// What bubblewrap's namespaces leave open and Landlock closes: writes to the script's own
/// `/proc/self` files, reading the sandbox's init process, and (when a run shares the
/// host's network namespace) the host's abstract Unix sockets.
pub(super) async fn escape_landlock_closes_what_namespaces_leave_open(mode: Mode) {
    use std::os::linux::net::SocketAddrExt;
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("proc writes, abstract sockets", mode);
    match healthz_layers(&sc).await.get("landlock") {
        Some((true, _)) => {}
        other => v.problem(format!("/healthz: layer landlock is not active: {other:?}")),
    }
    let name = unique("omniforge-escape-");
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let body = r#"
import socket
def write(path, data):
    def go():
        with open(path, "w") as f:
            f.write(data)
        return "WROTE " + path
    return go
def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect("\0" + ARGS["name"])
    return "CONNECTED to the host's abstract socket"
probe("write /proc/self/comm", write("/proc/self/comm", "pwned"))
probe("write /proc/self/oom_score_adj", write("/proc/self/oom_score_adj", "500"))
probe("read /proc/1/environ", lambda: open("/proc/1/environ").read()[:40])
probe("connect host abstract socket", connect)
probe("write /dev", write("/dev/pwned", "x"))
probe("write /dev/shm (allowed)", write("/dev/shm/ok", "x"))
"#;
    sc.tool("landlocked", body, json!({"network": true})).await;
    if let Some(call) = sc
        .attack(
            &mut v,
            "landlocked",
            json!({"name": name}),
            Duration::from_secs(10),
        )
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let init_environ = match mode {
            // The sandbox's own init (bubblewrap), outside the script's Landlock domain.
            Mode::Namespaces | Mode::Warm => ("EACCES", "landlock"),
            // The host's init, root's: another user's process is not in the run's /proc.
            Mode::NoNamespaces => ("ENOENT", mode.hides()),
        };
        for (p, errno, layer) in [
            ("write /proc/self/comm", "EACCES", "landlock"),
            ("write /proc/self/oom_score_adj", "EACCES", "landlock"),
            ("read /proc/1/environ", init_environ.0, init_environ.1),
            // seccomp refuses the AF_UNIX socket itself; Landlock's scope would refuse the
            // connect (`layers::landlock_scopes_abstract_unix_sockets_when_network_is_allowed`
            // shows it with seccomp off).
            (
                "connect host abstract socket",
                "EPERM",
                "seccomp (no AF_UNIX socket) + landlock (abstract sockets scoped to the run)",
            ),
        ] {
            match find(&obs, p) {
                Some(o) if o.errno == errno => v.layer(layer),
                Some(o) => v.leak(format!("{p}: {}", o.what())),
                None => v.problem(format!("no probe {p:?}: {}", short(&call.text(), 2000))),
            }
        }
        match find(&obs, "write /dev") {
            Some(o) if o.errno == "EROFS" => v.layer("read-only-root (/dev remounted read-only)"),
            Some(o) if o.errno == "EACCES" => v.layer("landlock"),
            Some(o) => v.leak(format!("write /dev: {}", o.what())),
            None => v.problem("no probe \"write /dev\""),
        }
        if !find(&obs, "write /dev/shm (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: /dev/shm must be writable");
        }
    }
    if listener.accept().is_ok() {
        v.leak("the host's abstract socket accepted a connection");
    }
    sc.finish(&mut server, v).await;
}
