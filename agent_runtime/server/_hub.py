"""EventHub: every agent's events, numbered in a replay buffer per agent and per session.

One subscription per agent feeds the hub (however many SSE clients read it), on the server's
event loop:
- An agent's stream holds every event its subscription delivers (its delegates' too, tagged
  with their keys), in order; a session's stream holds the events of that session's agents
  (each event once: a delegate's events come from its own feed, not its parent's).
- The subscription is `drop_oldest`, so a run never waits for the gateway; an overflow
  arrives as an `EventsDropped` event and is kept in the streams like any event.
- An agent started through the API is watched before its start is answered, so its stream
  misses nothing; an agent started by the embedding application is found by a sweep of the
  registry (every `SWEEP_SECONDS`) or when a request names it, and its stream starts there.
- When an agent stops for good, its stream gets a `stream_end` frame and closes; a new agent
  under the same key reopens it and its ids go on from there (a resuming client never sees
  an id twice). At most `RETAINED` closed streams are kept, the oldest forgotten first; so
  are at most `RETAINED` streams of sessions without a live agent or a reader (a client
  naming ever new sessions cannot grow the server's memory without bound).
- Every stream's frames count against one `ByteBudget` of `max_bytes` (`[server]
  replay_max_bytes`): each frame its encoded length plus `FRAME_OVERHEAD`, once per stream
  that keeps it. Past the budget the hub releases, in this order, until it is within: the
  frames of the oldest closed agent stream, then of the oldest idle session stream (no live
  agent, no reader), then the oldest frames of the largest live streams (down to
  `LOW_WATER` of the budget, so that this scan is rare), and only then the oldest
  remembered ids of forgotten streams. A forgotten stream's last id is remembered
  (`TOMBSTONE_BYTES`, counted too): a new agent (or reader) under that name goes on from it,
  and a client that resumes with an id whose frames were released gets one `events_dropped`
  frame counting them. Only a remembered id itself released to keep the budget lets a name
  start again at 1 (a resume with a larger id then reads "from now on", as after a server
  restart).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
from dataclasses import dataclass, field
from typing import Any

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.event_stream import Subscription
from agent_runtime.server._replay import ByteBudget, ReplayBuffer
from agent_runtime.server._wire import Frame, end_frame
from supervisors._log import get_logger

log = get_logger(__name__)

SWEEP_SECONDS = 0.5
RETAINED = 256
SUBSCRIPTION_QUEUE = 10_000
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
FRAME_OVERHEAD = 128
"""Bytes counted per kept frame beside its encoding: the Frame, the bytes object's header,
the deque slots and its recorded size."""
TOMBSTONE_BYTES = 256
"""Bytes counted per remembered last id of a forgotten stream (a dict entry and its name)."""
LOW_WATER = 0.9
"""Live streams are trimmed down to this fraction of the budget once it is exceeded."""

_Name = tuple[str, Any]  # ("agent", AgentKey) or ("session", str)


def frame_size(frame: Frame) -> int:
    """What keeping `frame` costs in a replay buffer, in bytes (it is encoded now, once)."""
    return len(frame.body()) + FRAME_OVERHEAD


@dataclass(eq=False)
class _Feed:
    key: AgentKey
    buffer: ReplayBuffer[Frame]
    agent: Any = None  # the Agent watched now (None once it stopped)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    sub: Subscription | None = field(default=None, repr=False)


class EventHub:
    """The replay buffers of one gateway (see the module docstring). Lives on one asyncio
    loop: `start()` binds it to the running one."""

    def __init__(self, runtime: Any, capacity: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.runtime = runtime
        self.capacity = capacity
        self.budget = ByteBudget(max_bytes)
        # The last ids of forgotten streams, oldest first (see the module docstring).
        self._forgotten: collections.OrderedDict[_Name, int] = collections.OrderedDict()
        self._feeds: dict[AgentKey, _Feed] = {}
        self._sessions: dict[str, ReplayBuffer[Frame]] = {}
        self._retired: collections.OrderedDict[AgentKey, None] = collections.OrderedDict()
        self._idle_sessions: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._sweeper: asyncio.Task[None] | None = None
        self._watching: dict[AgentKey, asyncio.Future[None]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closed = False

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Bind to the running loop and start sweeping the registry (idempotent)."""
        if self.loop is not None:
            return
        self.loop = asyncio.get_running_loop()
        self._sweeper = self.loop.create_task(self._sweep_forever(), name="gateway.sweep")

    async def close(self) -> None:
        """Stop feeding: subscriptions closed, every stream ended (readers finish what is
        buffered). Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for feed in list(self._feeds.values()):
            if feed.sub is not None:
                feed.sub.close()
            if feed.task is not None:
                feed.task.cancel()
            feed.buffer.close()
        for buffer in self._sessions.values():
            buffer.close()

    # -- buffers ----------------------------------------------------------------------------

    def agent_buffer(self, key: AgentKey) -> ReplayBuffer[Frame] | None:
        """The stream of the agent `key`, if the hub knows it (live or recently stopped)."""
        feed = self._feeds.get(key)
        return None if feed is None else feed.buffer

    def session_buffer(self, session: str) -> ReplayBuffer[Frame]:
        """The stream of `session` (made on first use: a client may listen before the
        session's first agent starts)."""
        buffer = self._sessions.get(session)
        if buffer is None:
            buffer = self._sessions[session] = self._new_buffer(("session", session))
        return buffer

    def _new_buffer(self, name: _Name) -> ReplayBuffer[Frame]:
        """A buffer for stream `name`, going on from its remembered last id if it had one."""
        start_after = self._forgotten.pop(name, None)
        if start_after is not None:
            self.budget.used -= TOMBSTONE_BYTES
        return ReplayBuffer[Frame](
            self.capacity, start_after=start_after or 0, budget=self.budget, size=frame_size
        )

    async def watch(self, agent: Agent) -> ReplayBuffer[Frame]:
        """Feed `agent`'s events into its stream from now on (at once if already fed).

        Raises:
            AgentStopped: the agent stopped before it could be subscribed to.
        """
        self.start()
        key = agent.key
        feed = self._feeds.get(key)
        if feed is not None and feed.agent is agent:
            return feed.buffer
        pending = self._watching.get(key)
        if pending is not None:  # another request subscribes to it right now
            await asyncio.shield(pending)
            return await self.watch(agent)
        assert self.loop is not None
        done = self._watching[key] = self.loop.create_future()
        try:
            sub = await asyncio.to_thread(
                agent.subscribe, max_queue=SUBSCRIPTION_QUEUE, overflow="drop_oldest"
            )
            if self.closed:  # the gateway shut down meanwhile: feed nothing
                sub.close()
                ended = feed.buffer if feed is not None else ReplayBuffer[Frame](1)
                ended.close()
                return ended
            if feed is None:
                feed = self._feeds[key] = _Feed(key, self._new_buffer(("agent", key)))
            self._retired.pop(key, None)
            feed.buffer.closed = False
            feed.agent, feed.sub = agent, sub
            feed.task = self.loop.create_task(self._pump(feed, agent, sub), name=f"feed {key}")
            return feed.buffer
        finally:
            del self._watching[key]
            done.set_result(None)

    async def _pump(self, feed: _Feed, agent: Agent, sub: Subscription) -> None:
        session_of = feed.key.session
        try:
            async for event in sub:
                frame = Frame.of(event)  # encoded when first read, once for both streams
                feed.buffer.append(frame)
                origin = event.agent if event.agent is not None else feed.key
                if origin == feed.key:
                    self.session_buffer(session_of).append(frame)
                if self.budget.used > self.budget.limit:
                    self.enforce_budget()
        except asyncio.CancelledError:
            raise
        except Exception:  # a broken subscription must not take the server down
            log.exception("gateway.feed.failed", agent=list(feed.key))
        finally:
            sub.close()
        if feed.agent is agent:  # not replaced by a new agent under the same key meanwhile
            feed.agent, feed.sub = None, None
            feed.buffer.append(end_frame("agent_stopped"))
            feed.buffer.close()
            self._retire(feed.key)

    def _retire(self, key: AgentKey) -> None:
        self._retired[key] = None
        while len(self._retired) > RETAINED:
            self._forget_agent(next(iter(self._retired)))
        self.enforce_budget()

    def _forget_agent(self, key: AgentKey) -> None:
        """Release the closed stream of `key`, remembering its last id."""
        self._retired.pop(key, None)
        feed = self._feeds.pop(key, None)
        if feed is not None:
            feed.buffer.discard()
            self._remember(("agent", key), feed.buffer.last_id)

    def _forget_session(self, session: str) -> None:
        """Release the stream of `session` (idle: no live agent, no reader), remembering its
        last id."""
        self._idle_sessions.pop(session, None)
        buffer = self._sessions.pop(session, None)
        if buffer is not None:
            buffer.discard()
            self._remember(("session", session), buffer.last_id)

    def _remember(self, name: _Name, last_id: int) -> None:
        if last_id == 0:
            return
        if name not in self._forgotten:
            self.budget.used += TOMBSTONE_BYTES
        self._forgotten[name] = last_id
        self._forgotten.move_to_end(name)

    def enforce_budget(self) -> None:
        """Bring the bytes of every stream within the budget (the order is in the module
        docstring); nothing when within it."""
        budget = self.budget
        while budget.over and self._retired:
            self._forget_agent(next(iter(self._retired)))
        if budget.over and self._idle_sessions:
            live = {key.session for key, feed in self._feeds.items() if feed.agent is not None}
            for session in list(self._idle_sessions):
                if not budget.over:
                    break
                buffer = self._sessions.get(session)
                if session in live or (buffer is not None and buffer.readers):
                    self._idle_sessions.pop(session, None)  # not idle any more
                    continue
                self._forget_session(session)
        if budget.over:
            self._trim_live()
        while budget.over and self._forgotten:
            self._forgotten.popitem(last=False)
            budget.used -= TOMBSTONE_BYTES

    def _trim_live(self) -> None:
        """Drop the oldest frames of the largest live streams until the bytes are down to
        `LOW_WATER` of the budget (their readers are told what they lost)."""
        budget = self.budget
        target = int(budget.limit * LOW_WATER)
        buffers = [feed.buffer for feed in self._feeds.values()]
        buffers += self._sessions.values()
        heap = [(-b.nbytes, n, b) for n, b in enumerate(buffers) if len(b)]
        heapq.heapify(heap)
        while budget.used > target and heap:
            _, n, buffer = heapq.heappop(heap)
            buffer.trim(max(len(buffer) // 8, 1))  # a slice of the largest, then look again
            if len(buffer):
                heapq.heappush(heap, (-buffer.nbytes, n, buffer))

    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:  # the next sweep tries again
                log.exception("gateway.sweep.failed")
            await asyncio.sleep(SWEEP_SECONDS)

    async def sweep(self) -> None:
        """Watch every agent of the registry that the hub does not feed yet, and forget the
        oldest idle session streams past `RETAINED`."""
        for key, agent in self.runtime.registry.list():
            feed = self._feeds.get(key)
            if feed is not None and feed.agent is agent:
                continue
            with contextlib.suppress(AgentStopped):  # stopped meanwhile: nothing to feed
                await self.watch(agent)
        self._forget_idle_sessions()

    def _forget_idle_sessions(self) -> None:
        live = {key.session for key, feed in self._feeds.items() if feed.agent is not None}
        for session, buffer in self._sessions.items():
            if session in live or buffer.readers:
                self._idle_sessions.pop(session, None)
            elif session not in self._idle_sessions:
                self._idle_sessions[session] = None
        while len(self._idle_sessions) > RETAINED:
            self._forget_session(next(iter(self._idle_sessions)))
        self.enforce_budget()
