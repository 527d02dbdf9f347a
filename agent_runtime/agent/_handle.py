"""Agent: the handle users hold; each call is a message to the agent's actor."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, Generic, TypeVar, cast, get_args, overload

import pykka

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime._loop_guard import refuse_on_loop
from agent_runtime._run_ids import new_run_id
from agent_runtime.agent._cell import AgentCell, Incarnation
from agent_runtime.agent._history import as_messages
from agent_runtime.agent._options import model_of
from agent_runtime.agent._protocol import (
    Abort,
    Decide,
    FollowUp,
    GetState,
    IdleWait,
    Queued,
    Reset,
    SetMode,
    SetModel,
    SetSystemPrompt,
    SetTools,
    StartRun,
    Steer,
    Subscribe,
    Unsubscribe,
)
from agent_runtime.agent._run_events import RunEvents
from agent_runtime.agent._state import AgentState, OutputT, RunResult, run_result
from agent_runtime.config import QueueMode
from agent_runtime.event_stream import OverflowPolicy, Subscription
from agent_runtime.events import Event
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop._output import OutputSpec
from agent_runtime.loop._trace import current_links
from agent_runtime.messages import Message
from agent_runtime.templates import PromptTemplates, Template, TemplateError
from agent_runtime.tools import Tool
from supervisors import LoopFuture

# An actor answers every call at once (no handler waits); this bounds a call to an actor
# wedged in a bug.
CALL_TIMEOUT = 30.0
# How long a call waits for a crashed `transient` agent's next incarnation (it returns at once
# when the agent ends for good instead).
RESTART_WAIT = 30.0
# Calls that can be sent again to the next incarnation when the actor died before answering
# (doing them twice is doing them once); any other such call raises AgentStopped.
IDEMPOTENT = (
    GetState,
    IdleWait,
    Subscribe,
    Abort,
    Reset,
    SetSystemPrompt,
    SetModel,
    SetTools,
    SetMode,
)

OnFailure = Callable[[Exception], Any]
# The output type of one run given its own `output_type=`.
RunOutputT = TypeVar("RunOutputT")


class _Int(int):
    """A default that stands for a config value; told apart from a caller's by identity."""


class _Str(str):
    """A default that stands for a config value; told apart from a caller's by identity."""


class _Float(float):
    """A default that stands for a config value; told apart from a caller's by identity."""


# `subscribe()`'s defaults: equal to the shipped `[subscription]` values, so the signature
# reads as DESIGN.md writes it, while a subscription made without them takes the runtime's.
MAX_QUEUE: Final[int] = _Int(1000)
OVERFLOW: Final[OverflowPolicy] = cast(OverflowPolicy, _Str("block"))
BLOCK_TIMEOUT: Final[float] = _Float(30.0)


class Agent(Generic[OutputT]):
    """The handle of one agent: each call is a typed message to the agent's actor, which
    lives on the runtime's event loop, so every method is thread-safe and returns promptly,
    also while a run is busy.

    Generic in its output, for type checkers: `start_agent(key, output_type=Book)` gives an
    `Agent[Book]`, whose `run`/`arun` return `RunResult[Book]` (a run's own `output_type=`
    types that run's result); without `output_type` it is an `Agent[str]`, whose results'
    `output` is the answer's text. A bare `Agent` (an agent found by key) is `Agent[Any]`.

    From another thread a call is one hop to the loop and back; on the agent's loop (an
    `async def` tool, a host that shares the loop) the actor answers in place, after the
    messages already in its mailbox. Calls that only need the actor's answer (`state()`,
    `prompt()`, `steer()`, `follow_up()`, `abort()`, `subscribe()`, `set_*`) work
    everywhere; calls that wait for a run or a start (`run`, `wait_for_idle`, `reset`,
    `stream`, `stop`) raise RuntimeError on an event loop's thread, naming their async twin.

    The handle outlives restarts: after a `transient` agent crashed and was restarted,
    `registry.lookup(key) is agent` still, its open subscriptions go on (they get the
    interrupted run's `Error("agent_crashed: ...")`, then the new actor's events) and the
    values set with `set_*` stay; the new actor's history is rebuilt from session memory
    (empty with `MemoryPolicy.none()`), and queued steering and follow-up messages are lost.
    A call made while the agent restarts waits for the new actor (up to 30 s; on an event
    loop it does not wait: AgentStopped).

    Raises (every method but `stop()`, which is idempotent, and the `key`, `alive` and `ref`
    properties): AgentStopped once the agent was stopped (or crashed for good).
    """

    def __init__(self, cell: AgentCell) -> None:
        self._cell = cell
        cell.handle = self

    # -- identity ---------------------------------------------------------------------------------

    @property
    def key(self) -> AgentKey:
        """The agent's `(session, role, index)`."""
        return self._cell.key

    @property
    def ref(self) -> pykka.ActorRef[Any]:
        """The current actor's pykka ref (for `supervisors.kill` and monitoring); it changes
        when a `transient` agent is restarted."""
        ref = self._cell.ref
        assert ref is not None
        return ref

    @property
    def alive(self) -> bool:
        """True until the agent is stopped for good (False while a crashed agent restarts)."""
        cell = self._cell
        actor = cell.actor
        return not cell.stopped and actor is not None and actor.actor_ref.is_alive()

    # -- messages to the actor --------------------------------------------------------------------

    def _current(self, deadline: float) -> Incarnation:
        """The incarnation taking calls now; off an event loop, waits for a restarting one.

        Raises:
            AgentStopped: the agent ended (or did not come back by `deadline`).
        """
        cell = self._cell
        while True:
            next_one = cell.incarnation  # read first: an attach after this sets it
            if cell.stopped:
                raise AgentStopped(cell.key)
            actor = cell.actor
            if actor is not None and actor.actor_ref.is_alive():
                return actor
            if _on_a_loop():
                raise AgentStopped(cell.key)
            left = deadline - time.monotonic()
            if left <= 0 or not next_one.wait(left):
                raise AgentStopped(cell.key)

    async def _acurrent(self, deadline: float) -> Incarnation:
        cell = self._cell
        while True:
            next_one = cell.incarnation  # read first: an attach after this sets it
            if cell.stopped:
                raise AgentStopped(cell.key)
            actor = cell.actor
            if actor is not None and actor.actor_ref.is_alive():
                return actor
            left = deadline - time.monotonic()
            try:
                await asyncio.wait_for(_awaited(next_one), left)
            except TimeoutError:
                raise AgentStopped(cell.key) from None

    def _ask(self, message: Any) -> Any:
        """The actor's answer to `message` (its exception raised here)."""
        deadline = time.monotonic() + RESTART_WAIT
        for _ in range(3):
            actor = self._current(deadline)
            try:
                if actor.on_loop_thread():
                    return actor.handle_now(message)
                future = _asked(actor, message)
                if not future.wait(CALL_TIMEOUT):
                    raise TimeoutError(
                        f"agent {tuple(self.key)!r} did not answer {type(message).__name__} "
                        f"within {CALL_TIMEOUT}s"
                    )
                return future.get()
            except pykka.ActorDeadError:
                if not isinstance(message, IDEMPOTENT):
                    raise AgentStopped(self.key) from None
        raise AgentStopped(self.key)

    async def _aask(self, message: Any) -> Any:
        """`_ask` for asyncio callers: it never blocks their loop."""
        deadline = time.monotonic() + RESTART_WAIT
        for _ in range(3):
            actor = await self._acurrent(deadline)
            try:
                if actor.on_loop_thread():
                    return actor.handle_now(message)
                future = _asked(actor, message)
                return await asyncio.wait_for(_awaited(future), CALL_TIMEOUT)
            except pykka.ActorDeadError:
                if not isinstance(message, IDEMPOTENT):
                    raise AgentStopped(self.key) from None
        raise AgentStopped(self.key)

    def _tell(self, message: Any) -> None:
        """Send `message` without waiting for an answer (from any thread, a finalizer too).

        Raises:
            AgentStopped: the agent ended, or is between incarnations right now.
        """
        cell = self._cell
        actor = cell.actor
        if cell.stopped or actor is None:
            raise AgentStopped(cell.key)
        try:
            actor.actor_ref.tell(message)
        except pykka.ActorDeadError:
            raise AgentStopped(cell.key) from None

    # -- runs -------------------------------------------------------------------------------------

    def _start_message(
        self,
        input: str | Message | Sequence[Message] | None,
        output: OutputSpec | None,
        subscription: Subscription | None = None,
    ) -> StartRun:
        prompts = None if input is None else tuple(as_messages(input))
        links = tuple(current_links())
        return StartRun(new_run_id(), prompts, links, output, LoopFuture(), subscription)

    async def _astart(self, input: str | Message | Sequence[Message]) -> StartRun:
        """Start a run from asyncio code; the start it was (its id, its outcome)."""
        start = self._start_message(input, None)
        await self._aask(start)
        return start

    def _launch(self, start: StartRun) -> None:
        """Send `start` to the actor from a thread that will wait on its outcome: the start's
        failure (busy, stopped, an actor gone before it) fails the outcome, so the caller
        wakes once, for the run's end."""
        actor = self._current(time.monotonic() + RESTART_WAIT)
        outcome = start.outcome
        try:
            reply = _asked(actor, start)
        except pykka.ActorDeadError:
            raise AgentStopped(self.key) from None

        def answered(reply: LoopFuture[Any]) -> None:
            if outcome.settled:
                return
            try:
                reply.get()
            except pykka.ActorDeadError:
                outcome.set_exception((AgentStopped, AgentStopped(self.key), None))
            except BaseException as exc:
                outcome.set_exception((type(exc), exc, exc.__traceback__))

        reply.add_done_callback(answered)

    def _output(
        self, output_type: Any, output_retries: int | None, on_failure: OnFailure | None
    ) -> tuple[OutputSpec | None, OnFailure | None]:
        """This run's typed output and fallback: each given value, else the agent's default."""
        options = self._cell.options
        if on_failure is not None and not callable(on_failure):
            raise TypeError(
                "on_failure must be a callable taking the run's exception and returning the "
                f"fallback output, not {type(on_failure).__name__}"
            )
        kind = output_type if output_type is not None else options.output_type
        if output_retries is not None and kind is None:
            raise ValueError("output_retries needs an output_type (of the run or the agent)")
        retries = output_retries if output_retries is not None else options.output_retries
        spec = None if kind is None else OutputSpec.of(kind, retries)
        return spec, on_failure if on_failure is not None else options.on_failure

    def prompt(self, input: str | Message | Sequence[Message]) -> str:
        """Start a run with `input`; returns its run id once the actor took it (at once).

        Once it has returned and the agent's memory policy writes, the prompt is kept: it is
        stored before the run's first model call, so a crash mid-run followed by a
        `transient` restart (or a new process on the same store) finds it at the end of the
        agent's history.

        Raises:
            AgentBusy: a run is in progress (steer or follow up instead).
            TypeError: `input` is not a str, a Message or a list of Messages.
        """
        run_id: str = self._ask(self._start_message(input, None))
        return run_id

    def continue_run(self) -> str:
        """Start a run from the history without new input; returns its run id.

        Raises:
            AgentBusy: a run is in progress.
            CannotContinue: the history is empty or ends with an assistant message.
        """
        run_id: str = self._ask(self._start_message(None, None))
        return run_id

    def steer(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for the running run: it is delivered at the next tool boundary or
        after the current answer (remaining tool calls of the batch are skipped). Sent to an
        idle agent, it waits for the next run.

        A `system_prompt` travels with the message: it applies from the model call that
        message goes into, for the rest of that run (the agent's own prompt stays).

        Raises:
            TypeError: `message` is not a str or a Message, or `system_prompt` not a str.
            ValueError: a list that does not hold exactly one message.
        """
        self._ask(Steer(_queued("steer", message, system_prompt)))

    def follow_up(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for when the running run would otherwise end: it goes on with it.

        A follow-up never starts a run of its own: one sent to an idle agent, or that
        arrives once the run is ending (the actor already handed it no follow-up), waits in
        the queue for the run the next prompt starts, which takes it when that run would
        end. A `system_prompt` travels with the message as with `steer`.

        Raises:
            TypeError: `message` is not a str or a Message, or `system_prompt` not a str.
            ValueError: a list that does not hold exactly one message.
        """
        self._ask(FollowUp(_queued("follow_up", message, system_prompt)))

    def abort(self, reason: str = "user_abort") -> bool:
        """Abort the running run (and its delegated subagents); False if none was running."""
        aborted: bool = self._ask(Abort(reason))
        return aborted

    # -- tool approvals -----------------------------------------------------------------------

    def approve(
        self, tool_call_id: str, *, args: dict[str, Any] | None = None, by: str | None = None
    ) -> None:
        """Let a tool call that waits for approval run: with `args` in place of the model's
        when given (checked here as the model's are: invalid ones raise and the call keeps
        waiting); `by` (who decided) is kept with the decision and on the
        `ToolApprovalDecided` event. A waiting run goes on at once; a turn parked in session
        memory (after a restart) runs its decided calls at the next `continue_run()`.

        Raises:
            ApprovalError: no call `tool_call_id` waits (unknown, or decided already; the
                message names the waiting ones), or `args` are invalid for its tool.
            AgentStopped: the agent was stopped.
        """
        self._ask(Decide(tool_call_id, True, _checked_args(args), None, by))

    def deny(self, tool_call_id: str, reason: str, *, by: str | None = None) -> None:
        """Refuse a tool call that waits for approval: it gets an error result saying
        `reason`, which the model reads, so the run goes on. See `approve`.

        Raises:
            ApprovalError: no call `tool_call_id` waits (unknown, or decided already).
            AgentStopped: the agent was stopped.
        """
        self._ask(Decide(tool_call_id, False, None, str(reason), by))

    async def aapprove(
        self, tool_call_id: str, *, args: dict[str, Any] | None = None, by: str | None = None
    ) -> None:
        """`approve` for asyncio callers: it never blocks their loop."""
        await self._aask(Decide(tool_call_id, True, _checked_args(args), None, by))

    async def adeny(self, tool_call_id: str, reason: str, *, by: str | None = None) -> None:
        """`deny` for asyncio callers: it never blocks their loop."""
        await self._aask(Decide(tool_call_id, False, None, str(reason), by))

    def wait_for_idle(self, timeout: float | None = None) -> None:
        """Block until no run is in progress and the end of the last one was delivered.

        Raises:
            TimeoutError: still running after `timeout` seconds.
            AgentStopped: the agent was stopped before the call.
            RuntimeError: called on an event loop's thread (it would block the loop): use
                `await_idle`.
        """
        refuse_on_loop("Agent.wait_for_idle()", "`await agent.await_idle(...)`")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pending: tuple[LoopFuture[Event], ...] = self._ask(IdleWait())
            if not pending:
                return
            (ended,) = pending
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not ended.wait(left):
                raise TimeoutError(f"agent {tuple(self.key)!r} still running after {timeout}s")

    @overload
    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: None = None,
        output_retries: int | None = None,
        on_failure: Callable[[Exception], OutputT] | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: type[RunOutputT],
        output_retries: int | None = None,
        on_failure: Callable[[Exception], RunOutputT] | None = None,
    ) -> RunResult[RunOutputT]: ...

    @overload
    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: object = None,
        output_retries: int | None = None,
        on_failure: None = None,
    ) -> RunResult[Any]: ...

    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
        on_failure: OnFailure | None = None,
    ) -> RunResult[Any]:
        """Prompt and wait for the run's end.

        With an `output_type` (this run's, else the agent's from `start_agent`), a pydantic
        model or any type a `TypeAdapter` takes, `RunResult.output` is the final answer
        validated as that type: asked for in the provider's structured mode where the model
        has one, else as a forced `final_result` tool call (a model with tools) or as JSON by
        instruction; a text answer that is valid JSON of the type is accepted in every mode.
        An invalid answer is told what failed and asked again, `output_retries` times
        (default: the agent's, 1), before `OutputValidationError` (`raw`, `errors`).
        `on_failure(exception)`, when given (or the agent's), turns a `RunFailed` (that one
        included, not a cancellation) into a result whose `output` is what it returned
        (its `stop_reason` is `"error"`, its `text` and `usage` the failed answer's, its
        `new_messages` empty: the history keeps them); an exception it raises propagates.
        None of these given and none set on the agent: `RunResult.output` is the answer's
        text. For checkers the result is `RunResult[OutputT]` of an `Agent[OutputT]`, or
        `RunResult[X]` for `output_type=X` (a class or an alias such as `list[int]`;
        another type form, `int | None`, gives `RunResult[Any]` and takes no
        `on_failure` unless cast to Any), and `on_failure` must return that type.

        Raises:
            AgentBusy: a run is in progress.
            OutputValidationError: the answer did not validate as `output_type`.
            RunFailed: the run ended with an error (`reason`, `partial`).
            RunCanceled: the run was aborted (`reason`).
            TemplateError: the agent's Template system prompt could not be rendered.
            TimeoutError: it did not end within `timeout` (the run goes on).
            RuntimeError: called on an event loop's thread (use `arun`).
            TypeError: `output_type` is not a type pydantic can validate, or `on_failure`
                is not callable.
            ValueError: `output_retries` is not an int >= 0, or is given without any
                `output_type`.
        """
        refuse_on_loop("Agent.run()", "`await agent.arun(...)`")
        output, fallback = self._output(output_type, output_retries, on_failure)
        start = self._start_message(input, output)
        self._launch(start)
        if not start.outcome.wait(timeout):
            raise TimeoutError(f"run {start.run_id} did not end within {timeout}s")
        return run_result(start.run_id, start.outcome.get(), output, fallback)

    @overload
    async def arun(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: None = None,
        output_retries: int | None = None,
        on_failure: Callable[[Exception], OutputT] | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    async def arun(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: type[RunOutputT],
        output_retries: int | None = None,
        on_failure: Callable[[Exception], RunOutputT] | None = None,
    ) -> RunResult[RunOutputT]: ...

    @overload
    async def arun(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: object = None,
        output_retries: int | None = None,
        on_failure: None = None,
    ) -> RunResult[Any]: ...

    async def arun(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
        on_failure: OnFailure | None = None,
    ) -> RunResult[Any]:
        """`run` for asyncio callers (typed output included): waiting never blocks the
        event loop."""
        output, fallback = self._output(output_type, output_retries, on_failure)
        start = self._start_message(input, output)
        await self._aask(start)
        try:
            terminal = await asyncio.wait_for(_awaited(start.outcome), timeout)
        except TimeoutError:
            raise TimeoutError(f"run {start.run_id} did not end within {timeout}s") from None
        return run_result(start.run_id, terminal, output, fallback)

    async def await_idle(self, timeout: float | None = None) -> None:
        """`wait_for_idle` for asyncio callers: waiting never blocks the event loop.

        Raises:
            TimeoutError: still running after `timeout` seconds.
            AgentStopped: the agent was stopped before the call.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pending: tuple[LoopFuture[Event], ...] = await self._aask(IdleWait())
            if not pending:
                return
            (ended,) = pending
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                await asyncio.wait_for(_awaited(ended), left)
            except TimeoutError:
                raise TimeoutError(
                    f"agent {tuple(self.key)!r} still running after {timeout}s"
                ) from None

    def stream(self, input: str | Message | Sequence[Message]) -> Iterator[Event]:
        """Subscribe, prompt, and yield events until this run's end (inclusive), including
        events of subagents it delegates to (tagged with their keys).

        Raises:
            RuntimeError: called on an event loop's thread (use `astream`).
        """
        refuse_on_loop("Agent.stream()", "`async for event in agent.astream(...)`")
        sub = self._new_subscription(MAX_QUEUE, OVERFLOW, BLOCK_TIMEOUT)
        try:
            # Subscribed by the start itself: nothing of a run that ended before this one.
            run_id: str = self._ask(self._start_message(input, None, sub))
            yield from sub.until_end(run_id=run_id)
        finally:
            sub.close()

    def astream(
        self, input: str | Message | Sequence[Message], *, abort_on_close: bool = False
    ) -> RunEvents:
        """`stream` for asyncio callers: `async for event in agent.astream(input)`.

        The run starts here, eagerly: `AgentBusy` (and every other start error) is raised by
        this call, before any event is awaited (an HTTP handler can still answer 409). On
        the agent's own loop (a host sharing it, as `Runtime.astart()` does by default) the
        actor takes the start in place; from another loop this call waits for its answer
        (a few tens of microseconds). The iterator yields the run's events up to its end,
        inclusive (delegates' included), waiting without blocking the loop and yielding to
        it between batches. Abandoning it before the end (`aclose()`, `break` then dropping
        it, or garbage collection) closes its subscription at once; the run goes on, unless
        `abort_on_close=True`, which aborts it (reason `stream_closed`): use that when the
        reader is a client that went away.

        Raises:
            AgentBusy: a run is in progress.
            AgentStopped: the agent was stopped.
            TypeError: `input` is not a str, a Message or a list of Messages.
        """
        sub = self._new_subscription(MAX_QUEUE, OVERFLOW, BLOCK_TIMEOUT)
        try:
            # Subscribed by the start itself: nothing of a run that ended before this one.
            run_id: str = self._ask(self._start_message(input, None, sub))
        except BaseException:
            sub.close()
            raise
        return RunEvents(self.key, sub, run_id, self._abort_run, abort_on_close)

    def _abort_run(self, reason: str, run_id: str) -> None:
        self._tell(Abort(reason, run_id))

    def subscribe(
        self,
        max_queue: int = MAX_QUEUE,
        overflow: OverflowPolicy = OVERFLOW,
        block_timeout: float = BLOCK_TIMEOUT,
    ) -> Subscription:
        """A bounded subscription to every event of this agent (and of its delegates).

        An argument left out takes the runtime's `[subscription]` config (shipped: 1000,
        `"block"`, 30 s, the defaults the signature shows); one given, even equal to the
        default, wins.

        Raises:
            ValueError: `max_queue < 1`, an unknown policy or `block_timeout <= 0`.
        """
        sub = self._new_subscription(max_queue, overflow, block_timeout)
        self._ask(Subscribe(sub))
        return sub

    async def _asubscribe(
        self, max_queue: int, overflow: OverflowPolicy, block_timeout: float
    ) -> Subscription:
        sub = self._new_subscription(max_queue, overflow, block_timeout)
        await self._aask(Subscribe(sub))
        return sub

    def _new_subscription(
        self, max_queue: int, overflow: OverflowPolicy, block_timeout: float
    ) -> Subscription:
        if self._cell.stopped:
            raise AgentStopped(self.key)
        config = self._cell.host.config.subscription
        if max_queue is MAX_QUEUE:
            max_queue = config.max_queue
        if overflow is OVERFLOW:
            overflow = config.overflow
        if block_timeout is BLOCK_TIMEOUT:
            block_timeout = config.block_timeout
        return Subscription(
            self.key,
            max_queue=max_queue,
            overflow=overflow,
            block_timeout=block_timeout,
            on_close=self._unsubscribed,
        )

    def _unsubscribed(self, sub: Subscription) -> None:
        actor = self._cell.actor
        if actor is not None:
            with contextlib.suppress(pykka.ActorDeadError):
                actor.actor_ref.tell(Unsubscribe(sub))

    # -- state ------------------------------------------------------------------------------------

    def state(self) -> AgentState:
        """A consistent snapshot of the agent, taken by its actor in one step.

        Raises:
            AgentStopped: the agent was stopped.
        """
        fields: dict[str, Any] = self._ask(GetState())
        return AgentState.model_construct(**fields)

    def reset(self) -> None:
        """Abort a running run and wait for its end, then clear history, queues and error
        (system prompt, model and tools stay). The session's stored history stays as it is:
        a restarted (`transient`) agent, or a new one of the session, reads it again.

        Raises:
            AgentStopped: the agent was stopped.
            TimeoutError: the aborted run did not end within 10 s.
            RuntimeError: called on an event loop's thread (use `areset`).
        """
        refuse_on_loop("Agent.reset()", "`await agent.areset()`")
        while not self._ask(Reset()):  # a run is in progress: end it first
            self.abort("reset")
            self.wait_for_idle(10.0)

    async def areset(self) -> None:
        """`reset` for asyncio callers: waiting for an aborted run never blocks the loop.

        Raises:
            AgentStopped: the agent was stopped.
            TimeoutError: the aborted run did not end within 10 s.
        """
        while not await self._aask(Reset()):  # a run is in progress: end it first
            await self._aask(Abort("reset"))
            await self.await_idle(10.0)

    # Each setter checks its value by the rules of `start_agent` before it reaches the actor.

    def set_system_prompt(self, prompt: str | Template) -> None:
        """Use `prompt` from the next model call on (also mid-run). A `Template` is rendered
        at the start of each run; called off an event loop, it is also rendered now for the
        run in progress (one that cannot be rendered leaves that run's prompt as it is, and
        the next run fails naming why).

        Raises:
            TypeError: `prompt` is not a str or a Template.
        """
        checked = self._check("system_prompt", prompt)
        rendered: str | None = checked if isinstance(checked, str) else None
        if rendered is None and not _on_a_loop():  # storage I/O: never on a loop
            try:
                rendered = PromptTemplates.of(self._cell.host.memory).render(checked)
            except TemplateError:
                rendered = None
        self._ask(SetSystemPrompt(checked, rendered))

    def set_model(self, model: ChatModel | str) -> None:
        """Use `model` from the next run on: a ChatModel, or the name of one of the runtime's
        `[llm]` profiles (or pools), built as `start_agent(model=...)` builds it.

        Raises:
            TypeError: `model` is neither a ChatModel nor a str.
            ConfigError: a name of no configured profile (the known ones named), or one that
                cannot be built (its API key variable unset, ...).
        """
        self._ask(SetModel(self._check("model", model_of(model, self._cell.host.config))))

    def set_tools(self, tools: Sequence[Tool]) -> None:
        """Use `tools` from the next run on.

        Raises:
            TypeError: `tools` is not a list of Tools.
            ValueError: duplicate tool names.
        """
        self._ask(SetTools(tuple(self._check("tools", tools))))

    def set_steering_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run.

        Raises:
            ValueError: another mode.
        """
        _check_mode(mode)
        self._ask(SetMode("steering", mode))

    def set_follow_up_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run.

        Raises:
            ValueError: another mode.
        """
        _check_mode(mode)
        self._ask(SetMode("follow_up", mode))

    def _check(self, option: str, value: object) -> Any:
        if self._cell.stopped:
            raise AgentStopped(self.key)
        return self._cell.options.check(option, value)

    def stop(self) -> None:
        """Abort the run, stop the agent and its spawned subagents; idempotent.

        Returns once their actors have stopped, without waiting for the aborted run: it ends
        on the loop afterwards (a running tool gets the abort grace), and its terminal event
        reaches the subscriptions, which then close.

        Raises:
            RuntimeError: called on the runtime's event-loop thread (use `astop`). On an
                application's running loop it warns once (`BlockingCallWarning`): it waits
                for a round trip to the runtime's loop per agent, so prefer
                `await agent.astop()` there.
        """
        refuse_on_loop("Agent.stop()", "`await agent.astop()`", on_host_loop="warn")
        self._cell.host.stop_agent(self)

    async def astop(self) -> None:
        """`stop` for asyncio callers. On the runtime's own loop (a runtime started with
        `Runtime.astart()`, or a tool's coroutine) the agent stops in place, its spawned
        subagents first: no thread, no hop, and nothing waited for (its run is aborted, as
        by `stop`). From another loop `stop` runs on a worker thread, and that loop goes on."""
        await self._cell.host.astop_agent(self)

    def __repr__(self) -> str:
        return f"<Agent {tuple(self.key)} alive={self.alive}>"


def _checked_args(args: object) -> dict[str, Any] | None:
    if args is None or isinstance(args, dict):
        return args
    raise TypeError(f"args must be a dict of the tool's arguments, not {type(args).__name__}")


def _on_a_loop() -> bool:
    """True on a thread that runs an event loop (where a call must not wait)."""
    return asyncio._get_running_loop() is not None


def _asked(actor: Incarnation, message: Any) -> LoopFuture[Any]:
    """`ask` the actor (an AsyncioActor, whose futures are LoopFutures)."""
    return cast(LoopFuture[Any], actor.actor_ref.ask(message, block=False))


async def _awaited(future: LoopFuture[Any]) -> Any:
    """`future` as a coroutine (for `asyncio.wait_for`)."""
    return await future


def _queued(what: str, message: object, system_prompt: object) -> Queued:
    """One steering or follow-up message (a list of exactly one is accepted too)."""
    if isinstance(message, list | tuple) and len(message) != 1:
        raise ValueError(
            f"{what}() takes one message (a str or a Message), got a list of {len(message)}: "
            f"call {what}() once per message"
        )
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise TypeError(f"system_prompt must be a str or None, not {type(system_prompt).__name__}")
    (msg,) = as_messages(message)  # type: ignore[arg-type]  # checked by as_messages
    return Queued(msg, system_prompt)


def _check_mode(mode: object) -> None:
    if mode not in get_args(QueueMode):
        raise ValueError(f"unknown queue mode {mode!r} (expected one of: one_at_a_time, all)")


async def runs_in_flight(agents: Sequence[Agent[Any]]) -> list[LoopFuture[Event]]:
    """On the agents' loop: the outcome of each agent's run whose end is not delivered yet,
    asked of each actor in its mailbox order (as `wait_for_idle` asks), with no thread hop
    per agent. A runtime's stop waits for them all after one hop to the loop, not one round
    trip per agent (100,000 idle agents took ~10 s of hops)."""
    ends: list[LoopFuture[Event]] = []
    for count, agent in enumerate(agents, 1):
        cell = agent._cell
        actor = cell.actor
        pending: tuple[LoopFuture[Event], ...] | None = None
        if actor is not None:
            with contextlib.suppress(pykka.ActorDeadError, RuntimeError):  # gone meanwhile
                pending = actor.handle_now(IdleWait())
        if pending is None:  # between incarnations (a restart), or gone: the cell's last run
            run = cell.undelivered()
            pending = () if run is None else (run.outcome,)
        ends.extend(pending)
        if count % 512 == 0:
            await asyncio.sleep(0)  # other callbacks go on between batches
    return ends
