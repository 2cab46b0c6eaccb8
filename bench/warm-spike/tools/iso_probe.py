# Isolation probe of the spike: what one call sees of the process it runs in, and what an
# earlier call of the same tool left behind. Prints one JSON object.
import ctypes
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np

args = json.load(sys.stdin)
out = {"pid": os.getpid(), "ppid": os.getppid()}
# What a fork shares with the template and its siblings.
out["hash_str"] = hash("omniforge-spike")
out["random"] = random.random()
out["np_random"] = float(np.random.random())
out["libc_printf"] = hex(ctypes.cast(ctypes.CDLL(None).printf, ctypes.c_void_p).value)
maps = open("/proc/self/maps").read().splitlines()
out["stack"] = [m.split()[0] for m in maps if m.endswith("[stack]")]
out["heap"] = [m.split()[0] for m in maps if m.endswith("[heap]")]
out["id_None"] = hex(id(None))
fds = {}
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError as e:
        fds[fd] = "?" + e.strerror
out["fds"] = fds
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
for k in ("Uid", "Seccomp", "NoNewPrivs", "Threads", "CapEff"):
    out[k] = status.get(k, "").strip()
# State a previous call may have left.
out["json_marker_seen"] = getattr(json, "_spike_marker", None)
json._spike_marker = os.getpid()
out["np_marker_seen"] = getattr(np, "_spike_marker", None)
np._spike_marker = os.getpid()
out["env_left_seen"] = os.environ.get("SPIKE_LEFT")
os.environ["SPIKE_LEFT"] = str(os.getpid())
out["env_keys"] = sorted(os.environ)
out["secret"] = os.environ.get("SPIKE_SECRET")
out["tmpdir"] = tempfile.gettempdir()
out["cwd"] = os.getcwd()
for what, path in (("tmpdir_file", os.path.join(tempfile.gettempdir(), "left.txt")), ("tmp_file", "/tmp/left.txt"),
                   ("shm_file", "/dev/shm/left.txt")):
    out[what + "_seen"] = os.path.exists(path)
    try:
        with open(path, "w") as f:
            f.write("left by %d" % os.getpid())
        out[what + "_write"] = "ok"
    except OSError as e:
        out[what + "_write"] = e.strerror
for what, path in (("ls_tmp", "/tmp"), ("ls_shm", "/dev/shm")):
    try:
        out[what] = sorted(os.listdir(path))
    except OSError as e:
        out[what] = e.strerror
# Processes visible, and one left behind on purpose (its own session: escapes killpg).
procs = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            procs[p] = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode().strip()
        except OSError as e:
            procs[p] = "?" + e.strerror
out["procs"] = procs
bg = subprocess.Popen(["sleep", "30"], start_new_session=True)
out["bg_pid"] = bg.pid
try:
    import multiprocessing as mp

    mp.Lock()
    out["mp_lock"] = "ok"
except Exception as e:  # noqa: BLE001
    out["mp_lock"] = repr(e)
try:
    import socket

    socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    out["inet_socket"] = "created"
except OSError as e:
    out["inet_socket"] = e.strerror
print(json.dumps(out))
