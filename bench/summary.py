"""The table at the top of bench/RESULTS.md: every workload's headline number as a ratio against its
peer in the same run, for OmniForge as committed and for each baseline binary measured in the same
rounds (`OMNIFORGE_BASELINE`, systems `omniforge@NAME`), with issue 24's targets. Also the
sections of the workloads only this table reads (w1-stored, w5-expiry).

Called by report.py: `top(by, machine)` and `sections(by, workload)` return Markdown lines.
"""

import statistics


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def p50_ms(r):
    lat = r.get("lat_us") or {}
    return None if lat.get("p50") is None else lat["p50"] / 1000.0


def clients(r):
    c = r.get("clients")
    return None if c is None else int(c)


def baselines(by):
    """The baseline systems present in the results, in the order they first appear."""
    seen = []
    for rows in by.values():
        for r in rows:
            s = r.get("system") or ""
            if s.startswith("omniforge@") and s not in seen:
                seen.append(s)
    return seen


def label(sysn):
    if sysn.startswith("omniforge@"):
        return f"OmniForge {sysn.split('@', 1)[1]} (baseline)"
    return {"omniforge": "OmniForge", "bare": "bare python -I"}.get(sysn, sysn)


def pick(rows, **want):
    return [r for r in rows if all((clients(r) if k == "clients" else r.get(k)) == v for k, v in want.items())]


def ratio(a, b):
    return a / b if a and b else None


def x(v, nd=2):
    return "n/a" if v is None else f"{v:.{nd}f}×"


def msf(v, sign=False):
    return "n/a" if v is None else (f"{v:+.3f} ms" if sign else f"{v:.3f} ms")


def mb(v):
    return "n/a" if v is None else f"{v:.1f} MB"


def top(by, machine):
    """The headline table: one row per measure, one column per OmniForge build."""
    systems = ["omniforge"] + baselines(by)
    rows = []  # (workload, measure, target, {system: (text, met)})

    def add(wk, measure, target, per):
        if any(v[0] != "n/a" for v in per.values()):
            rows.append((wk, measure, target, per))

    w1 = by.get("w1", [])
    for tr in ["http-session", "http-stateless"]:
        mode = tr.split("-")[1]
        peer32 = med([r["rps"] for r in pick(w1, system="rmcp-minimal", transport=tr, clients=32)])
        peer1 = med([p50_ms(r) for r in pick(w1, system="rmcp-minimal", transport=tr, clients=1)])
        per32, per1 = {}, {}
        for s in systems:
            rv = ratio(med([r["rps"] for r in pick(w1, system=s, transport=tr, clients=32)]), peer32)
            per32[s] = (x(rv), None if rv is None else rv >= 0.95)
            p = med([p50_ms(r) for r in pick(w1, system=s, transport=tr, clients=1)])
            d = None if p is None or peer1 is None else p - peer1
            per1[s] = (msf(d, True) + ("" if p is None else f" ({p:.3f})"), None if d is None else d <= 0.03)
        add("w1", f"tools/call, 32 clients, {mode}: req/s ÷ rmcp minimal", "≥ 0.95× (stretch 1.0×)", per32)
        add("w1", f"tools/call, 1 client, {mode}: p50 − rmcp minimal's ({msf(peer1)})", "≤ +0.03 ms", per1)

    ws = by.get("w1-stored", [])
    bare1 = med([p50_ms(r) for r in ws if r.get("system") == "bare" and r.get("clients") in ("1", 1)])
    bare8 = med([r.get("rps") for r in ws if r.get("system") == "bare" and r.get("clients") in ("8", 8)])
    per1, per8 = {}, {}
    for s in systems:
        p = med([p50_ms(r) for r in pick(ws, system=s, clients=1)])
        per1[s] = (x(ratio(bare1, p)) + ("" if p is None else f" ({p:.1f} ms)"), None)
        per8[s] = (x(ratio(med([r["rps"] for r in pick(ws, system=s, clients=8)]), bare8)), None)
    add("w1-stored", f"stored script tool (warm), 1 client: bare p50 ({msf(bare1)}) ÷ p50", "no regression", per1)
    add("w1-stored", "stored script tool (warm), 8 clients: calls/s ÷ bare runs/s (8 at once)", "no regression", per8)

    w3 = by.get("w3", [])
    per1, per32 = {}, {}
    direct32 = med([r["rps"] for r in pick(w3, system="direct", clients=32)])
    for s in systems:
        added = []
        for r in pick(w3, system=s, clients=1):
            d = [q for q in pick(w3, system="direct", clients=1) if q.get("round") == r.get("round")]
            if d and p50_ms(r) is not None and p50_ms(d[0]) is not None:
                added.append(p50_ms(r) - p50_ms(d[0]))
        a = med(added)
        per1[s] = (msf(a, True), None if a is None else a <= 0.1)
        rv = ratio(med([r["rps"] for r in pick(w3, system=s, clients=32)]), direct32)
        per32[s] = (x(rv), None if rv is None else rv >= 0.8)
    add("w3", "manifest tool, 1 client: p50 added to a direct Connect call", "≤ +0.1 ms", per1)
    add("w3", "manifest tool, 32 clients: req/s ÷ direct", "≥ 0.8×", per32)

    w6 = by.get("w6", [])
    peer = med([r["rps"] for r in pick(w6, system="rmcp-minimal")])
    per = {}
    for s in systems:
        rv = ratio(med([r["rps"] for r in pick(w6, system=s)]), peer)
        per[s] = (x(rv), None if rv is None else rv >= 0.95)
    add("w6", "stdio, sequential calls: calls/s ÷ rmcp minimal", "≥ 0.95×", per)

    we = by.get("w5-expiry", [])
    pera, pere = {}, {}
    for s in systems:
        rs = pick(we, system=s)
        n = med([r.get("sessions") for r in rs]) or 0
        add_mb = med([(r["rss_after_kb"] - r["rss_before_kb"]) / 1024 * (1000 / n if n else 1) for r in rs])
        pera[s] = (mb(add_mb) + ("" if not rs or n == 1000 else f" (scaled from {n:.0f})"),
                   None if add_mb is None else add_mb <= 20)
        back = med([r["rss_expired_kb"] / r["rss_before_kb"] for r in rs if r.get("rss_expired_kb")])
        pere[s] = ("n/a" if back is None else f"{(back - 1) * 100:+.0f}% of idle", None if back is None else back <= 1.10)
    add("w5", "1,000 idle 2025-11-25 sessions: RSS added", "≤ 20 MB", pera)
    add("w5", "RSS after those sessions expired, against idle", "within +10%", pere)

    w2 = [r for r in by.get("w2", []) if clients(r) == 1]
    per = {} if not w2 else {s: (msf(med([p50_ms(r) for r in pick(w2, system=s)])) + f", RSS {mb(med([(r.get('rss_kb') or 0) / 1024 for r in pick(w2, system=s)]))}", None)
           for s in systems}
    add("w2", "tools/list of 10,000 stored tools, 1 client: first page p50, RSS", "(issue 6 targets, section 2)", per)

    w4 = by.get("w4-mcp", [])
    bare = med([p50_ms(r) for r in w4 if r.get("system") == "bare" and r.get("tool") == "dateutil"])
    warm = med([p50_ms(r) for r in w4 if r.get("system") == "warm" and r.get("tool") == "dateutil"])
    if warm is not None:
        add("w4", "dateutil tool, warm pool, 1 client: bare p50 ÷ p50", "(section 4)",
            {"omniforge": (x(ratio(bare, warm)) + f" ({warm:.1f} ms)", None)})

    w7 = by.get("w7-lb", [])
    d32 = med([r["rps"] for r in pick(w7, system="direct", clients=32)])
    lb3 = med([r["rps"] for r in pick(w7, system="lb-3", clients=32)])
    if lb3 is not None:
        add("w7", "tools/call through HAProxy to 3 replicas, 32 clients: req/s ÷ one replica direct", "(section 7)",
            {"omniforge": (x(ratio(lb3, d32)), None)})

    if not rows:
        return []
    loads = [float(r["load1"]) for rs in by.values() for r in rs if r.get("load1")]
    out = [f"## As of commit {machine.get('omniforge_commit', '?')}\n",
           "Each number is a ratio (or a difference) against its peer measured in the same rounds of one run, "
           "medians over rounds. " + (f"1-minute load average during the measurements: {min(loads):.2f} to "
                                      f"{max(loads):.2f} on {machine.get('nproc')} cores (shared machine). " if loads else "")
           + "Baselines: other OmniForge binaries in the same rounds (`OMNIFORGE_BASELINE`).\n"]
    mark = lambda ok: "" if ok is None else (" ✓" if ok else " ✗")
    head = "| workload | measure | target | OmniForge " + machine.get("omniforge_commit", "HEAD") + " |"
    head += "".join(f" {label(s)} |" for s in systems[1:])
    out += [head, "|---|---|---|---:|" + "---:|" * (len(systems) - 1)]
    for wk, measure, target, per in rows:
        out.append(f"| {wk} | {measure} | {target} |" + "".join(
            f" {per.get(s, ('n/a', None))[0]}{mark(per.get(s, ('n/a', None))[1])} |" for s in systems))
    out += ["", "✓ met, ✗ missed. w1: `omniforge serve` with its defaults (call log and metrics on, no exporter) "
            "plus `--token-file`, every request with its bearer token.", ""]
    return out


def sections(by, workload):
    """The section of a workload only this module reads (w1-stored, w5-expiry)."""
    out = []
    ws = by.get("w1-stored", []) if workload == "w1-stored" else []
    if ws:
        out += ["## 1b. A stored script tool over HTTP (w1-stored)\n",
                "`add_vat` (examples/tools, no dependencies) stored through `omniforge_create_tool` and called with "
                "the server's defaults (warm pool on), session mode: 1 client with calls 50 ms apart, and 8 closed-loop "
                "clients; `bare` is the tool environment's `python -I` running the same code on the server core, one "
                "at a time and 8 at once.\n",
                "| system | clients | calls/s | p50 (ms) | p99 (ms) | errors | RSS after (MB) |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for s in ["omniforge"] + baselines(by) + ["bare"]:
            for c in (1, 8):
                rs = [r for r in ws if r.get("system") == s and clients(r) == c]
                if not rs:
                    continue
                p99 = med([(r.get("lat_us") or {}).get("p99") for r in rs])
                rss = med([(r.get("rss_kb") or 0) / 1024 for r in rs if r.get("rss_kb")])
                out.append(f"| {label(s)} | {c} | {med([r.get('rps') for r in rs]):,.1f} | {med([p50_ms(r) for r in rs]):.2f} | "
                           f"{'n/a' if p99 is None else f'{p99 / 1000:.2f}'} | {sum(r.get('errors', 0) for r in rs)} | "
                           f"{'n/a' if rss is None else f'{rss:.1f}'} |")
        out.append("")
    we = by.get("w5-expiry", []) if workload == "w5-expiry" else []
    if we:
        out += ["## 5b. Session memory and its return (w5-expiry)\n",
                "`--session-idle-timeout 4s`; RSS (VmRSS) idle, with the sessions open and idle, then 8 s after the "
                "last one was used (every session expired and closed by the server).\n",
                "| system | sessions | idle RSS (MB) | with sessions (MB) | per session (KB) | after expiry (MB) |",
                "|---|---:|---:|---:|---:|---:|"]
        for s in ["omniforge"] + baselines(by):
            for r in [r for r in we if r.get("system") == s]:
                exp = r.get("rss_expired_kb")
                out.append(f"| {label(s)} | {r['sessions']} | {r['rss_before_kb'] / 1024:.1f} | {r['rss_after_kb'] / 1024:.1f} | "
                           f"{r['per_session_kb']:.1f} | {'n/a' if exp is None else f'{exp / 1024:.1f}'} |")
        out.append("")
    return out
