#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK (2.x; 1.x works too) as a scripted client.

    python repl.py http URL [HEADER_NAME=VALUE ...]
    python repl.py stdio '["/path/to/omniforge", "stdio" or "bridge", ...]'

Run by crates/omniforge/tests/e2e/script_tools.rs and manifest_tools.rs. The driver connects
and initializes, prints one JSON line `{"event": "ready", "init": {...}}`, then reads one JSON
command per stdin line and answers each with exactly one JSON line on stdout, in order:

    {"op": "list"}                         -> {"ok": true, "tools": [Tool, ...]}
    {"op": "call", "name": N, "args": {..}, "progress": bool, "timeout": s}
        -> {"ok": true, "result": CallToolResult, "elapsed": s,
            "progress": [{"progress", "total", "message"}, ...]}
        With "progress": true the SDK sends a progressToken (_meta) and the notifications
        that arrive for this request are collected.
    {"op": "call_cancel", "name": N, "args": {...}, "after": seconds}
        starts the call and cancels it from the client after `after` seconds (the SDK then
        sends notifications/cancelled)  -> {"ok": true, "cancelled": true|false,
                                            "result": ... (if it finished first), "elapsed": s}
    {"op": "start", "tag": T, "name": N, "args": {..}}
        starts the call in the background -> {"ok": true}
    {"op": "cancel", "tag": T}
        cancels the background call from the client side (the SDK sends
        notifications/cancelled) and waits for it to unwind
        -> {"ok": true, "cancelled": bool, "result"?: CallToolResult, "error"?: text, "elapsed": s}
    {"op": "bench", "name": N, "args": {..}, "n": K}
        K sequential calls -> {"ok": true, "elapsed": [s, ...], "results": [first, last]}
    {"op": "changes"}                      -> {"ok": true, "count": N}
        N = notifications/tools/list_changed received so far
    {"op": "wait_changes", "count": N, "timeout": s}
        -> {"ok": true, "count": M} once M >= N, or {"ok": false, "error": "timeout", "count": M}
    {"op": "quit"}                         -> {"ok": true}, then the driver exits 0

One request may take REPL_TIMEOUT_S seconds (environment; default 60) unless the command
says otherwise. A request the SDK reports as failed (JSON-RPC error, timeout, broken
transport) gives {"ok": false, "error": TEXT}. Results are dumped by alias (camelCase:
isError, structuredContent), without None fields. Diagnostics go to stderr. Exit 0 after
quit or EOF; 4 on an exception outside a command.
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

# Seconds for one request unless the command says otherwise.
REQUEST_TIMEOUT = float(os.environ.get("REPL_TIMEOUT_S", "60"))


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
    box = {"changed": anyio.Event()}

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

        async with anyio.create_task_group() as tg:
            background = {}
            while True:
                line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
                if not line:
                    break
                line = line.strip()
                if not line:
                    continue
                cmd = json.loads(line)
                if cmd.get("op") == "quit":
                    out({"ok": True})
                    break
                try:
                    out(await run(session, cmd, changes, box, tg, background))
                except Exception as exc:  # noqa: BLE001 - report the SDK's error to the test
                    log(f"command {cmd!r} failed: {exc!r}")
                    out({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            tg.cancel_scope.cancel()


async def run(session, cmd, changes, box, tg, background):
    op = cmd.get("op")
    timeout = cmd.get("timeout", REQUEST_TIMEOUT)
    if op == "list":
        with anyio.fail_after(timeout):
            tools = await session.list_tools()
        return {"ok": True, "tools": [dump(t) for t in tools.tools]}
    if op == "call":
        seen = []

        async def on_progress(progress, total, message):
            seen.append({"progress": progress, "total": total, "message": message})

        started = time.monotonic()
        with anyio.fail_after(timeout):
            result = await session.call_tool(
                cmd["name"], cmd.get("args", {}),
                progress_callback=on_progress if cmd.get("progress") else None,
            )
        return {"ok": True, "result": dump(result), "elapsed": time.monotonic() - started,
                "progress": seen}
    if op == "call_cancel":
        started = time.monotonic()
        holder = {}
        with anyio.move_on_after(cmd["after"]) as scope:
            holder["result"] = await session.call_tool(cmd["name"], cmd.get("args", {}))
        reply = {"ok": True, "cancelled": scope.cancelled_caught, "elapsed": time.monotonic() - started}
        if "result" in holder:
            reply["result"] = dump(holder["result"])
        return reply
    if op == "start":
        state = {"done": anyio.Event(), "scope": anyio.CancelScope(), "started": time.monotonic()}
        background[cmd["tag"]] = state

        async def go():
            try:
                with state["scope"]:
                    state["result"] = await session.call_tool(cmd["name"], cmd.get("args", {}))
            except Exception as exc:  # noqa: BLE001
                state["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                state["done"].set()

        tg.start_soon(go)
        return {"ok": True}
    if op == "cancel":
        state = background.pop(cmd["tag"])
        state["scope"].cancel()
        with anyio.fail_after(timeout):
            await state["done"].wait()
        reply = {"ok": True, "cancelled": state["scope"].cancelled_caught,
                 "elapsed": time.monotonic() - state["started"]}
        if "result" in state:
            reply["result"] = dump(state["result"])
        if "error" in state:
            reply["error"] = state["error"]
        return reply
    if op == "bench":
        elapsed = []
        results = []
        for i in range(cmd["n"]):
            started = time.monotonic()
            with anyio.fail_after(timeout):
                result = await session.call_tool(cmd["name"], cmd.get("args", {}))
            elapsed.append(time.monotonic() - started)
            if i == 0 or i == cmd["n"] - 1:
                results.append(dump(result))
        return {"ok": True, "elapsed": elapsed, "results": results}
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
