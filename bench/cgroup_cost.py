"""What each step of omniforge-script's per-run cgroups costs on this machine (workload 4).

    python cgroup_cost.py [RUNS=30]     # as root; prints one JSON object

For each hierarchy omniforge-script uses here (cgroup v2 for `cgroup.kill`, and v1 `pids` when
v2 cannot limit processes), per run: mkdir of the run cgroup (+ pids.max), moving a live child
into it (a write to cgroup.procs, the kernel's migration path that the runner's pre_exec takes)
after GAP_MS of idleness (as between two tool calls), then a second move right after the
first (`migrate_again`), and rmdir once the child is reaped (retried until it succeeds, as the
runner does). Medians, ms. A move after idleness can wait for an RCU grace period (the global
cgroup_threadgroup_rwsem is taken for writing); a move right after another one does not.
"""

import json
import os
import statistics
import subprocess
import sys
import time

GAP_MS = 50


def own(ctrl):
    for line in open("/proc/self/cgroup"):
        n, c, path = line.rstrip("\n").split(":", 2)
        if (ctrl == "" and n == "0" and c == "") or (ctrl and ctrl in c.split(",")):
            return path
    return None


def hierarchies():
    out = []
    for mount in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]:
        if os.path.isfile(os.path.join(mount, "cgroup.controllers")) and own("") is not None:
            out.append(("v2", os.path.join(mount, own("").lstrip("/"))))
            break
    if own("pids") is not None and os.path.isdir("/sys/fs/cgroup/pids"):
        out.append(("v1-pids", os.path.join("/sys/fs/cgroup/pids", own("pids").lstrip("/"))))
    return out


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    result = {}
    for name, base in hierarchies():
        parent = os.path.join(base, f"bench-cgcost-{os.getpid()}")
        try:
            os.mkdir(parent)
        except OSError as e:
            result[name] = {"error": str(e)}
            continue
        t = {"mkdir": [], "migrate": [], "migrate_again": [], "rmdir": [], "rmdir_retries": []}
        try:
            for i in range(runs):
                d = os.path.join(parent, f"run-{i}")
                t0 = time.perf_counter()
                os.mkdir(d)
                if name == "v1-pids":
                    with open(os.path.join(d, "pids.max"), "w") as f:
                        f.write("64")
                t1 = time.perf_counter()
                child = subprocess.Popen(["sleep", "5"])
                time.sleep(GAP_MS / 1000)
                t2 = time.perf_counter()
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write(str(child.pid))
                t3 = time.perf_counter()
                with open(os.path.join(parent, "cgroup.procs"), "w") as f:
                    f.write(str(child.pid))
                t["migrate_again"].append((time.perf_counter() - t3) * 1e3)
                child.kill()
                child.wait()
                t4 = time.perf_counter()
                retries = 0
                while True:
                    try:
                        os.rmdir(d)
                        break
                    except OSError:
                        retries += 1
                        time.sleep(0.001)
                t5 = time.perf_counter()
                t["mkdir"].append((t1 - t0) * 1e3)
                t["migrate"].append((t3 - t2) * 1e3)
                t["rmdir"].append((t5 - t4) * 1e3)
                t["rmdir_retries"].append(retries)
        finally:
            for e in os.listdir(parent):
                if e.startswith("run-"):
                    try:
                        os.rmdir(os.path.join(parent, e))
                    except OSError:
                        pass
            os.rmdir(parent)
        result[name] = {k: round(statistics.median(v), 3) for k, v in t.items()}
        result[name]["migrate_p90"] = round(sorted(t["migrate"])[int(0.9 * (runs - 1))], 3)
    print(json.dumps({"runs": runs, "gap_ms": GAP_MS, "kernel": os.uname().release, "ms": result}))


if __name__ == "__main__":
    main()
