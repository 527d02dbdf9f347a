"""A real MCP server for tests/agent_runtime/test_mcp.py, built with the SDK's MCPServer (the
SDK 2 name of FastMCP).

Run as `python mcp_test_server.py http PORT MARKS_DIR` (streamable HTTP on 127.0.0.1:PORT,
path /mcp) or `python mcp_test_server.py stdio MARKS_DIR`. The `slow` tool writes
`MARKS_DIR/started` when it begins and `MARKS_DIR/cancelled` when the server cancels it, so
a test can see that a client's abort reached the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations


def build(marks: Path) -> MCPServer:
    server = MCPServer("agent-runtime-test")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with `message`."""
        raise ToolError(message)

    @server.tool(name="dotted.name")
    def dotted() -> str:
        """A tool whose name providers reject."""
        return "dotted ok"

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of request header `name` (HTTP only)."""
        request: Any = ctx.request_context.request
        return str(request.headers.get(name, "<absent>")) if request is not None else "<stdio>"

    @server.tool()
    def pid() -> int:
        """This server's process id."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """Ends the server process at once."""
        os._exit(3)

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleeps `seconds`, marking its start and its cancellation in the marks folder."""
        (marks / "started").write_text("1")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            (marks / "cancelled").write_text("1")
            raise
        return "slept"

    return server


def main(argv: list[str]) -> None:
    if argv[0] == "http":
        port, marks = int(argv[1]), Path(argv[2])
        build(marks).run(transport="streamable-http", host="127.0.0.1", port=port)
    else:
        build(Path(argv[1])).run(transport="stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
