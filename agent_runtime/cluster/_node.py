"""NodeActor: the body of one cluster node, a Ray actor hosting one local `Runtime`.

`ClusterRuntime` makes this class a Ray actor (async: every method is a coroutine on the
actor's event loop, so hundreds of waiting `run`s and `pull`s cost no thread each). Calls that
block briefly (a start, a stop, an actor call of an agent) go to a small thread pool of the
node, never onto that loop. What a node guarantees:
- each agent it starts is registered in its local Runtime (local uniqueness) and is told to
  the cluster registry when it ends, however it ends;
- a subscription's events are buffered on the node under the reader's own bound and overflow
  policy (`Subscription`), and leave it only when pulled, in order, in batches;
- a node restarted by Ray (`max_restarts`) starts empty with a new `incarnation`, which it
  tells the registry first, so the caller side can see which agents were lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.cluster._ray import import_ray
from agent_runtime.cluster._wire import RemoteError, encode_events, unpack_options
from agent_runtime.config import RuntimeConfig
from agent_runtime.event_stream import OverflowPolicy, Subscription
from agent_runtime.runtime import Runtime
from supervisors import monitor

T = TypeVar("T")

# The Agent methods a caller may invoke on a node through `call` (everything else is refused).
CALLS = frozenset(
    {
        "prompt",
        "continue_run",
        "steer",
        "follow_up",
        "abort",
        "state",
        "wait_for_idle",
        "reset",
        "set_system_prompt",
        "set_model",
        "set_tools",
        "set_steering_mode",
        "set_follow_up_mode",
    }
)
UNKNOWN_SUBSCRIPTION = "unknown_subscription"
# A subscription no reader pulled for this long is closed (its reader's process went away):
# under "block" it would otherwise hold its agent's runs up to block_timeout at every event.
ABANDONED_AFTER = 120.0


@dataclass(frozen=True)
class NodeInfo:
    """A node as it answers `info()`."""

    name: str
    incarnation: str
    pid: int
    agents: int
    running: int


@dataclass(frozen=True)
class Pulled:
    """One `pull`'s answer: events (JSON, in order), why the subscription ended (None while
    open; `UNKNOWN_SUBSCRIPTION` when this incarnation never had it) and the run the agent
    is running now (None when idle), so a reader knows which run a node loss interrupts."""

    events: bytes
    end: str | None
    running: str | None


class NodeActor:
    """One node: a local Runtime and the subscriptions remote readers pull from."""

    def __init__(
        self, name: str, registry: str, namespace: str, config: RuntimeConfig | None
    ) -> None:
        ray = import_ray()
        self.name = name
        self.incarnation = uuid.uuid4().hex
        self.runtime = Runtime.start(config, name=name)
        self._pool = ThreadPoolExecutor(8, thread_name_prefix=f"{name}.calls")
        self._subs: dict[str, Subscription] = {}
        self._pulled: dict[str, float] = {}  # sub id -> when it was last pulled (monotonic)
        self._sub_ids = itertools.count(1)
        self._registry = ray.get_actor(registry, namespace=namespace)
        self._registry.node_up.remote(name, self.incarnation)

    async def _blocking(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _agent(self, key: AgentKey) -> Agent:
        from agent_runtime._errors import AgentStopped

        agent = self.runtime.registry.lookup(key)
        if not isinstance(agent, Agent):
            raise AgentStopped(key)
        return agent

    async def info(self) -> NodeInfo:
        """Name, incarnation, process, live agents and running runs (cheap: published
        snapshots only, no agent is asked)."""
        self._close_abandoned()
        agents = [a for _, a in self.runtime.registry.list() if isinstance(a, Agent)]
        running = sum(1 for a in agents if _running(a) is not None)
        return NodeInfo(self.name, self.incarnation, os.getpid(), len(agents), running)

    def _close_abandoned(self) -> None:
        now = time.monotonic()
        for sub_id, pulled in list(self._pulled.items()):
            if now - pulled > ABANDONED_AFTER:
                self._forget(sub_id)

    def _forget(self, sub_id: str) -> None:
        self._pulled.pop(sub_id, None)
        sub = self._subs.pop(sub_id, None)
        if sub is not None:
            sub.close()

    async def start_agent(self, key: AgentKey, options: bytes) -> str | RemoteError:
        """Start an agent under `key`; this node's incarnation, or the error."""
        try:
            agent = await self._blocking(
                lambda: self.runtime.start_agent(key, **unpack_options(options))
            )
        except Exception as exc:
            return RemoteError.of(exc)
        ref = agent._cell.child_ref  # what the subagents supervisor holds: it exits once
        if ref is not None:
            registry, name, incarnation = self._registry, self.name, self.incarnation
            monitor(ref, lambda _ref, _reason: registry.exited.remote(key, name, incarnation))
        return self.incarnation

    async def stop_agent(self, key: AgentKey) -> bool:
        """Stop the agent under `key`; False if none runs here."""
        agent = self.runtime.registry.lookup(key)
        if not isinstance(agent, Agent):
            return False
        return await self._blocking(lambda: self.runtime.stop_agent(agent))

    async def call(
        self, key: AgentKey, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """`agent.<method>(*args, **kwargs)` of the agent under `key`: its value or a
        RemoteError."""
        if method not in CALLS:
            return RemoteError.of(ValueError(f"{method!r} is not an Agent call a node runs"))
        try:
            agent = self._agent(key)
            return await self._blocking(lambda: getattr(agent, method)(*args, **kwargs))
        except Exception as exc:
            return RemoteError.of(exc)

    async def run(self, key: AgentKey, input: Any, timeout: float | None, kwargs: Any) -> Any:
        """`agent.arun(input, timeout, **kwargs)`: the RunResult or a RemoteError."""
        try:
            return await self._agent(key).arun(input, timeout, **kwargs)
        except Exception as exc:
            return RemoteError.of(exc)

    async def subscribe(
        self, key: AgentKey, max_queue: int, overflow: OverflowPolicy, block_timeout: float
    ) -> str | RemoteError:
        """A subscription to the agent under `key`, bounded here; its id for `pull`."""
        try:
            agent = self._agent(key)
            sub = await self._blocking(lambda: agent.subscribe(max_queue, overflow, block_timeout))
        except Exception as exc:
            return RemoteError.of(exc)
        sub_id = f"{self.incarnation}:{next(self._sub_ids)}"
        self._subs[sub_id] = sub
        self._pulled[sub_id] = time.monotonic()
        return sub_id

    async def pull(self, sub_id: str, max_items: int, timeout: float) -> Pulled:
        """Up to `max_items` buffered events of `sub_id`, waiting up to `timeout` seconds for
        the first; the batch ends at the subscription's end, which is then forgotten."""
        sub = self._subs.get(sub_id)
        if sub is None:
            return Pulled(b"[]", UNKNOWN_SUBSCRIPTION, None)
        self._pulled[sub_id] = time.monotonic()
        batch = await sub.stream.apull_many(max_items, timeout=timeout)
        end = None
        terminal = sub.stream.terminal
        if batch and batch[-1] is terminal and terminal is not None:
            batch.pop()
            end = getattr(terminal, "reason", "closed")
            self._forget(sub_id)
        agent = self.runtime.registry.lookup(sub.agent) if sub.agent is not None else None
        running = _running(agent) if isinstance(agent, Agent) else None
        return Pulled(encode_events(batch), end, running)

    async def unsubscribe(self, sub_id: str) -> None:
        """Close `sub_id` (idempotent)."""
        self._forget(sub_id)

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop the local Runtime (every run gets its Canceled first)."""
        for sub in list(self._subs.values()):
            sub.close()
        await self._blocking(lambda: self.runtime.stop(timeout))
        with contextlib.suppress(Exception):
            self._pool.shutdown(wait=False)


def _running(agent: Agent) -> str | None:
    status = agent._cell.status
    return None if status is None else status.run_id
