#!/usr/bin/env python3
"""Propagation of a create from one replica to another (issue 14), for scripts/bench.

    propagation.py WRITER_URL READER_URL N

Opens a 2025-06-18 session on each replica (raw JSON-RPC over Streamable HTTP, httpx) and both
GET streams (`reader_after_writer_ms`: the reader's list_changed after the writer's own, that is,
the propagation through PostgreSQL). Then N times: creates a tool (no dependencies) through the writer, and
from the writer's acknowledgment measures on the reader (1) when `notifications/tools/list_changed`
arrives on its stream (negative: before the writer answered; also given from the create's
sending) and (2) when the first `tools/call` of the new tool that succeeds was sent (polled
every 5 ms; `answered_ms`: when it answered; the reader builds the tool's environment from the
stored lock if it has not got it).
A first, unmeasured create warms the reader's environment of no-dependency tools. Prints one
JSON object: each create's times in ms and their medians.
"""
import json
import statistics
import sys
import threading
import time
import uuid

import httpx

VERSION = "2025-06-18"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def messages(response):
    """The JSON-RPC messages of a JSON or SSE answer."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()] if response.content else []
    out = []
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            try:
                out.append(json.loads(line[5:]))
            except ValueError:
                pass
    return out


class Session:
    def __init__(self, url):
        self.url, self.http, self.next = url, httpx.Client(timeout=120), 1
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
        r = self.http.post(url, headers=HEADERS, json=init)
        r.raise_for_status()
        self.id = r.headers["mcp-session-id"]
        self.headers = dict(HEADERS, **{"mcp-session-id": self.id, "mcp-protocol-version": VERSION})
        self.http.post(url, headers=self.headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, name, arguments):
        self.next += 1
        body = {"jsonrpc": "2.0", "id": self.next, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        r = self.http.post(self.url, headers=self.headers, json=body)
        for m in messages(r):
            if m.get("id") == self.next:
                return m
        return {"error": {"message": f"HTTP {r.status_code}"}}

    def listen(self, on_change):
        """The GET stream, read in a thread: calls on_change(t) for each list_changed."""
        def run():
            with httpx.Client(timeout=None) as http:
                with http.stream("GET", self.url, headers=dict(self.headers, accept="text/event-stream")) as r:
                    for line in r.iter_lines():
                        if line.startswith("data:") and "notifications/tools/list_changed" in line:
                            on_change(time.perf_counter())
        threading.Thread(target=run, daemon=True).start()


def ok(m):
    return "result" in m and not m["result"].get("isError")


def main():
    writer_url, reader_url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    writer, reader = Session(writer_url), Session(reader_url)
    changes, own = [], []
    reader.listen(changes.append)
    writer.listen(own.append)
    time.sleep(0.3)
    rows = []
    for i in range(n + 1):
        name = f"prop_{uuid.uuid4().hex[:12]}"
        create = {"name": name, "description": "Propagation probe.", "code": f"print({name!r})\n",
                  "inputSchema": {"type": "object", "properties": {}}}
        seen, own_seen = len(changes), len(own)
        t0 = time.perf_counter()
        m = writer.call("omniforge_create_tool", create)
        acked = time.perf_counter()
        if not ok(m):
            sys.exit(f"create failed: {m}")
        deadline = acked + 120
        while True:
            attempt = time.perf_counter()
            m = reader.call(name, {})
            if ok(m):
                # The first call that worked was sent at `attempt` (its own run time apart).
                callable_at, answered_at = attempt, time.perf_counter()
                break
            if time.perf_counter() > deadline:
                sys.exit(f"{name} not callable on the reader after 60 s: {m}")
            time.sleep(0.005)
        while len(changes) <= seen and time.perf_counter() < deadline:
            time.sleep(0.005)
        while len(own) <= own_seen and time.perf_counter() < deadline:
            time.sleep(0.005)
        changed_at = changes[seen] if len(changes) > seen else None
        own_at = own[own_seen] if len(own) > own_seen else None
        row = {"create_ms": (acked - t0) * 1e3, "callable_ms": (callable_at - acked) * 1e3,
               "answered_ms": (answered_at - acked) * 1e3,
               "list_changed_ms": None if changed_at is None else (changed_at - acked) * 1e3,
               "list_changed_from_send_ms": None if changed_at is None else (changed_at - t0) * 1e3,
               # The writer's own sessions hear of the commit from its own change feed, the
               # reader's through PostgreSQL: the difference is the propagation itself.
               "reader_after_writer_ms": None if changed_at is None or own_at is None else (changed_at - own_at) * 1e3}
        if i > 0:  # the first one warms the reader's environment
            rows.append(row)
        else:
            first = row
    med = lambda k: statistics.median(r[k] for r in rows if r[k] is not None)
    print(json.dumps({"first": first, "rows": rows, "create_p50_ms": med("create_ms"),
                      "callable_p50_ms": med("callable_ms"), "answered_p50_ms": med("answered_ms"),
                      "list_changed_p50_ms": med("list_changed_ms"),
                      "list_changed_from_send_p50_ms": med("list_changed_from_send_ms"),
                      "reader_after_writer_p50_ms": med("reader_after_writer_ms"),
                      "reader_after_writer_max_ms": max(r["reader_after_writer_ms"] or 0 for r in rows),
                      "callable_max_ms": max(r["callable_ms"] for r in rows)}))


if __name__ == "__main__":
    main()
