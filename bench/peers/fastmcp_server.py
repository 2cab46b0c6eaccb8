"""Python SDK peer of OmniForge's benchmarks: the official Python SDK's high-level server.

- With PyPI `mcp` 1.x (`.deps/py-mcp1`): FastMCP (`mcp.server.fastmcp`), the server the issue names.
- With PyPI `mcp` 2.x (`.deps/py-mcp2`): MCPServer (`mcp.server.mcpserver`), FastMCP's 2.x name.

    python fastmcp_server.py stdio --text-file GUIDE.txt
    python fastmcp_server.py http  --text-file GUIDE.txt --port PORT [--stateless]

One tool, `omniforge_instructions`, answers the contents of --text-file as one text block (no
structured output, so the bytes on the wire match the other peers). HTTP runs on uvicorn, as
the SDK's own `run("streamable-http")` does, bound to 127.0.0.1, with access logs off.
"""

import argparse

import uvicorn
from mcp.types import ToolAnnotations

try:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as Server
    SDK = 1
except ModuleNotFoundError:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import MCPServer as Server
    SDK = 2


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["stdio", "http"])
    p.add_argument("--text-file", required=True)
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--stateless", action="store_true")
    a = p.parse_args()
    with open(a.text_file, encoding="utf-8") as f:
        text = f.read()

    if SDK == 1:
        mcp = Server("fastmcp-bench", stateless_http=a.stateless, log_level="WARNING",
                     host="127.0.0.1", port=a.port)
    else:
        mcp = Server("mcpserver-bench", log_level="WARNING")

    @mcp.tool(name="omniforge_instructions", description="A constant text (benchmark tool).",
              annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False,
                                          idempotentHint=True, openWorldHint=False),
              structured_output=False)
    def omniforge_instructions() -> str:
        return text

    if a.mode == "stdio":
        mcp.run("stdio")
        return
    if SDK == 1:
        app = mcp.streamable_http_app()
    else:
        app = mcp.streamable_http_app(stateless_http=a.stateless, host="127.0.0.1", max_sessions=None)
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
