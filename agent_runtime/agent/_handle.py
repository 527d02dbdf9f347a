"""Agent: the handle users hold; each call is a message to the agent's actor."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, cast, get_args

import pykka

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime._run_ids import new_run_id
from agent_runtime.agent._calls import ActorCalls
from agent_runtime.agent._history import as_messages
from agent_runtime.agent._messages import answer
from agent_runtime.agent._run import Queued, ReservedRun, RunView
from agent_runtime.agent._run_events import RunEvents
from agent_runtime.agent._shell import AgentShell, IncarnationExited
from agent_runtime.agent._state import AgentState, RunResult, run_result
from agent_runtime.config import QueueMode
from agent_runtime.event_stream import OverflowPolicy, Subscription
from agent_runtime.events import AgentEnd, Canceled, Error, Event
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop._output import OutputSpec
from agent_runtime.loop._trace import current_links
from agent_runtime.messages import Message
from agent_runtime.templates import Template
from agent_runtime.tools import Tool

OnFailure = Callable[[Exception], Any]


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


class Agent:
    """The handle of one agent: a thin proxy that turns each call into a message to the agent's
    actor (as pykka's `ActorProxy` does), so every method is thread-safe and returns promptly,
    also while a run is busy (runs execute on the runtime's event loop).

    The handle outlives restarts: after a `transient` agent crashed and was restarted,
    `registry.lookup(key) is agent` still, its open subscriptions go on (they get the
    interrupted run's `Error("agent_crashed: ...")`, then the new actor's events) and the
    values set with `set_*` stay; the new actor's history is rebuilt from session memory
    (empty with `MemoryPolicy.none()`), and queued steering and follow-up messages are lost.
    A call made while the agent restarts waits for the new actor (up to 5 s).

    Raises (every method but `stop()`, which is idempotent, and the `key`, `alive` and `ref`
    properties): AgentStopped once the agent was stopped (or crashed for good).
    """

    def __init__(self, shell: AgentShell) -> None:
        self._shell = shell
        self._calls = ActorCalls(shell)
        shell.handle = self

    # -- identity ---------------------------------------------------------------------------------

    @property
    def key(self) -> AgentKey:
        """The agent's `(session, role, index)`."""
        return self._shell.key

    @property
    def ref(self) -> pykka.ActorRef[Any]:
        """The current actor's pykka ref (for `supervisors.kill` and monitoring); it changes
        when a `transient` agent is restarted."""
        ref = self._shell.ref
        assert ref is not None
        return ref

    @property
    def alive(self) -> bool:
        """True until the agent is stopped for good (False while a crashed agent restarts)."""
        ref = self._shell.ref
        return not self._shell.stopped and ref is not None and ref.is_alive()

    # -- runs -------------------------------------------------------------------------------------

    def _start(
        self,
        input: str | Message | Sequence[Message] | None,
        output: OutputSpec | None = None,
        sub: Subscription | None = None,
    ) -> RunView | ReservedRun:
        prompts = None if input is None else as_messages(input)
        reserved = self._reserved_start(prompts, output, sub)
        if reserved is not None:
            return reserved
        view: RunView = self._calls.call("start_run", prompts, current_links(), output)
        return view

    async def _astart(
        self, input: str | Message | Sequence[Message] | None, output: OutputSpec | None = None
    ) -> RunView | ReservedRun:
        prompts = None if input is None else as_messages(input)
        reserved = self._reserved_start(prompts, output, None)
        if reserved is not None:
            return reserved
        view: RunView = await self._calls.acall("start_run", prompts, current_links(), output)
        return view

    def _reserved_start(
        self, prompts: list[Message] | None, output: OutputSpec | None, sub: Subscription | None
    ) -> ReservedRun | None:
        """Start the run without waiting for the actor, when it offers its start ticket (an
        idle agent whose start can fail only by a race with its stop); None otherwise, and
        the caller asks the actor, which answers AgentBusy and the like at once.

        A reserved start that fails at the actor after all ends the run's stream with
        `Canceled("not_started: ...")` and fails its outcome with the error (`run()` raises
        it), so every reader still sees one end."""
        shell = self._shell
        if prompts is None:  # continuing can fail on the history: the actor decides first
            return None
        reservation = ReservedRun(new_run_id())
        args = (reservation, prompts, current_links(), output)
        if not shell.reserve_start(reservation.run_id):
            return None
        try:
            reply = self._calls.send("start_reserved", args, wait=False, hold=True)
        except BaseException:
            shell.reservation_arrived(reservation.run_id)
            raise
        if reply is None:  # the actor exited just now: ask its next incarnation instead
            shell.reservation_arrived(reservation.run_id)
            return None
        reply.add_done_callback(functools.partial(self._reserved_answered, reservation, sub))
        return reservation

    def _reserved_answered(
        self,
        reservation: ReservedRun,
        sub: Subscription | None,
        reply: concurrent.futures.Future[Any],
    ) -> None:
        error = reply.exception()
        if error is None or reservation.started:
            return  # the run started: its driver ends it (an exit after that included)
        if isinstance(error, IncarnationExited):
            error = AgentStopped(self.key)
        terminal = Canceled(
            agent=self.key,
            run_id=reservation.run_id,
            reason=f"not_started: {type(error).__name__}: {error}",
        )
        shell = self._shell
        if sub is not None and not any(ref() is sub for ref in shell.subscriptions):
            sub.stream.push_async(terminal)  # its subscribe did not reach the actor
        shell.push_now(terminal)
        answer(reservation.outcome, exception=error)

    def _output(
        self, output_type: Any, output_retries: int | None, on_failure: OnFailure | None
    ) -> tuple[OutputSpec | None, OnFailure | None]:
        """This run's typed output and fallback: each given value, else the agent's default."""
        options = self._shell.options
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
        """Start a run with `input`; returns its run id at once. An idle agent takes the
        start without its caller waiting for the actor (so `astream` and `prompt` on an
        application's event loop never hold it); should that start then lose a race with the
        agent's stop, the run ends with `Canceled("not_started: ...")`.

        Raises:
            AgentBusy: a run is in progress (steer or follow up instead).
            TypeError: `input` is not a str, a Message or a list of Messages.
        """
        return self._start(input).run_id

    def continue_run(self) -> str:
        """Start a run from the history without new input; returns its run id.

        Raises:
            AgentBusy: a run is in progress.
            CannotContinue: the history is empty or ends with an assistant message.
        """
        return self._start(None).run_id

    def steer(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for the running run: it is delivered at the next tool boundary or
        after the current answer (remaining tool calls of the batch are skipped).

        A `system_prompt` travels with the message: it applies from the model call that
        message goes into, for the rest of that run (the agent's own prompt stays).

        Raises:
            TypeError: `message` is not a str or a Message, or `system_prompt` not a str.
            ValueError: a list that does not hold exactly one message.
        """
        self._queue("steer", _queued("steer", message, system_prompt))

    def follow_up(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for when the agent would otherwise stop.

        Sent to an idle agent, it only queues, unless it arrives within `follow_up_poll`
        (`[agent]` config, 50 ms) after a run that ended with `AgentEnd`: then it starts a run.
        After a failed or aborted run it never starts one (and leaves `state().error`).
        A `system_prompt` travels with the message as with `steer`.

        Raises:
            TypeError: `message` is not a str or a Message, or `system_prompt` not a str.
            ValueError: a list that does not hold exactly one message.
        """
        self._queue("follow_up", _queued("follow_up", message, system_prompt))

    def _queue(self, name: str, queued: Queued) -> None:
        if self._calls.on_loop_thread():
            self._calls.tell(name, queued)
        else:
            self._calls.call(name, queued)

    def abort(self, reason: str = "user_abort") -> bool:
        """Abort the running run (and its delegated subagents); False if none was running."""
        if self._calls.on_loop_thread():
            # a reserved start on its way to the actor is a run too: the abort follows it
            running = self._shell.delivering is not None or self._shell.reserved is not None
            self._calls.tell("abort", reason)
            return running
        aborted: bool = self._calls.call("abort", reason)
        return aborted

    def wait_for_idle(self, timeout: float | None = None) -> None:
        """Block until no run is in progress (follow-up runs included).

        Raises:
            TimeoutError: still running after `timeout` seconds.
            AgentStopped: the agent was stopped before the call.
            RuntimeError: called on the runtime's event-loop thread (it would block every
                agent): use `await_idle`.
        """
        self._calls.refuse_on_loop("Agent.wait_for_idle()", "`await agent.await_idle(...)`")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ended = self._calls.call("idle_future")
            if ended is None:
                return
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            done, _ = concurrent.futures.wait([ended], left)
            if not done:
                raise TimeoutError(f"agent {tuple(self.key)!r} still running after {timeout}s")

    def run(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
        on_failure: OnFailure | None = None,
    ) -> RunResult:
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
        None of these given and none set on the agent: `RunResult.output` is None.

        Raises:
            AgentBusy: a run is in progress.
            OutputValidationError: the answer did not validate as `output_type`.
            RunFailed: the run ended with an error (`reason`, `partial`).
            RunCanceled: the run was aborted (`reason`).
            TimeoutError: it did not end within `timeout` (the run goes on).
            RuntimeError: called on the runtime's event-loop thread (use `arun`).
            TypeError: `output_type` is not a type pydantic can validate, or `on_failure`
                is not callable.
            ValueError: `output_retries` is not an int >= 0, or is given without any
                `output_type`.
        """
        self._calls.refuse_on_loop("Agent.run()", "`await agent.arun(...)`")
        output, fallback = self._output(output_type, output_retries, on_failure)
        view = self._start(input, output)
        try:
            terminal = view.outcome.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"run {view.run_id} did not end within {timeout}s") from None
        return run_result(view.run_id, terminal, output, fallback)

    async def arun(
        self,
        input: str | Message | Sequence[Message],
        timeout: float | None = None,
        *,
        output_type: Any = None,
        output_retries: int | None = None,
        on_failure: OnFailure | None = None,
    ) -> RunResult:
        """`run` for asyncio callers (typed output included): waiting never blocks the
        event loop."""
        output, fallback = self._output(output_type, output_retries, on_failure)
        view = await self._astart(input, output)
        outcome = asyncio.shield(asyncio.wrap_future(view.outcome))
        try:
            terminal = await asyncio.wait_for(outcome, timeout)
        except TimeoutError:
            raise TimeoutError(f"run {view.run_id} did not end within {timeout}s") from None
        return run_result(view.run_id, terminal, output, fallback)

    async def await_idle(self, timeout: float | None = None) -> None:
        """`wait_for_idle` for asyncio callers: waiting never blocks the event loop.

        Raises:
            TimeoutError: still running after `timeout` seconds.
            AgentStopped: the agent was stopped before the call.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ended = await self._calls.acall("idle_future")
            if ended is None:
                return
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            done, _ = await asyncio.wait([asyncio.wrap_future(ended)], timeout=left)
            if not done:
                raise TimeoutError(f"agent {tuple(self.key)!r} still running after {timeout}s")

    def stream(self, input: str | Message | Sequence[Message]) -> Iterator[Event]:
        """Subscribe, prompt, and yield events until this run's end (inclusive), including
        events of subagents it delegates to (tagged with their keys).

        Raises:
            RuntimeError: called on the runtime's event-loop thread (use `astream`).
        """
        self._calls.refuse_on_loop("Agent.stream()", "`async for event in agent.astream(...)`")
        sub = self.subscribe()
        try:
            run_id = self.prompt(input)
            yield from sub.until_end(run_id=run_id)
        finally:
            sub.close()

    def astream(
        self, input: str | Message | Sequence[Message], *, abort_on_close: bool = False
    ) -> RunEvents:
        """`stream` for asyncio callers: `async for event in agent.astream(input)`.

        The run starts here, eagerly: `AgentBusy` (and every other start error) is raised by
        this call, before any event is awaited (an HTTP handler can still answer 409); only a
        start that loses a race with the agent's stop, which the call cannot see, ends the
        stream with `Canceled("not_started: ...")` instead. An idle agent takes the start
        without this call waiting for its actor, so the caller's loop is not held. The
        iterator yields the run's events up to its end, inclusive (delegates' included),
        waiting without blocking the loop and yielding to it between batches. Abandoning it
        before the end (`aclose()`, `break` then dropping it, or garbage collection) closes its
        subscription at once; the run goes on, unless `abort_on_close=True`, which aborts it
        (reason `stream_closed`): use that when the reader is a client that went away.

        Raises:
            AgentBusy: a run is in progress.
            AgentStopped: the agent was stopped.
            TypeError: `input` is not a str, a Message or a list of Messages.
        """
        prompts = as_messages(input)
        sub = self._new_subscription(MAX_QUEUE, OVERFLOW, BLOCK_TIMEOUT)
        # Not waited for: the actor takes the subscription before the run it starts next (one
        # mailbox, in order). On an event loop it never waits for a restarting agent either.
        if self._calls.send("subscribe", (sub,), wait=not self._calls.on_loop_thread()) is None:
            sub.close()
            raise AgentStopped(self.key)
        try:
            run_id = self._start(prompts, sub=sub).run_id
        except BaseException:
            sub.close()
            raise
        return RunEvents(self.key, sub, run_id, self._abort_run, abort_on_close)

    def _abort_run(self, reason: str, run_id: str) -> None:
        self._calls.tell("abort", reason, run_id)

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
        self._calls.call("subscribe", sub)
        return sub

    async def _asubscribe(
        self, max_queue: int, overflow: OverflowPolicy, block_timeout: float
    ) -> Subscription:
        sub = self._new_subscription(max_queue, overflow, block_timeout)
        await self._calls.acall("subscribe", sub)
        return sub

    def _new_subscription(
        self, max_queue: int, overflow: OverflowPolicy, block_timeout: float
    ) -> Subscription:
        if self._shell.stopped:
            raise AgentStopped(self.key)
        config = self._shell.host.config.subscription
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

    def _tell(self, name: str, *args: Any) -> None:
        """Send a call without waiting for its answer (from an actor or the event loop)."""
        self._calls.tell(name, *args)

    def _unsubscribed(self, sub: Subscription) -> None:
        self._calls.tell_fact("unsubscribe", sub)

    # -- state ------------------------------------------------------------------------------------

    def state(self) -> AgentState:
        """A consistent snapshot of the agent, taken by its actor in one step.

        Raises:
            AgentStopped: the agent was stopped.
        """
        fields: dict[str, Any] = self._calls.call("state")
        return AgentState.model_construct(**fields)

    def reset(self) -> None:
        """Abort a running run and wait for its end, then clear history, queues and error
        (system prompt, model and tools stay). The session's stored history stays as it is:
        a restarted (`transient`) agent, or a new one of the session, reads it again.

        Raises:
            AgentStopped: the agent was stopped.
            TimeoutError: the aborted run did not end within 10 s.
            RuntimeError: called on the runtime's event-loop thread.
        """
        self._calls.refuse_on_loop("Agent.reset()", "`await agent.areset()`")
        while not self._calls.call("reset"):  # a run is in progress: end it first
            self.abort("reset")
            self.wait_for_idle(10.0)

    async def areset(self) -> None:
        """`reset` for asyncio callers: waiting for an aborted run never blocks the loop.

        Raises:
            AgentStopped: the agent was stopped.
            TimeoutError: the aborted run did not end within 10 s.
        """
        while not await self._calls.acall("reset"):  # a run is in progress: end it first
            await self._calls.acall("abort", "reset")
            await self.await_idle(10.0)

    # Each setter checks its value by the rules of `start_agent` before it reaches the actor.

    def set_system_prompt(self, prompt: str | Template) -> None:
        """Use `prompt` from the next model call on (also mid-run). A `Template` is rendered
        at the start of each run (and now, when a run is in progress).

        Raises:
            TypeError: `prompt` is not a str or a Template.
            TemplateError: a run is in progress and the Template cannot be rendered.
        """
        self._calls.call("set_system_prompt", self._check("system_prompt", prompt))

    def set_model(self, model: ChatModel) -> None:
        """Use `model` from the next run on.

        Raises:
            TypeError: `model` is not a ChatModel.
        """
        self._calls.call("set_model", self._check("model", model))

    def set_tools(self, tools: Sequence[Tool]) -> None:
        """Use `tools` from the next run on.

        Raises:
            TypeError: `tools` is not a list of Tools.
            ValueError: duplicate tool names.
        """
        self._calls.call("set_tools", list(self._check("tools", tools)))

    def set_steering_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run.

        Raises:
            ValueError: another mode.
        """
        _check_mode(mode)
        self._calls.call("set_mode", "steering", mode)

    def set_follow_up_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run.

        Raises:
            ValueError: another mode.
        """
        _check_mode(mode)
        self._calls.call("set_mode", "follow_up", mode)

    def _check(self, option: str, value: object) -> Any:
        if self._shell.stopped:
            raise AgentStopped(self.key)
        return self._shell.options.check(option, value)

    def stop(self) -> None:
        """Abort the run, stop the agent and its spawned subagents; idempotent.

        Raises:
            RuntimeError: called on the runtime's event-loop thread (use `astop`). On an
                application's running loop it warns once (`BlockingCallWarning`): it waits
                for the run's abort grace, so prefer `await agent.astop()` there.
        """
        self._calls.refuse_on_loop("Agent.stop()", "`await agent.astop()`", on_host_loop="warn")
        self._shell.host.stop_agent(self)

    async def astop(self) -> None:
        """`stop` for asyncio callers: it runs on a worker thread, the loop goes on."""
        await asyncio.to_thread(self.stop)

    def __repr__(self) -> str:
        return f"<Agent {tuple(self.key)} alive={self.alive}>"


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


def _ends(event: Event, key: AgentKey, run_id: str) -> bool:
    return (
        isinstance(event, AgentEnd | Error | Canceled)
        and event.agent == key
        and event.run_id == run_id
    )
