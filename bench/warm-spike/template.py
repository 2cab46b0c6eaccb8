# The warm template of the issue-15 spike. It runs as /omniforge/main.py inside the real
# sandbox of a cold run (bubblewrap namespaces, uid 65534, read-only root, no network, the
# seccomp filter, and the Landlock domain of omniforge's own helper), started by
# bench/warm-spike (src/warm.rs) with `<env>/bin/python -I /omniforge/main.py`.
#
# It never runs tool code and never sees a call's arguments, environment or output. It:
#   1. reads `init` from its control socket (SOCK_SEQPACKET, fd $WARM_CTL_FD): the tool's code,
#      the Landlock paths of the per-call domain, and what to preload;
#   2. imports what the code imports (and `omniforge`), compiles the code, freezes the heap
#      (gc.freeze, fewer copy-on-write faults in children);
#   3. on `spare`, forks a spare child and hands the server one end of a fresh socketpair
#      (SCM_RIGHTS); the child confines itself (per-call dirs, its own Landlock domain) and
#      waits on the other end for its call; the server talks to it directly from then on;
#   4. on SIGCHLD, reaps and reports each child's wait status, then removes its per-call dirs.
#
# Control messages are JSON; file descriptors ride along as SCM_RIGHTS.

import array
import ast
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time

T_START = time.monotonic_ns()
CTL = socket.socket(fileno=int(os.environ.pop("WARM_CTL_FD")))
MAXFDS = 8


def recv(sock):
    fds = array.array("i")
    msg, anc, _flags, _addr = sock.recvmsg(1 << 20, socket.CMSG_SPACE(MAXFDS * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return (json.loads(msg) if msg else None), list(fds)


def send(sock, obj, fds=()):
    data = json.dumps(obj).encode()
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], anc)


# --- Landlock (raw system calls through ctypes; x86-64 numbers) ----------------------------------

import ctypes  # noqa: E402  (the template pays for it once; children inherit it)

LIBC = ctypes.CDLL(None, use_errno=True)
SYS_CREATE, SYS_ADD_RULE, SYS_RESTRICT = 444, 445, 446
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
FS_ALL = (1 << 16) - 1  # ABI 5: execute .. ioctl_dev (what omniforge's helper handles at ABI 6)
FS_READ = 1 | 4 | 8  # execute, read_file, read_dir
FS_MAKE_SOCK = 1 << 9
# A call may not create named unix sockets: Landlock (ABI 7) does not check connect() on them,
# and /proc/net/unix shows every path in the shared network namespace, so a concurrent call
# could connect. Abstract sockets stay usable within the call (scoped).
FS_CALL_RW = FS_ALL & ~FS_MAKE_SOCK
FS_FILE_ONLY = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # rights that apply to a non-directory
NET_ALL = 1 | 2  # bind_tcp, connect_tcp
SCOPE_ALL = 1 | 2  # abstract unix sockets, signals


def _check(ret, what):
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, "%s: %s" % (what, os.strerror(e)))
    return ret


def landlock_restrict(read_only, read_write, rw_access=FS_ALL):
    """A new Landlock domain for this process: `read_only` paths readable (and executable),
    `read_write` paths fully accessible, nothing else; no TCP; scoped signals and abstract
    unix sockets. Nested inside the template's domain (intersection)."""
    attr = struct.pack("QQQ", FS_ALL, NET_ALL, SCOPE_ALL)
    rs = _check(LIBC.syscall(SYS_CREATE, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)), "create_ruleset")
    try:
        for paths, access in ((read_only, FS_READ), (read_write, rw_access)):
            for p in paths:
                try:
                    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)
                except FileNotFoundError:
                    continue
                try:
                    allowed = access if os.path.isdir(p) else access & FS_FILE_ONLY
                    rule = struct.pack("=Qi", allowed, fd)  # packed landlock_path_beneath_attr
                    _check(LIBC.syscall(SYS_ADD_RULE, rs, 1, rule, 0), "add_rule " + p)
                finally:
                    os.close(fd)
        _check(LIBC.prctl(38, 1, 0, 0, 0), "no_new_privs")  # already set by bwrap; harmless
        _check(LIBC.syscall(SYS_RESTRICT, rs, 0), "restrict_self")
    finally:
        os.close(rs)


# --- init ------------------------------------------------------------------------------------

init, _ = recv(CTL)
CODE_TEXT = init["code"]
MAIN = "/omniforge/main.py"
code_obj = compile(CODE_TEXT, MAIN, "exec")
# Tracebacks of the tool must show the tool's lines, not this file's (also bound at MAIN).
import linecache  # noqa: E402

linecache.cache[MAIN] = (len(CODE_TEXT), None, CODE_TEXT.splitlines(True), MAIN)


def imported_modules(tree):
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [node.module + "." + a.name for a in node.names if a.name != "*"]
    return names


preloaded, failed = [], []
import importlib  # noqa: E402
import pkgutil  # noqa: E402

HARNESS = ["omniforge", "random", "tempfile", "atexit", "threading", "traceback", "types", "resource"]


def import_all(names):
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except BaseException:  # a name imported from a module, not a module; a failing import
            failed.append(name)


mode = init.get("preload", "ast")  # none | ast | submodules
if mode != "none":
    import_all(imported_modules(ast.parse(CODE_TEXT)) + HARNESS)
if mode == "submodules":
    # Every public submodule of each top-level package the code imports (deterministic: what
    # the package may import lazily, e.g. numpy.ma inside np.percentile). Not from calls.
    deadline = time.monotonic() + float(init.get("submodule_budget_s", 5.0))
    for top in sorted({n.split(".")[0] for n in imported_modules(ast.parse(CODE_TEXT))}):
        pkg = sys.modules.get(top)
        if pkg is None or not hasattr(pkg, "__path__"):
            continue
        for info in pkgutil.walk_packages(pkg.__path__, top + ".", onerror=lambda _n: None):
            parts = info.name.split(".")[1:]
            if any(p.startswith("_") or p in ("tests", "testing", "conftest") for p in parts):
                continue
            if time.monotonic() > deadline:
                failed.append("(submodule budget spent)")
                break
            import_all([info.name])
import atexit  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402

RO = init["landlock_ro"]  # the helper's --ro list, minus /dev (a /dev rule would cover /dev/shm)
# Every /dev entry but shm, resolved (/dev/stdin and co. point at pipes, not files).
DEV_RO = sorted({os.path.realpath("/dev/" + e) for e in os.listdir("/dev")}
                - {"/dev/shm"})
DEV_RO = [p for p in DEV_RO if p.startswith("/dev/")]
RW_FIXED = init["landlock_rw"]  # /dev/null, /dev/zero, /dev/full
sys.stdout.flush()
sys.stderr.flush()
gc.collect()
if init.get("gc_freeze", True):
    gc.freeze()


def status_threads():
    for line in open("/proc/self/status"):
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


# --- the spare child ---------------------------------------------------------------------------


def spare_main(sock, call_id):
    """Runs in the forked child: confine, say ready, wait for the call, run it, exit."""
    t_fork = time.monotonic_ns()
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for s in (CTL, wake_r, wake_w):  # the template's sockets: never usable by a call
        s.close()
    keep = {0, 1, 2, sock.fileno()}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    tag = os.urandom(12).hex()
    tmp, shm = "/tmp/c-" + tag, "/dev/shm/c-" + tag
    os.mkdir(tmp, 0o700)
    os.mkdir(shm, 0o700)
    t0 = time.monotonic_ns()
    if init.get("child_landlock", True):
        landlock_restrict(RO + DEV_RO, RW_FIXED + [tmp, shm],
                          FS_CALL_RW if init.get("deny_make_sock", True) else FS_ALL)
    t1 = time.monotonic_ns()
    os.chdir(tmp)
    send(sock, {"op": "ready", "id": call_id, "dirs": [tmp, shm], "landlock_us": (t1 - t0) // 1000,
                "fork_to_ready_us": (time.monotonic_ns() - t_fork) // 1000})
    msg, fds = recv(sock)  # the call: blocks until the server hands it over
    t_recv = time.monotonic_ns()
    if msg is None or msg.get("op") != "call":
        os._exit(0)
    stdin, stdout, stderr, chan = fds
    for src, dst in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(src, dst)
        os.close(src)
    env = {"PATH": msg["path"], "HOME": tmp, "TMPDIR": tmp, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", "OMNIFORGE_FD": str(chan)}
    env.update(msg.get("env", {}))
    os.environ.clear()
    os.environ.update(env)
    cpu = int(msg.get("cpu_s", 31))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    for name, key in (("RLIMIT_AS", "as_bytes"), ("RLIMIT_FSIZE", "fsize_bytes")):
        if key in msg:
            resource.setrlimit(getattr(resource, name), (msg[key], msg[key]))
    # Per-process state a fork would otherwise share with the template and every sibling.
    random.seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()
    tempfile.tempdir = None
    om = sys.modules.get("omniforge")
    if om is not None:  # the helper opens its side channel and caches args at import
        om._channel = om._open_channel()
        om._args = None
        om._last_done = None
    sys.argv = [MAIN]
    main = types.ModuleType("__main__")
    main.__file__ = MAIN
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    before = set(sys.modules)
    t_code = time.monotonic_ns()
    code = 0
    try:
        exec(code_obj, main.__dict__)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    t_end = time.monotonic_ns()
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    try:
        t_exit = time.monotonic_ns()
        send(sock, {"op": "done", "code": code, "recv_to_code_us": (t_code - t_recv) // 1000,
                    "code_us": (t_end - t_code) // 1000, "exit_funcs_us": (t_exit - t_end) // 1000,
                    "t_exit_ns": t_exit, "t_recv_ns": t_recv, "new_modules": sorted(set(sys.modules) - before)[:200]})
    except OSError:
        pass
    # The call is complete: let go of its pipes and channel now, so the server sees EOF and
    # answers while this process is still tearing down its (large, copy-on-write) memory.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        os.close(chan)
    except OSError:
        pass
    os._exit(code)


# --- the template's loop ---------------------------------------------------------------------

wake_r, wake_w = socket.socketpair()
wake_r.setblocking(False)
wake_w.setblocking(False)
signal.set_wakeup_fd(wake_w.fileno())
signal.signal(signal.SIGCHLD, lambda *_: None)
children = {}  # pid -> (id, dirs)
send(CTL, {"op": "ready", "pid": os.getpid(), "threads": status_threads(), "preloaded": preloaded,
           "failed": failed, "boot_us": (time.monotonic_ns() - T_START) // 1000})


class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack",
                                               "stack_size", "tls", "set_tid", "set_tid_size", "cgroup")]


CLONE_INTO_CGROUP = 0x200000000
SYS_CLONE3 = 435
PYLIBC = ctypes.PyDLL(None, use_errno=True)  # the GIL stays held across the call


def clone_into_cgroup(cgroup_fd):
    """fork(), but the child starts in the cgroup v2 directory `cgroup_fd` (no migration).
    CPython's fork bookkeeping is done by hand, as os.fork does it."""
    args = CloneArgs(flags=CLONE_INTO_CGROUP, exit_signal=signal.SIGCHLD, cgroup=cgroup_fd)
    ctypes.pythonapi.PyOS_BeforeFork()
    pid = PYLIBC.syscall(SYS_CLONE3, ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    if pid == 0:
        ctypes.pythonapi.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    ctypes.pythonapi.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, "clone3(CLONE_INTO_CGROUP): " + os.strerror(err))
    return pid


def fork_spare(call_id, cgroup_fd=None):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Credentials on every message the server reads from `a`: the kernel translates the
    # child's pid into the server's PID namespace, so the server learns the host pid to move.
    a.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    t = time.monotonic_ns()
    pid = os.fork() if cgroup_fd is None else clone_into_cgroup(cgroup_fd)
    if pid == 0:
        try:
            a.close()
            spare_main(b, call_id)
        except BaseException:
            try:
                traceback.print_exc()
            finally:
                os._exit(70)
        os._exit(0)
    b.close()
    children[pid] = call_id
    send(CTL, {"op": "spare", "id": call_id, "pid": pid, "fork_us": (time.monotonic_ns() - t) // 1000}, [a.fileno()])
    a.close()


def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        call_id = children.pop(pid, None)
        if call_id is not None:
            send(CTL, {"op": "exit", "id": call_id, "status": status, "t_reaped_ns": time.monotonic_ns()})


def remove_tree(path):
    # The per-call dirs are removed by the server through this message, after it killed the
    # call's cgroups, so nothing of the call is still writing.
    import shutil

    shutil.rmtree(path, ignore_errors=True)


while True:
    readable, _, _ = select.select([CTL, wake_r], [], [])
    if wake_r in readable:
        try:
            while wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass
        reap()
    if CTL in readable:
        msg, fds = recv(CTL)
        if msg is None:
            os._exit(0)
        op = msg["op"]
        if op == "spare":
            try:
                fork_spare(msg["id"], fds[0] if fds else None)
            except OSError as e:
                send(CTL, {"op": "spare", "id": msg["id"], "error": str(e)})
        for fd in fds:
            os.close(fd)
        if op == "spare":
            pass
        elif op == "preload":
            # Modules earlier calls imported (lazily, or inside functions): import them here so
            # later children start with them. Only importable names from the read-only
            # sys.path (stdlib, the environment); never the tool's own code.
            for name in msg["modules"]:
                if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name) and name not in sys.modules:
                    try:
                        importlib.import_module(name)
                        preloaded.append(name)
                    except Exception:
                        failed.append(name)
            gc.collect()
            gc.freeze()
        elif op == "cleanup":
            for d in msg["dirs"]:
                if d.startswith(("/tmp/c-", "/dev/shm/c-")):
                    remove_tree(d)
        elif op == "status":
            send(CTL, {"op": "status", "threads": status_threads(), "children": len(children)})
        elif op == "exit":
            os._exit(0)
