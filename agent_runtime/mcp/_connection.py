"""A long-lived MCP session on a private event-loop thread (for servers run as subprocesses).

An SDK session is bound to the event loop (and anyio task group) that opened it, but an
agent's tools run on the runtime's loop and a user may list tools on another. So the session
lives on a loop of its own, in a daemon thread, and calls from any loop are handed to it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agent_runtime.mcp._endpoint import StdioEndpoint, all_tools
from agent_runtime.mcp._sdk import require_sdk

T = TypeVar("T")

_CLOSE_WAIT = 10.0
"""Seconds `close()` waits for the session (and the server process) to end."""


class Connection:
    """One MCP session with `endpoint`, opened on first use and kept until `close()`.

    Guarantees:
    - Calls from any thread or event loop share the one session (the SDK multiplexes them).
    - If the session ends (the server process exited), the calls in flight fail and the next
      call opens a new session (a new process).
    - Cancelling an awaiting caller cancels its request on the session's loop (the SDK then
      tells the server with `notifications/cancelled`).
    - `close()` is idempotent and thread-safe: it ends the session (the SDK stops the server
      process), then the thread. Calls after it raise `RuntimeError`.
    """

    def __init__(self, endpoint: StdioEndpoint) -> None:
        self.endpoint = endpoint
        self.label = endpoint.label
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"mcp-session {self.label}", daemon=True
        )
        self._thread.start()
        # Touched only on the connection's loop:
        self._opened: asyncio.Future[Any] | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self._holder: asyncio.Task[None] | None = None
        self._release: asyncio.Event | None = None

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists (all pages)."""
        return await self._run(all_tools)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """The server's `CallToolResult`; raises what the SDK raises."""
        return await self._run(lambda client: client.call_tool(name, arguments))

    async def _run(self, use: Callable[[Any], Awaitable[T]]) -> T:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"the MCP connection to {self.label} is closed")
            future = asyncio.run_coroutine_threadsafe(self._use(use), self._loop)
        return await asyncio.wrap_future(future)

    async def _use(self, use: Callable[[Any], Awaitable[T]]) -> T:
        client = await self._session()
        try:
            return await use(client)
        except Exception as exc:
            if _connection_lost(exc):
                self._retire()
            raise

    def _retire(self) -> None:
        """Let go of a session whose server went away: the next call opens a new one."""
        if self._holder is not None and self._release is not None:
            self._release.set()
            self._retired.add(self._holder)
            self._holder.add_done_callback(self._retired.discard)
        self._holder = self._release = self._opened = None

    async def _session(self) -> Any:
        if self._holder is None or self._holder.done():
            self._opened = self._loop.create_future()
            self._release = asyncio.Event()
            self._holder = self._loop.create_task(self._hold(self._opened, self._release))
        assert self._opened is not None
        return await asyncio.shield(self._opened)

    async def _hold(self, opened: asyncio.Future[Any], release: asyncio.Event) -> None:
        """Keeps the session open until released; a session that fails ends this task."""
        try:
            async with self.endpoint.session() as client:
                opened.set_result(client)
                await release.wait()
        except asyncio.CancelledError:
            if not opened.done():
                opened.cancel()
            raise
        except Exception as exc:
            if not opened.done():
                opened.set_exception(exc)
            # else the session ended under its callers: each sees its own request fail

    def close(self) -> None:
        """End the session and stop its thread; waits up to 10 s for the server to stop.

        Raises:
            RuntimeError: called from the connection's own thread (never the case for users).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if threading.current_thread() is self._thread:  # pragma: no cover - internal misuse
            raise RuntimeError("Connection.close() called on its own thread")
        future = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        try:
            future.result(_CLOSE_WAIT)
        except Exception:
            pass  # the process is stopped with the interpreter at the latest
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CLOSE_WAIT)
            if not self._thread.is_alive():
                self._loop.close()

    async def _shutdown(self) -> None:
        # Calls still running end first (cancelled: their callers get error results), so no
        # caller waits forever on a loop that stops; then the sessions close.
        current = asyncio.current_task()
        sessions = {*self._retired, *([self._holder] if self._holder is not None else [])}
        calls = [t for t in asyncio.all_tasks() if t is not current and t not in sessions]
        for task in calls:
            task.cancel()
        if calls:
            await asyncio.wait(calls, timeout=_CLOSE_WAIT)
        self._retire()
        holders = list(self._retired)
        if not holders:
            return
        _, pending = await asyncio.wait(holders, timeout=_CLOSE_WAIT)
        for holder in pending:
            holder.cancel()


def _connection_lost(exc: BaseException) -> bool:
    """True when `exc` says the session is unusable (not a server's answer to one request)."""
    sdk = require_sdk()
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, sdk.MCPError):
        return bool(exc.code == sdk.types.CONNECTION_CLOSED)
    return not isinstance(exc, TimeoutError | ValueError)  # a slow or malformed answer
