"""A Tasks (SEP-2663) client on the official Python SDK 2.x, for tests/e2e/tasks.rs.

The SDK has no Tasks v2 client, so this adds one the way the SDK lets extensions: a
`ClientExtension` for `io.modelcontextprotocol/tasks` whose `ResultClaim` takes a `tools/call`
answered with `resultType: "task"` and polls `tasks/get` (a raw request through the SDK's
session) until the task ends, returning its inlined `CallToolResult`.

    python tasks_client.py URL TOOL JSON_ARGS READ_TIMEOUT_S

Prints one JSON line: {"text": ..., "isError": ..., "taskId": ..., "polls": N, "statuses": [...]}.
"""

import asyncio
import json
import sys
from typing import Any, ClassVar, Literal

from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types import CallToolResult, Request, RequestParams, Result

TASKS = "io.modelcontextprotocol/tasks"
SEEN: dict[str, Any] = {"polls": 0, "statuses": []}


class TaskHandle(Result):
    """The flat CreateTaskResult of SEP-2663."""

    result_type: Literal["task"]
    task_id: str
    status: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class GetTaskParams(RequestParams):
    task_id: str


class GetTask(Request[GetTaskParams, Literal["tasks/get"]]):
    name_param: ClassVar[str | None] = "taskId"  # routed by Mcp-Name (SEP-2243)
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskParams


class DetailedTask(Result):
    task_id: str
    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


async def resolve(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
    SEEN["taskId"] = handle.task_id
    interval = (handle.poll_interval_ms or 1000) / 1000
    while True:
        task = await ctx.session.send_request(
            GetTask(params=GetTaskParams(task_id=handle.task_id)), DetailedTask
        )
        SEEN["polls"] += 1
        if not SEEN["statuses"] or SEEN["statuses"][-1] != task.status:
            SEEN["statuses"].append(task.status)
        if task.status == "completed":
            return CallToolResult.model_validate(task.result)
        if task.status in ("failed", "cancelled"):
            raise RuntimeError("task %s: %s" % (task.status, task.error))
        await asyncio.sleep(interval)


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=resolve)]


async def main() -> None:
    url, tool, arguments, read_timeout = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4])
    async with Client(url, read_timeout_seconds=read_timeout, extensions=[Tasks()]) as client:
        result = await client.call_tool(tool, arguments)
    text = " ".join(getattr(c, "text", "") for c in result.content)
    print(json.dumps({"text": text, "isError": bool(result.is_error), **SEEN}), flush=True)


asyncio.run(main())
