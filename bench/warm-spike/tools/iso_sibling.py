# Isolation probe of the spike: two concurrent calls of one tool. The victim holds a secret in
# its environment and files, listens on an abstract and a named unix socket, and counts what
# reaches it; the attacker looks for it through /proc, signals, sockets and files.
import errno
import json
import os
import signal
import socket
import sys
import tempfile
import time

args = json.load(sys.stdin)
role = args["role"]
me = os.getpid()
out = {"role": role, "pid": me, "ppid": os.getppid()}


def attempt(fn):
    try:
        r = fn()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


if role == "victim":
    secret = os.environ["SPIKE_SECRET"]
    tmp = tempfile.gettempdir()
    shm = tmp.replace("/tmp/", "/dev/shm/", 1)
    open(os.path.join(tmp, "secret.txt"), "w").write(secret)
    out["shm_write"] = attempt(lambda: open(os.path.join(shm, "secret"), "w").write(secret) and None)
    got = []
    for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: got.append(signal.Signals(s).name))
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    a.bind("\0spike-victim")
    a.listen(8)
    n = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    out["named_bind"] = attempt(lambda: n.bind(os.path.join(tmp, "sock")))
    listening = [("abstract", a)]
    if out["named_bind"] == "ok":
        n.listen(8)
        n.setblocking(False)
        listening.append(("named", n))
    a.setblocking(False)
    accepted = {"abstract": 0, "named": 0}
    end = time.time() + float(args.get("hold_s", 2.5))
    while time.time() < end:
        for name, s in listening:
            try:
                c, _ = s.accept()
                accepted[name] += 1
                c.close()
            except BlockingIOError:
                pass
        time.sleep(0.01)
    out["signals_received"] = got
    out["connections_accepted"] = accepted
else:
    secret = args.get("secret", "")
    time.sleep(float(args.get("delay_s", 0.5)))
    found = {}
    for p in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        pid = int(p)
        if pid == me:
            continue
        r = {"cmdline": attempt(lambda: open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()[:60])}
        r["environ"] = attempt(lambda: "SECRET FOUND" if secret.encode() in open("/proc/%d/environ" % pid, "rb").read() else "read, no secret")
        r["maps"] = attempt(lambda: "%d lines" % len(open("/proc/%d/maps" % pid).read().splitlines()))
        r["mem"] = attempt(lambda: open("/proc/%d/mem" % pid, "rb").close())
        r["cwd"] = attempt(lambda: os.readlink("/proc/%d/cwd" % pid))
        r["fd"] = attempt(lambda: len(os.listdir("/proc/%d/fd" % pid)))
        r["kill0"] = attempt(lambda: os.kill(pid, 0))
        r["SIGUSR1"] = attempt(lambda: os.kill(pid, signal.SIGUSR1)) if pid not in (1,) else "skipped (bwrap init)"
        found[p] = r
    out["procs"] = found
    out["abstract_connect"] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect("\0spike-victim"))
    paths = []
    net = attempt(lambda: open("/proc/net/unix").read())
    if isinstance(net, str) and "\n" in net:
        paths = [l.split()[-1] for l in net.splitlines()[1:] if len(l.split()) >= 8 and "/c-" in l.split()[-1]]
    out["proc_net_unix_paths"] = paths
    mine = tempfile.gettempdir()
    for path in paths:
        if path.startswith(mine):
            continue
        out["named_connect " + path] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path))
        d = os.path.dirname(path)
        out["read " + d + "/secret.txt"] = attempt(lambda: "SECRET FOUND" if secret in open(d + "/secret.txt").read() else "read")
        out["ls " + d] = attempt(lambda: os.listdir(d))
        shm = d.replace("/tmp/", "/dev/shm/", 1)
        out["read " + shm + "/secret"] = attempt(lambda: "SECRET FOUND" if secret in open(shm + "/secret").read() else "read")
    out["ls /tmp"] = attempt(lambda: os.listdir("/tmp"))
    out["ls /dev/shm"] = attempt(lambda: os.listdir("/dev/shm"))
print(json.dumps(out))
