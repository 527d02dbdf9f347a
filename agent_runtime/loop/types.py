"""The loop's inputs: AgentContext (what the model sees), LoopConfig (how a run behaves)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent_runtime._key import AgentKey
from agent_runtime.abort import AbortSignal
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.events import Event, MessageUpdate
from agent_runtime.guardrails._base import Guardrail, validated
from agent_runtime.llm.base import ChatModel, check_chat_model
from agent_runtime.llm.types import ReasoningLevel
from agent_runtime.loop._output import OutputSpec
from agent_runtime.loop._transcript import TranscriptState
from agent_runtime.messages import AssistantMessage, Message
from agent_runtime.tools import Tool

MessagesGetter = Callable[[], list[Message]]
MessagesTransform = Callable[[list[Message]], "list[Message] | Awaitable[list[Message]]"]
SyncRunner = Callable[[Callable[[], Any]], "Future[Any]"]
T = TypeVar("T")
E = TypeVar("E", bound=Event)


class Stamp(Protocol):
    """`stamp(kind, **fields)`: a new event of the run, with its identity and next `seq`."""

    def __call__(self, kind: type[E], /, **fields: Any) -> E: ...


class UpdateSink(Protocol):
    """Takes a run's streamed tokens in place of the run's generator yielding them."""

    def heard(self) -> bool:
        """Whether a `MessageUpdate` made now would reach anyone. While nobody hears, the
        loop makes none (no `seq` is used: each stream stays gap-free) and calls `unheard`."""
        ...

    def update(self, event: MessageUpdate) -> Awaitable[None] | None:
        """Take one `MessageUpdate`; returns None, or an awaitable the run awaits before it
        reads the next chunk (the consumer's backpressure)."""
        ...

    def unheard(self, answer: Callable[[], AssistantMessage]) -> None:
        """Tokens of the answer now streaming go unheard: `answer()` makes the message as far
        as it has grown when called (until the next `MessageEnd`). Called once when tokens
        stop being heard, not once per token."""
        ...


class LoopHost(Protocol):
    """Where `loop.stream` runs a run: what the loop needs of a runtime (`Runtime` is one)."""

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a task on the host's event loop."""
        ...

    def run_sync(self, fn: Callable[[], T]) -> Future[T]:
        """Run a synchronous call (a tool) off the event loop."""
        ...

    def new_signal(self) -> AbortSignal:
        """A new abort signal (one the host aborts when it stops)."""
        ...


class RetryPolicy(BaseModel):
    """Provider retry: capped exponential backoff with jitter, in seconds (DESIGN.md 7).

    Retry number n waits `min(max_delay, base_delay * 2**(n-1))`, spread by +-`jitter`; a
    provider's retry-after hint wins when longer, honoured up to `max_retry_after`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(default=3, ge=0)
    base_delay: float = Field(default=2.0, ge=0)
    max_delay: float = Field(default=30.0, ge=0)
    max_retry_after: float = Field(default=120.0, ge=0)
    jitter: float = Field(default=0.1, ge=0, lt=1)


class AgentContext(BaseModel):
    """What a run starts from: the system prompt, the transcript so far and the tools.

    `transcript` (optional) is the caller's `TranscriptState` of exactly these `messages`
    (an agent keeps one as its history grows): the run takes it over (pass a copy to keep
    yours) and checks only what it adds, so its cost does not grow with the history. Without
    it the run checks the whole transcript once.

    The run copies `messages` as it starts: the caller's list is never read again.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    system_prompt: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: Sequence[Tool] = Field(default_factory=list)
    transcript: TranscriptState | None = None

    def __init__(
        self,
        system_prompt: str = "",
        messages: Sequence[Message] | None = None,
        tools: Sequence[Tool] | None = None,
        transcript: TranscriptState | None = None,
    ) -> None:
        """`AgentContext(system_prompt, messages, tools)`, positional or by keyword."""
        super().__init__(
            system_prompt=system_prompt,
            messages=list(messages or []),
            tools=list(tools or []),
            transcript=transcript,
        )


class LoopConfig(BaseModel):
    """How a run behaves.

    Callables are called on the run's event-loop thread, so a slow one stalls every run on
    that loop (by design: no thread hop per call); they must not block:
    - `get_steering_messages` / `get_follow_up_messages` return (and consume) queued
      messages; the loop delivers exactly what one call returns before the next model call
      (so a getter returning one message gives `one_at_a_time`). They are not called once
      the run is aborted.
    - `convert_to_llm` filters what the model sees; `transform_context` rewrites the
      transcript before each call (e.g. `context.make_transform`); make a slow transform
      `async def` (it is awaited) and offload CPU-heavy work with `asyncio.to_thread`.
    - `on_undelivered_steering` / `on_undelivered_follow_ups` receive messages the run took
      from a getter but could not deliver (abort, tool-turn limit, the generator closed),
      so the owner can queue them again; each message is either delivered (its MessageEnd
      yielded) or handed back, never both.
    - `get_system_prompt`, when set, is asked before every model call (so a system prompt
      changed mid-run applies to the next call); otherwise the context's prompt is used.
    - `spawner` becomes `ToolContext.spawn` for the run's tools (the agent wires it).
    - `trace_links`: the span the run was started under, as an OpenTelemetry link (the
      agent passes the caller's current one): the run's `agent.run` span becomes its child,
      so a delegated subagent's run is a child of the tool span that started it.
    - `output`: the run's typed output (`OutputSpec.of(type, retries)`): every model call asks
      for it and an answer ending the run is validated; an invalid one is told what failed and
      asked again `retries` times, then the run ends with `Error("output_invalid: ...")`.
    - `stream_max_queue` / `stream_overflow`: the bound of the EventStream `loop.stream`
      returns; None takes the host's `[event_stream]` config (a Runtime has one), else
      EventStream's own defaults (10000, "error").
    - `guardrails` check the text at their points (`agent_runtime.Guardrail`): a blocking
      failure at `model_request`, `model_response` or `tool_result` ends the run with
      `Error(reason="guardrail: NAME at POINT: EXPLANATION")`; at `tool_call` the call is not
      run and gets an error result (`details["outcome"] == "blocked"`) the model reads. None
      (the default) costs a run nothing.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    model: ChatModel

    def __init__(self, model: ChatModel, **options: Any) -> None:
        """`LoopConfig(model, **options)`: the model positional or by keyword, options by
        keyword (validated as the fields; an unknown one is rejected)."""
        super().__init__(model=model, **options)

    max_tool_concurrency: int = Field(default=8, ge=1)
    max_tool_turns: int = Field(default=25, ge=1)
    tool_timeout: float | None = Field(default=None, gt=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    abort_grace: float = Field(default=0.25, ge=0)
    get_steering_messages: MessagesGetter | None = None
    get_follow_up_messages: MessagesGetter | None = None
    convert_to_llm: Callable[[list[Message]], list[Message]] | None = None
    transform_context: MessagesTransform | None = None
    on_undelivered_steering: Callable[[list[Message]], None] | None = None
    on_undelivered_follow_ups: Callable[[list[Message]], None] | None = None
    temperature: float | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, ge=1)
    reasoning: ReasoningLevel | None = None
    tool_choice: str | None = None
    run_id: str = ""
    agent: AgentKey | None = None
    runtime: Any = None
    run_sync: SyncRunner | None = None
    get_system_prompt: Callable[[], str] | None = None
    trace_links: Sequence[Any] = Field(default_factory=list)
    spawner: Callable[..., Any] | None = None
    stream_max_queue: int | None = Field(default=None, ge=1)
    stream_overflow: OverflowPolicy | None = None
    output: OutputSpec | None = None
    guardrails: tuple[Guardrail, ...] = ()
    # Tool approval (`loop._approval`): where waiting calls are decided (an `Approver`, wired
    # by an agent; None: a call that needs approval is not run), how long one may wait
    # (None: until decided), and a turn parked for approval that this run resumes first.
    approvals: Any = None
    approval_timeout: float | None = Field(default=None, gt=0)
    resume: Any = None

    @field_validator("model", mode="plain")  # the whole check: no second isinstance after it
    @classmethod
    def _check_model(cls, value: object) -> object:
        return check_chat_model(value)

    @field_validator("guardrails", mode="plain")
    @classmethod
    def _check_guardrails(cls, value: object) -> tuple[Guardrail, ...]:
        if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
            raise TypeError(f"guardrails must be a list of Guardrails, not {type(value).__name__}")
        return tuple(validated(g) for g in value)
