#!/usr/bin/env python3
"""Splits warm script tool calls into their stages from kernel scheduler events.

    perf record -a -e sched:sched_process_exec -e sched:sched_process_fork \
        -e sched:sched_process_exit -o calls.perf -- sleep 20   # while calls run
    perf script -i calls.perf > calls.txt
    python3 bench/sched_split.py calls.txt

Per call (a fork by an OmniForge tokio worker), the p50 of each stage, in ms:
  fork -> bwrap       the forked child until it execs bubblewrap: the runner's pre_exec
                      (rlimits, process group, joining the run's cgroups)
  bwrap -> ns         bubblewrap until it forks into the new namespaces
  ns -> helper        bubblewrap's set-up inside them (mounts, uid map, seccomp) until it
                      execs the Landlock helper (`omniforge __omniforge-sandbox-exec`)
  helper -> python    the helper (Landlock rules) until it execs Python
  python -> exit      the script itself
  exit -> bwrap exit  bubblewrap's teardown
Tracepoints cost far less than strace, which slows every system call of the sandbox set-up.
"""
import re
import statistics
import sys

calls, cur = [], None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s*(.+?)\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)", line)
    if not m:
        continue
    comm, _pid, t, ev, rest = m.groups()
    t = float(t) * 1000
    if ev == "sched_process_fork" and comm.startswith("tokio"):
        cur = {"fork": t}
        calls.append(cur)
    elif cur is None:
        continue
    elif ev == "sched_process_exec" and rest.startswith("filename=/usr/bin/bwrap") and "bwrap" not in cur:
        cur["bwrap"] = t
    elif ev == "sched_process_fork" and comm == "bwrap" and "ns" not in cur:
        cur["ns"] = t
    elif ev == "sched_process_exec" and "sandbox-exec" in rest:
        cur["helper"] = t
    elif ev == "sched_process_exec" and "bin/python" in rest:
        cur["python"] = t
    elif ev == "sched_process_exit" and comm == "python" and "python" in cur and "exit" not in cur:
        cur["exit"] = t
    elif ev == "sched_process_exit" and comm == "bwrap" and "exit" in cur:
        cur["bwrap exit"] = t
full = [c for c in calls if all(k in c for k in ("fork", "bwrap", "ns", "helper", "python", "exit"))]
print(f"{len(full)} complete calls of {len(calls)} forks")
stages = [("fork", "bwrap"), ("bwrap", "ns"), ("ns", "helper"), ("helper", "python"), ("python", "exit"), ("exit", "bwrap exit")]
for a, b in stages:
    v = [c[b] - c[a] for c in full if b in c]
    if v:
        print(f"{a:>6} -> {b:<10} p50 {statistics.median(v):7.2f} ms")
