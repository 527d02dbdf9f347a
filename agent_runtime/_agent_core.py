"""The state of one agent and the lifecycle of its runs (driven on the runtime's event loop)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import structlog

from agent_runtime._errors import AgentBusy, AgentStopped, CannotContinue
from agent_runtime._key import AgentKey
from agent_runtime._subscription import Subscription
from agent_runtime.abort import AbortSignal
from agent_runtime.event_stream import EventStream
from agent_runtime.events import (
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
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.tools import Tool

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
        self.messages: list[Message] = []
        self.steering: deque[Message] = deque()
        self.follow_ups: deque[Message] = deque()
        self.steering_mode: str = options["steering_mode"]
        self.follow_up_mode: str = options["follow_up_mode"]
        self.error: str | None = None
        self.run: RunRecord | None = None
        self.ended_at = 0.0
        self.idle = threading.Event()
        self.idle.set()
        self.stopped = False
        self.parent: AgentCore | None = None
        self.children: weakref.WeakSet[AgentCore] = weakref.WeakSet()
        self.subscriptions: list[weakref.ref[Subscription]] = []
        self.log = log.bind(session=key.session, role=key.role, index=key.index)

    # -- queues (called on the loop thread by the run) ----------------------------------------

    def take_steering(self) -> list[Message]:
        with self.lock:
            return _take(self.steering, self.steering_mode)

    def take_follow_ups(self) -> list[Message]:
        with self.lock:
            return _take(self.follow_ups, self.follow_up_mode)

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
            AgentBusy, CannotContinue, AgentStopped.
        """
        with self.lock:
            self.check_alive()
            if self.run is not None:
                raise AgentBusy(self.key, self.run.run_id)
            if prompts is None:
                if not self.messages:
                    raise CannotContinue("Cannot continue: no messages in history")
                if isinstance(self.messages[-1], AssistantMessage):
                    raise CannotContinue("Cannot continue from message role: assistant")
            run = RunRecord(uuid.uuid4().hex[:16], self.runtime.abort_table.new())
            self.run = run
            self.error = None
            self.idle.clear()
            context = AgentContext(
                system_prompt=self.system_prompt, messages=list(self.messages), tools=self._tools()
            )
            config = self._loop_config(run)
        out = EventStream(max_queue=256, overflow="block", run_id=run.run_id, agent=self.key)
        if prompts is None:
            loop_stream_continue(
                context, config, run.signal, runtime=self.runtime, event_stream=out
            )
        else:
            loop_stream(
                prompts, context, config, run.signal, runtime=self.runtime, event_stream=out
            )
        self.runtime.loop_tasks.submit(self._drive(run, out))
        self.log.info("agent.run.started", run_id=run.run_id, continued=prompts is None)
        return run

    def _tools(self) -> list[Tool]:
        registry = self.options.get("tool_registry")
        if registry is None:
            return list(self.tools)
        from agent_runtime.tools import merge_tools

        return merge_tools(self.tools, registry)

    def _loop_config(self, run: RunRecord) -> LoopConfig:
        o = self.options
        level = o["thinking_level"]
        return LoopConfig(
            model=self.model,
            max_tool_concurrency=o["max_tool_concurrency"],
            max_tool_turns=o["max_tool_turns"],
            tool_timeout=o["tool_timeout"],
            retry=o["retry"],
            abort_grace=o["abort_grace"],
            get_steering_messages=self.take_steering,
            get_follow_up_messages=self.take_follow_ups,
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
        start = False
        with self.lock:
            self.check_alive()
            self.follow_ups.append(message)
            if system_prompt is not None:
                self.system_prompt = system_prompt
            # A follow-up that lands just after a run ended would otherwise wait for the next
            # prompt: within the poll window it starts a run of its own.
            start = self.run is None and time.monotonic() - self.ended_at <= FOLLOW_UP_POLL
        if start:
            with self.lock:
                queued = _take(self.follow_ups, self.follow_up_mode)
            if queued:
                try:
                    self.start(queued)
                except AgentBusy:
                    self.requeue_follow_ups(queued)

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
        self.abort("reset")
        self.wait_idle(10.0)
        with self.lock:
            self.messages.clear()
            self.steering.clear()
            self.follow_ups.clear()
            self.error = None

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
        with self.lock:
            live = [s for r in self.subscriptions if (s := r()) is not None and not s.closed]
            self.subscriptions = [weakref.ref(s) for s in live]
            return live

    async def fan_out(self, event: Event) -> None:
        """Deliver to every subscription of this agent and of its ancestors (delegation)."""
        for sub in self.live_subscriptions():
            await sub.deliver(event)
        if self.parent is not None:
            await self.parent.fan_out(event)

    # -- the run driver (on the loop thread) --------------------------------------------------

    async def _drive(self, run: RunRecord, events: EventStream) -> None:
        terminal: Event | None = None
        try:
            async for event in events:
                self._apply(run, event)
                if event is events.terminal:
                    terminal = event
                await self.fan_out(event)
        except asyncio.CancelledError:
            terminal = Canceled(agent=self.key, run_id=run.run_id, reason="runtime_stopped")
            for sub in self.live_subscriptions():
                sub.stream.push_async(terminal)
            raise
        finally:
            self._finish(run, terminal)

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
        with self.lock:
            if self.run is run:
                reason = terminal.reason if isinstance(terminal, Canceled | Error) else "ended"
                self.messages.extend(pair_dangling_calls(self.messages, reason))
                self.run = None
                self.ended_at = time.monotonic()
                self.idle.set()
        outcome = terminal or Canceled(agent=self.key, run_id=run.run_id, reason="lost")
        if not run.outcome.done():
            run.outcome.set_result(outcome)
        self.runtime.abort_table.release(run.signal)
        kind = type(outcome).__name__
        self.log.info("agent.run.finished", run_id=run.run_id, outcome=kind)

    # -- end of life ----------------------------------------------------------------------------

    def shutdown(self, reason: str) -> None:
        """Stop for good: abort the run, close every subscription (their readers stop)."""
        self.abort(reason)
        with self.lock:
            self.stopped = True
            subs = [s for r in self.subscriptions if (s := r()) is not None]
            self.subscriptions = []
        for sub in subs:
            sub.stream.cancel(f"agent_stopped: {reason}")


def _take(queue: deque[Message], mode: str) -> list[Message]:
    if not queue:
        return []
    if mode == "all":
        taken = list(queue)
        queue.clear()
        return taken
    return [queue.popleft()]
