"""Calls one tool through the official Python SDK 2.x client speaking protocol 2026-07-28.

    python input_required.py URL TOOL ANSWERS_JSON

The client pins 2026-07-28 (stateless, no initialize) and answers every elicitation with the
next item of ANSWERS_JSON (a list of ElicitResult objects); the SDK drives the input-required
rounds itself (it retries with inputResponses and the requestState). Prints one JSON line:
{"result": <the final CallToolResult>, "asked": [<each elicitation's params>]}.
"""

import json
import sys

import anyio
from mcp import Client
from mcp_types import ElicitResult


async def main(url, tool, answers):
    asked = []

    async def elicitation(context, params):
        asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return ElicitResult.model_validate(answers[len(asked) - 1])

    async with Client(url, mode="2026-07-28", elicitation_callback=elicitation) as client:
        with anyio.fail_after(60):
            result = await client.call_tool(tool, {})
    print(json.dumps({
        "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        "asked": asked,
    }), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
