"""McpTools: the tools of a server kept running as a subprocess, and their closing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import TracebackType

from agent_runtime.mcp._connection import Connection
from agent_runtime.tools import Tool


class McpTools(list[Tool]):
    """A `list[Tool]` that owns the MCP session (and server process) its tools call.

    Pass it wherever tools go (`start_agent(tools=...)`). Close it when done, with `close()`
    (or `await aclose()`), or use it as a context manager (`with` / `async with`); calls
    after that are error results. `close()` stops the server process and waits up to 10 s.
    """

    def __init__(self, tools: Iterable[Tool], connection: Connection) -> None:
        super().__init__(tools)
        self.connection = connection

    def close(self) -> None:
        """Close the session and stop the server process; idempotent, any thread."""
        self.connection.close()

    async def aclose(self) -> None:
        """`close()` without blocking the event loop."""
        await asyncio.to_thread(self.connection.close)

    def __enter__(self) -> McpTools:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> McpTools:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"McpTools({self.connection.label!r}, {[t.name for t in self]!r})"
