"""AgentState and RunResult: what callers get back from an agent (JSON round-trippable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypeVar

from agent_runtime._errors import OutputValidationError, RunCanceled, RunFailed, run_failed
from agent_runtime._key import AgentKey
from agent_runtime.agent._approvals import PendingApproval
from agent_runtime.config import QueueMode
from agent_runtime.events import AgentEnd, Canceled, Error, Event
from agent_runtime.llm.types import ModelInfo, ToolSpec
from agent_runtime.loop._output import OutputSpec
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
    # Tool calls waiting for `approve` / `deny`, of the run or of a turn parked in memory.
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    error: str | None = None
    steering_queue: list[Message] = Field(default_factory=list)
    follow_up_queue: list[Message] = Field(default_factory=list)
    steering_mode: QueueMode = "one_at_a_time"
    follow_up_mode: QueueMode = "one_at_a_time"
    subscriptions: int = 0  # open subscriptions to this agent


# A run's output type. The default, Any, is what a bare `RunResult` or `Agent` stands for (an
# agent found by key, a parameter taking any agent); `start_agent` and `run` give the precise
# one. (Any, not str, also because pydantic validates an unparametrized field as the default.)
OutputT = TypeVar("OutputT", default=Any)


class RunResult(BaseModel, Generic[OutputT]):
    """What `Agent.run` returns: the run's new messages, the final text, usage, stop reason.

    `memory_error` is None once the run's turns were all committed to session memory (or the
    agent does not write to it); otherwise it says why a turn was not stored (a locked
    database, a full disk). The result stands either way: the agent's own history holds
    every new message, but other agents of the session and a restarted agent will not see
    the turns that failed.

    `output` is the run's output, typed `OutputT` for checkers (`RunResult[Book]` from an
    `Agent[Book]` or a run's `output_type=Book`): validated as the `output_type` the run had
    (its own or the agent's default), or what `on_failure` made of a failure; without an
    `output_type` it is the final answer's text (`text`).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    new_messages: list[Message]
    text: str
    usage: Usage
    stop_reason: StopReason
    memory_error: str | None = None
    # The default is the text (`_text_is_the_output`), for a result built by hand (a test of an
    # evaluator); None only stands in for it in the signature.
    output: OutputT = Field(default=cast(Any, None))

    @model_validator(mode="before")
    @classmethod
    def _text_is_the_output(cls, data: Any) -> Any:
        if isinstance(data, dict) and "output" not in data:
            return {**data, "output": data.get("text", "")}
        return data


def run_result(
    run_id: str,
    terminal: Event,
    output: OutputSpec | None = None,
    on_failure: Callable[[Exception], Any] | None = None,
) -> RunResult[Any]:
    """The RunResult of a finished run, or its failure raised (RunFailed, RunCanceled).

    With `output`, the final answer is validated as its type into `RunResult.output`
    (`OutputValidationError` if it is not), without it `output` is the answer's text; with
    `on_failure`, a failure (`RunFailed` and
    its subclasses, not a cancellation) becomes a result whose `output` is what
    `on_failure(exception)` returned (an exception it raises propagates).
    """
    try:
        return _result(run_id, terminal, output)
    except RunFailed as failure:
        if on_failure is None:
            raise
        fallback = on_failure(failure)
        partial = failure.partial if isinstance(failure.partial, AssistantMessage) else None
        return RunResult(
            run_id=run_id,
            new_messages=[],
            text=partial.text if partial is not None else "",
            usage=partial.usage if partial is not None else Usage(),
            stop_reason="error",
            output=fallback,
        )


def _result(run_id: str, terminal: Event, output: OutputSpec | None) -> RunResult[Any]:
    if isinstance(terminal, Error):
        partial = terminal.partial
        if (
            output is not None
            and terminal.reason.startswith("output_invalid:")
            and isinstance(partial, AssistantMessage)
        ):
            parsed = output.parse(partial)
            raise OutputValidationError(
                terminal.reason, raw=parsed.raw, errors=parsed.errors, partial=partial
            )
        raise run_failed(terminal.reason, partial)
    if isinstance(terminal, Canceled):
        raise RunCanceled(terminal.reason)
    assert isinstance(terminal, AgentEnd)
    replies = [m for m in terminal.new_messages if isinstance(m, AssistantMessage)]
    usage = replies[0].usage if replies else Usage()  # frozen: one reply's is the sum
    for reply in replies[1:]:
        usage = usage + reply.usage
    last = replies[-1] if replies else None
    text = last.text if last else ""
    value: Any = text
    if output is not None:
        parsed = output.parse(last if last is not None else AssistantMessage())
        if not parsed.ok:
            raise OutputValidationError(
                f"output_invalid: the final answer is not a valid {output.name}",
                raw=parsed.raw,
                errors=parsed.errors,
                partial=last,
            )
        value = parsed.value
    return RunResult(
        run_id=run_id,
        new_messages=list(terminal.new_messages),
        text=text,
        usage=usage,
        stop_reason=last.stop_reason if last else "stop",
        memory_error=terminal.memory_error,
        output=value,
    )
