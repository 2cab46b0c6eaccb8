"""Reads one resource or gets one prompt through the official Python SDK 2.x client.

    python content_request.py URL resource URI ANSWERS_JSON MODE
    python content_request.py URL prompt NAME ANSWERS_JSON MODE [ARGUMENTS_JSON]

MODE is the client's `mode`: "legacy" (initialize handshake, 2025-11-25: the server asks
through elicitation/create requests) or "2026-07-28" (stateless: the server answers
input_required and the SDK retries with inputResponses and the requestState). Every
elicitation is answered with the next item of ANSWERS_JSON (a list of ElicitResult objects).
Prints one JSON line: {"result": <the final ReadResourceResult or GetPromptResult>, "asked":
[<each elicitation's params>]}.
"""

import json
import sys

import anyio
from mcp import Client
from mcp_types import ElicitResult


async def main(url, kind, target, answers, mode, arguments):
    asked = []

    async def elicitation(context, params):
        asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return ElicitResult.model_validate(answers[len(asked) - 1])

    async with Client(url, mode=mode, elicitation_callback=elicitation) as client:
        with anyio.fail_after(60):
            if kind == "resource":
                result = await client.read_resource(target)
            else:
                result = await client.get_prompt(target, arguments)
    print(json.dumps({
        "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        "asked": asked,
    }), flush=True)


if __name__ == "__main__":
    extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), sys.argv[5],
              extra)
