"""Writes bench/RESULTS.md and bench/results.png from a scripts/bench run.

    python report.py --results results.jsonl --machine machine.json --notes notes.md --md RESULTS.md --png results.png

Input: one JSON object per measurement (from bench/loadgen and script-layers), tagged with
workload, system, transport, round. Every number written here comes from those files; rounds
are combined by their median.
"""

import argparse
import json
import os
import re
import statistics
from collections import defaultdict

import matplotlib

import summary

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = ["omniforge", "omniforge-nodelay", "rmcp-minimal", "rmcp-nagle", "fastmcp", "mcpserver2", "ts-sdk"]
VARIANTS = ["omniforge", "omniforge-nodelay"]
LABEL = {
    "omniforge": "OmniForge",
    "omniforge-nodelay": "OmniForge + bench/patches",
    "rmcp-nagle": "rmcp minimal, no TCP_NODELAY",
    "rmcp-minimal": "rmcp 3.11 minimal",
    "fastmcp": "FastMCP (mcp 1.x)",
    "mcpserver2": "MCPServer (mcp 2.x)",
    "ts-sdk": "TypeScript SDK",
    "direct": "Connect upstream, direct",
    "bare": "bare python -I",
}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=2):
    if x is None:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def ms(us):
    return None if us is None else us / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--notes")
    ap.add_argument("--md", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()

    rows = [json.loads(l) for l in open(a.results) if l.strip()]
    machine = json.load(open(a.machine))
    by = defaultdict(list)
    for r in rows:
        by[r.get("workload")].append(r)
    for b in summary.baselines(by):  # OMNIFORGE_BASELINE binaries, next to OmniForge in every table
        SYSTEMS.insert(SYSTEMS.index("rmcp-minimal"), b)
        LABEL[b] = summary.label(b)
    loads = [float(r["load1"]) for r in rows if "load1" in r]
    patched = any(r.get("system") == "omniforge-nodelay" for r in rows)
    global VARIANTS
    VARIANTS = ["omniforge", "omniforge-nodelay"] if patched else ["omniforge"]
    end = [r for r in rows if r.get("workload") == "end"]
    out = []
    w = out.append

    w("# OmniForge benchmarks: results\n")
    if a.smoke or machine.get("smoke"):
        w("> **Smoke run** (about 1 s per workload): these numbers check the harness and mean little.\n")
    w("Produced by `scripts/bench` (raw data: `bench/target/results/results.jsonl`). Servers run on CPU 0, the "
      "load generator (`bench/loadgen`, Rust, one thread) on CPU 1, both pinned with `taskset`. Every peer serves "
      "the same tool, `omniforge_instructions`, answering OmniForge's own instructions text "
      f"({machine.get('guide_bytes')} bytes, one text block), so each `tools/call` moves the same bytes. "
      "Medians over rounds; latencies are per request, client-side, in milliseconds.\n")
    out += summary.top(by, machine)
    w("## Machine and versions\n")
    s = machine.get("settings", {})
    w("| | |\n|---|---|")
    w(f"| date | {machine['date']} |")
    w(f"| CPU | {machine['cpu_model']}, `nproc` = {machine['nproc']} |")
    w(f"| kernel | {machine['kernel']} |")
    la = machine.get("loadavg_start")
    w(f"| load average | at start {' / '.join(la) if la else 'n/a'} (1/5/15 min); 1-min load during the measurements "
      f"{fmt(min(loads), 2) if loads else 'n/a'} to {fmt(max(loads), 2) if loads else 'n/a'}"
      f"{'; at end ' + end[-1]['loadavg_end'] if end else ''}. The machine is shared with other engineers' builds. |")
    w(f"| OmniForge | {machine['omniforge']} (commit {machine['omniforge_commit']}), rmcp {machine['rmcp']}, "
      f"tokio {machine['tokio']}, axum {machine['axum']}, {machine['rustc']}; binary `{machine.get('omniforge_binary')}` |")
    for n, b in machine.get("baselines", {}).items():
        w(f"| {LABEL.get(n, n)} | {b['version']}; binary `{b['binary']}` |")
    w(f"| rmcp minimal peer | rmcp {machine['rmcp']} (`bench/rmcp-minimal`, same features as OmniForge) |")
    w(f"| Python SDK | FastMCP from `mcp` {machine['python_mcp1']}, MCPServer from `mcp` {machine['python_mcp2']}, "
      f"uvicorn {machine['uvicorn']}, {machine['python']} |")
    w(f"| TypeScript SDK | `@modelcontextprotocol/sdk` {machine['ts_sdk']} on Node {machine['node']} (Express app from `createMcpExpressApp`) |")
    for rr in machine.get("reruns", []):
        w(f"| re-run | `--only {rr['only']}` on {rr['date']} (load {' / '.join(rr['loadavg_start'])}), OmniForge commit "
          f"{rr.get('omniforge_commit', machine['omniforge_commit'])}; those rows replace the first run's |")
    w(f"| settings | {s.get('duration_s')} s measured after {s.get('warmup_s')} s warm-up per HTTP run, "
      f"{s.get('rounds')} rounds; stdio {s.get('stdio_calls')} calls; script {s.get('script_calls')} calls; "
      f"start-up {s.get('startup_runs')} runs; {s.get('sessions')} sessions |")
    w("")

    targets = {}  # (workload, target) -> {variant: (measured, met, margin)}

    class T:
        def append(self, t, variant="omniforge"):
            wk, name, m, ok, margin = t
            targets.setdefault((wk, name), {})[variant] = (m, ok, margin)
    tg = T()

    # ---- w1
    w1 = by.get("w1", [])
    agg = defaultdict(lambda: defaultdict(list))
    for r in w1:
        k = (r["system"], r["transport"], int(r["clients"]))
        agg[k]["rps"].append(r["rps"])
        lat = r.get("lat_us") or {}
        agg[k]["p50"].append(ms(lat.get("p50")))
        agg[k]["p99"].append(ms(lat.get("p99")))
        agg[k]["errors"].append(r.get("errors", 0))
        agg[k]["rss"].append((r.get("rss_kb") or 0) / 1024)
    W1 = {k: {m: med(v) for m, v in d.items()} for k, d in agg.items()}
    if W1:
        w("## 1. `tools/call` of a trivial built-in tool over Streamable HTTP\n")
        pc = " patched ÷ this |" if patched else ""
        w("| system | transport | clients | throughput (req/s) | p50 (ms) | p99 (ms) | errors | RSS after (MB) | OmniForge ÷ this |" + pc)
        w("|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if patched else ""))
        for tr in ["http-session", "http-stateless"]:
            for c in [1, 32]:
                base = W1.get(("omniforge", tr, c), {}).get("rps")
                based = W1.get(("omniforge-nodelay", tr, c), {}).get("rps")
                for sysn in SYSTEMS:
                    d = W1.get((sysn, tr, c))
                    if not d:
                        continue
                    ratio = base / d["rps"] if base and d["rps"] else None
                    ratiod = based / d["rps"] if based and d["rps"] else None
                    w(f"| {LABEL[sysn]} | {tr} | {c} | {fmt(d['rps'])} | {fmt(d['p50'], 3)} | {fmt(d['p99'], 3)} | "
                      f"{int(d['errors'] or 0)} | {fmt(d['rss'], 1)} | {'—' if sysn == 'omniforge' else fmt(ratio) + '×'} |"
                      + (f" {'—' if sysn == 'omniforge-nodelay' else fmt(ratiod) + '×'} |" if patched else ""))
        w("")
        tr = "http-session"
        for v in VARIANTS:
            om = W1.get((v, tr, 32), {}).get("rps")
            for peer, goal in [("rmcp-minimal", 0.8), ("fastmcp", 10.0), ("ts-sdk", 3.0)]:
                p = W1.get((peer, tr, 32), {}).get("rps")
                if om and p:
                    r = om / p
                    tg.append(("1", f"throughput ≥ {goal}× {LABEL[peer]} (32 clients, session mode)",
                               f"{r:.2f}× ({fmt(om)} vs {fmt(p)} req/s)", r >= goal,
                               f"missed by {(goal - r) / goal * 100:.0f}% (needs {goal * p:,.0f} req/s)" if r < goal else f"{(r / goal - 1) * 100:.0f}% headroom"), v)
            p50 = W1.get((v, tr, 1), {}).get("p50")
            if p50 is not None:
                tg.append(("1", "p50 latency with 1 client ≤ 0.3 ms", f"{p50:.3f} ms", p50 <= 0.3,
                           f"missed by {p50 - 0.3:.3f} ms ({p50 / 0.3:.1f}× the target)" if p50 > 0.3 else f"{0.3 - p50:.3f} ms under"), v)
                pm = W1.get(("rmcp-minimal", tr, 1), {}).get("p50")
                if pm:
                    w(f"With 1 client, {LABEL[v]}'s p50 is {p50:.3f} ms against {pm:.3f} ms for the rmcp minimal server "
                      f"({p50 - pm:+.3f} ms).\n")

    out += summary.sections(by, "w1-stored")
    # ---- w2
    w2 = by.get("w2", [])
    if w2:
        w("## 2. `tools/list` with 10,000 stored tools (first page)\n")
        w("| server | clients | throughput (req/s) | p50 (ms) | p99 (ms) | errors | page size | idle RSS (MB) | RSS after load (MB) | peak RSS (MB) |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for v, c in [(v, c) for v in VARIANTS for c in [1, 32]]:
            rs = [r for r in w2 if int(r["clients"]) == c and r["system"] == v]
            if not rs:
                continue
            p50 = med([ms(r["lat_us"]["p50"]) for r in rs if r.get("lat_us")])
            p99 = med([ms(r["lat_us"]["p99"]) for r in rs if r.get("lat_us")])
            idle = med([int(r["idle_rss_kb"]) / 1024 for r in rs if r.get("idle_rss_kb")])
            after = med([r["rss_kb"] / 1024 for r in rs if r.get("rss_kb")])
            hwm = med([r["hwm_kb"] / 1024 for r in rs if r.get("hwm_kb")])
            pb = med([int(r["page_bytes"]) for r in rs if r.get("page_bytes")])
            w(f"| {LABEL[v]} | {c} | {fmt(med([r['rps'] for r in rs]))} | {fmt(p50, 3)} | {fmt(p99, 3)} | "
              f"{sum(r.get('errors', 0) for r in rs)} | {fmt(pb / 1024 if pb else None, 0)} KiB, 1,000 tools | {fmt(idle, 1)} | {fmt(after, 1)} | {fmt(hwm, 1)} |")
            if c == 1:
                tg.append(("2", "first page p50 ≤ 2 ms", f"{p50:.3f} ms", p50 <= 2.0,
                                f"missed by {p50 - 2:.2f} ms ({p50 / 2:.1f}× the target)" if p50 > 2 else f"{2 - p50:.2f} ms under"), v)
                rss = max(x for x in [idle, after] if x is not None)
                tg.append(("2", "server RSS with 10,000 tools ≤ 60 MB", f"{rss:.1f} MB (idle {fmt(idle, 1)}, after 1-client load {fmt(after, 1)}; peak {fmt(hwm, 1)})",
                                rss <= 60, f"missed by {rss - 60:.1f} MB" if rss > 60 else f"{60 - rss:.1f} MB under"), v)
        w("")

    sm = by.get("w2-schema-mem", [])
    if sm:
        d = sm[-1]["data"]
        w(f"Memory per stored tool, measured apart (`bench/tools/src/bin/schema-mem.rs`, same `jsonschema` line as OmniForge): "
          f"one compiled input-schema validator of the seeded schema adds {d['validator_kb_each']:.1f} KB of RSS "
          f"({d['validators_mb']:.1f} MB for {d['n']:,}; {d['compile_us_each']:.1f} µs to compile each), and one "
          f"`serde_json::Value` copy of that 2-property schema {d['schema_clone_kb_each']:.1f} KB.\n")
    w2p = os.path.join(os.path.dirname(a.results), "perf-w2-omniforge.txt")
    if os.path.exists(w2p) and os.path.getsize(w2p) > 0:
        w(f"Profile of {LABEL[VARIANTS[-1]]} serving the first page to 1 client (`perf record -e cpu-clock --call-graph dwarf`):\n")
        w("```")
        for line in open(w2p).read().splitlines()[:70]:
            w(perf_line(line))
        w("```\n")

    # ---- w3
    w3 = by.get("w3", [])
    if w3:
        w("## 3. Manifest tool call against a local Connect upstream\n")
        w("The upstream is the Connect fixture (`tests/fixtures/connect`, Node 22, `@connectrpc/connect-node`), "
          "pinned to CPU 0 together with OmniForge: the whole server side shares one core. `direct` is the same "
          "load generator POSTing the Connect JSON request itself (`/fixture.v1.FixtureService/Echo`); `via OmniForge` "
          "is an MCP `tools/call` of `fixture_echo` (session mode).\n")
        w("| path | clients | throughput (req/s) | p50 (ms) | p99 (ms) | errors |")
        w("|---|---:|---:|---:|---:|---:|")
        W3 = {}
        for sysn in ["direct"] + VARIANTS + summary.baselines(by):
            for c in [1, 32]:
                rs = [r for r in w3 if r["system"] == sysn and int(r["clients"]) == c]
                if not rs:
                    continue
                d = {"rps": med([r["rps"] for r in rs]), "p50": med([ms(r["lat_us"]["p50"]) for r in rs if r.get("lat_us")]),
                     "p99": med([ms(r["lat_us"]["p99"]) for r in rs if r.get("lat_us")]), "errors": sum(r.get("errors", 0) for r in rs)}
                # per-round pairing for the added latency
                d["rounds"] = {r["round"]: r for r in rs}
                W3[(sysn, c)] = d
                w(f"| {'direct' if sysn == 'direct' else 'via ' + LABEL[sysn]} | {c} | {fmt(d['rps'])} | {fmt(d['p50'], 3)} | {fmt(d['p99'], 3)} | {d['errors']} |")
        w("")
        for v in VARIANTS:
          if ("direct", 1) in W3 and (v, 1) in W3:
            added = []
            for rd, r in W3[(v, 1)]["rounds"].items():
                dr = W3[("direct", 1)]["rounds"].get(rd)
                if dr and r.get("lat_us") and dr.get("lat_us"):
                    added.append(ms(r["lat_us"]["p50"] - dr["lat_us"]["p50"]))
            ad = med(added)
            if ad is not None:
                tg.append(("3", "p50 added latency ≤ 0.25 ms (1 client)", f"{ad:.3f} ms (per round: {', '.join(f'{x:.3f}' for x in added)})",
                                ad <= 0.25, f"missed by {ad - 0.25:.3f} ms" if ad > 0.25 else f"{0.25 - ad:.3f} ms under"), v)
          if ("direct", 32) in W3 and (v, 32) in W3:
            r = W3[(v, 32)]["rps"] / W3[("direct", 32)]["rps"]
            tg.append(("3", "throughput ≥ 0.7× direct (32 clients)", f"{r:.2f}×", r >= 0.7,
                            f"missed by {(0.7 - r) / 0.7 * 100:.0f}%" if r < 0.7 else f"{(r / 0.7 - 1) * 100:.0f}% headroom"), v)

    # ---- w4
    w4 = by.get("w4", [])
    w4l = by.get("w4-layers", [])
    if w4:
        w("## 4. Warm script tool call (Python, one dependency: python-dateutil)\n")
        w("`bench_dateutil` (`bench/peers/dateutil_tool.py`) stored through `omniforge_create_tool`; one client, "
          "sequential calls. `bare` is the same script run with its environment's interpreter, "
          "`<env>/bin/python -I dateutil_tool.py`, arguments on stdin, on the server core.\n")
        w4r = by.get("w4-runner", [])
        w("| what | calls | p50 (ms) | p90 (ms) | p99 (ms) | the runner's own p50 inside OmniForge (ms) |")
        w("|---|---:|---:|---:|---:|---:|")
        W4 = {}
        for key, label in [((v, sb), f"{LABEL[v]}, `--sandbox {sb}`{' (every layer)' if sb == 'standard' else ''}")
                           for v in VARIANTS for sb in ["standard", "off"]] + [(("bare", None), "bare `python -I`")]:
            rs = [r for r in w4 if r["system"] == key[0] and (key[1] is None or r.get("sandbox") == key[1])]
            if not rs:
                continue
            d = {q: med([ms(r["lat_us"][q]) for r in rs if r.get("lat_us")]) for q in ["p50", "p90", "p99"]}
            d["runner"] = med([r["runner_p50_ms"] for r in w4r if r["system"] == key[0] and r["sandbox"] == key[1]])
            W4[key] = d
            w(f"| {label} | {sum(int(r.get('count', 0)) for r in rs)} | {fmt(d['p50'])} | {fmt(d['p90'])} | {fmt(d['p99'])} | "
              f"{fmt(d['runner']) if key[0] != 'bare' else ''} |")
        w("")
        for v in VARIANTS:
            for sb in ["standard", "off"]:
                d = W4.get((v, sb))
                if d and d.get("runner") is not None and ("bare", None) in W4:
                    w(f"{LABEL[v]}, `--sandbox {sb}`: of the {d['p50']:.1f} ms end to end, the runner's own run takes "
                      f"{d['runner']:.1f} ms ({d['runner'] - W4[('bare', None)]['p50']:+.1f} ms against the bare run), and "
                      f"everything around it (HTTP, MCP, argument checks, result shaping, call log) {d['p50'] - d['runner']:.1f} ms "
                      "(medians of the runner's debug log and of the client's latencies, same calls).\n")
        for v in VARIANTS:
          if (v, "standard") in W4 and ("bare", None) in W4:
            std, bare = W4[(v, "standard")]["p50"], W4[("bare", None)]["p50"]
            tg.append(("4", "p50 with every sandbox layer ≤ bare + 15 ms", f"{std:.1f} ms vs bare {bare:.1f} ms (+{std - bare:.1f} ms)",
                            std <= bare + 15, f"missed by {std - bare - 15:.1f} ms" if std > bare + 15 else f"{bare + 15 - std:.1f} ms under"), v)
        if w4l:
            L = defaultdict(list)
            layers = w4l[-1]["data"].get("layers", {})
            for r in w4l:
                for k, v in r["data"]["lat_us"].items():
                    L[k].append(ms(v["p50"]))
            Lm = {k: med(v) for k, v in L.items()}
            P = defaultdict(list)
            for r in w4l:
                for k, v in (r["data"].get("paired_diff_us") or {}).items():
                    P[k].append(ms(v))
            Pm = {k: med(v) for k, v in P.items()}
            w("### The cost of each layer (p50, ms)\n")
            w("From `bench/tools/src/bin/script-layers.rs`: omniforge-script's `Runner` driven directly (no MCP), "
              "each iteration running bare, runner-off, runner-cgroups and runner-bwrap back to back; a layer's cost is "
              "the median of the paired per-iteration differences (robust to the machine's load drifting), median "
              "over rounds. Then one call-log write (`SqliteStore::record_call`). The last rows split OmniForge's "
              "end-to-end call with the runner's own duration, which OmniForge logs at debug level for every call.\n")
            w("| layer | what it adds | p50 (ms) |")
            w("|---|---|---:|")
            pd = lambda a_, b_: Pm.get(f"{a_} - {b_}", _d(Lm, a_, b_))
            rows_l = [("Python itself", "bare `python -I` with python-dateutil", Lm.get("bare")),
                      ("runner", "process group, rlimits, side-channel socketpair, script file, capped capture "
                                 f"(layers: {', '.join(layers.get('runner-off', []))})", pd("runner-off", "bare")),
                      ("cgroups", "per-run cgroups: create, move the child in (pre_exec), kill, remove "
                                  f"(layers: {', '.join(x for x in layers.get('runner-cgroups', []) if x not in layers.get('runner-off', []))})",
                       pd("runner-cgroups", "runner-off")),
                      ("bubblewrap", "namespaces, uid 65534, read-only binds, private /tmp "
                                     f"(layers: {', '.join(x for x in layers.get('runner-bwrap', []) if x not in layers.get('runner-cgroups', []))})",
                       pd("runner-bwrap", "runner-cgroups")),
                      ("all runner layers", "runner-bwrap − bare, paired", pd("runner-bwrap", "bare")),
                      ("call log", "one SQLite row, `synchronous=FULL` (an fsync)", Lm.get("call-log"))]
            for v in VARIANTS:
                d = W4.get((v, "standard"))
                if d and d.get("runner") is not None and ("bare", None) in W4:
                    rows_l.append((f"all runner layers inside {LABEL[v]}", "the runner's own p50 from the server's debug log, minus bare",
                                   d["runner"] - W4[("bare", None)]["p50"]))
                    rows_l.append((f"around the runner in {LABEL[v]}", "HTTP, MCP, argument checks, result shaping, call log: "
                                   "end-to-end p50 minus the runner's own p50", d["p50"] - d["runner"]))
                elif d and Lm.get("runner-bwrap") is not None and ("bare", None) in W4:
                    rest = d["p50"] - W4[("bare", None)]["p50"] - (pd("runner-bwrap", "bare") or 0) - (Lm.get("call-log") or 0)
                    rows_l.append((f"MCP + server ({LABEL[v]})", "the rest, by subtraction (noisy)", rest))
            for name, what, v in rows_l:
                w(f"| {name} | {what} | {fmt(v)} |")
            w("")
        cg = by.get("w4-cgroup", [])
        if cg:
            d = cg[-1]["data"]
            w(f"Each cgroup step, measured apart (`bench/cgroup_cost.py`, {d['runs']} runs, a child moved after {d['gap_ms']} ms "
              "of idleness as between two calls; medians, ms):\n")
            w("| hierarchy | mkdir | move a process in (after idleness) | p90 | a second move right after | rmdir after exit |")
            w("|---|---:|---:|---:|---:|---:|")
            for h, v in d["ms"].items():
                if "error" in v:
                    w(f"| {h} | {v['error']} | | | | |")
                else:
                    w(f"| {h} | {v['mkdir']:.3f} | {v['migrate']:.3f} | {v['migrate_p90']:.3f} | {v['migrate_again']:.3f} | {v['rmdir']:.3f} |")
            w("")

    # ---- w4: warm templates end to end through MCP (issue 15)
    wm = by.get("w4-mcp", [])
    if wm:
        tools = [t for t in ["dateutil", "numpy", "add_vat"] if any(r.get("tool") == t for r in wm)]
        rounds = len({r.get("round") for r in wm})
        load = [float(r["load1"]) for r in wm if r.get("load1")]
        w("### Warm templates end to end through MCP (issue 15)\n")
        w("The release `omniforge serve` with its default pool (`--warm-pool 8`, `warm`) against `--warm-pool 0` "
          "(`cold`), both `--sandbox standard` (every layer), one after the other in each round, and the tool's code "
          "run bare (`<env>/bin/python -I tool.py`, arguments on stdin), all on the server core; one MCP client, "
          "sequential `tools/call`, each 50 ms after the previous answer (as an agent spaces its calls), after 1 s of "
          "warm-up calls (the first of which starts the template on the warm server). Tools: `bench_dateutil` "
          "(`bench/peers/dateutil_tool.py`), `bench_numpy` (`examples/tools/describe_numbers.json`: `import numpy`, "
          "mean, std, percentiles of 20 numbers), `bench_add_vat` (`examples/tools/add_vat.json`, no dependency). "
          f"Medians over {rounds} rounds" + (f"; 1-min load during these runs {min(load):.2f} to {max(load):.2f}" if load else "")
          + ".\n")
        w("| tool | calls (bare / cold / warm) | bare p50 / p99 (ms) | cold p50 / p99 (ms) | warm p50 / p99 (ms) | warm / bare (p50) | warm / cold (p50) | errors |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        WM = {}
        for t in tools:
            for sysn in ["bare", "cold", "warm"]:
                rs = [r for r in wm if r.get("tool") == t and r["system"] == sysn]
                WM[(t, sysn)] = {q: med([ms((r.get("lat_us") or {}).get(q)) for r in rs]) for q in ["p50", "p99"]}
                WM[(t, sysn)]["n"] = sum(int(r.get("count", 0)) for r in rs)
                WM[(t, sysn)]["errors"] = sum(int(r.get("errors", 0)) for r in rs)
            b, c, x = WM[(t, "bare")], WM[(t, "cold")], WM[(t, "warm")]
            ratio = lambda a_, b_: (a_["p50"] / b_["p50"]) if a_["p50"] and b_["p50"] else None
            wb, wc = ratio(x, b), ratio(x, c)
            w(f"| {t} | {b['n']} / {c['n']} / {x['n']} | {fmt(b['p50'])} / {fmt(b['p99'])} | {fmt(c['p50'])} / {fmt(c['p99'])} | "
              f"{fmt(x['p50'])} / {fmt(x['p99'])} | {fmt(wb, 3)} | {fmt(wc, 3)} | {c['errors'] + x['errors'] + b['errors']} |")
            goal = {"dateutil": 0.3, "numpy": 0.15}.get(t)
            if goal and wb is not None:
                tg.append(("4 / issue 15", f"{t} tool through MCP: warm p50 ≤ {goal}× bare",
                           f"{wb:.3f}× ({x['p50']:.2f} vs {b['p50']:.2f} ms)", wb <= goal,
                           f"{goal / wb:.1f}× under" if wb <= goal else f"missed by {wb / goal:.2f}×"))
        w("")
        first = by.get("w4-mcp-first", [])
        if first:
            w("First call after create: a new tool with the same code and dependencies is created over MCP (the server "
              "prepares its template for the author before `omniforge_create_tool` answers), then called once; against "
              "the first call of the same tools on the `--warm-pool 0` server, and against that server's cold p50 above.\n")
            w("| tool | samples | first call after create p50 (ms) | first call, pool off p50 (ms) | ratio | cold p50, pool off (ms) | ratio |")
            w("|---|---:|---:|---:|---:|---:|---:|")
            for t in tools:
                fw = [ms(r["lat_us"]["p50"]) for r in first if r.get("tool") == t and r["system"] == "warm" and r.get("count")]
                fc = [ms(r["lat_us"]["p50"]) for r in first if r.get("tool") == t and r["system"] == "cold" and r.get("count")]
                fa, c1, c2 = med(fw), med(fc), WM.get((t, "cold"), {}).get("p50")
                r1 = fa / c1 if fa and c1 else None
                r2 = fa / c2 if fa and c2 else None
                w(f"| {t} | {len(fw)} / {len(fc)} | {fmt(fa)} | {fmt(c1)} | {fmt(r1, 3)} | {fmt(c2)} | {fmt(r2, 3)} |")
                if r2 is not None:
                    tg.append(("4 / issue 15", f"{t} through MCP: first call after create ≤ 1.1× a cold call (pool off, p50)",
                               f"{r2:.3f}× ({fa:.2f} vs {c2:.2f} ms)", r2 <= 1.1,
                               f"{1.1 / r2:.1f}× under" if r2 <= 1.1 else f"missed by {r2 / 1.1:.2f}×"))
            w("")
        tput = by.get("w4-mcp-tput", [])
        if tput:
            rr = sorted({r.get("round") for r in tput})
            w(f"Throughput: {tput[0].get('clients')} closed-loop MCP clients (one session each) calling `bench_dateutil` "
              f"for {tput[0].get('window_s', 0):.0f} s after warm-up, `--warm-pool 8` then `--warm-pool 0` in each round; "
              "the server, its templates and every call on the server core (the runner's slots: 2 × the cores it may "
              "use = 2 at once, the rest queue).\n")
            w("| round | warm calls/s | p50 / p99 (ms) | pool off calls/s | p50 / p99 (ms) | ratio | errors |")
            w("|---:|---:|---:|---:|---:|---:|---:|")
            ratios = []
            for i, rnd in enumerate(rr):
                ta = next((r for r in tput if r.get("round") == rnd and r["system"] == "warm"), None)
                c = next((r for r in tput if r.get("round") == rnd and r["system"] == "cold"), None)
                if not ta or not c:
                    continue
                x = ta["rps"] / c["rps"] if c["rps"] else None
                if x:
                    ratios.append(x)
                la, lc = ta.get("lat_us") or {}, c.get("lat_us") or {}
                w(f"| {i + 1} | {ta['rps']:.1f} | {fmt(ms(la.get('p50')))} / {fmt(ms(la.get('p99')))} | {c['rps']:.1f} | "
                  f"{fmt(ms(lc.get('p50')))} / {fmt(ms(lc.get('p99')))} | {fmt(x)} | {int(ta.get('errors', 0)) + int(c.get('errors', 0))} |")
            w("")
            if ratios:
                x = med(ratios)
                tg.append(("4 / issue 15", f"{tput[0].get('clients')} MCP clients on the dateutil tool: calls/s ≥ 5× `--warm-pool 0`",
                           f"{x:.2f}× (median of {len(ratios)} rounds)", x >= 5,
                           f"{x / 5:.2f}× the target" if x >= 5 else f"missed by {5 / x:.2f}×"))
        pool = by.get("w4-mcp-pool", [])
        if pool:
            warm = (pool[-1].get("data") or {}).get("warm") or {}
            mib = lambda b: None if b is None else b / (1 << 20)
            w(f"Memory, from the warm server's `/healthz` after the latency runs (last round; pool {'on' if warm.get('on') else 'off: ' + str(warm.get('off_reason'))}, "
              f"at most {warm.get('max_templates')} templates). A template is its bubblewrap, init and interpreter; "
              "its ready spare shares most pages with it, so RSS counts those twice and PSS splits them.\n")
            w("| template | calls on it | template RSS (MiB) | spare RSS (MiB) | PSS, both (MiB) | ready after (ms) |")
            w("|---|---:|---:|---:|---:|---:|")
            for t in warm.get("templates") or []:
                w(f"| `{t.get('version')}` | {t.get('calls')} | {fmt(mib(t.get('template_rss_bytes')), 1)} | "
                  f"{fmt(mib(t.get('spares_rss_bytes')), 1)} | {fmt(mib(t.get('pss_bytes')), 1)} | {fmt(t.get('boot_ms'), 0)} |")
            w(f"| **pool** | | | | RSS {fmt(mib(warm.get('rss_bytes')), 1)}, PSS {fmt(mib(warm.get('pss_bytes')), 1)} | |")
            w("")

    # ---- w4: warm templates (issue 15)
    w4w = by.get("w4-warm", [])
    if w4w:
        d = w4w[-1]["data"]
        w("### Warm templates through the crate API (issue 15)\n")
        w("From `bench/tools/src/bin/script-warm.rs`: omniforge-script's `WarmPool` driven directly (no MCP; "
          "`scripts/bench` runs only its `layers` part now that the table above measures the rest end to end). "
          "`cold` is the `Runner` with every layer and the pool "
          "off, `warm` a call on the version's template (prepared when the version is created), `bare` "
          "`<env>/bin/python -I tool.py` with the arguments on stdin. Interleaved round-robin, each call after a 50 ms "
          f"pause; active layers: {', '.join(d.get('layers', []))}; load {d.get('load_start')} → {d.get('load_end')}.\n")
        lat = d.get("latency") or {}
        if lat:
            w("| tool | bare p50 / p99 (ms) | cold p50 / p99 (ms) | warm p50 / p99 (ms) | warm / bare | warm / cold |")
            w("|---|---:|---:|---:|---:|---:|")
            for tool, r in lat.items():
                w(f"| {tool} | {fmt(r['bare']['p50'])} / {fmt(r['bare']['p99'])} | {fmt(r['cold']['p50'])} / {fmt(r['cold']['p99'])} | "
                  f"{fmt(r['warm']['p50'])} / {fmt(r['warm']['p99'])} | {r['warm_over_bare']:.3f} | {r['warm_over_cold']:.3f} |")
            w("")
            for tool, goal in [("dateutil", 0.3), ("numpy", 0.15)]:
                if tool in lat:
                    x = lat[tool]["warm_over_bare"]
                    tg.append(("4 / issue 15", f"{tool} tool: warm p50 ≤ {goal}× bare", f"{x:.3f}× ({lat[tool]['warm']['p50']:.2f} vs {lat[tool]['bare']['p50']:.2f} ms)",
                               x <= goal, f"{goal / x:.1f}× under" if x <= goal else f"missed by {x / goal:.2f}×"))
        first = d.get("first") or {}
        if first:
            w("First call after create: the version's template is prepared when it is created (as the server will do "
              "at create and enable), then the call; against the same call cold with the pool off.\n")
            w("| tool | first call after create p50 (ms) | cold, pool off p50 (ms) | ratio | template ready after (p50, ms) |")
            w("|---|---:|---:|---:|---:|")
            for tool, r in first.items():
                w(f"| {tool} | {fmt(r['first_after_create']['p50'])} | {fmt(r['cold_pool_off']['p50'])} | {r['ratio']:.3f} | {fmt(r['template_ready']['p50'])} |")
                tg.append(("4 / issue 15", f"{tool}: first call after create ≤ 1.1× cold (pool off)", f"{r['ratio']:.3f}×",
                           r["ratio"] <= 1.1, f"{1.1 / r['ratio']:.1f}× under" if r["ratio"] <= 1.1 else f"missed by {r['ratio'] / 1.1:.2f}×"))
            w("")
        tp = d.get("throughput")
        if tp:
            w(f"Throughput: {tp['clients']} closed-loop clients calling the dateutil tool for {tp['seconds']} s, warm and "
              "pool off alternating (the runner's slots and queue as configured: 2 × cores run at once).\n")
            w("| round | warm calls/s | pool off calls/s | ratio |")
            w("|---:|---:|---:|---:|")
            for i, r in enumerate(tp["rounds"]):
                w(f"| {i + 1} | {r['warm_per_s']:.1f} | {r['cold_per_s']:.1f} | {r['ratio']:.2f} |")
            w("")
            x = tp["median_ratio"]
            tg.append(("4 / issue 15", f"{tp['clients']} clients: calls/s ≥ 5× pool off", f"{x:.2f}× (median of {len(tp['rounds'])} rounds)",
                       x >= 5, f"{x / 5:.2f}× the target" if x >= 5 else f"missed by {5 / x:.2f}×"))
        ly = d.get("layers_warm")
        if ly:
            w("The cost of each layer on the warm path (dateutil; p50 ms, and the median of paired differences "
              "with the layer minus without). With a ready spare, the per-call layers are paid before the call "
              "arrives; with none (`spares: 0`, a call beyond the ready spares in a burst) they are on its path. "
              "Namespaces, uid, read-only root, no network and seccomp are the template's: a call inherits them.\n")
            w("| variant | p50 | p99 | layer's cost (ms) |")
            w("|---|---:|---:|---:|")
            order = ["warm", "no call cgroups", "no call landlock", "neither", "runner without seccomp",
                     "spare on demand", "on demand, no call cgroups", "on demand, no call landlock"]
            for name in sorted(ly, key=lambda n: order.index(n) if n in order else len(order)):
                r = ly[name]
                w(f"| {name} | {fmt(r['summary'].get('p50'))} | {fmt(r['summary'].get('p99'))} | {r['with_minus_without_ms']:+.3f} |")
            w("")
        mem = d.get("memory")
        if mem:
            w("Memory after the latency runs (one ready spare each): RSS counts pages a template shares with its spare "
              "in both; PSS splits them.\n")
            w("| template | template RSS (MiB) | spare RSS (MiB) | PSS, both (MiB) | ready after (ms) |")
            w("|---|---:|---:|---:|---:|")
            for t in mem["templates"]:
                w(f"| {t['tool']} | {t['template_rss_mib']:.1f} | {t['spare_rss_mib']:.1f} | {t['pss_mib']:.1f} | {fmt(t.get('boot_ms'))} |")
            w(f"| **pool** | | | RSS {mem['pool_rss_mib']:.1f}, PSS {mem['pool_pss_mib']:.1f} | |")
            w("")

    # ---- w5
    st = by.get("w5-startup", [])
    ss = by.get("w5-sessions", [])
    if st or ss:
        w("## 5. Memory and start-up\n")
        w("Start-up: from spawn to the first successful `initialize` answer (HTTP: retried every millisecond; stdio: "
          "written at once), through `taskset`. Idle RSS: VmRSS 1 s after the last start-up became ready. Sessions: "
          "`initialize` + `notifications/initialized` each, then idle; with `+GET`, each session also holds its "
          "standalone SSE stream on its own connection, as every real client does.\n")
        w("| system | start-up p50 HTTP (ms) | start-up p50 stdio (ms) | idle RSS (MB): heap + files | sessions | RSS added (MB) | per session (KB) | RSS added with +GET (MB) | per session +GET (KB) |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        W5 = {}
        for sysn in SYSTEMS:
            h = [r for r in st if r["system"] == sysn and r["transport"] == "http"]
            sd = [r for r in st if r["system"] == sysn and r["transport"] == "stdio"]
            s0 = [r for r in ss if r["system"] == sysn and r["mode"] == "sessions"]
            s1 = [r for r in ss if r["system"] == sysn and r["mode"] == "sessions+sse"]
            d = {"start": med([ms(r["lat_us"]["p50"]) for r in h]), "start_stdio": med([ms(r["lat_us"]["p50"]) for r in sd]),
                 "idle": med([r["idle_rss_kb"] / 1024 for r in h if r.get("idle_rss_kb")]),
                 "anon": med([r["idle_rss_anon_kb"] / 1024 for r in h if r.get("idle_rss_anon_kb")]),
                 "file": med([r["idle_rss_file_kb"] / 1024 for r in h if r.get("idle_rss_file_kb")]),
                 "n": med([r["sessions"] for r in s0 + s1]),
                 "add": med([r["rss_delta_kb"] / 1024 for r in s0]), "per": med([r["per_session_kb"] for r in s0]),
                 "add_sse": med([r["rss_delta_kb"] / 1024 for r in s1]), "per_sse": med([r["per_session_kb"] for r in s1])}
            if not any(v is not None for v in d.values()):
                continue
            W5[sysn] = d
            w(f"| {LABEL[sysn]} | {fmt(d['start'], 1)} | {fmt(d['start_stdio'], 1)} | {fmt(d['idle'], 1)}: {fmt(d['anon'], 1)} + {fmt(d['file'], 1)} | {fmt(d['n'], 0)} | "
              f"{fmt(d['add'], 1)} | {fmt(d['per'], 1)} | {fmt(d['add_sse'], 1)} | {fmt(d['per_sse'], 1)} |")
        w("")
        o = W5.get("omniforge", {})
        if o.get("idle") is not None:
            tg.append(("5", "idle server RSS ≤ 15 MB", f"{o['idle']:.1f} MB", o["idle"] <= 15,
                            f"missed by {o['idle'] - 15:.1f} MB" if o["idle"] > 15 else f"{15 - o['idle']:.1f} MB under"))
        n = o.get("n") or 0
        for key, label in [("add", "without GET streams"), ("add_sse", "each with its GET stream")]:
            if o.get(key) is not None:
                v = o[key] * (1000 / n if n else 1)
                tg.append(("5", f"1,000 idle HTTP sessions add ≤ 30 MB ({label})",
                                f"{v:.1f} MB" + ("" if n == 1000 else f" (scaled from {n:.0f} sessions)"), v <= 30,
                                f"missed by {v - 30:.1f} MB" if v > 30 else f"{30 - v:.1f} MB under"))
        if o.get("start") is not None:
            tg.append(("5", "start-up to ready ≤ 100 ms (HTTP)", f"{o['start']:.1f} ms", o["start"] <= 100,
                            f"missed by {o['start'] - 100:.1f} ms" if o["start"] > 100 else f"{100 - o['start']:.1f} ms under"))

    out += summary.sections(by, "w5-expiry")
    # ---- w6
    w6 = by.get("w6", [])
    if w6:
        w("## 6. stdio: sequential `tools/call` on one connection\n")
        w("| system | calls per round | total (s) | calls/s | p50 (ms) | p99 (ms) | errors | OmniForge ÷ this (calls/s) |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        W6 = {}
        for sysn in SYSTEMS:
            rs = [r for r in w6 if r["system"] == sysn]
            if rs:
                W6[sysn] = {"n": med([r["count"] for r in rs]), "t": med([r["window_s"] for r in rs]), "rps": med([r["rps"] for r in rs]),
                            "p50": med([ms(r["lat_us"]["p50"]) for r in rs if r.get("lat_us")]),
                            "p99": med([ms(r["lat_us"]["p99"]) for r in rs if r.get("lat_us")]), "errors": sum(r.get("errors", 0) for r in rs)}
        base = W6.get("omniforge", {}).get("rps")
        for sysn, d in W6.items():
            ratio = base / d["rps"] if base and d["rps"] else None
            w(f"| {LABEL[sysn]} | {fmt(d['n'], 0)} | {fmt(d['t'])} | {fmt(d['rps'])} | {fmt(d['p50'], 3)} | {fmt(d['p99'], 3)} | {d['errors']} | "
              f"{'—' if sysn == 'omniforge' else fmt(ratio) + '×'} |")
        w("")
        if base and "rmcp-minimal" in W6:
            r = base / W6["rmcp-minimal"]["rps"]
            tg.append(("6", "stdio calls/s as a ratio against the rmcp minimal server (no threshold set)", f"{r:.2f}×", None, "reported"))

    # ---- targets
    w("## Targets\n")
    mark = lambda ok: "—" if ok is None else ("**met**" if ok else "**missed**")
    if patched:
        w("OmniForge as committed (HEAD, see above), and the same commit with `bench/patches/` applied "
          "(proposed fixes, measured in the same run; not part of main).\n")
        w("| # | target | OmniForge HEAD | met? | margin | HEAD + bench/patches | met? |")
        w("|---|---|---|---|---|---|---|")
    else:
        other = [f"`{rr['only']}` on {rr['omniforge_commit']}" for rr in machine.get("reruns", [])
                 if rr.get("omniforge_commit") and rr["omniforge_commit"] != machine["omniforge_commit"]]
        w(f"OmniForge as committed (commit {machine['omniforge_commit']}"
          + (f"; re-run: {', '.join(other)}" if other else "") + ").\n")
        w("| # | target | measured | met? | margin |")
        w("|---|---|---|---|---|")
    for (wk, t), per in targets.items():
        m, ok, margin = per.get("omniforge", ("n/a", None, ""))
        line = f"| {wk} | {t} | {m} | {mark(ok)} | {margin} |"
        if patched:
            pm, pok, pmargin = per.get("omniforge-nodelay", ("(same code path)", None, ""))
            line += f" {pm} | {mark(pok)}{(' (' + pmargin + ')') if pmargin and pok is not None else ''} |"
        w(line)
    w("")

    # ---- profile
    d = os.path.dirname(a.results)
    profs = [("w1-omniforge", f"{LABEL[VARIANTS[-1]]}, workload 1 (tools/call, 32 clients, session mode)"),
             ("w1-rmcp", "rmcp 3.11 minimal, workload 1 (same load)"),
             ("w3-omniforge", f"{LABEL[VARIANTS[-1]]}, workload 3 (manifest tool, 32 clients; the Connect upstream is another process)")]
    if any(os.path.exists(os.path.join(d, f"perf-{n}.txt")) for n, _ in profs):
        w("## Profiles\n")
        w("`perf record -e cpu-clock -F 999 --call-graph dwarf` on the server process for 4 s of load (scripts/bench, "
          "`profile` step; the patched build when there is one). Self time by shared object, then inclusive time of "
          "user-space frames.\n")
        for n, title in profs:
            f = os.path.join(d, f"perf-{n}.txt")
            if os.path.exists(f) and os.path.getsize(f) > 0:
                w(f"### {title}\n")
                w("```")
                for line in open(f).read().splitlines()[:70]:
                    w(perf_line(line))
                w("```\n")

    if a.notes and os.path.exists(a.notes):
        w(open(a.notes).read())

    open(a.md, "w").write("\n".join(out) + "\n")
    plot(a.png, W1 if w1 else {}, by, machine)


def perf_line(line):
    """A perf report line without its empty trailing columns (`-      -`) and padding."""
    return re.sub(r"\s+-\s+-\s*$", "", line).rstrip()


def _d(L, a, b):
    return None if L.get(a) is None or L.get(b) is None else L[a] - L[b]


def plot(path, W1, by, machine):
    fig, axes = plt.subplots(3, 3, figsize=(18, 15))
    colors = {"omniforge": "#d9480f", "omniforge-nodelay": "#f59f00", "rmcp-nagle": "#a5d8ff", "rmcp-minimal": "#1c7ed6", "fastmcp": "#2b8a3e", "mcpserver2": "#74b816",
              "ts-sdk": "#7048e8", "direct": "#868e96", "bare": "#868e96"}
    names = [s for s in SYSTEMS if any(k[0] == s for k in W1)]

    def bars(ax, keys, vals, title, ylabel, log=False, labels=None):
        xs = range(len(keys))
        ax.bar(xs, [v or 0 for v in vals], color=[colors.get(k.split("|")[0], "#495057") for k in keys])
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels or [LABEL.get(k, k) for k in keys], rotation=25, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        for x, v in zip(xs, vals):
            if v:
                ax.annotate(fmt(v), (x, v), ha="center", va="bottom", fontsize=7)

    # throughput, session mode, 1 and 32 clients
    ax = axes[0][0]
    width = 0.38
    for i, c in enumerate([1, 32]):
        vals = [W1.get((s, "http-session", c), {}).get("rps") or 0 for s in names]
        ax.bar([x + (i - 0.5) * width for x in range(len(names))], vals, width,
               color=[colors.get(s, "#868e96") for s in names], alpha=0.55 if c == 1 else 1.0, label=f"{c} client{'s' if c > 1 else ''}")
        for x, v in enumerate(vals):
            if v:
                ax.annotate(f"{v:,.0f}", (x + (i - 0.5) * width, v), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([LABEL[s] for s in names], rotation=25, ha="right", fontsize=8)
    ax.set_title("1. tools/call over HTTP (session): throughput\n(light: 1 client, dark: 32 clients)", fontsize=10)
    ax.set_ylabel("requests/s")
    ax.set_yscale("log")

    # latency p50 and p99, 1 client
    ax = axes[0][1]
    for i, q in enumerate(["p50", "p99"]):
        vals = [W1.get((s, "http-session", 1), {}).get(q) or 0 for s in names]
        ax.bar([x + (i - 0.5) * width for x in range(len(names))], vals, width, color=[colors.get(s, "#868e96") for s in names],
               alpha=0.55 if q == "p50" else 1.0)
        for x, v in enumerate(vals):
            if v:
                ax.annotate(f"{v:.2f}", (x + (i - 0.5) * width, v), ha="center", va="bottom", fontsize=6)
    ax.axhline(0.3, color="red", ls="--", lw=1)
    ax.text(len(names) - 0.5, 0.3, "target p50 0.3 ms", color="red", fontsize=7, ha="right", va="bottom")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([LABEL[s] for s in names], rotation=25, ha="right", fontsize=8)
    ax.set_title("1. tools/call over HTTP (session), 1 client: latency\n(light: p50, dark: p99)", fontsize=10)
    ax.set_ylabel("ms")
    ax.set_yscale("log")

    # stdio
    ax = axes[0][2]
    w6 = by.get("w6", [])
    ks = [s for s in SYSTEMS if any(r["system"] == s for r in w6)]
    bars(ax, ks, [med([r["rps"] for r in w6 if r["system"] == s]) for s in ks], "6. stdio: sequential tools/call", "calls/s", log=True)

    # w3
    ax = axes[1][0]
    w3 = by.get("w3", [])
    keys, vals, labels = [], [], []
    for s in ["direct"] + VARIANTS:
        for c in [1, 32]:
            rs = [r for r in w3 if r["system"] == s and int(r["clients"]) == c]
            if rs:
                keys.append(s)
                vals.append(med([r["rps"] for r in rs]))
                p50 = med([r["lat_us"]["p50"] / 1000 for r in rs if r.get("lat_us")])
                labels.append(f"{'direct' if s == 'direct' else 'via ' + LABEL[s]}\n{c} cl., p50 {p50:.2f} ms")
    if keys:
        bars(ax, keys, vals, "3. Connect upstream: direct vs MCP via OmniForge", "requests/s", labels=labels)

    # memory
    ax = axes[1][1]
    st, ss = by.get("w5-startup", []), by.get("w5-sessions", [])
    ks = [s for s in SYSTEMS if any(r["system"] == s for r in st + ss)]
    idle = [med([r["idle_rss_kb"] / 1024 for r in st if r["system"] == s and r.get("idle_rss_kb")]) or 0 for s in ks]
    add = [med([r["rss_delta_kb"] / 1024 for r in ss if r["system"] == s and r["mode"] == "sessions+sse"]) or 0 for s in ks]
    ax.bar(range(len(ks)), idle, color=[colors.get(s, "#868e96") for s in ks], alpha=0.55, label="idle RSS")
    ax.bar(range(len(ks)), add, bottom=idle, color=[colors.get(s, "#868e96") for s in ks], label="+ sessions with GET streams")
    for x, (i0, a0) in enumerate(zip(idle, add)):
        ax.annotate(f"{i0:.0f} + {a0:.0f}", (x, i0 + a0), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(ks)))
    ax.set_xticklabels([LABEL[s] for s in ks], rotation=25, ha="right", fontsize=8)
    n = med([r["sessions"] for r in ss]) or 0
    ax.set_title(f"5. RSS: idle (light) + {n:.0f} idle sessions with GET streams (dark)", fontsize=10)
    ax.set_ylabel("MB")

    # start-up
    ax = axes[1][2]
    ks = [s for s in SYSTEMS if any(r["system"] == s and r["transport"] == "http" for r in st)]
    bars(ax, ks, [med([r["lat_us"]["p50"] / 1000 for r in st if r["system"] == s and r["transport"] == "http"]) for s in ks],
         "5. start-up to first initialize answer (HTTP), p50", "ms", log=True)
    ax.axhline(100, color="red", ls="--", lw=1)

    # stateless throughput
    ax = axes[2][0]
    for i, c in enumerate([1, 32]):
        vals = [W1.get((s, "http-stateless", c), {}).get("rps") or 0 for s in names]
        ax.bar([x + (i - 0.5) * width for x in range(len(names))], vals, width,
               color=[colors.get(s, "#868e96") for s in names], alpha=0.55 if c == 1 else 1.0)
        for x, v in enumerate(vals):
            if v:
                ax.annotate(f"{v:,.0f}", (x + (i - 0.5) * width, v), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([LABEL[s] for s in names], rotation=25, ha="right", fontsize=8)
    ax.set_title("1. tools/call over HTTP (stateless): throughput\n(light: 1 client, dark: 32 clients)", fontsize=10)
    ax.set_ylabel("requests/s")
    ax.set_yscale("log")

    # w2
    ax = axes[2][1]
    w2 = by.get("w2", [])
    ks = [v for v in VARIANTS if any(r["system"] == v and int(r["clients"]) == 1 for r in w2)]
    if ks:
        bars(ax, ks, [med([r["lat_us"]["p50"] / 1000 for r in w2 if r["system"] == v and int(r["clients"]) == 1]) for v in ks],
             "2. tools/list, 10,000 stored tools: first page p50 (1 client)", "ms")
        ax.axhline(2, color="red", ls="--", lw=1)

    # w4
    ax = axes[2][2]
    w4 = by.get("w4", [])
    keys, vals, labels = [], [], []
    for v in VARIANTS:
        for sb in ["standard", "off"]:
            rs = [r for r in w4 if r["system"] == v and r.get("sandbox") == sb]
            if rs:
                keys.append(v)
                vals.append(med([r["lat_us"]["p50"] / 1000 for r in rs]))
                labels.append(f"{LABEL[v]}\n--sandbox {sb}")
    rs = [r for r in w4 if r["system"] == "bare"]
    if rs:
        keys.append("bare")
        vals.append(med([r["lat_us"]["p50"] / 1000 for r in rs]))
        labels.append("bare python -I")
    if keys:
        bars(ax, keys, vals, "4. warm script tool call (python-dateutil), p50", "ms", labels=labels)
        if rs:
            ax.axhline(vals[-1] + 15, color="red", ls="--", lw=1)
            ax.text(0, vals[-1] + 15, "bare + 15 ms", color="red", fontsize=7, va="bottom")

    fig.suptitle(f"OmniForge {machine['omniforge_commit']} vs MCP SDK servers — {machine['cpu_model']}, {machine['nproc']} cores, {machine['date']}"
                 f"{' (SMOKE RUN)' if machine.get('smoke') else ''}", fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
