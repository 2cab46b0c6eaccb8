//! One layer at a time: each test runs the same attack with and without one layer (the
//! others as configured) and shows that this layer is what stops it.

use std::os::unix::net::UnixListener;

use omniforge_script::*;

use crate::util::*;

/// System calls a script never needs, tried with harmless arguments; prints `name errno`
/// (0 when the call went through).
const SYSCALLS: &str = r#"
import ctypes, errno, os, socket, platform
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    print(name, 0 if r >= 0 else ctypes.get_errno())
x86 = platform.machine() == "x86_64"
call("unshare", 272 if x86 else 97, 0)
call("io_uring_setup", 425, 1, None)
call("perf_event_open", 298 if x86 else 241, None, 0, -1, -1, 0)
if x86:
    call("x32_unshare", 0x40000000 | 272, 0)
for fam, name in [(socket.AF_INET, "inet"), (socket.AF_INET6, "inet6"), (socket.AF_NETLINK, "netlink"), (socket.AF_UNIX, "unix")]:
    try:
        socket.socket(fam, socket.SOCK_DGRAM if fam != socket.AF_UNIX else socket.SOCK_STREAM).close()
        print("socket_" + name, 0)
    except OSError as e:
        print("socket_" + name, e.errno)
a, b = socket.socketpair()
print("socketpair", 0)
"#;

fn errnos(text: &str) -> std::collections::BTreeMap<String, i32> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

const EPERM: i32 = 1;

/// Inside bubblewrap's empty network namespace `socket(AF_INET)` still succeeds (only a
/// connect fails): the seccomp filter is what refuses it, and the syscalls on its list.
#[tokio::test]
async fn seccomp_denies_sockets_and_syscalls_inside_bubblewrap() {
    let with = runner_without(&["landlock"]);
    assert_layer(&with, "namespaces");
    assert_layer(&with, "seccomp");
    let out = run(&with, spec(SYSCALLS).await).await;
    assert_eq!(out.exit, Exit::Code(0), "{out:?}");
    let got = errnos(&stdout(&out));
    for name in [
        "unshare",
        "io_uring_setup",
        "perf_event_open",
        "socket_inet",
        "socket_inet6",
        "socket_netlink",
    ] {
        assert_eq!(got.get(name), Some(&EPERM), "{name}: {got:?}");
    }
    if std::env::consts::ARCH == "x86_64" {
        assert_eq!(got.get("x32_unshare"), Some(&EPERM), "{got:?}");
    }
    // No Unix socket of any kind (the host's, pathname or abstract, stay out of reach);
    // socket pairs, which asyncio and multiprocessing use, still work.
    assert_eq!(
        (got.get("socket_unix"), got.get("socketpair")),
        (Some(&EPERM), Some(&0)),
        "{got:?}"
    );

    // The same script with bubblewrap alone: the calls reach the kernel.
    let without = runner_without(&["landlock", "seccomp"]);
    assert_layer(&without, "namespaces");
    let out = run(&without, spec(SYSCALLS).await).await;
    let got = errnos(&stdout(&out));
    assert_eq!(got.get("unshare"), Some(&0), "{got:?}");
    assert_eq!(got.get("socket_inet"), Some(&0), "{got:?}");
    assert_eq!(got.get("socket_unix"), Some(&0), "{got:?}");
    assert_ne!(got.get("io_uring_setup"), Some(&EPERM), "{got:?}");

    // With network allowed, the Internet families open; the syscall list still holds.
    let mut s = spec(SYSCALLS).await;
    s.network = true;
    let got = errnos(&stdout(&run(&with, s).await));
    assert_eq!(
        (got.get("socket_inet"), got.get("socket_inet6")),
        (Some(&0), Some(&0)),
        "{got:?}"
    );
    assert_eq!(got.get("unshare"), Some(&EPERM), "{got:?}");
    assert_eq!(got.get("socket_unix"), Some(&EPERM), "{got:?}");
}

/// Without bubblewrap the child loads the same filter itself.
#[tokio::test]
async fn seccomp_without_bubblewrap() {
    let runner = runner_without(&["namespaces", "landlock"]);
    assert_layer(&runner, "seccomp");
    let got = errnos(&stdout(&run(&runner, spec(SYSCALLS).await).await));
    assert_eq!(
        (
            got.get("socket_inet"),
            got.get("unshare"),
            got.get("socket_unix"),
            got.get("socketpair")
        ),
        (Some(&EPERM), Some(&EPERM), Some(&EPERM), Some(&0)),
        "{got:?}"
    );
}

/// Python's own machinery (threads, subprocess, multiprocessing, asyncio, hashlib, ssl)
/// works under every layer, with and without bubblewrap.
#[tokio::test]
async fn python_works_under_every_layer() {
    let runner = runner(SandboxLevel::Standard);
    for l in ["namespaces", "landlock", "seccomp", "cgroup-kill"] {
        assert_layer(&runner, l);
    }
    let code = r#"
import asyncio, hashlib, multiprocessing, ssl, subprocess, tempfile, threading
t = threading.Thread(target=lambda: None); t.start(); t.join()
print(subprocess.run(["/bin/echo", "sub"], capture_output=True, text=True).stdout.strip())
with multiprocessing.Pool(2) as p:
    print(sum(p.map(abs, [-1, -2])))
async def main():
    await asyncio.sleep(0)
    return "loop"
print(asyncio.run(main()))
with tempfile.NamedTemporaryFile() as f:
    f.write(b"x"); f.flush()
    print("tmp", f.name.startswith("/tmp/"))
print(hashlib.sha256(b"").hexdigest()[:8], int(ssl.create_default_context().verify_mode))
"#;
    let out = run(&runner, spec(code).await).await;
    assert_eq!(
        stdout(&out),
        "sub\n3\nloop\ntmp True\ne3b0c442 2\n",
        "{out:?}"
    );
    // The same without bubblewrap, as a uid of its own with a private /tmp and /dev/shm
    // (multiprocessing's semaphores live there) and no AF_UNIX sockets.
    let runner = runner_without(&["namespaces"]);
    for l in ["unprivileged-uid", "landlock", "seccomp"] {
        assert_layer(&runner, l);
    }
    let out = run(&runner, spec(code).await).await;
    assert_eq!(
        stdout(&out),
        "sub\n3\nloop\ntmp True\ne3b0c442 2\n",
        "{out:?}"
    );
}

/// Without bubblewrap, Landlock alone keeps a script out of the host's files (here a
/// database any user may read, so that the run's own uid is not what stops it) and off TCP;
/// the host's /tmp is not the run's (a private one, with a uid of its own).
#[tokio::test]
async fn landlock_confines_the_host_without_bubblewrap() {
    use std::os::unix::fs::PermissionsExt as _;
    let secret_dir = fresh_data_dir();
    std::fs::set_permissions(secret_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = secret_dir.path().join("omniforge.db");
    std::fs::write(&db, "SECRET").unwrap();
    let host_tmp = format!("/tmp/omniforge-landlock-test-{}", std::process::id());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            drop(sock);
        }
    });
    let code = format!(
        r#"
import os, socket, tempfile
def attempt(name, f):
    try:
        f()
        print(name, 0)
    except OSError as e:
        print(name, e.errno)
attempt("read_db", lambda: open({db:?}).read())
attempt("list_home", lambda: os.listdir("/root"))
attempt("write_host_tmp", lambda: open("/tmp/omniforge-landlock-test-{pid}", "w").close())
attempt("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3).close())
attempt("write_own_tmp", lambda: tempfile.TemporaryFile().close())
"#,
        db = db.display().to_string(),
        pid = std::process::id(),
    );
    let with = runner_without(&["namespaces", "seccomp"]);
    assert_layer(&with, "landlock");
    let out = run(&with, spec(&code).await).await;
    let got = errnos(&stdout(&out));
    const EACCES: i32 = 13;
    for name in ["read_db", "list_home", "connect"] {
        assert_eq!(got.get(name), Some(&EACCES), "{name}: {out:?}");
    }
    assert_eq!(got.get("write_own_tmp"), Some(&0), "{out:?}");
    // The write to "/tmp" landed in the run's own /tmp, never on the host's.
    let on_host = std::path::Path::new(&host_tmp).exists();
    let _ = std::fs::remove_file(&host_tmp);
    assert!(!on_host, "{host_tmp} was written on the host: {out:?}");

    let without = runner_without(&["namespaces", "seccomp", "landlock"]);
    let got = errnos(&stdout(&run(&without, spec(&code).await).await));
    let _ = std::fs::remove_file(&host_tmp);
    assert_eq!(
        (got.get("read_db"), got.get("connect")),
        (Some(&0), Some(&0)),
        "{got:?}"
    );
}

/// A run that allows network shares the host's network namespace, and with it the host's
/// abstract Unix sockets: Landlock's scope is what keeps the script from connecting to them.
#[tokio::test]
async fn landlock_scopes_abstract_unix_sockets_when_network_is_allowed() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("omniforge-test-{}-{}", std::process::id(), line!());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let code = format!(
        r#"
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{name}")
    print("connected")
except OSError as e:
    print("refused", e.errno)
"#
    );
    let mut s = spec(&code).await;
    s.network = true;
    let with = runner_without(&["seccomp"]);
    assert_layer(&with, "landlock");
    assert_layer(&with, "namespaces");
    let out = run(&with, s.clone()).await;
    assert_eq!(stdout(&out), "refused 1\n", "{out:?}");

    let without = runner_without(&["seccomp", "landlock"]);
    assert_eq!(stdout(&run(&without, s).await), "connected\n");
    drop(listener);
}

/// bubblewrap's /dev is a tmpfs without a size cap: it is remounted read-only, and
/// /dev/shm is its own capped tmpfs.
#[tokio::test]
async fn dev_is_read_only_and_shm_is_capped() {
    let runner = runner_without(&["landlock", "seccomp"]);
    let code = r#"
import os
try:
    open("/dev/filler", "w").write("x")
    print("wrote /dev")
except OSError as e:
    print("dev", e.errno)
open("/dev/null", "w").write("ok")
st = os.statvfs("/dev/shm")
print("shm", st.f_blocks * st.f_frsize <= 64 << 20)
"#;
    let out = run(&runner, spec(code).await).await;
    assert_eq!(stdout(&out), "dev 30\nshm True\n", "{out:?}"); // EROFS
}
