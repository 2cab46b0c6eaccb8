"""OmniForge warm template (issue 15): one per tool version, in the sandbox of a cold run.

Started by the server as ``python -I -u /omniforge/warm/template.py`` with the exact command
line of a cold call of the tool (bubblewrap's namespaces and binds, its uid, the seccomp
filter, the Landlock helper's domain), the tool's code bound at ``/omniforge/main.py`` as in
a cold call, and a control socket (``SOCK_SEQPACKET``) whose number is in
``OMNIFORGE_WARM_CTL``. Messages are JSON objects; descriptors ride along as ``SCM_RIGHTS``.

The template never sees a call: no arguments, no environment, no secrets, no output. It

1. reads ``init``, checks that the code can run warm (see ``_cold_reason``), imports what the
   code imports (and the public submodules of those packages, within a time budget), compiles
   the code once, freezes the heap, and says ``ready`` (with read-only descriptors of the
   sandbox's ``/proc`` and ``/dev`` entries, for the per-call Landlock rules);
2. on ``spare``, forks a child and hands the server one end of a new socket pair; from then on
   the server talks to the child directly (``_spare``);
3. reaps its children and reports each wait status (``exit``), and on ``cleanup`` removes a
   finished call's directories.

A child (``_spare``) neutralises every descriptor it inherited, makes its private ``/tmp/c-R``
and ``/dev/shm/c-R``, sends the server read-only handles of both, applies the Landlock ruleset
the server built from them (``_omniforge_warm.restrict_self``, compiled code), and waits. Its
call brings stdin, stdout, stderr and the side channel (the server keeps their other ends and
the output caps) and the call's environment; it runs the tool's code in a fresh ``__main__``
as the interpreter would run the script, says ``done`` and exits.
"""

import array
import ast
import gc
import json
import os
import select
import shutil
import signal
import socket
import stat
import sys
import time

_STARTED = time.monotonic()
_CTL = socket.socket(fileno=int(os.environ.pop("OMNIFORGE_WARM_CTL")))
_MAIN = "/omniforge/main.py"
_NATIVE_PATH = "/omniforge/warm/_omniforge_warm.abi3.so"
_MAX_FDS = 8
_TAG_CHARS = frozenset("0123456789abcdef")
# Modules the child's own work uses, imported here once.
_HARNESS = ["omniforge", "random", "tempfile", "atexit", "threading", "traceback", "types",
            "resource", "linecache", "builtins", "importlib.machinery"]
# Packages whose use needs what a warm call does not have: a writable /dev/shm for named
# semaphores (multiprocessing and the process pools built on it).
_COLD_PACKAGES = {"multiprocessing", "joblib", "loky", "dask", "ray"}
_COLD_NAMES = {"ProcessPoolExecutor"}


def _recv(sock):
    fds = array.array("i")
    data, ancillary, flags, _ = sock.recvmsg(
        1 << 18, socket.CMSG_SPACE(_MAX_FDS * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        raise OSError("a truncated message")
    return (json.loads(data) if data else None), list(fds)


def _send(sock, message, fds=()):
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([json.dumps(message, separators=(",", ":")).encode()], ancillary)


def _load_native():
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader("_omniforge_warm", _NATIVE_PATH)
    spec = importlib.util.spec_from_file_location("_omniforge_warm", _NATIVE_PATH, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _imported(tree):
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names += [node.module + "." + a.name for a in node.names if a.name != "*"]
    return names


def _cold_reason(tree):
    """Why this code must run cold, or None. Warm calls share the template's /tmp and /dev/shm
    and may write only their own directory there (TMPDIR), so code that names those paths or
    needs named semaphores in /dev/shm keeps the cold path, where both are private."""
    for name in _imported(tree):
        if name.split(".")[0] in _COLD_PACKAGES:
            return "it imports %s (process pools need a writable /dev/shm)" % name.split(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _COLD_NAMES:
            return "it uses %s" % node.id
        if isinstance(node, ast.Attribute) and node.attr in _COLD_NAMES:
            return "it uses %s" % node.attr
        if isinstance(node, ast.alias) and node.name in _COLD_NAMES:
            return "it imports %s" % node.name
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            for shared in ("/tmp", "/dev/shm"):
                if value == shared or value.startswith(shared + "/"):
                    return "it names %r (a warm call may write only its own directory)" % value[:60]
    return None


def _preload(tree, budget_s, submodules):
    import importlib
    import pkgutil

    loaded, failed = 0, 0
    for name in _imported(tree) + _HARNESS:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
            loaded += 1
        except BaseException:  # a name imported from a module, or an import that fails
            failed += 1
    if not submodules:
        return loaded, failed
    # Every public submodule of the top-level packages the code imports: what they import
    # lazily (numpy.ma inside np.percentile) is then shared. Never what a call imported.
    deadline = time.monotonic() + budget_s
    for top in sorted({n.split(".")[0] for n in _imported(tree)}):
        package = sys.modules.get(top)
        if package is None or not hasattr(package, "__path__"):
            continue
        for info in pkgutil.walk_packages(package.__path__, top + ".", onerror=lambda _n: None):
            if time.monotonic() > deadline:
                return loaded, failed
            parts = info.name.split(".")[1:]
            if any(p.startswith("_") or p in ("tests", "testing", "conftest") for p in parts):
                continue
            if info.name in sys.modules:
                continue
            try:
                importlib.import_module(info.name)
                loaded += 1
            except BaseException:
                failed += 1
    return loaded, failed


def _threads():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def _shared_writable():
    """A writable shared mapping the imports left (calls forked from here would all share
    it, so nothing could keep one call's data from the next), or None."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) > 1 and fields[1][1] == "w" and fields[1][3] == "s":
                return fields[5] if len(fields) > 5 else "anonymous memory"
    return None


def _sandbox_handles():
    """Read-only handles the per-call Landlock rules need from inside the sandbox: its /proc
    and each /dev entry but shm (whose directory holds the other calls' directories)."""
    names, fds = [], [os.open("/proc", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)]
    for entry in sorted(os.listdir("/dev")):
        if entry == "shm" or len(fds) >= 48:
            continue
        try:
            fd = os.open("/dev/" + entry, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            os.close(fd)  # /dev/fd, /dev/stdin...: they lead into /proc
            continue
        names.append(entry)
        fds.append(fd)
    return names, fds


# --- boot -----------------------------------------------------------------------------------

_init, _ = _recv(_CTL)
_NATIVE = _load_native()
with open(_MAIN, encoding="utf-8") as _f:
    _SOURCE = _f.read()
_reason = None
_code = None
_loaded = _failed = 0
try:
    _tree = ast.parse(_SOURCE, _MAIN)
except (SyntaxError, ValueError) as _e:
    _reason = "it does not compile (%s)" % _e.__class__.__name__
else:
    _reason = _cold_reason(_tree)
    if _reason is None:
        _loaded, _failed = _preload(_tree, float(_init.get("budget_s", 3.0)),
                                    bool(_init.get("submodules", True)))
        _code = compile(_tree, _MAIN, "exec", dont_inherit=True)
import atexit  # noqa: E402
import builtins  # noqa: E402
import importlib.machinery  # noqa: E402
import linecache  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

# Tracebacks of the tool show its own lines, as in a cold call.
linecache.cache[_MAIN] = (len(_SOURCE), None, _SOURCE.splitlines(True), _MAIN)
_threads_now = _threads()
if _reason is None and _threads_now != 1:
    _reason = "its imports started %d threads (a fork copies only one)" % (_threads_now - 1)
_shared = _shared_writable() if _reason is None else None
if _shared is not None:
    _reason = "its imports mapped shared writable memory (%s) every call would share" % _shared
os.chdir("/")
sys.stdout.flush()
sys.stderr.flush()
gc.collect()
gc.freeze()
_dev_names, _handles = _sandbox_handles()
_send(_CTL, {"op": "ready", "eligible": _reason is None, "reason": _reason,
             "threads": _threads_now, "preloaded": _loaded, "failed": _failed,
             "dev": _dev_names, "boot_ms": int((time.monotonic() - _STARTED) * 1000)},
      _handles)
for _fd in _handles:
    os.close(_fd)
del _handles, _init


# --- a call, in the child -------------------------------------------------------------------


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    try:
        sys.stderr.write(str(code) + "\n")
    except BaseException:
        pass
    return 1


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except BaseException:
            pass


def _call(sock, message, fds, home):
    stdin, stdout, stderr, chan = fds
    for src, dst in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(src, dst)
        os.close(src)
    os.set_inheritable(chan, True)  # as OMNIFORGE_FD is in a cold call
    env = {str(k): str(v) for k, v in message["env"]}
    env.update(HOME=home, TMPDIR=home, OMNIFORGE_FD=str(chan))
    os.environ.clear()
    os.environ.update(env)
    cpu = int(message["cpu"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    for limit, key in ((resource.RLIMIT_AS, "as"), (resource.RLIMIT_FSIZE, "fsize")):
        resource.setrlimit(limit, (int(message[key]), int(message[key])))
    # State a fork shares with the template and every other call (random reseeds itself
    # after a fork; numpy's global generator does not).
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        np_random.seed()
    tempfile.tempdir = None
    helper = sys.modules.get("omniforge")
    if helper is not None:  # it opens its side channel and caches the arguments at import
        helper._channel = helper._open_channel()
        helper._args = None
        helper._last_done = None
    sys.argv = [_MAIN]
    main = types.ModuleType("__main__")
    main.__file__ = _MAIN
    main.__cached__ = None
    main.__builtins__ = builtins
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", _MAIN)
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    code, interrupted = 0, False
    try:
        exec(_code, main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        exc = exc.with_traceback(tb)  # without this function's frame, as a cold traceback
        try:
            sys.excepthook(type(exc), exc, tb)
        except BaseException:
            pass
        code = 1
    # The interpreter's own shutdown: threads joined, exit handlers, then objects released.
    try:
        threading._shutdown()
    except BaseException:
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    try:
        del sys.modules["__main__"]
        main.__dict__.clear()
        gc.collect()
    except BaseException:
        pass
    _flush()
    if interrupted:
        # As the interpreter does after an uncaught KeyboardInterrupt: die by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    try:
        _send(sock, {"op": "done", "code": code & 0xFF})
    except OSError:
        pass
    # The call is over: let go of its pipes now, so the server's reads end while this process
    # tears down its copy of the template.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os._exit(code & 0xFF)


def _neutralise_descriptors(keep):
    """Every descriptor this child inherited from the template, but 0-2 and `keep`, now points
    at /dev/null: nothing of the template's files reaches a call, and a number a library still
    holds cannot later close a descriptor of the call that happens to reuse it."""
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in (keep, null):
            try:
                os.fstat(fd)
            except OSError:
                continue  # the directory listdir had open, closed since
            os.dup2(null, fd, inheritable=False)
    os.close(null)


def _spare(sock):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for own in (_CTL, _WAKE_R, _WAKE_W):
        own.close()
    _neutralise_descriptors(sock.fileno())
    os.setsid()
    tag = os.urandom(12).hex()
    home, shm = "/tmp/c-" + tag, "/dev/shm/c-" + tag
    os.mkdir(home, 0o700)
    os.mkdir(shm, 0o700)
    handles = [os.open(d, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
               for d in (home, shm)]
    _send(sock, {"op": "dirs", "tag": tag}, handles)
    for fd in handles:
        os.close(fd)
    message, fds = _recv(sock)
    if message is None or message.get("op") != "confine":
        os._exit(0)
    if len(fds) == 1:
        _NATIVE.restrict_self(fds[0])
        os.close(fds[0])
    elif not message.get("skip"):  # only the server's measurements leave the domain out
        os._exit(0)
    os.chdir(home)
    _send(sock, {"op": "ready"})
    message, fds = _recv(sock)
    if message is None or message.get("op") != "call" or len(fds) != 4:
        os._exit(0)
    _send(sock, {"op": "started"})
    _call(sock, message, fds, home)


# --- the template's loop --------------------------------------------------------------------

_children = {}  # pid -> spare id


def _fork_spare(spare_id):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Before the child can send anything: the kernel then attaches its pid to every message
    # the server reads from `ours`.
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    try:
        pid = os.fork()
    except OSError as exc:
        ours.close()
        theirs.close()
        _send(_CTL, {"op": "spare", "id": spare_id, "error": str(exc)})
        return
    if pid == 0:
        try:
            ours.close()
            _spare(theirs)
        except BaseException:
            try:
                traceback.print_exc()
            except BaseException:
                pass
        os._exit(70)
    theirs.close()
    _children[pid] = spare_id
    _send(_CTL, {"op": "spare", "id": spare_id}, [ours.fileno()])
    ours.close()


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        spare_id = _children.pop(pid, None)
        if spare_id is not None:
            _send(_CTL, {"op": "exit", "id": spare_id, "status": status})


def _cleanup(tag):
    if isinstance(tag, str) and len(tag) == 24 and set(tag) <= _TAG_CHARS:
        for path in ("/tmp/c-" + tag, "/dev/shm/c-" + tag):
            shutil.rmtree(path, ignore_errors=True)


_WAKE_R, _WAKE_W = socket.socketpair()
_WAKE_R.setblocking(False)
_WAKE_W.setblocking(False)
signal.set_wakeup_fd(_WAKE_W.fileno())
signal.signal(signal.SIGCHLD, lambda *_: None)
while True:
    readable, _, _ = select.select([_CTL, _WAKE_R], [], [])
    if _WAKE_R in readable:
        try:
            while _WAKE_R.recv(4096):
                pass
        except BlockingIOError:
            pass
        _reap()
    if _CTL in readable:
        _message, _fds = _recv(_CTL)
        for _fd in _fds:
            os.close(_fd)
        if _message is None:
            os._exit(0)
        _op = _message.get("op")
        if _op == "spare" and _code is not None:
            _fork_spare(int(_message["id"]))
        elif _op == "cleanup":
            _cleanup(_message.get("tag"))
