"""AgentActor (the supervised unit) and Agent (the thread-safe handle users hold)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, get_args

import pykka
from pydantic import BaseModel, ConfigDict, Field

from agent_runtime._errors import AgentStopped, RunCanceled, RunFailed
from agent_runtime._key import AgentKey
from agent_runtime.agent._core import AgentCore, RunRecord, as_messages
from agent_runtime.config import QueueMode
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.event_stream._subscription import Subscription
from agent_runtime.events import AgentEnd, Canceled, Error, Event
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.types import ModelInfo, ToolSpec
from agent_runtime.messages import AssistantMessage, Message, StopReason, Usage
from agent_runtime.tools import Tool, check_unique
from supervisors import ExitReason, SupervisedActor, monitor

if TYPE_CHECKING:
    from agent_runtime.runtime import Runtime


class AgentState(BaseModel):
    """A snapshot of an agent (JSON round-trippable)."""

    model_config = ConfigDict(frozen=True)

    key: AgentKey
    system_prompt: str
    model: ModelInfo
    tools: list[ToolSpec]
    messages: list[Message]
    is_running: bool
    run_id: str | None = None
    stream_message: AssistantMessage | None = None
    pending_tool_calls: list[str] = Field(default_factory=list)
    error: str | None = None
    steering_queue: list[Message] = Field(default_factory=list)
    follow_up_queue: list[Message] = Field(default_factory=list)
    steering_mode: QueueMode = "one_at_a_time"
    follow_up_mode: QueueMode = "one_at_a_time"


class RunResult(BaseModel):
    """What `Agent.run` returns: the run's new messages, the final text, usage, stop reason."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    new_messages: list[Message]
    text: str
    usage: Usage
    stop_reason: StopReason


class AgentActor(SupervisedActor):
    """The supervised unit of one agent: owns its `AgentCore`, registers it under its key.

    On start it registers in the runtime registry (the entry goes when the actor exits, however
    it exits). A normal stop, or any exit of a `temporary` agent, ends the agent for good
    (its run is aborted and its subscriptions close); a crashed `transient` agent is restarted
    by its supervisor with the same core, so its history and subscriptions carry over.
    """

    def __init__(self, core: AgentCore, handle: Agent) -> None:
        super().__init__()
        self.core = core
        self.handle = handle

    def on_start(self) -> None:
        handle = self.handle
        handle._ref = self.actor_ref
        self.core.runtime.registry.register(
            self.core.key,
            handle,
            ref=self.actor_ref,
            metadata={"model": self.core.model.info.model, "restart": self.core.options["restart"]},
        )

        # A monitor hears the exit at once, also a `kill` from another thread, so the core
        # is shut before anyone can see the registry entry gone.
        monitor(self.actor_ref, self._exited)

    def _exited(self, _ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
        if not reason.abnormal or self.core.options["restart"] == "temporary":
            self.core.shutdown(str(reason))
        else:
            self.core.abort(f"agent_crashed: {reason}")


class Agent:
    """The handle of one agent: every method is thread-safe and returns promptly, also while
    a run is busy (runs execute on the runtime's event loop, not on the caller's thread).

    Raises (every method but `stop()`, which is idempotent, and the `key`, `alive` and `ref`
    properties): AgentStopped once the agent was stopped.
    """

    def __init__(self, core: AgentCore) -> None:
        self._core = core
        self._ref: pykka.ActorRef[Any] | None = None

    # -- identity -------------------------------------------------------------------------------

    @property
    def key(self) -> AgentKey:
        """The agent's `(session, role, index)`."""
        return self._core.key

    @property
    def ref(self) -> pykka.ActorRef[Any]:
        """The current actor's pykka ref (for `supervisors.kill` and monitoring)."""
        assert self._ref is not None
        return self._ref

    @property
    def alive(self) -> bool:
        """True until the agent is stopped for good."""
        return not self._core.stopped and self._ref is not None and self._ref.is_alive()

    # -- runs -----------------------------------------------------------------------------------

    def prompt(self, input: str | Message | Sequence[Message]) -> str:
        """Start a run with `input`; returns its run id at once.

        Raises:
            AgentBusy: a run is in progress (steer or follow up instead).
            TypeError: `input` is not a str, a Message or a list of Messages.
        """
        return self._core.start(as_messages(input)).run_id

    def continue_run(self) -> str:
        """Start a run from the history without new input; returns its run id.

        Raises:
            AgentBusy: a run is in progress.
            CannotContinue: the history is empty or ends with an assistant message.
        """
        return self._core.start(None).run_id

    def steer(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for the running run: it is delivered at the next tool boundary or
        after the current answer (remaining tool calls of the batch are skipped)."""
        (msg,) = as_messages(message)
        self._core.steer(msg, system_prompt)

    def follow_up(self, message: str | Message, *, system_prompt: str | None = None) -> None:
        """Queue a message for when the agent would otherwise stop."""
        (msg,) = as_messages(message)
        self._core.follow_up(msg, system_prompt)

    def abort(self, reason: str = "user_abort") -> bool:
        """Abort the running run (and its delegated subagents); False if none was running."""
        self._core.check_alive()
        return self._core.abort(reason)

    def wait_for_idle(self, timeout: float | None = None) -> None:
        """Block until no run is in progress.

        Raises:
            TimeoutError: still running after `timeout` seconds.
            AgentStopped: the agent was stopped before the call.
        """
        self._core.check_alive()
        self._core.wait_idle(timeout)

    def run(
        self, input: str | Message | Sequence[Message], timeout: float | None = None
    ) -> RunResult:
        """Prompt and wait for the run's end.

        Raises:
            AgentBusy: a run is in progress.
            RunFailed: the run ended with an error (`reason`, `partial`).
            RunCanceled: the run was aborted (`reason`).
            TimeoutError: it did not end within `timeout` (the run goes on).
        """
        record = self._core.start(as_messages(input))
        try:
            terminal = record.outcome.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"run {record.run_id} did not end within {timeout}s") from None
        return run_result(record, terminal)

    async def arun(
        self, input: str | Message | Sequence[Message], timeout: float | None = None
    ) -> RunResult:
        """`run` for asyncio callers: waiting never blocks the event loop."""
        record = self._core.start(as_messages(input))
        try:
            terminal = await asyncio.wait_for(asyncio.wrap_future(record.outcome), timeout)
        except TimeoutError:
            raise TimeoutError(f"run {record.run_id} did not end within {timeout}s") from None
        return run_result(record, terminal)

    def stream(self, input: str | Message | Sequence[Message]) -> Iterator[Event]:
        """Subscribe, prompt, and yield events until this run's end (inclusive), including
        events of subagents it delegates to (tagged with their keys)."""
        sub = self.subscribe()
        try:
            run_id = self.prompt(input)
            yield from sub.until_end(run_id=run_id)
        finally:
            sub.close()

    async def astream(self, input: str | Message | Sequence[Message]) -> AsyncIterator[Event]:
        """`stream` for asyncio callers."""
        sub = self.subscribe()
        try:
            run_id = self.prompt(input)
            async for event in sub:
                yield event
                if _ends(event, self.key, run_id):
                    return
        finally:
            sub.close()

    def subscribe(
        self, max_queue: int = 1000, overflow: OverflowPolicy = "block", block_timeout: float = 30.0
    ) -> Subscription:
        """A bounded subscription to every event of this agent (and of its delegates).

        Raises:
            ValueError: `max_queue < 1`, an unknown policy or `block_timeout <= 0`.
        """
        return self._core.subscribe(max_queue, overflow, block_timeout)

    # -- state ----------------------------------------------------------------------------------

    def state(self) -> AgentState:
        """A consistent snapshot of the agent (taken under the agent's lock; the model is
        built after releasing it, so a long history never stalls the run's event loop).

        Raises:
            AgentStopped: the agent was stopped.
        """
        core = self._core
        with core.lock:
            core.check_alive()
            run = core.run
            fields: dict[str, Any] = {
                "key": core.key,
                "system_prompt": core.system_prompt,
                "model": core.model,
                "tools": list(core.tools),
                "messages": list(core.messages),
                "is_running": run is not None,
                "run_id": run.run_id if run else None,
                "stream_message": run.stream_message if run else None,
                "pending_tool_calls": list(run.pending_tool_calls) if run else [],
                "error": core.error,
                "steering_queue": list(core.steering),
                "follow_up_queue": list(core.follow_ups),
                "steering_mode": core.steering_mode,
                "follow_up_mode": core.follow_up_mode,
            }
        fields["model"] = fields["model"].info
        fields["tools"] = [t.spec() for t in fields["tools"]]
        return AgentState(**fields)

    def reset(self) -> None:
        """Abort a running run and wait for its end, then clear history, queues and error
        (system prompt, model and tools stay).

        Raises:
            AgentStopped: the agent was stopped.
            TimeoutError: the aborted run did not end within 10 s.
        """
        self._core.check_alive()
        self._core.reset()

    def set_system_prompt(self, prompt: str) -> None:
        """Use `prompt` from the next run on."""
        with self._core.lock:
            self._core.check_alive()
            self._core.system_prompt = prompt

    def set_model(self, model: ChatModel) -> None:
        """Use `model` from the next run on."""
        if not isinstance(model, ChatModel):
            raise TypeError(f"model must be a ChatModel, not {type(model).__name__}")
        with self._core.lock:
            self._core.check_alive()
            self._core.model = model

    def set_tools(self, tools: Sequence[Tool]) -> None:
        """Use `tools` from the next run on.

        Raises:
            ValueError: duplicate or invalid tool names.
        """
        check_unique(list(tools))
        with self._core.lock:
            self._core.check_alive()
            self._core.tools = list(tools)

    def set_steering_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run."""
        _check_mode(mode)
        with self._core.lock:
            self._core.check_alive()
            self._core.steering_mode = mode

    def set_follow_up_mode(self, mode: QueueMode) -> None:
        """`one_at_a_time` or `all`; applies at the next consumption, even mid-run."""
        _check_mode(mode)
        with self._core.lock:
            self._core.check_alive()
            self._core.follow_up_mode = mode

    def stop(self) -> None:
        """Abort the run, stop the agent and its spawned subagents; idempotent."""
        runtime: Runtime = self._core.runtime
        runtime.subagents.stop(self)

    def __repr__(self) -> str:
        return f"<Agent {tuple(self.key)} alive={self.alive}>"


def _check_mode(mode: object) -> None:
    if mode not in get_args(QueueMode):
        raise ValueError(f"unknown queue mode {mode!r} (expected one of: one_at_a_time, all)")


def _ends(event: Event, key: AgentKey, run_id: str) -> bool:
    return (
        isinstance(event, AgentEnd | Error | Canceled)
        and event.agent == key
        and event.run_id == run_id
    )


def run_result(record: RunRecord, terminal: Event) -> RunResult:
    """The RunResult of a finished run, or its failure raised (RunFailed, RunCanceled)."""
    if isinstance(terminal, Error):
        raise RunFailed(terminal.reason, terminal.partial)
    if isinstance(terminal, Canceled):
        raise RunCanceled(terminal.reason)
    assert isinstance(terminal, AgentEnd)
    replies = [m for m in terminal.new_messages if isinstance(m, AssistantMessage)]
    usage = Usage()
    for reply in replies:
        usage = usage + reply.usage
    last = replies[-1] if replies else None
    return RunResult(
        run_id=record.run_id,
        new_messages=list(terminal.new_messages),
        text=last.text if last else "",
        usage=usage,
        stop_reason=last.stop_reason if last else "stop",
    )


__all__ = ["Agent", "AgentActor", "AgentState", "AgentStopped", "RunResult"]
