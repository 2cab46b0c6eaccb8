#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK 2.x through a load balancer in front of replicas.

    python replica_client.py stateless LB_URL [TOOL]  # 2026-07-28, no session: plain round robin
    python replica_client.py session   LB_URL         # a 2025-x session (initialize handshake)

Run by crates/omniforge/tests/e2e/replicas.rs. Commands come on stdin, one a line; answers go
to stdout, one a line (diagnostics on stderr):

stateless: calls `omniforge_instructions` one after the other, 20 ms apart, from start on.
    With TOOL, it first creates TOOL through the balancer (`omniforge_create_tool`: a script
    that prints a line naming OmniForge), prints CREATED {"text": answer}, and calls TOOL
    instead.
    report  -> COUNTS {"ok": n, "failed": m, "errors": [first few]}  (counts since the last report)
    quit    -> exit 0

session: prints SESSION {"id": ..., "version": ...} once initialized, then
    call    -> calls `omniforge_instructions`: OK {"id": session} when it worked; when it failed,
               LOST {"id": old, "status": HTTP status of that session's last POST, "error": text}, then
               the client initializes a new session and calls again: OK {"id": new} (or FAILED)
    open    -> a new session (the old one is closed): SESSION {...}
    quit    -> exit 0
"""
import json
import sys
import traceback

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOOL = "omniforge_instructions"
SCRIPT = 'print("OmniForge replica tool")\n'
STEP_TIMEOUT = 30  # seconds for one request


def out(tag, payload=None):
    print(tag if payload is None else f"{tag} {json.dumps(payload)}", flush=True)


def log(text):
    print(f"driver(py replica): {text}", file=sys.stderr, flush=True)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def lines():
    """stdin lines, read off the event loop."""
    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            return
        yield line.strip()


async def stateless(url, tool=None):
    counts = {"ok": 0, "failed": 0, "errors": []}
    done = anyio.Event()

    async def loop(client):
        while not done.is_set():
            try:
                with anyio.fail_after(STEP_TIMEOUT):
                    result = await client.call_tool(tool or TOOL, {})
                if result.is_error or "OmniForge" not in text_of(result):
                    raise RuntimeError(f"unexpected result: {result!r}"[:300])
                counts["ok"] += 1
            except Exception as e:  # a failed request: counted, and the loop goes on
                counts["failed"] += 1
                if len(counts["errors"]) < 5:
                    counts["errors"].append(f"{type(e).__name__}: {e}"[:300])
            await anyio.sleep(0.02)

    async with Client(url, mode="2026-07-28") as client:
        log(f"stateless client at {client.protocol_version}")
        if tool:
            with anyio.fail_after(4 * STEP_TIMEOUT):
                created = await client.call_tool("omniforge_create_tool", {
                    "name": tool,
                    "description": "Prints a line; created by the stateless replica client",
                    "code": SCRIPT,
                    "inputSchema": {"type": "object", "properties": {}},
                })
            if created.is_error:
                raise RuntimeError(f"creating {tool}: {text_of(created)}"[:300])
            out("CREATED", {"text": text_of(created)[:300]})
        async with anyio.create_task_group() as tg:
            tg.start_soon(loop, client)
            out("READY")
            async for line in lines():
                if line == "report":
                    out("COUNTS", dict(counts))
                    counts.update(ok=0, failed=0, errors=[])
                elif line == "quit":
                    break
            done.set()
            tg.cancel_scope.cancel()


async def one_session(url, commands, answers):
    """One 2025-x session through the balancer, in its own task: answers `call` commands until
    `close`; remembers the HTTP status of the session's last answer."""
    seen = {"status": None, "id": None}

    async def hook(response):
        log(f"{response.request.method} -> {response.status_code} (session {response.headers.get('mcp-session-id') or seen['id']})")
        if response.request.method == "POST":
            seen["status"] = response.status_code
        sid = response.headers.get("mcp-session-id")
        if sid:
            seen["id"] = sid

    try:
        async with create_mcp_http_client() as http:
            http.event_hooks["response"].append(hook)
            transport = streamable_http_client(url, http_client=http, terminate_on_close=False)
            async with Client(transport, mode="legacy", read_timeout_seconds=STEP_TIMEOUT) as client:
                await answers.send(("SESSION", {"id": seen["id"], "version": client.protocol_version}))
                async for command in commands:
                    if command == "close":
                        break
                    try:
                        with anyio.fail_after(STEP_TIMEOUT):
                            result = await client.call_tool(TOOL, {})
                        if result.is_error or "OmniForge" not in text_of(result):
                            raise RuntimeError(f"unexpected result: {result!r}"[:300])
                        await answers.send(("OK", {"id": seen["id"]}))
                    except Exception as e:
                        error = f"{type(e).__name__}: {e}"[:300]
                        await answers.send(("LOST", {"id": seen["id"], "status": seen["status"], "error": error}))
    except Exception as e:  # the session's end may fail with its replica gone
        log(f"session {seen['id']} ended: {type(e).__name__}: {e}")
        await answers.send(("FAILED", {"error": f"{type(e).__name__}: {e}"[:300]}))


async def session(url):
    answers_in, answers = anyio.create_memory_object_stream(16)

    async with anyio.create_task_group() as tg:

        def start():
            send, receive = anyio.create_memory_object_stream(16)
            tg.start_soon(one_session, url, receive, answers_in)
            return send

        async def reply():
            with anyio.fail_after(2 * STEP_TIMEOUT):
                return await answers.receive()

        current = start()
        out(*await reply())
        async for line in lines():
            if line == "open":
                await current.send("close")
                current = start()
                out(*await reply())
            elif line == "call":
                await current.send("call")
                tag, payload = await reply()
                out(tag, payload)
                if tag != "LOST":
                    continue
                # The session is gone: initialize a new one, as the spec tells clients to.
                await current.send("close")
                current = start()
                tag, payload = await reply()
                if tag != "SESSION":
                    out(tag, payload)
                    continue
                await current.send("call")
                out(*await reply())
            elif line == "quit":
                break
        await current.send("close")
        tg.cancel_scope.cancel()


def main():
    args = sys.argv[1:]
    if not (args[:1] == ["stateless"] and len(args) in (2, 3)) and not (args[:1] == ["session"] and len(args) == 2):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kind, rest = args[0], args[1:]
    try:
        anyio.run(stateless if kind == "stateless" else session, *rest)
    except BaseException:
        traceback.print_exc()
        sys.exit(4)


if __name__ == "__main__":
    main()
