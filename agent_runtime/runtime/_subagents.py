"""Subagents: the runtime's DynamicSupervisor of agents, as a facade keyed by AgentKey."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, Unpack, overload

import pykka

from agent_runtime._errors import AlreadyRegistered
from agent_runtime._key import AgentKey
from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.agent import Agent, AgentActor, AgentHost, AgentOptions, AgentOptionsDict
from agent_runtime.agent._approvals import ParkedTurn, read_agent
from agent_runtime.agent._cell import AgentCell
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import Message
from supervisors import (
    ChildSpec,
    ChildStartError,
    DynamicSupervisor,
    ExitReason,
    Supervisor,
    monitor,
)
from supervisors._log import get_logger

log = get_logger(__name__)

OutputT = TypeVar("OutputT")

# What an incarnation starts from: messages, the session's sequence, a turn parked waiting
# for approvals, a kept prompt not yet stored (see `read_agent`).
_History = tuple[tuple[Message, ...], int, ParkedTurn | None, tuple[Message, ...]]
_NO_HISTORY: _History = ((), 0, None, ())


class Subagents:
    """Start, stop and list the agents of one runtime (all under its `subagents`
    DynamicSupervisor).

    Agents are `temporary` by default: a crash is not restarted and never touches siblings.
    A `transient` agent runs under a one-child supervisor of its own, so its restart intensity
    is its own: it is restarted after each crash with its history from session memory, and the
    crash past `max_restarts` within `max_seconds` (`[supervision]`) ends that agent alone.
    """

    def __init__(self, runtime: AgentHost, supervisor: Callable[[], DynamicSupervisor]) -> None:
        self._runtime = runtime
        self._supervisor = supervisor  # the current `subagents` DynamicSupervisor

    @overload
    def start(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: None = None,
        on_failure: Callable[[Exception], str] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent[str]: ...

    @overload
    def start(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: type[OutputT],
        on_failure: Callable[[Exception], OutputT] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent[OutputT]: ...

    @overload
    def start(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: object = None,
        on_failure: None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]: ...

    def start(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]:
        """Start an agent under `key` with `options` (`AgentOptionsDict`: `model`, `tools`,
        `system_prompt`, ...), typed as its output: `Agent[Book]` with `output_type=Book`,
        `Agent[str]` without (its results' `output` is the answer's text).

        Raises:
            AlreadyRegistered: a live agent holds the key (`.holder` is its Agent).
            TypeError: an unknown option, no model (and no default profile), a wrong type.
            ValueError: an invalid key or option value.
            ConfigError: `model=` names no configured profile (the known ones named).
        """
        given = _given(options, output_type, on_failure)
        return self._start(AgentKey.of(key), given, parent=None)

    async def astart(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **options: Any,
    ) -> Agent[Any]:
        """`start`, awaited on the runtime's event loop (`Runtime.astart_agent` there): the
        agent starts in place, its history read on the session writer's threads meanwhile,
        so a burst of starts takes no thread and no hop. Errors are `start`'s.

        Raises:
            RuntimeError: not called on the runtime's loop.
        """
        self._check_on_loop("Subagents.astart()")
        given = _given(options, output_type, on_failure)
        return await self._astart(AgentKey.of(key), given, parent=None)

    def _check_on_loop(self, what: str) -> None:
        if asyncio.get_running_loop() is not self._runtime.loop_tasks.loop:
            raise RuntimeError(f"{what} runs on the runtime's event loop only")

    async def _astart(
        self, key: AgentKey, options: dict[str, Any], parent: AgentCell | None
    ) -> Agent:
        """`_start` in place on the runtime's loop: the history is read on the session
        writer's threads while the loop goes on."""
        opts = self._options(key, options)
        history = _NO_HISTORY
        if opts.memory.read:
            writer = self._runtime.memory_writer
            read = functools.partial(read_agent, writer.memory, key, opts.memory, "agent_restarted")
            history = await asyncio.wrap_future(writer.submit(key.session, read))
        return self._launch(key, opts, history, parent)

    def _options(self, key: AgentKey, options: dict[str, Any]) -> AgentOptions:
        holder = self._runtime.registry.lookup(key)
        if holder is not None:
            raise AlreadyRegistered(key, holder)
        runtime = self._runtime
        return AgentOptions.build(runtime.config, options, tools=runtime.tools, role=key.role)

    def _start(self, key: AgentKey, options: dict[str, Any], parent: AgentCell | None) -> Agent:
        refuse_on_loop(
            "Runtime.start_agent()",
            "`await runtime.astart_agent(...)` (in a tool: `await ctx.aspawn(...)`)",
        )
        opts = self._options(key, options)
        # The history is read here, on the caller's thread: the actor takes it on its loop.
        history = read_agent(self._runtime.memory, key, opts.memory, "agent_restarted")
        return self._launch(key, opts, history, parent)

    def _launch(
        self, key: AgentKey, opts: AgentOptions, history: _History, parent: AgentCell | None
    ) -> Agent:
        """Start the actor of an agent whose options are built and history read, under the
        `subagents` supervisor (on the loop's thread its `on_start` runs before this returns)."""
        runtime = self._runtime
        messages, sequence, parked, unstored = history
        loop = runtime.loop_tasks.loop
        cell = AgentCell(key, runtime, opts, parent, loop, (messages, sequence))
        cell.parked, cell.unstored = parked, unstored
        handle = Agent(cell)
        child_id = f"agent:{key.session}/{key.role}/{key.index}"
        shutdown = runtime.config.supervision.shutdown

        start_actor = _ActorStart(cell)
        if opts.restart == "transient":
            spec = ChildSpec(
                id=child_id,
                start=lambda: self._start_supervised(cell, child_id, start_actor),
                restart="temporary",
                shutdown="infinity",
                type="supervisor",
            )
        else:
            spec = ChildSpec(id=child_id, start=start_actor, restart="temporary", shutdown=shutdown)
        try:
            cell.child_ref = self._supervisor().start_child(spec)
        except ChildStartError as exc:
            cause = exc.__cause__
            while cause is not None and not isinstance(cause, AlreadyRegistered):
                cause = cause.__cause__
            if isinstance(cause, AlreadyRegistered):
                raise cause from None
            raise
        log.info("agent.started", session=key.session, role=key.role, index=key.index)
        return handle

    def _start_supervised(
        self, cell: AgentCell, child_id: str, start_actor: Any
    ) -> pykka.ActorRef[Any]:
        """A one-child supervisor for a transient agent, on the agent's loop: the agent's own
        restart budget, and no thread."""
        sup = self._runtime.config.supervision
        supervisor = Supervisor.start(
            [ChildSpec(id="agent", start=start_actor, restart="transient", shutdown=sup.shutdown)],
            max_restarts=sup.max_restarts,
            max_seconds=sup.max_seconds,
            name=child_id,
            loop=cell.loop,
        )

        def exited(_ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
            if reason.abnormal:
                cell.log.error("agent.gave_up", reason=str(reason))
                cell.on_loop(lambda: cell.end(f"agent_crashed: {reason}"))
            else:
                cell.on_loop(lambda: cell.end("agent_stopped"))

        monitor(supervisor.ref, exited)
        return supervisor.ref

    def spawn(self, parent: Agent, role: str, options: dict[str, Any]) -> Agent:
        """`ToolContext.spawn` for tools of `parent`: the next free index of `role` in the
        parent's session, tied to the parent (stopped with it)."""
        options = _spawned(options)
        for key in self._spawn_keys(parent, role):
            with contextlib.suppress(AlreadyRegistered):
                return self._start(key, options, parent=parent._cell)
        raise AlreadyRegistered(AgentKey(parent.key.session, role, -1), None)

    async def aspawn(self, parent: Agent, role: str, options: dict[str, Any]) -> Agent:
        """`spawn`, awaited on the runtime's event loop (`ToolContext.aspawn` in an `async
        def` tool): the subagent starts in place, as `astart` starts an agent.

        Raises:
            RuntimeError: not called on the runtime's loop.
        """
        self._check_on_loop("Subagents.aspawn()")
        options = _spawned(options)
        for key in self._spawn_keys(parent, role):
            with contextlib.suppress(AlreadyRegistered):
                return await self._astart(key, options, parent=parent._cell)
        raise AlreadyRegistered(AgentKey(parent.key.session, role, -1), None)

    def _spawn_keys(self, parent: Agent, role: str) -> Iterator[AgentKey]:
        """The keys a spawn of `role` tries, each the next free index of `role` in the
        parent's session when it is asked for (another start may take it first)."""
        session = parent.key.session
        for _ in range(SPAWN_ATTEMPTS):
            yield AgentKey(session, role, self._runtime.registry.next_index(session, role))

    def stop(self, agent_or_key: Agent | AgentKey | tuple[str, str, int]) -> bool:
        """Stop an agent (its run aborted, its spawned subagents stopped first); False if no
        such agent was running."""
        agent = self._resolve(agent_or_key)
        if agent is None:
            return False
        cell = agent._cell
        for child in sorted(cell.children, key=lambda c: c.key):
            if isinstance(child.handle, Agent):
                self.stop(child.handle)
        ref = cell.child_ref
        stopped = ref is not None and self._supervisor().terminate_child(ref)
        if not cell.stopped:  # a normal exit ended it already: no wake-up of the loop for it
            cell.on_loop(lambda: cell.end("agent_stopped"))
        return stopped

    async def astop(self, agent_or_key: Agent | AgentKey | tuple[str, str, int]) -> bool:
        """`stop`, awaited on the runtime's event loop (`Agent.astop` there): the agent's
        actor stops in place, its spawned subagents first, with no thread and no wait (its
        run is aborted and ends on the loop afterwards, as after `stop`).

        Raises:
            RuntimeError: not called on the runtime's loop.
        """
        self._check_on_loop("Subagents.astop()")
        agent = self._resolve(agent_or_key)
        if agent is None:
            return False
        cell = agent._cell
        for child in sorted(cell.children, key=lambda c: c.key):
            if isinstance(child.handle, Agent):
                await self.astop(child.handle)
        ref = cell.child_ref
        # An agent is a temporary child its caller started: none left (None) means stopped.
        stopped = ref is not None and bool(self._supervisor().terminate_temporary(ref))
        cell.end("agent_stopped")  # idempotent: a normal exit may have ended it already
        return stopped

    def _resolve(self, agent_or_key: Agent | AgentKey | tuple[str, str, int]) -> Agent | None:
        if isinstance(agent_or_key, Agent):
            return agent_or_key
        found = self._runtime.registry.lookup(AgentKey.of(agent_or_key))
        return found if isinstance(found, Agent) else None

    def list(self) -> list[Agent]:
        """Every live agent, sorted by key."""
        return [a for _, a in self._runtime.registry.list() if isinstance(a, Agent)]

    def count(self) -> int:
        """How many agents are live."""
        return len(self.list())

    def stop_all(self) -> int:
        """Stop every agent; returns how many were stopped."""
        return sum(1 for agent in self.list() if self.stop(agent))


# How many free indexes a spawn tries when other starts keep taking them first.
SPAWN_ATTEMPTS = 100


def _spawned(options: dict[str, Any]) -> dict[str, Any]:
    """A spawned subagent's options: it works from the task it is given, not from the whole
    session's history, and its scratch work stays out of the session unless asked for."""
    return {"memory": MemoryPolicy.none(), **options}


class _ActorStart:
    """`ChildSpec.start` of an agent: a new `AgentActor` of `cell` on its loop. One object
    per agent for the cyclic collector to walk, where a closure took four."""

    __slots__ = ("cell",)

    def __init__(self, cell: AgentCell) -> None:
        self.cell = cell

    def __call__(self) -> pykka.ActorRef[Any]:
        return AgentActor.start(self.cell, loop=self.cell.loop)


def _given(
    options: Any, output_type: Any, on_failure: Callable[[Exception], Any] | None
) -> dict[str, Any]:
    given: dict[str, Any] = dict(options)
    if output_type is not None:
        given["output_type"] = output_type
    if on_failure is not None:
        given["on_failure"] = on_failure
    return given
