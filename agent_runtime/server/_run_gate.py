"""GatedRun: one run's events, the agent held within one event of its reader.

The AG-UI endpoint reports the session state after each turn (`STATE_SNAPSHOT`). The state is
read from the store, not carried by the events, so a reader that lags behind the agent reads
it as a later turn's tool already left it. A `GatedRun` reads the run through a `block`
subscription of `GATE_QUEUE` events, taken one at a time: while the reader holds an event,
the agent waits to deliver the one after next, and a tool starts only once its
`ToolExecutionStart` was delivered. So whatever the reader does before it takes the next
event (reading the state after a `TurnEnd`) sees the world as of that point of the event
order: no tool of a later turn has started.

The cost is one hand-over between the runtime's loop and the reader's per event; a reader
that stops taking events holds the run up to the subscription's `block_timeout` (then the
subscription alone is closed and the iteration ends).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import Sequence
from typing import Any

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.event_stream import Subscription
from agent_runtime.events import Event, is_terminal
from agent_runtime.messages import UserMessage

__all__ = ["GATE_QUEUE", "STREAM_CLOSED", "GatedRun"]

GATE_QUEUE = 1
"""Events the agent may deliver ahead of the one its reader holds."""

STREAM_CLOSED = "stream_closed"
"""The abort reason of a run whose reader closed it before its end."""


class GatedRun:
    """The events of one run of `agent`, up to and including its end (see the module
    docstring). Start it with `GatedRun.start`; `aclose()` before the end aborts the run."""

    def __init__(self, agent: Any, sub: Subscription, run_id: str) -> None:
        self._agent = agent
        self._key: AgentKey = agent.key
        self._sub = sub
        self.run_id = run_id
        self._pending: collections.deque[Event] = collections.deque()
        self._ended = False
        self._closed = False

    @classmethod
    async def start(cls, agent: Any, prompts: Sequence[UserMessage]) -> GatedRun:
        """Subscribe to `agent`, then start its run with `prompts`.

        Raises:
            AgentBusy: a run is in progress.
            AgentStopped: the agent was stopped.
        """
        sub = await asyncio.to_thread(agent.subscribe, max_queue=GATE_QUEUE, overflow="block")
        try:
            run_id: str = agent.prompt(list(prompts))
        except BaseException:
            sub.close()
            raise
        return cls(agent, sub, run_id)

    def __aiter__(self) -> GatedRun:
        return self

    async def __anext__(self) -> Event:
        while not self._closed:
            if not self._pending:
                batch = await self._sub.stream.apull_many(1)  # one at a time: the gate
                if not batch:  # the subscription ended (closed) before the run did
                    break
                self._pending.extend(batch)
            event = self._pending.popleft()
            if event is self._sub.stream.terminal:  # the subscription's own end
                break
            if event.agent in (None, self._key) and event.run_id != self.run_id:
                continue  # the agent's events of another run (none expected)
            if is_terminal(event) and event.agent in (None, self._key):
                self._ended = True
                await self.aclose()
            return event
        await self.aclose()
        raise StopAsyncIteration

    def close(self) -> None:
        """Unsubscribe; abort the run (reason `stream_closed`) if it has not ended, without
        waiting for the abort (a response being cancelled must not wait). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._sub.close()
        if not self._ended:
            threading.Thread(target=self._abort, name="agui.abort", daemon=True).start()

    def _abort(self) -> None:
        with contextlib.suppress(AgentStopped):
            self._agent.abort(STREAM_CLOSED)

    async def aclose(self) -> None:
        """`close()` for `async with` and asyncio code."""
        self.close()

    async def __aenter__(self) -> GatedRun:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
