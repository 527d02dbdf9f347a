"""Where an MCP server is and how one session with it is opened (HTTP or a subprocess)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from agent_runtime.mcp._sdk import require_sdk


async def all_tools(client: Any) -> list[Any]:
    """Every tool an open `mcp.Client` lists, all pages."""
    listed: list[Any] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        listed.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return listed


@dataclass(frozen=True)
class HttpEndpoint:
    """A server reached over streamable HTTP at `url`, with extra request `headers`."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.url

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        """An initialized `mcp.Client`, closed (its MCP session terminated) on exit."""
        sdk = require_sdk()
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(
                create_mcp_http_client(headers=dict(self.headers))
            )
            transport = streamable_http_client(self.url, http_client=http)
            yield await stack.enter_async_context(sdk.Client(transport, cache=None))

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists, over a session of its own."""
        async with self.session() as client:
            return await all_tools(client)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """One `tools/call` over a session of its own: the server's `CallToolResult`."""
        async with self.session() as client:
            return await client.call_tool(name, arguments)


@dataclass(frozen=True)
class StdioEndpoint:
    """A server started as `command args...` and spoken to over its stdin/stdout."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None

    @property
    def label(self) -> str:
        return " ".join([self.command, *self.args])

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Any]:
        """An initialized `mcp.Client` over a new server process, stopped on exit."""
        sdk = require_sdk()
        params = sdk.StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
        )
        async with sdk.Client(params, cache=None) as client:
            yield client
