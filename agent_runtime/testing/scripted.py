"""ScriptedModel: a deterministic ChatModel that plays one scripted turn per call.

Importing this module registers the `scripted` profile kind with the LLM factory (a
ScriptedModel without turns that echoes), so `agent_runtime.llm.from_config` can build it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_runtime.config import ModelProfile, RuntimeConfig
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.errors import LLMError
from agent_runtime.llm.factory import profile_pricing, register_profile_kind
from agent_runtime.llm.types import (
    ALL_CAPABILITIES,
    Capability,
    ChatRequest,
    FinishDelta,
    ModelInfo,
    ModelPricing,
    StreamChunk,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    UsageDelta,
)
from agent_runtime.messages import StopReason, ToolCall, Usage, UserMessage


class ScriptedTurn(BaseModel):
    """One scripted answer.

    `text` is the answer; `chunks` (when given) are its streamed deltas, in order, and
    `text` defaults to their concatenation. `delay` waits before the first chunk,
    `chunk_delay` between chunks. `tool_calls` are requested after the text. `error` (an
    `LLMError`) is raised after the turn's chunks. `thinking`, `usage` and `stop_reason`
    override what would be derived (`stop_reason` is `tool_use` when there are tool calls,
    else `stop`).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    chunks: list[str] | None = None
    delay: float = Field(default=0.0, ge=0)
    chunk_delay: float = Field(default=0.0, ge=0)
    error: LLMError | None = None
    thinking: str = ""
    thinking_signature: str | None = None
    usage: Usage | None = None
    stop_reason: StopReason | None = None

    def __init__(
        self,
        text: str = "",
        tool_calls: list[ToolCall] | None = None,
        chunks: list[str] | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        error: LLMError | None = None,
        **extra: Any,
    ) -> None:
        """The DESIGN.md signature, positional or by keyword; `extra` sets the other fields.

        Raises:
            pydantic.ValidationError: a value of the wrong type, a negative delay, an unknown
                field, or `chunks` that do not add up to `text`.
        """
        super().__init__(
            text=text,
            tool_calls=[] if tool_calls is None else tool_calls,
            chunks=chunks,
            delay=delay,
            chunk_delay=chunk_delay,
            error=error,
            **extra,
        )

    @model_validator(mode="after")
    def _chunks_match_text(self) -> ScriptedTurn:
        if self.chunks is not None:
            joined = "".join(self.chunks)
            if not self.text:
                object.__setattr__(self, "text", joined)
            elif joined != self.text:
                raise ValueError(f"chunks {self.chunks!r} do not add up to text {self.text!r}")
        return self

    def text_chunks(self) -> list[str]:
        """The streamed deltas of the text (one chunk when `chunks` is not given)."""
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        return [self.text] if self.text else []

    def final_stop_reason(self) -> StopReason:
        """The stop reason the turn ends with."""
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "stop"

    def final_usage(self, request: ChatRequest | None = None) -> Usage:
        """The turn's usage: as scripted, else a deterministic estimate (4 chars a token)."""
        if self.usage is not None:
            return self.usage
        prompt_chars = len(request.model_dump_json()) if request is not None else 0
        out_chars = len(self.text) + sum(len(json.dumps(c.arguments)) for c in self.tool_calls)
        return Usage(input_tokens=prompt_chars // 4, output_tokens=max(out_chars // 4, 1))

    def deltas(self, request: ChatRequest | None = None) -> Iterator[StreamChunk]:
        """The turn as provider-independent stream chunks (without delays or the error)."""
        if self.thinking or self.thinking_signature:
            yield ThinkingDelta(text=self.thinking)
            if self.thinking_signature:
                yield ThinkingDelta(signature=self.thinking_signature)
        for piece in self.text_chunks():
            yield TextDelta(text=piece)
        for index, call in enumerate(self.tool_calls):
            yield ToolCallDelta(
                index=index, id=call.id, name=call.name, arguments=json.dumps(call.arguments)
            )
        yield UsageDelta(usage=self.final_usage(request))


class ScriptedModel(BaseChatModel):
    """A ChatModel that answers each call with the next `ScriptedTurn`.

    Deterministic and thread-safe; records every request (`requests`, `call_count`), unless
    `record_requests=False` (then `requests` stays empty: for long soaks and benchmarks, where
    kept requests would hold every history). A call after the script ran out raises
    `ScriptExhausted` naming how many turns there were, or, with `echo=True` (the offline
    `scripted` profile), answers `echo: <last user text>`.
    """

    def __init__(
        self,
        turns: Iterable[ScriptedTurn | str] = (),
        *,
        model: str = "scripted",
        provider: str = "scripted",
        capabilities: Iterable[Capability] = ALL_CAPABILITIES,
        pricing: ModelPricing | None = None,
        echo: bool = False,
        record_requests: bool = True,
    ) -> None:
        self._lock = threading.Lock()
        self.echo = echo
        self._record = record_requests
        self._calls = 0
        self._turns: list[ScriptedTurn] = [_as_turn(t) for t in turns]
        self._next = 0
        self.requests: list[ChatRequest] = []
        self._info = ModelInfo(
            provider=provider,
            model=model,
            capabilities=frozenset(capabilities),
            pricing=pricing,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider `scripted` unless told otherwise; every capability unless told otherwise."""
        return self._info

    @property
    def call_count(self) -> int:
        """How many calls were made (including ones that failed)."""
        with self._lock:
            return self._calls

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        with self._lock:
            return len(self._turns) - self._next

    def add(self, *turns: ScriptedTurn | str) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(_as_turn(t) for t in turns)

    def _take(self, request: ChatRequest) -> ScriptedTurn:
        with self._lock:
            self._calls += 1
            if self._record:
                self.requests.append(request)
            if self._next >= len(self._turns):
                if self.echo:
                    return ScriptedTurn(text=f"echo: {_last_user_text(request)}")
                raise ScriptExhausted(
                    f"ScriptedModel has no turn left for call {self._calls} "
                    f"(script had {len(self._turns)} turns)"
                )
            turn = self._turns[self._next]
            self._next += 1
            return turn

    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        # Called at the stream's first step (BaseChatModel), so the turn is taken then.
        return play_turn(self._take(request), request)


async def play_turn(turn: ScriptedTurn, request: ChatRequest) -> AsyncIterator[StreamChunk]:
    """`turn` as a model's stream: its delays, its chunks, then its error or its finish.

    What `ScriptedModel` and `FunctionModel` stream for a turn; a failed turn reports no usage.
    """
    if turn.delay:
        await asyncio.sleep(turn.delay)
    first = True
    for chunk in turn.deltas(request):
        if isinstance(chunk, UsageDelta) and turn.error is not None:
            continue  # a failed turn reports no usage
        if isinstance(chunk, TextDelta) and not first and turn.chunk_delay:
            await asyncio.sleep(turn.chunk_delay)
        first = first and not isinstance(chunk, TextDelta)
        yield chunk
    if turn.error is not None:
        raise turn.error
    yield FinishDelta(reason=turn.final_stop_reason())


class ScriptExhausted(LLMError):
    """A ScriptedModel was called more often than it has turns."""

    default_code = "script_exhausted"


def _last_user_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def _as_turn(turn: ScriptedTurn | str | Any) -> ScriptedTurn:
    if isinstance(turn, ScriptedTurn):
        return turn
    if isinstance(turn, str):
        return ScriptedTurn(text=turn)
    raise TypeError(f"a script turn must be a ScriptedTurn or a str, not {type(turn).__name__}")


def _build_scripted(name: str, profile: ModelProfile, config: RuntimeConfig) -> ScriptedModel:
    """The model of a `scripted` profile: no turns, answering `echo: <last user text>`."""
    return ScriptedModel(
        model=profile.model or "scripted", pricing=profile_pricing(profile), echo=True
    )


register_profile_kind("scripted", _build_scripted)
