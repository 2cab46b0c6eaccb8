"""Gets one prompt through the official Python SDK 2.x client.

    python get_prompt.py URL NAME ARGUMENTS_JSON ANSWERS_JSON MODE

MODE is the client's `mode`: "legacy" (initialize handshake, 2025-11-25: the server asks
through elicitation/create requests) or "2026-07-28" (stateless: the server answers
input_required and the SDK retries with inputResponses and the requestState). Every
elicitation is answered with the next item of ANSWERS_JSON (a list of ElicitResult objects).
Prints one JSON line: {"result": <the final GetPromptResult>, "asked": [<each elicitation's
params>]}.
"""

import json
import sys

import anyio
from mcp import Client
from mcp_types import ElicitResult


async def main(url, name, arguments, answers, mode):
    asked = []

    async def elicitation(context, params):
        asked.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return ElicitResult.model_validate(answers[len(asked) - 1])

    async with Client(url, mode=mode, elicitation_callback=elicitation) as client:
        with anyio.fail_after(60):
            result = await client.get_prompt(name, arguments)
    print(json.dumps({
        "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
        "asked": asked,
    }), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4]),
              sys.argv[5])
