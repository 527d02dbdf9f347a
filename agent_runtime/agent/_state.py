"""AgentState and RunResult: what callers get back from an agent (JSON round-trippable)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent_runtime._errors import RunCanceled, run_failed
from agent_runtime._key import AgentKey
from agent_runtime.config import QueueMode
from agent_runtime.events import AgentEnd, Canceled, Error, Event
from agent_runtime.llm.types import ModelInfo, ToolSpec
from agent_runtime.messages import AssistantMessage, Message, StopReason, Usage


class AgentState(BaseModel):
    """A snapshot of an agent, taken by its actor in one step (JSON round-trippable)."""

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
    subscriptions: int = 0  # open subscriptions to this agent


class RunResult(BaseModel):
    """What `Agent.run` returns: the run's new messages, the final text, usage, stop reason.

    `memory_error` is None once the run's turns were all committed to session memory (or the
    agent does not write to it); otherwise it says why a turn was not stored (a locked
    database, a full disk). The result stands either way: the agent's own history holds
    every new message, but other agents of the session and a restarted agent will not see
    the turns that failed.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    new_messages: list[Message]
    text: str
    usage: Usage
    stop_reason: StopReason
    memory_error: str | None = None


def run_result(run_id: str, terminal: Event) -> RunResult:
    """The RunResult of a finished run, or its failure raised (RunFailed, RunCanceled)."""
    if isinstance(terminal, Error):
        raise run_failed(terminal.reason, terminal.partial)
    if isinstance(terminal, Canceled):
        raise RunCanceled(terminal.reason)
    assert isinstance(terminal, AgentEnd)
    replies = [m for m in terminal.new_messages if isinstance(m, AssistantMessage)]
    usage = Usage()
    for reply in replies:
        usage = usage + reply.usage
    last = replies[-1] if replies else None
    return RunResult(
        run_id=run_id,
        new_messages=list(terminal.new_messages),
        text=last.text if last else "",
        usage=usage,
        stop_reason=last.stop_reason if last else "stop",
        memory_error=terminal.memory_error,
    )
