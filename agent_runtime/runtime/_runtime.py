"""Runtime: the root supervision tree of one agent runtime, and the facade over it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import gc
import itertools
import os
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar, Unpack, cast, overload

import pykka

from agent_runtime._counters import RuntimeCounters
from agent_runtime._gauges import watch as watch_in_gauges
from agent_runtime._key import AgentKey
from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime.abort import RUNTIME_STOPPING, AbortSignal, AbortTable
from agent_runtime.agent import Agent, AgentOptionsDict
from agent_runtime.agent._approvals import PendingApproval
from agent_runtime.agent._handle import runs_in_flight
from agent_runtime.agent._options import model_of
from agent_runtime.config import RuntimeConfig, load_config
from agent_runtime.llm.base import ChatModel
from agent_runtime.memory import SessionMemory, SessionWriter, open_session_memory
from agent_runtime.registry import AgentRegistry
from agent_runtime.runtime._holder import TableOwner
from agent_runtime.runtime._introspection import Introspection, RuntimeStats, RuntimeTree
from agent_runtime.runtime._model_overrides import ModelOverrides
from agent_runtime.runtime._status_socket import StatusSocket
from agent_runtime.runtime._subagents import Subagents
from agent_runtime.telemetry import configure_logging as configure_structlog
from agent_runtime.telemetry import install_exporter, record_log_content
from agent_runtime.templates import PromptTemplates
from agent_runtime.tools import ToolRegistry
from agent_runtime.workflows import Workflows
from supervisors import (
    AsyncTaskSupervisor,
    ChildSpec,
    DynamicSupervisor,
    LoopFuture,
    Supervisor,
    SupervisorStopped,
    TaskSupervisor,
)
from supervisors._log import get_logger

T = TypeVar("T")
log = get_logger(__name__)

CHILD_IDS = ("abort_table", "registry", "loop_tasks", "tool_tasks", "subagents")

_runtime_ids = itertools.count(1)


class AsyncStart:
    """What `Runtime.astart()` returns: await it for the runtime, or use it as an async
    context manager (the runtime stops with `astop` on exit)."""

    def __init__(
        self, start: Callable[[asyncio.AbstractEventLoop | None], Runtime], share_loop: bool
    ) -> None:
        self._start = start
        self._share_loop = share_loop
        self._runtime: Runtime | None = None

    async def _started(self) -> Runtime:
        loop = asyncio.get_running_loop() if self._share_loop else None
        return await asyncio.to_thread(self._start, loop)

    def __await__(self) -> Generator[Any, None, Runtime]:
        return self._started().__await__()

    async def __aenter__(self) -> Runtime:
        self._runtime = await self._started()
        return self._runtime

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runtime is not None:
            await self._runtime.astop()


class Runtime:
    """One agent runtime: a root `Supervisor` (one_for_one) and the tables it owns.

    The root's children, started in this order and stopped in reverse: `abort_table`,
    `registry` (actors that own the shared tables), `loop_tasks` (an AsyncTaskSupervisor: the
    one event loop that runs every agent's actor, every run and all LLM I/O, on a thread of
    its own, or on the host application's loop when started with `astart(share_loop=True)`),
    `tool_tasks` (a TaskSupervisor for synchronous tools) and `subagents` (a
    DynamicSupervisor of agents, which live on that loop: they stop before it).
    The tables belong to this object, so a restart of their owner actors loses nothing.
    Several runtimes live in one process independently. Use as a context manager to stop
    it on exit. `tree()` and `stats()` show what it is doing without waiting on it; with
    `telemetry.status_socket` set, it serves them on that Unix socket (`agent-runtime top`).
    """

    def __init__(
        self,
        config: RuntimeConfig,
        name: str,
        host_loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config = config
        self.name = name
        self._host_loop = host_loop  # the application's, when the runtime shares it
        self.abort_table = AbortTable()
        self.registry: AgentRegistry[Any] = AgentRegistry()
        self._lock = threading.Lock()
        self._subagents: DynamicSupervisor | None = None
        self._loop_tasks: AsyncTaskSupervisor | None = None
        self._tool_tasks: TaskSupervisor | None = None
        self._supervisor: Supervisor | None = None
        self._stopped = False
        self.counters = RuntimeCounters()  # what stats() reads; agents count into it
        self._introspection = Introspection(
            name,
            self.registry,
            self.counters,
            lambda: self._supervisor is not None and self._supervisor.alive,
        )
        self._status_socket: StatusSocket | None = None
        self.tools = ToolRegistry()
        self.memory: SessionMemory = open_session_memory(config)  # with its compaction trigger
        self.memory_writer = SessionWriter(self.memory, name=f"{name}.session-writer")
        self.subagents = Subagents(self, lambda: self.subagents_supervisor)
        self._model_overrides = ModelOverrides()
        # One thread for astart_agent from a loop other than the runtime's: a start is mostly
        # CPU, and more threads would only contend with the host's loop for the GIL. Made at
        # its first use only: ThreadPoolExecutor starts no thread before a submit.
        self._starter = ThreadPoolExecutor(1, thread_name_prefix=f"{name}.starter")
        self._workflows: Workflows | None = None  # made at first use (`workflows`)

    @classmethod
    def start(
        cls,
        config: RuntimeConfig | str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        configure_logging: bool = False,
        freeze_gc: bool = False,
    ) -> Runtime:
        """Start a runtime: configure logging (see below), then start the tree.

        `config` is a RuntimeConfig, a path to a TOML file, or None for `load_config()`
        (config/runtime.toml and `AGENT_RUNTIME_*` overrides). Logging is the application's:
        by default structlog and `logging` are left alone (the runtime's events go to
        structlog once configured, else to `logging`, which shows warnings on stderr). With
        `configure_logging=True`, or `[telemetry] configure_logging = true`, structlog is set
        up from `[telemetry]` unless the application configured it first, which is never
        overridden. `[telemetry] exporter = "console"` or `"otlp"` installs the global
        OpenTelemetry providers, once per process (`telemetry.install_exporter`); the default
        `"none"` installs nothing. Blocks while the tree starts: from asyncio use `astart`.

        `freeze_gc=True` is for a server that starts its runtime once its own set-up is done:
        once the tree has started, a full garbage collection, then `gc.freeze()`, so the
        objects alive then (modules, the application's and the runtime's set-up) are never
        walked by the cyclic collector again. A full collection of a process of many agents
        then walks only what was made since: without it, the burst of a hundred agents'
        starts in a server took one of 30-90 ms on its loop's thread, the longest stall of
        all. The freeze is process-wide and not undone at `stop()`; a reference cycle among
        the frozen objects that later becomes garbage is never collected. Off by default.

        Raises:
            ConfigError: the configuration is invalid (or names an exporter not installed),
                or `telemetry.status_socket` cannot be served (the message says why).
            TypeError: `config` is of another type.
        """
        return cls._start(config, name, configure_logging, None, freeze_gc)

    @classmethod
    def _start(
        cls,
        config: RuntimeConfig | str | os.PathLike[str] | None,
        name: str | None,
        configure_logging: bool,
        host_loop: asyncio.AbstractEventLoop | None,
        freeze_gc: bool,
    ) -> Runtime:
        if config is None or isinstance(config, str | os.PathLike):
            config = load_config(config)
        elif not isinstance(config, RuntimeConfig):
            raise TypeError(
                f"config must be a RuntimeConfig, a path or None, not {type(config).__name__}"
            )
        record_log_content(config.telemetry)
        if configure_logging or config.telemetry.configure_logging:
            configure_structlog(config.telemetry)
        install_exporter(config.telemetry)
        path = config.telemetry.status_socket
        status_socket = StatusSocket.bind(path) if path is not None else None  # fails first
        try:
            runtime = cls(config, name or f"runtime-{next(_runtime_ids)}", host_loop)
            runtime._start_tree()
        except BaseException:
            if status_socket is not None:
                status_socket.close()
            raise
        watch_in_gauges(runtime)
        if status_socket is not None:
            runtime._status_socket = status_socket
            status_socket.serve(runtime._introspection.report, name=f"{runtime.name}.status")
        if freeze_gc:
            gc.collect()  # what is garbage now is not frozen with the rest
            gc.freeze()
        log.info("runtime.started", runtime=runtime.name, status_socket=path)
        return runtime

    @classmethod
    def astart(
        cls,
        config: RuntimeConfig | str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        configure_logging: bool = False,
        share_loop: bool = True,
        freeze_gc: bool = False,
    ) -> AsyncStart:
        """`start` for asyncio hosts, on a worker thread so the host's loop goes on:
        `runtime = await Runtime.astart(...)`, or `async with Runtime.astart(...) as runtime:`
        (stopped with `astop` on exit). Errors are those of `start`, raised when awaited.

        With `share_loop` (the default) the runtime does its event-loop work (every run's
        loop, all LLM I/O, `async def` tools) as tasks on the loop that awaits this, instead
        of on a thread of its own: the events a host streams are made on its own loop, with
        no second thread competing with it for the GIL. Its agents are actors on that loop
        too (no thread each). Then:
        - stop the runtime (`await runtime.astop()`, or leave the `async with`) before that
          loop ends; a runtime whose loop was closed under it fails what is left on it with
          `EventLoopDied`;
        - blocking calls (`agent.run()`, `runtime.stop()`, ...) on that loop's thread raise
          RuntimeError naming their async twin, as they would on the runtime's own loop;
        - an `async def` tool that blocks (CPU work, a synchronous client) holds the host's
          requests too: make such tools plain `def` (they run in `tool_tasks`).
        `share_loop=False` gives the runtime its own event-loop thread, as `start` does.
        `freeze_gc` is `start`'s.
        """
        return AsyncStart(
            lambda loop: cls._start(config, name, configure_logging, loop, freeze_gc), share_loop
        )

    def _start_tree(self) -> None:
        sup = self.config.supervision

        def start_subagents() -> pykka.ActorRef[Any]:
            handle = DynamicSupervisor.start(
                max_children=sup.max_agents,
                max_restarts=sup.max_restarts,
                max_seconds=sup.max_seconds,
                name=f"{self.name}.subagents",
            )
            self._subagents = handle
            return handle.ref

        def start_loop_tasks() -> pykka.ActorRef[Any]:
            handle = AsyncTaskSupervisor.start(
                name=f"{self.name}.loop_tasks", stop_timeout=sup.shutdown, loop=self._host_loop
            )
            self._loop_tasks = handle
            return handle.ref

        def start_tool_tasks() -> pykka.ActorRef[Any]:
            handle = TaskSupervisor.start(
                max_workers=sup.tool_workers,
                name=f"{self.name}.tool_tasks",
                stop_timeout=sup.shutdown,
            )
            self._tool_tasks = handle
            return handle.ref

        shutdown = sup.shutdown
        specs = [
            ChildSpec(id="abort_table", start=lambda: TableOwner.start(self.abort_table)),
            ChildSpec(id="registry", start=lambda: TableOwner.start(self.registry)),
            # The loop and the pool wait up to `shutdown` for their tasks; a little more here
            # lets them finish that wait before the root gives up on them.
            ChildSpec(id="loop_tasks", start=start_loop_tasks, shutdown=shutdown + 1.0),
            ChildSpec(id="tool_tasks", start=start_tool_tasks, shutdown=shutdown + 1.0),
            # After the loop its agents live on: stopped first (reverse order), before it.
            ChildSpec(
                id="subagents",
                start=start_subagents,
                type="supervisor",
                # agents get `shutdown` each, in turn; the whole tree is bounded by stop()
                shutdown="infinity",
            ),
        ]
        children = self._introspection.watched(specs, agents_under="subagents")
        self._supervisor = Supervisor.start(
            children,
            strategy="one_for_one",
            max_restarts=sup.max_restarts,
            max_seconds=sup.max_seconds,
            name=self.name,
        )

    # -- the tree -------------------------------------------------------------------------------

    @property
    def supervisor(self) -> Supervisor:
        """The root supervisor."""
        assert self._supervisor is not None
        return self._supervisor

    @property
    def loop_tasks(self) -> AsyncTaskSupervisor:
        """The event loop that runs every run's loop and all LLM I/O (current incarnation)."""
        assert self._loop_tasks is not None
        return self._loop_tasks

    @property
    def tool_tasks(self) -> TaskSupervisor:
        """The thread pool for synchronous tools (current incarnation)."""
        assert self._tool_tasks is not None
        return self._tool_tasks

    @property
    def subagents_supervisor(self) -> DynamicSupervisor:
        """The DynamicSupervisor under which every agent of this runtime runs."""
        assert self._subagents is not None
        return self._subagents

    @property
    def templates(self) -> PromptTemplates:
        """The prompt templates, kept in this runtime's session memory store (the one
        `PromptTemplates.of(self.memory)`, which its agents' `Template` prompts read)."""
        return PromptTemplates.of(self.memory)

    @property
    def workflows(self) -> Workflows:
        """The durable workflows of this runtime (`agent_runtime.workflows`), kept in its
        session memory store; made at first use. `stop()` halts them first, leaving their
        records as committed, so `workflows.resume()` continues them after a restart."""
        with self._lock:
            workflows = self._workflows
            made = workflows is None
            if workflows is None:
                workflows = self._workflows = Workflows(self)
        if made and self._stopped:  # first used after stop(): it refuses, as a stopped one
            workflows.stop(0.0)
        return workflows

    @property
    def stopping(self) -> bool:
        """True once `stop()` was called: agents start no new runs (AgentStopped)."""
        return self._stopped

    @property
    def alive(self) -> bool:
        """True until `stop()` or until the root supervisor gave up."""
        return not self._stopped and self.supervisor.alive

    # -- introspection --------------------------------------------------------------------------

    def tree(self) -> RuntimeTree:
        """A snapshot of the supervision tree and of every live agent's status.

        Cheap and never blocking: it reads what each agent last published (an immutable
        snapshot swapped in by its actor and its run driver) and never sends an actor a
        message, so it answers at once however busy the agents are, also from a tool. The
        price is freshness: it may be a few milliseconds behind the agents (a fact on its
        way to an actor is not in it yet). An agent between two incarnations (a transient
        restart) is missing from it for that moment.
        """
        return self._introspection.tree()

    def pending_approvals(self) -> list[PendingApproval]:
        """Every tool call waiting for `approve` / `deny`, of every live agent (subagents
        included; `PendingApproval.agent` says whose), oldest request first. Cheap and never
        blocking, as `tree()`: it reads what each agent's actor last published."""
        return self._introspection.pending_approvals()

    def stats(self) -> RuntimeStats:
        """The runtime's counters since it started (runs and tool calls by outcome, turns,
        tokens, retries, restarts, dropped events). Cheap and never blocking, as `tree()`;
        a few milliseconds behind the agents at most."""
        return self._introspection.stats()

    # -- agents ---------------------------------------------------------------------------------

    @overload
    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: None = None,
        on_failure: Callable[[Exception], str] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[str]: ...

    @overload
    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: type[T],
        on_failure: Callable[[Exception], T] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[T]: ...

    @overload
    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: object = None,
        on_failure: None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]: ...

    def start_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]:
        """Start an agent under `key` (same as `runtime.subagents.start`): the options are
        `AgentOptionsDict`'s keywords; `model` is a ChatModel or the name of an `[llm]`
        profile (or pool) of the runtime's config. With `output_type=Book` it is an
        `Agent[Book]` (its runs' `output` a validated `Book`, `on_failure` returning one),
        without an `Agent[str]` (`output` is the answer's text).

        Raises:
            AlreadyRegistered: a live agent holds the key.
            TypeError: an unknown option (named); ValueError: an invalid key or value.
            ConfigError: `model=` names no configured profile (the known ones named), or
                one that cannot be built.
        """
        return self.subagents.start(
            key, output_type=output_type, on_failure=on_failure, **agent_options
        )

    @overload
    async def astart_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: None = None,
        on_failure: Callable[[Exception], str] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[str]: ...

    @overload
    async def astart_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: type[T],
        on_failure: Callable[[Exception], T] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[T]: ...

    @overload
    async def astart_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: object = None,
        on_failure: None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]: ...

    async def astart_agent(
        self,
        key: AgentKey | tuple[str, str, int],
        *,
        output_type: Any = None,
        on_failure: Callable[[Exception], Any] | None = None,
        **agent_options: Unpack[AgentOptionsDict],
    ) -> Agent[Any]:
        """`start_agent` for asyncio hosts. On the runtime's own loop (a runtime started with
        `Runtime.astart()`, or a tool's coroutine) the agent starts in place: no thread and no
        hop, its history read on the session writer's threads while the loop goes on. From
        another loop the start runs on a worker thread, so a burst of starts (a request each)
        never holds the host's loop. Options, types and errors are `start_agent`'s."""
        loop = asyncio.get_running_loop()
        if self._on_own_loop(loop):
            return await self.subagents.astart(
                key, output_type=output_type, on_failure=on_failure, **agent_options
            )
        start = functools.partial(
            self.start_agent,
            key,
            output_type=output_type,
            on_failure=on_failure,
            **agent_options,
        )
        agent: Agent[Any] = await loop.run_in_executor(self._starter, start)
        return agent

    def _on_own_loop(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether `loop` is this running runtime's own: its async twins work in place there."""
        tasks = self._loop_tasks
        return tasks is not None and loop is tasks.loop and not self._stopped

    def spawn_subagent(self, parent: Agent, role: str, options: dict[str, Any]) -> Agent:
        """Start a subagent of `parent` (`ToolContext.spawn`): the next free index of `role` in
        the parent's session, stopped with the parent."""
        return self.subagents.spawn(parent, role, options)

    async def aspawn_subagent(self, parent: Agent, role: str, options: dict[str, Any]) -> Agent:
        """`spawn_subagent` awaited (`ToolContext.aspawn`): in place on the runtime's own
        loop, no thread and no hop; from another loop on a worker thread."""
        if self._on_own_loop(asyncio.get_running_loop()):
            return await self.subagents.aspawn(parent, role, options)
        return await asyncio.to_thread(self.spawn_subagent, parent, role, options)

    def _runs_in_flight(self, deadline: float) -> list[LoopFuture[Any]]:
        """The outcomes of the runs whose end is still to be delivered, gathered on the loop
        in one hop (none when the loop is gone or does not answer by `deadline`)."""
        agents = self.subagents.list()
        if not agents or self._loop_tasks is None:
            return []
        try:
            gathered = self._loop_tasks.submit(runs_in_flight(agents))
            return gathered.result(max(deadline - time.monotonic(), 0.0))
        except (RuntimeError, TimeoutError, concurrent.futures.CancelledError):
            return []

    def stop_agent(self, agent: Agent) -> bool:
        """Stop `agent` and its spawned subagents (same as `runtime.subagents.stop`)."""
        return self.subagents.stop(agent)

    async def astop_agent(self, agent: Agent) -> bool:
        """`stop_agent` for asyncio hosts (`Agent.astop`). On the runtime's own loop the
        agent stops in place: no thread and no hop. From another loop the stop runs on a
        worker thread, and that loop goes on."""
        if self._on_own_loop(asyncio.get_running_loop()):
            return await self.subagents.astop(agent)
        return await asyncio.to_thread(self.stop_agent, agent)

    @contextlib.contextmanager
    def override_model(self, agent_or_role: Agent | str, model: ChatModel | str) -> Iterator[None]:
        """For tests: inside the block, `agent_or_role` runs with `model` instead of its own.

        `agent_or_role` is an Agent (the agent under its key) or a role name (every agent of
        that role, also ones started inside the block). Each run started inside the block
        uses `model` from its first call to its end; a run started after the block (also
        after an exception) uses the agent's own model again, as it is then (a `set_model`
        inside the block counts). Nested overrides restore in order, the innermost matching
        one wins; thread-safe. The agents' `state().model` stays their own model. `model`
        may be the name of an `[llm]` profile (or pool) of the runtime's config.

        Raises:
            TypeError: `agent_or_role` is neither an Agent nor a str, or `model` is not a
                ChatModel instance (each named).
            ValueError: an empty role.
            ConfigError: `model` names no configured profile (the known ones named).
        """
        chosen = cast(ChatModel, model_of(model, self.config))  # not one: TypeError below
        with self._model_overrides.override(agent_or_role, chosen):
            yield

    def model_for_run(self, key: AgentKey, model: ChatModel) -> ChatModel:
        """The model a run of the agent under `key` starts with (`model`, its own, unless
        `override_model` says otherwise)."""
        return self._model_overrides.model_for_run(key, model)

    # -- the loop host (agent_runtime.loop.LoopHost) -----------------------------------------

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a task on the runtime's event loop."""
        return self.loop_tasks.submit(coro)

    def run_sync(self, fn: Callable[[], T]) -> Future[T]:
        """Run a synchronous call (a tool) in the `tool_tasks` pool."""
        return self.tool_tasks.submit(fn)

    def new_signal(self) -> AbortSignal:
        """A new signal of the runtime's abort table (aborted by `stop()`)."""
        return self.abort_table.new()

    # -- lifecycle ------------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Abort every live signal, then stop the tree in reverse order within `timeout`.

        From the first moment agents start no new run (`AgentStopped`); running ones get
        their abort grace to pair their tool calls before the tree stops. Idempotent. When
        it returns, no thread of this runtime is left running, except threads of tools or
        handlers that ignored their stop and were abandoned (logged).

        Raises:
            TimeoutError: the tree did not stop within `timeout` seconds.
            RuntimeError: called on a runtime's event-loop thread (from a tool). On an
                application's running loop it warns once (`BlockingCallWarning`): use
                `await runtime.astop()` there.
        """
        refuse_on_loop("Runtime.stop()", "`await runtime.astop()`", on_host_loop="warn")
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._status_socket is not None:  # a watcher sees the runtime gone from now on
            self._status_socket.close()
        started = time.monotonic()
        deadline = started + timeout
        if self._workflows is not None:  # before the aborts: a stop is no step failure
            self._workflows.stop(timeout / 2)
        # Every running run ends with Canceled("runtime_stopping") at its subscribers, within
        # its abort grace: an SSE client sees a terminal before the tree goes away.
        aborted = self.abort_table.abort_all(RUNTIME_STOPPING)
        # Let aborted runs pair their tool calls (abort grace) before their loop goes away.
        for ended in self._runs_in_flight(deadline):
            ended.wait(max(deadline - time.monotonic(), 0.0))
        # Tools still running now were abandoned by their runs (abort grace). Give them at
        # most half of what is left, so the pool's own shutdown wait cannot outlast `timeout`.
        if self._tool_tasks is not None:
            left = max(deadline - time.monotonic(), 0.0)
            if not self._tool_tasks.drain(min(left / 2, self.config.supervision.shutdown)):
                log.warning("runtime.stop.abandoned_tools", runtime=self.name)
        with contextlib.suppress(SupervisorStopped):  # the root already gave up
            self.supervisor.stop(timeout=max(deadline - time.monotonic(), 0.1))
        if not self.memory_writer.close(timeout=max(deadline - time.monotonic(), 1.0)):
            log.warning("runtime.stop.memory_writer_busy", runtime=self.name)
        self.memory.close()
        self._starter.shutdown(wait=False, cancel_futures=True)
        log.info(
            "runtime.stopped",
            runtime=self.name,
            aborted_signals=aborted,
            seconds=round(time.monotonic() - started, 3),
        )

    async def astop(self, timeout: float = 10.0) -> None:
        """`stop` for asyncio hosts: the stop runs on a worker thread and the host's loop goes
        on meanwhile (every open run's subscribers get its `Canceled` first, as with `stop`).

        Raises:
            TimeoutError: as `stop`.
            RuntimeError: awaited on this runtime's own event loop (from one of its tools).
        """
        loop_tasks = self._loop_tasks
        on_own_loop = (
            self._host_loop is None
            and loop_tasks is not None
            and asyncio.get_running_loop() is loop_tasks.loop
        )
        if on_own_loop:
            raise RuntimeError(
                "Runtime.astop() awaited on the runtime's own event loop (from a tool): "
                "a runtime cannot wait for its own loop to stop"
            )
        await asyncio.to_thread(self.stop, timeout)

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<Runtime {self.name} alive={self.alive}>"
