"""The state of one agent and the lifecycle of its runs (driven on the runtime's event loop)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

import structlog

from agent_runtime._errors import AgentBusy, AgentStopped, CannotContinue
from agent_runtime._key import AgentKey
from agent_runtime.abort import AbortSignal
from agent_runtime.event_stream import EventStream
from agent_runtime.event_stream._subscription import Subscription, deliver
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    Event,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import AgentContext, LoopConfig
from agent_runtime.loop import stream as loop_stream
from agent_runtime.loop import stream_continue as loop_stream_continue
from agent_runtime.loop._trace import current_links
from agent_runtime.memory import MemoryPolicy, window
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.tools import Tool, merge_tools

if TYPE_CHECKING:
    from agent_runtime.runtime import Runtime

log = structlog.get_logger(__name__)

# A follow-up sent this soon after a run ended starts a new run at once (DESIGN.md 7).
FOLLOW_UP_POLL = 0.05


def as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    """A prompt as messages: a str becomes one UserMessage.

    Raises:
        TypeError: anything else than a str, a message or a list of messages.
    """
    if isinstance(value, str):
        return [UserMessage(content=value)]
    if isinstance(value, UserMessage | AssistantMessage | ToolResultMessage):
        return [value]
    if isinstance(value, list | tuple) and all(
        isinstance(m, UserMessage | AssistantMessage | ToolResultMessage) for m in value
    ):
        return list(value)
    raise TypeError(f"expected a str, a Message or a list of Messages, not {type(value).__name__}")


def pair_dangling_calls(messages: list[Message], reason: str) -> list[Message]:
    """Results for tool calls left without one (a run cut off by a crash or a stopped loop),
    so the history stays a valid transcript."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    missing: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id not in answered:
                    missing.append(
                        ToolResultMessage(
                            tool_call_id=call.id,
                            tool_name=call.name,
                            content=[TextContent(text=f"Not completed: the run ended ({reason}).")],
                            details={"outcome": "unknown", "cancelled": True},
                            is_error=True,
                        )
                    )
    return missing


class RunRecord:
    """One run: its id, abort signal and outcome future."""

    def __init__(self, run_id: str, signal: AbortSignal) -> None:
        self.run_id = run_id
        self.signal = signal
        self.outcome: Future[Event] = Future()
        self.stream_message: AssistantMessage | None = None
        self.pending_tool_calls: dict[str, None] = {}
        # The loop found no follow-up when it would stop: whatever is queued from now on
        # arrived too late for it and starts the next run when this one ends.
        self.ending = False
        self.base = 0  # where its messages start in the agent's history
        self.finished = False  # the state no longer shows it as running
        self.settled = False  # its outcome is set


class AgentCore:
    """Everything an agent is, guarded by one lock (owned by this module; never held while
    calling user code, pushing to subscribers or blocking).

    Runs execute as tasks on the runtime's event loop (`loop.stream`) and a driver task on the
    same loop applies their events here and fans them out to subscriptions: no thread hop
    per token. Calls from any thread read or change state under the lock and return at once.
    """

    def __init__(self, key: AgentKey, runtime: Runtime, options: dict[str, Any]) -> None:
        self.key = key
        self.runtime = runtime
        self.lock = threading.Lock()
        self.system_prompt: str = options["system_prompt"]
        self.model: ChatModel = options["model"]
        self.tools: list[Tool] = list(options["tools"])
        self.options = options
        self.memory_policy: MemoryPolicy = options["memory"]
        self.messages: list[Message] = self._remembered()
        self.steering: deque[Message] = deque()
        self.follow_ups: deque[Message] = deque()
        self.steering_mode: str = options["steering_mode"]
        self.follow_up_mode: str = options["follow_up_mode"]
        self.error: str | None = None
        self.run: RunRecord | None = None
        self.last_run: RunRecord | None = None  # the newest run, until its end is delivered
        self.ended_at = 0.0
        self.idle = threading.Event()
        self.idle.set()
        self.stopped = False
        self.stop_reason = ""
        self.parent: AgentCore | None = None
        self.children: weakref.WeakSet[AgentCore] = weakref.WeakSet()
        self.subscriptions: list[weakref.ref[Subscription]] = []
        self._driver: asyncio.Task[None] | None = None  # the last run's driver (loop thread)
        self.log = log.bind(session=key.session, role=key.role, index=key.index)

    # -- session memory -----------------------------------------------------------------------

    def _remembered(self) -> list[Message]:
        """The session's history (within the policy's window) when the policy reads it."""
        policy = self.memory_policy
        if not policy.read:
            return []
        history = self.runtime.memory.history(self.key.session)
        return window(history.messages, policy.last_n)

    def _remember(self, messages: list[Message]) -> None:
        """Append a finished run's committed messages to the session, as one batch."""
        if not self.memory_policy.write or not messages:
            return
        try:
            self.runtime.memory.append(self.key.session, messages)
        except Exception:
            # The run's result stands; the agent's own history still has the messages.
            self.log.exception("agent.memory.append_failed", count=len(messages))

    # -- queues (called on the loop thread by the run) ----------------------------------------

    def take_steering(self) -> list[Message]:
        with self.lock:
            return _take(self.steering, self.steering_mode)

    def take_follow_ups(self, run: RunRecord) -> list[Message]:
        with self.lock:
            taken = _take(self.follow_ups, self.follow_up_mode)
            run.ending = not taken
            return taken

    def current_system_prompt(self) -> str:
        with self.lock:
            return self.system_prompt

    def requeue_steering(self, messages: list[Message]) -> None:
        with self.lock:
            self.steering.extendleft(reversed(messages))

    # -- calls from any thread ----------------------------------------------------------------

    def check_alive(self) -> None:
        if self.stopped:
            raise AgentStopped(self.key)

    def start(self, prompts: list[Message] | None) -> RunRecord:
        """Start a run with `prompts` (None: continue the history).

        Raises:
            AgentBusy, CannotContinue, AgentStopped (also while the runtime stops).
        """
        with self.lock:
            begun = self._begin_locked(prompts)
        return self._launch(*begun)

    def _begin_locked(
        self, prompts: list[Message] | None
    ) -> tuple[RunRecord, list[Message] | None, AgentContext, LoopConfig]:
        """Make a new run the current one (so every other start raises AgentBusy)."""
        self.check_alive()
        if self.runtime.stopping:
            raise AgentStopped(self.key)
        if self.run is not None:
            raise AgentBusy(self.key, self.run.run_id)
        if prompts is None:
            if not self.messages:
                raise CannotContinue("Cannot continue: no messages in history")
            if isinstance(self.messages[-1], AssistantMessage):
                raise CannotContinue("Cannot continue from message role: assistant")
        run = RunRecord(uuid.uuid4().hex[:16], self.runtime.abort_table.new())
        run.base = len(self.messages)
        self.run = run
        self.last_run = run
        self.error = None
        self.idle.clear()
        context = AgentContext(
            system_prompt=self.system_prompt, messages=list(self.messages), tools=self._tools()
        )
        return run, prompts, context, self._loop_config(run)

    def _launch(
        self,
        run: RunRecord,
        prompts: list[Message] | None,
        context: AgentContext,
        config: LoopConfig,
    ) -> RunRecord:
        """Submit the run and its driver to the runtime's event loop (outside the lock).

        Raises:
            AgentStopped: the event loop is gone (the runtime stopped); the run is undone.
        """
        out = EventStream(max_queue=256, overflow="block", run_id=run.run_id, agent=self.key)
        try:
            if prompts is None:
                loop_stream_continue(
                    context, config, run.signal, runtime=self.runtime, event_stream=out
                )
            else:
                loop_stream(
                    prompts, context, config, run.signal, runtime=self.runtime, event_stream=out
                )
            driver = self.runtime.loop_tasks.submit(self._drive(run, out))
        except RuntimeError as exc:  # the loop was stopped under us
            run.signal.abort("runtime_stopped")
            out.cancel("runtime_stopped")
            self._finish(run, None)
            self._settle(run, None)
            raise AgentStopped(self.key) from exc
        driver.add_done_callback(functools.partial(self._driver_done, run))
        self.log.info("agent.run.started", run_id=run.run_id, continued=prompts is None)
        return run

    def _driver_done(self, run: RunRecord, driver: Future[None]) -> None:
        # A driver canceled before it ran (the runtime stopping) never reached its finally.
        if driver.cancelled() and not run.finished:
            terminal = self._stopped_mid_run(run)
            self._finish(run, terminal)
            self._settle(run, terminal)

    def _tools(self) -> list[Tool]:
        registry = self.options.get("tool_registry")
        if registry is None:
            return list(self.tools)
        return merge_tools(self.tools, registry)

    def _loop_config(self, run: RunRecord) -> LoopConfig:
        o = self.options
        level = o["thinking_level"]
        return LoopConfig(
            model=self.model,
            trace_links=current_links(),
            max_tool_concurrency=o["max_tool_concurrency"],
            max_tool_turns=o["max_tool_turns"],
            tool_timeout=o["tool_timeout"],
            retry=o["retry"],
            abort_grace=o["abort_grace"],
            get_steering_messages=self.take_steering,
            get_follow_up_messages=functools.partial(self.take_follow_ups, run),
            on_undelivered_steering=self.requeue_steering,
            on_undelivered_follow_ups=self.requeue_follow_ups,
            get_system_prompt=self.current_system_prompt,
            spawner=self.runtime.subagents.spawner(self),
            reasoning=None if level == "off" else level,
            run_id=run.run_id,
            agent=self.key,
            runtime=self.runtime,
            stream_max_queue=256,
            stream_overflow="block",
        )

    def steer(self, message: Message, system_prompt: str | None) -> None:
        with self.lock:
            self.check_alive()
            self.steering.append(message)
            if system_prompt is not None:
                self.system_prompt = system_prompt

    def follow_up(self, message: Message, system_prompt: str | None) -> None:
        """Queue a follow-up. One that lands within FOLLOW_UP_POLL after a run ended starts
        a run of its own (checked and started under one lock hold, so a concurrent prompt
        either wins, and the follow-up waits in the queue, or gets AgentBusy); one that lands
        after the loop's last look at the queue starts the next run when this one ends."""
        begun = None
        with self.lock:
            self.check_alive()
            self.follow_ups.append(message)
            if system_prompt is not None:
                self.system_prompt = system_prompt
            in_window = time.monotonic() - self.ended_at <= FOLLOW_UP_POLL
            if self.run is None and in_window and not self.runtime.stopping:
                begun = self._begin_locked(_take(self.follow_ups, self.follow_up_mode))
        if begun is not None:
            self._start_follow_up(begun)

    def _start_follow_up(
        self, begun: tuple[RunRecord, list[Message] | None, AgentContext, LoopConfig]
    ) -> None:
        try:
            self._launch(*begun)
        except AgentStopped:
            if begun[1]:
                self.requeue_follow_ups(begun[1])

    def requeue_follow_ups(self, messages: list[Message]) -> None:
        with self.lock:
            self.follow_ups.extendleft(reversed(messages))

    def abort(self, reason: str) -> bool:
        with self.lock:
            run = self.run
        if run is None:
            return False
        run.signal.abort(reason)
        for child in list(self.children):
            child.abort(f"parent_aborted: {reason}")
        return True

    def wait_idle(self, timeout: float | None) -> None:
        if not self.idle.wait(timeout):
            raise TimeoutError(f"agent {tuple(self.key)!r} still running after {timeout}s")

    def reset(self) -> None:
        """Abort the running run, wait for its end, then clear history, queues and error.

        A run started by another thread in between is aborted as well, so the history is
        cleared only while no run can write into it.

        Raises:
            TimeoutError: a run did not end within 10 s of its abort.
        """
        while True:
            self.abort("reset")
            self.wait_idle(10.0)
            with self.lock:
                self.check_alive()
                if self.run is None:
                    self.messages.clear()
                    self.steering.clear()
                    self.follow_ups.clear()
                    self.error = None
                    return

    # -- subscriptions ----------------------------------------------------------------------

    def subscribe(self, max_queue: int, overflow: Any, block_timeout: float) -> Subscription:
        sub = Subscription(
            self.key,
            max_queue=max_queue,
            overflow=overflow,
            block_timeout=block_timeout,
            on_close=self._forget,
        )
        with self.lock:
            self.check_alive()
            self.subscriptions.append(weakref.ref(sub))
        return sub

    def _forget(self, sub: Subscription) -> None:
        with self.lock:
            self.subscriptions = [r for r in self.subscriptions if r() not in (None, sub)]

    def live_subscriptions(self) -> list[Subscription]:
        """The open subscriptions (closed and collected ones are forgotten here)."""
        return [s for r in self.subscription_refs() if (s := r()) is not None]

    def subscription_refs(self) -> list[weakref.ref[Subscription]]:
        """Weak refs to the open subscriptions; prunes closed and collected ones."""
        with self.lock:
            self.subscriptions = [
                r for r in self.subscriptions if (s := r()) is not None and not s.closed
            ]
            return list(self.subscriptions)

    async def fan_out(self, event: Event) -> None:
        """Deliver to every subscription of this agent and of its ancestors (delegation).

        Only weak refs are held while a delivery waits, so a subscription dropped by its
        reader is collected and closed, which ends the wait at once.
        """
        for ref in self.subscription_refs():
            await deliver(ref, event)
        if self.parent is not None:
            await self.parent.fan_out(event)

    # -- the run driver (on the loop thread) --------------------------------------------------

    async def _drive(self, run: RunRecord, events: EventStream) -> None:
        """Apply the run's events to the state, then hand each to the subscriptions.

        The agent goes idle (the next prompt is accepted) before the run's terminal is
        delivered, so a reader that sees the end can start the next run at once; the
        outcome (`run()`, a delegating parent) is set after the delivery, so a parent's
        subscribers see a subagent's end before the parent's tool result. Events of
        consecutive runs reach each subscription in run order: a driver first waits for the
        previous one to finish delivering.
        """
        previous, self._driver = self._driver, asyncio.current_task()
        terminal: Event | None = None
        try:
            if previous is not None and not previous.done():
                await asyncio.wait([previous])
            async for event in events:
                self._apply(run, event)
                if event is events.terminal:
                    terminal = event
                    self._finish(run, terminal)
                await self.fan_out(event)
        except asyncio.CancelledError:
            if terminal is None:
                terminal = self._stopped_mid_run(run)
            raise
        finally:
            self._finish(run, terminal)
            self._settle(run, terminal)

    def _stopped_mid_run(self, run: RunRecord) -> Event:
        """The `Canceled` of a run whose driver the stopping runtime cancelled, handed to the
        subscriptions without waiting (the loop is going away)."""
        terminal = Canceled(agent=self.key, run_id=run.run_id, reason="runtime_stopped")
        for sub in self.live_subscriptions():
            sub.stream.push_async(terminal)
        return terminal

    def _apply(self, run: RunRecord, event: Event) -> None:
        with self.lock:
            if self.run is not run:
                return  # reset or stopped since: this run no longer writes the history
            if isinstance(event, MessageUpdate):
                run.stream_message = event.message
            elif isinstance(event, MessageStart):
                if isinstance(event.message, AssistantMessage):
                    run.stream_message = event.message
            elif isinstance(event, MessageEnd):
                run.stream_message = None
                message = event.message
                failed = isinstance(message, AssistantMessage) and message.stop_reason in (
                    "error",
                    "aborted",
                )
                if not failed:
                    self.messages.append(message)
            elif isinstance(event, ToolExecutionStart):
                run.pending_tool_calls[event.tool_call_id] = None
            elif isinstance(event, ToolExecutionEnd):
                run.pending_tool_calls.pop(event.tool_call_id, None)
            elif isinstance(event, Error):
                self.error = event.reason

    def _finish(self, run: RunRecord, terminal: Event | None) -> None:
        """End `run` in the state (idempotent): pair its dangling calls, go idle, and start
        the next run with follow-ups that arrived after the loop's last look."""
        begun = None
        committed: list[Message] = []
        with self.lock:
            if run.finished:
                return
            run.finished = True
            if self.run is run:
                reason = terminal.reason if isinstance(terminal, Canceled | Error) else "ended"
                self.messages.extend(pair_dangling_calls(self.messages, reason))
                committed = self.messages[run.base :]
                self.run = None
                self.ended_at = time.monotonic()
                self.idle.set()
                late = isinstance(terminal, AgentEnd) and run.ending and self.follow_ups
                if late and not self.stopped and not self.runtime.stopping:
                    begun = self._begin_locked(_take(self.follow_ups, self.follow_up_mode))
        # Written before a follow-up run can start, so the session keeps the runs in order.
        # (SQLite appends take well under a millisecond here; see bench.)
        self._remember(committed)
        if begun is not None:
            self._start_follow_up(begun)

    def _settle(self, run: RunRecord, terminal: Event | None) -> None:
        """Set the run's outcome and release its signal (after its events were delivered)."""
        with self.lock:
            if run.settled:
                return
            run.settled = True
            close = self.stopped  # stopped during the run: its end is delivered, now close
        outcome = terminal or Canceled(agent=self.key, run_id=run.run_id, reason="lost")
        with contextlib.suppress(InvalidStateError):  # a waiter canceled it (arun timeout)
            run.outcome.set_result(outcome)
        self.runtime.abort_table.release(run.signal)
        self.log.info("agent.run.finished", run_id=run.run_id, outcome=type(outcome).__name__)
        if close:
            self._close_subscriptions()

    # -- end of life ----------------------------------------------------------------------------

    def shutdown(self, reason: str) -> None:
        """Stop for good (idempotent): no new call is accepted, the run is aborted, and every
        subscription is closed, after the run's end was delivered if one was running (so
        readers see its `Canceled`)."""
        with self.lock:
            if not self.stopped:
                self.stopped = True
                self.stop_reason = reason
            # A run counts until its end reached the subscribers (it goes idle a little
            # earlier, so that a reader who sees the end can prompt at once).
            last = self.last_run
            running = last is not None and not last.settled
        self.abort(reason)
        if not running:
            self._close_subscriptions()

    def _close_subscriptions(self) -> None:
        with self.lock:
            subs = [s for r in self.subscriptions if (s := r()) is not None]
            self.subscriptions = []
        for sub in subs:
            sub.stream.cancel(f"agent_stopped: {self.stop_reason}")


def _take(queue: deque[Message], mode: str) -> list[Message]:
    if not queue:
        return []
    if mode == "all":
        taken = list(queue)
        queue.clear()
        return taken
    return [queue.popleft()]
