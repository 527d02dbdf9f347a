"""RunEvents: one run's events for an asyncio reader, as `Agent.astream` hands them out."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from types import TracebackType

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.event_stream import Subscription
from agent_runtime.events import Event, is_terminal

STREAM_CLOSED = "stream_closed"
"""The abort reason of a run whose `astream(..., abort_on_close=True)` was closed early."""


class RunEvents:
    """The events of one run, up to and including its end, for `async for`.

    The run was started when this was made (start errors were raised then). Closing it
    before the end — `aclose()`, `async with` exit, or dropping it (a `break` out of an
    `async for` over `agent.astream(...)` drops it) — unsubscribes at once, so the run
    never waits for a reader that is gone; with `abort_on_close=True` it also aborts the run
    (reason `stream_closed`), e.g. when an HTTP client disconnects. A reader that holds it
    without reading applies backpressure like any `block` subscription (`block_timeout`).
    """

    def __init__(
        self,
        key: AgentKey,
        sub: Subscription,
        run_id: str,
        abort: Callable[[str, str], None],
        abort_on_close: bool,
    ) -> None:
        self.key = key
        self.run_id = run_id
        self._sub = sub
        self._abort = abort
        self._abort_on_close = abort_on_close
        self._ended = False
        self._closed = False

    def __aiter__(self) -> RunEvents:
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        try:
            # The subscription's own step, not its `auntil_end` generator: one async layer
            # less per event on the reader's loop.
            event = await self._sub._anext(None)
        except BaseException:
            self.close()
            raise
        if event is None:  # the subscription ended (closed) before the run did
            self.close()
            raise StopAsyncIteration
        if is_terminal(event) and event.run_id == self.run_id and event.agent == self.key:
            self._ended = True
            self.close()
        return event

    def close(self) -> None:
        """Unsubscribe (and abort the run, if asked and it has not ended); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._sub.close()
        if self._abort_on_close and not self._ended:
            with contextlib.suppress(AgentStopped):
                self._abort(STREAM_CLOSED, self.run_id)

    async def aclose(self) -> None:
        """`close()` for `contextlib.aclosing` and asyncio code."""
        self.close()

    async def __aenter__(self) -> RunEvents:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # Dropped unread (a `break`, a client gone): the run must not wait for this reader.
        if not getattr(self, "_closed", True):
            self.close()

    def __repr__(self) -> str:
        return f"<RunEvents agent={tuple(self.key)} run_id={self.run_id} closed={self._closed}>"
