#!/usr/bin/env python3
"""E2E driver: the official Python MCP SDK (1.x or 2.x) reads resources and prompts.

    python read_content.py '["/path/to/omniforge", "--data-dir", DIR, "stdio"]'

Run by crates/omniforge/tests/e2e/content.rs against a server whose database holds
packs/conformance.toml. Prints one JSON object on stdout with what the SDK returned (models
dumped by alias, without None fields):

    {"capabilities": ..., "resources": [...], "templates": [...], "text": ReadResourceResult,
     "binary": ..., "templated": ..., "prompts": [...], "simple": GetPromptResult,
     "with_args": ..., "embedded": ..., "image": ..., "completion": CompleteResult,
     "missing_arg_error": "..."}

Exit 0 when every request got an answer; 4 on an exception (traceback on stderr).
"""
import json
import os
import sys
import traceback

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import PromptReference

TIMEOUT = 30


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def main(argv):
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ, NO_COLOR="1"))
    async with stdio_client(params, errlog=sys.stderr) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            out = {}
            with anyio.fail_after(TIMEOUT):
                init = await session.initialize()
                out["capabilities"] = dump(init)["capabilities"]
                out["resources"] = [dump(r) for r in (await session.list_resources()).resources]
                listed = await session.list_resource_templates()
                # 1.x names the field resourceTemplates, 2.x resource_templates.
                templates = getattr(listed, "resource_templates", None)
                if templates is None:
                    templates = listed.resourceTemplates
                out["templates"] = [dump(t) for t in templates]
                out["text"] = dump(await session.read_resource("test://static-text"))
                out["binary"] = dump(await session.read_resource("test://static-binary"))
                out["templated"] = dump(await session.read_resource("test://template/123/data"))
                out["prompts"] = [dump(p) for p in (await session.list_prompts()).prompts]
                out["simple"] = dump(await session.get_prompt("test_simple_prompt"))
                out["with_args"] = dump(
                    await session.get_prompt(
                        "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"}
                    )
                )
                out["embedded"] = dump(
                    await session.get_prompt(
                        "test_prompt_with_embedded_resource", {"resourceUri": "test://x/1"}
                    )
                )
                out["image"] = dump(await session.get_prompt("test_prompt_with_image"))
                out["completion"] = dump(
                    await session.complete(
                        PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
                        {"name": "arg1", "value": "te"},
                    )
                )
                try:
                    await session.get_prompt("test_prompt_with_arguments", {"arg1": "x"})
                    out["missing_arg_error"] = None
                except Exception as exc:  # noqa: BLE001 - the SDK raises McpError
                    out["missing_arg_error"] = f"{exc}"
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    try:
        anyio.run(main, json.loads(sys.argv[1]))
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        sys.exit(4)
