#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK (1.x or 2.x) against OmniForge.

    python client.py stdio '["/path/to/omniforge", "stdio", ...]'
    python client.py http  http://127.0.0.1:PORT/mcp

Run by crates/omniforge/tests/e2e/clients.rs. Steps: initialize, tools/list, call
`omniforge_instructions`, print READY, wait (20 s) for notifications/tools/list_changed,
tools/list again. Machine-readable lines on stdout, one per step:

    INIT {"protocolVersion": ..., "serverInfo": ...}
    TOOLS ["name", ...]           first listing
    CALL {CallToolResult, camelCase}
    READY                         the test may now change the catalog
    CHANGED                       notifications/tools/list_changed arrived
    TOOLS2 ["name", ...]          listing after the change
    DONE

Diagnostics go to stderr. Exit 0 only if every step worked; 2 = a check failed,
3 = list_changed did not arrive in time, 4 = an exception.
"""
import json
import os
import sys
import traceback
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

try:  # 2.x (and late 1.x) name; 2.x yields (read, write)
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # 1.x name; yields (read, write, get_session_id)
    from mcp.client.streamable_http import streamablehttp_client as http_client

STEP_TIMEOUT = 15  # seconds for one request
CHANGE_TIMEOUT = 20  # seconds to wait for list_changed after READY


def out(tag, payload=None):
    line = tag if payload is None else f"{tag} {json.dumps(payload)}"
    print(line, flush=True)


def log(text):
    print(f"driver(py {sdk_version()}): {text}", file=sys.stderr, flush=True)


def sdk_version():
    try:
        from importlib.metadata import version

        return version("mcp")
    except Exception:  # pragma: no cover
        return "?"


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class DriverFail(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


def fail(code, text):
    raise DriverFail(code, text)


def find_fail(exc):
    """The DriverFail in `exc`, also inside (nested) exception groups."""
    if isinstance(exc, DriverFail):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = find_fail(inner)
        if found is not None:
            return found
    return None


async def main(kind, target):
    changed = anyio.Event()
    seen = {"before_ready": 0, "total": 0}
    ready = False

    async def on_message(message):
        # 1.x: a ServerNotification RootModel (.root), a RequestResponder or an Exception;
        # 2.x: the notification model itself or an Exception.
        if isinstance(message, Exception):
            log(f"transport exception: {message!r}")
            return
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", None)
        if method == "notifications/tools/list_changed":
            seen["total"] += 1
            if ready:
                changed.set()
            else:
                seen["before_ready"] += 1
                log("list_changed arrived before READY (no catalog change was made yet)")

    async with AsyncExitStack() as stack:
        if kind == "stdio":
            cmd = json.loads(target)
            env = dict(os.environ, NO_COLOR="1")
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
            streams = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        elif kind == "http":
            streams = await stack.enter_async_context(http_client(target))
        else:
            fail(2, f"unknown transport {kind!r}")
        session = await stack.enter_async_context(
            ClientSession(streams[0], streams[1], message_handler=on_message)
        )

        with anyio.fail_after(STEP_TIMEOUT):
            init = await session.initialize()
        init = dump(init)
        out("INIT", {"protocolVersion": init.get("protocolVersion"), "serverInfo": init.get("serverInfo")})

        with anyio.fail_after(STEP_TIMEOUT):
            tools = await session.list_tools()
        names = [t.name for t in tools.tools]
        out("TOOLS", names)
        if "omniforge_instructions" not in names:
            fail(2, f"tools/list lacks omniforge_instructions: {names}")

        with anyio.fail_after(STEP_TIMEOUT):
            result = await session.call_tool("omniforge_instructions", {})
        call = dump(result)
        out("CALL", call)
        if call.get("isError"):
            fail(2, f"omniforge_instructions returned isError: {call}")
        texts = [c.get("text", "") for c in call.get("content", []) if c.get("type") == "text"]
        if not any("OmniForge" in t for t in texts):
            fail(2, f"omniforge_instructions text does not mention OmniForge: {call}")

        ready = True
        out("READY")
        try:
            with anyio.fail_after(CHANGE_TIMEOUT):
                await changed.wait()
        except TimeoutError:
            fail(3, f"no notifications/tools/list_changed within {CHANGE_TIMEOUT} s after READY "
                    f"({seen['before_ready']} arrived before READY)")
        out("CHANGED")

        with anyio.fail_after(STEP_TIMEOUT):
            tools = await session.list_tools()
        out("TOOLS2", [t.name for t in tools.tools])
    out("DONE")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1], sys.argv[2])
    except BaseException as exc:  # noqa: BLE001 - report everything, exit non-zero
        failure = find_fail(exc)
        if failure is None:
            traceback.print_exc()
            log("FAIL: exception")
            sys.exit(4)
        log(f"FAIL: {failure}")
        sys.exit(failure.code)
