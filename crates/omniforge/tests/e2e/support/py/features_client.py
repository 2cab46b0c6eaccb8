#!/usr/bin/env python3
"""E2E driver for client features: the official Python MCP SDK (1.x or 2.x) as a client that
answers the server's requests (sampling, elicitation, roots) and records what it received.

    python features_client.py http  URL                  FEATURES_JSON
    python features_client.py stdio '["omniforge", ...]' FEATURES_JSON

FEATURES_JSON: {"sampling": RESULT?, "elicitation": RESULT?, "roots": [Root, ...]?,
"sampling_delay": SECONDS?}. Each of the first three keys present registers the SDK callback (so
the client declares that capability) answering with that result; an absent key leaves the
capability undeclared. With "sampling_delay" the sampling callback first sleeps that long; if the
server cancels the request meanwhile, "sampling_cancelled" counts it.

Run by crates/omniforge/tests/e2e/client_features.rs. Prints `{"event": "ready", "init": ...}`
after initialize, then answers each JSON command line on stdin with one JSON line:

    {"op": "list"}                    -> {"ok": true, "tools": [Tool, ...]}
    {"op": "set_level", "level": L}   -> {"ok": true}
    {"op": "call", "name": N, "args": {..}, "progress": bool}
        -> {"ok": true, "result": CallToolResult, "progress": [{progress, total, message}],
            "logs": [LoggingMessageNotification params], "sampling": [CreateMessage params],
            "elicitation": [ElicitRequest params], "roots": N, "sampling_cancelled": N}
        (everything received while the call ran)
    {"op": "quit"}                    -> {"ok": true}

A failed request gives {"ok": false, "error": TEXT}. Models are dumped by alias (camelCase)
without None fields.
"""
import json
import os
import sys
import traceback
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client

try:  # 2.x name; yields (read, write)
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # 1.x name; yields (read, write, get_session_id)
    from mcp.client.streamable_http import streamablehttp_client as http_client

REQUEST_TIMEOUT = 60


def out(payload):
    print(json.dumps(payload), flush=True)


def log(text):
    print(f"features_client.py: {text}", file=sys.stderr, flush=True)


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(kind, target, features):
    seen = {"sampling": [], "elicitation": [], "roots": 0, "logs": [], "sampling_cancelled": 0}
    callbacks = {}

    if "sampling" in features:
        async def sampling(context, params):
            seen["sampling"].append(dump(params))
            if features.get("sampling_delay"):
                try:
                    await anyio.sleep(features["sampling_delay"])
                except anyio.get_cancelled_exc_class():
                    seen["sampling_cancelled"] += 1
                    raise
            return types.CreateMessageResult.model_validate(features["sampling"])

        callbacks["sampling_callback"] = sampling
    if "elicitation" in features:
        async def elicitation(context, params):
            seen["elicitation"].append(dump(params))
            return types.ElicitResult.model_validate(features["elicitation"])

        callbacks["elicitation_callback"] = elicitation
    if "roots" in features:
        async def roots(context):
            seen["roots"] += 1
            return types.ListRootsResult.model_validate({"roots": features["roots"]})

        callbacks["list_roots_callback"] = roots

    async def logging(params):
        seen["logs"].append(dump(params))

    async with AsyncExitStack() as stack:
        if kind == "stdio":
            cmd = json.loads(target)
            params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ, NO_COLOR="1"))
            streams = await stack.enter_async_context(stdio_client(params, errlog=sys.stderr))
        else:
            streams = await stack.enter_async_context(http_client(target))
        session = await stack.enter_async_context(
            ClientSession(streams[0], streams[1], logging_callback=logging, **callbacks)
        )
        with anyio.fail_after(REQUEST_TIMEOUT):
            init = dump(await session.initialize())
        out({"event": "ready", "init": {"protocolVersion": init.get("protocolVersion")}})
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                break
            if not line.strip():
                continue
            cmd = json.loads(line)
            if cmd.get("op") == "quit":
                out({"ok": True})
                break
            try:
                out(await run(session, cmd, seen))
            except Exception as exc:  # noqa: BLE001 - report the SDK's error to the test
                log(f"command {cmd!r} failed: {exc!r}")
                out({"ok": False, "error": f"{type(exc).__name__}: {exc}"})


async def run(session, cmd, seen):
    op = cmd.get("op")
    with anyio.fail_after(cmd.get("timeout", REQUEST_TIMEOUT)):
        if op == "list":
            return {"ok": True, "tools": [dump(t) for t in (await session.list_tools()).tools]}
        if op == "set_level":
            await session.set_logging_level(cmd["level"])
            return {"ok": True}
        if op == "call":
            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "total": total, "message": message})

            for key in ("sampling", "elicitation", "logs"):
                seen[key] = []
            seen["roots"] = 0
            seen["sampling_cancelled"] = 0
            result = await session.call_tool(
                cmd["name"], cmd.get("args", {}),
                progress_callback=on_progress if cmd.get("progress") else None,
            )
            # Notifications sent just before the result may be handled just after it.
            await anyio.sleep(0.2)
            return {"ok": True, "result": dump(result), "progress": progress,
                    "logs": seen["logs"], "sampling": seen["sampling"],
                    "elicitation": seen["elicitation"], "roots": seen["roots"],
                    "sampling_cancelled": seen["sampling_cancelled"]}
    return {"ok": False, "error": f"unknown op {op!r}"}


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
    except BaseException:  # noqa: BLE001 - report everything, exit non-zero
        traceback.print_exc()
        sys.exit(4)
