#!/usr/bin/env python3
"""E2E driver of the container test: the official Python MCP SDK (1.x) over Streamable HTTP
with a bearer token, against the server in the container.

    python container_forge.py URL TOKEN forge TOOL_JSON ARGS_JSON   create the tool (omniforge_create_tool
                                                          with TOOL_JSON's arguments), then call it
    python container_forge.py URL TOKEN call  NAME ARGS_JSON        list the tools, then call NAME

Prints one JSON line: {"created": TEXT?, "tools": [names], "result": CallToolResult}. A failure
is a traceback and exit status 1.

Run by crates/omniforge/tests/e2e/container.rs.
"""
import json
import sys
from datetime import timedelta

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

# The first create resolves and installs the dependency inside the container (uv from PyPI).
CREATE_TIMEOUT = timedelta(seconds=240)
CALL_TIMEOUT = timedelta(seconds=60)


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(url, token, mode, target, args_json):
    headers = {"Authorization": f"Bearer {token}"}
    out = {}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if mode == "forge":
                with open(target) as f:
                    tool = json.load(f)
                created = await session.call_tool(
                    "omniforge_create_tool", tool, read_timeout_seconds=CREATE_TIMEOUT
                )
                out["created"] = text(created)
                if created.isError:
                    raise SystemExit(f"omniforge_create_tool failed: {out['created']}")
                name = tool["name"]
            else:
                name = target
            out["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
            result = await session.call_tool(
                name, json.loads(args_json), read_timeout_seconds=CALL_TIMEOUT
            )
            out["result"] = dump(result)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
