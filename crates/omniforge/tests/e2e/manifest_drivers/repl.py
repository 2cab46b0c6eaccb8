#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK (2.x; 1.x works too) as a scripted client.

    python repl.py http URL [HEADER_NAME=VALUE ...]
    python repl.py stdio '["/path/to/omniforge", "bridge", ...]'

Run by crates/omniforge/tests/e2e/manifest_tools.rs. The driver connects and initializes,
prints one JSON line `{"event": "ready", "init": {...}}`, then reads one JSON command per
stdin line and answers each with exactly one JSON line on stdout, in order:

    {"op": "list"}                                  -> {"ok": true, "tools": [Tool, ...]}
    {"op": "call", "name": N, "args": {...}}        -> {"ok": true, "result": CallToolResult,
                                                        "elapsed": seconds}
    {"op": "call_cancel", "name": N, "args": {...}, "after": seconds}
        starts the call and cancels it from the client after `after` seconds (the SDK then
        sends notifications/cancelled)  -> {"ok": true, "cancelled": true|false,
                                            "result": ... (if it finished first), "elapsed": s}
    {"op": "changes"}                               -> {"ok": true, "count": N}
        N = notifications/tools/list_changed received so far
    {"op": "wait_changes", "count": N, "timeout": s} -> {"ok": true, "count": M} once M >= N,
                                                        or {"ok": false, "error": "timeout", ...}
    {"op": "quit"}                                  -> {"ok": true}, then the driver exits 0

A request the server answers with a JSON-RPC error gives {"ok": false, "error": TEXT}.
Results are dumped by alias (camelCase: isError, structuredContent), without None fields.
Diagnostics go to stderr. Exit 0 after quit or EOF; 4 on an exception outside a command.
"""
import json
import os
import sys
import time
import traceback
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

try:  # 2.x (and late 1.x) name; 2.x yields (read, write)
    from mcp.client.streamable_http import streamable_http_client as http_client

    NEW_HTTP = True
except ImportError:  # 1.x name; yields (read, write, get_session_id)
    from mcp.client.streamable_http import streamablehttp_client as http_client

    NEW_HTTP = False

REQUEST_TIMEOUT = 20  # seconds for one request unless the command says otherwise


def out(payload):
    print(json.dumps(payload), flush=True)


def log(text):
    print(f"repl.py: {text}", file=sys.stderr, flush=True)


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def http_streams(url, headers):
    if not headers:
        return http_client(url)
    if NEW_HTTP:
        try:
            from mcp.shared._httpx_utils import create_mcp_http_client

            return http_client(url, http_client=create_mcp_http_client(headers=headers))
        except TypeError:
            pass
    return http_client(url, headers=headers)


async def main(kind, target, extra):
    changes = {"count": 0}
    changed = anyio.Event()
    box = {"changed": changed}

    async def on_message(message):
        if isinstance(message, Exception):
            log(f"transport exception: {message!r}")
            return
        inner = getattr(message, "root", message)
        if getattr(inner, "method", None) == "notifications/tools/list_changed":
            changes["count"] += 1
            log(f"list_changed #{changes['count']}")
            box["changed"].set()

    async with AsyncExitStack() as stack:
        if kind == "stdio":
            cmd = json.loads(target)
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ, NO_COLOR="1"))
            streams = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        elif kind == "http":
            headers = dict(h.split("=", 1) for h in extra)
            streams = await stack.enter_async_context(http_streams(target, headers))
        else:
            raise SystemExit(f"unknown transport {kind!r}")
        session = await stack.enter_async_context(
            ClientSession(streams[0], streams[1], message_handler=on_message)
        )
        with anyio.fail_after(REQUEST_TIMEOUT):
            init = await session.initialize()
        init = dump(init)
        out({"event": "ready", "init": {"protocolVersion": init.get("protocolVersion"),
                                        "serverInfo": init.get("serverInfo")}})

        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                break
            line = line.strip()
            if not line:
                continue
            cmd = json.loads(line)
            op = cmd.get("op")
            if op == "quit":
                out({"ok": True})
                break
            try:
                out(await run(session, cmd, changes, box))
            except Exception as exc:  # noqa: BLE001 - report the SDK's error to the test
                log(f"command {cmd!r} failed: {exc!r}")
                out({"ok": False, "error": f"{type(exc).__name__}: {exc}"})


async def run(session, cmd, changes, box):
    op = cmd.get("op")
    timeout = cmd.get("timeout", REQUEST_TIMEOUT)
    if op == "list":
        with anyio.fail_after(timeout):
            tools = await session.list_tools()
        return {"ok": True, "tools": [dump(t) for t in tools.tools]}
    if op == "call":
        started = time.monotonic()
        with anyio.fail_after(timeout):
            result = await session.call_tool(cmd["name"], cmd.get("args", {}))
        return {"ok": True, "result": dump(result), "elapsed": time.monotonic() - started}
    if op == "call_cancel":
        started = time.monotonic()
        holder = {}
        with anyio.move_on_after(cmd["after"]) as scope:
            holder["result"] = await session.call_tool(cmd["name"], cmd.get("args", {}))
        reply = {"ok": True, "cancelled": scope.cancelled_caught, "elapsed": time.monotonic() - started}
        if "result" in holder:
            reply["result"] = dump(holder["result"])
        return reply
    if op == "changes":
        return {"ok": True, "count": changes["count"]}
    if op == "wait_changes":
        want = cmd["count"]
        with anyio.move_on_after(timeout):
            while changes["count"] < want:
                box["changed"] = anyio.Event()
                await box["changed"].wait()
        if changes["count"] >= want:
            return {"ok": True, "count": changes["count"]}
        return {"ok": False, "error": "timeout", "count": changes["count"]}
    return {"ok": False, "error": f"unknown op {op!r}"}


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3:])
    except BaseException:  # noqa: BLE001 - report everything, exit non-zero
        traceback.print_exc()
        log("FAIL: exception")
        sys.exit(4)
