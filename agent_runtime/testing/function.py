"""FunctionModel: a ChatModel whose every answer is computed by a Python function.

The test double for replies that depend on the request (the tools offered, the last tool
result, the system prompt), where a fixed script (`ScriptedModel`) is not enough.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from types import GeneratorType
from typing import TypeAlias

from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.types import (
    ALL_CAPABILITIES,
    Capability,
    ChatRequest,
    ModelInfo,
    ModelPricing,
    StreamChunk,
    TextDelta,
)
from agent_runtime.messages import AssistantMessage, TextContent, ThinkingContent
from agent_runtime.testing.scripted import ScriptedTurn, play_turn

Reply: TypeAlias = str | AssistantMessage | ScriptedTurn
"""What a FunctionModel's function returns: the text, a whole reply, or a turn to stream."""

ReplyFunction: TypeAlias = Callable[
    [ChatRequest], Reply | Awaitable[Reply] | Iterator[str] | AsyncIterator[str]
]
"""A FunctionModel's function: sync or async, from the request to its reply; or a generator
(sync or async) of the text's pieces."""


class FunctionModel(BaseChatModel):
    """A ChatModel that answers each call with what `fn(request)` returns.

    `fn` takes the `ChatRequest` and returns (or, when async, resolves to) a `str` (the
    answer's text), an `AssistantMessage` (its text, thinking, tool calls, and its usage and
    stop reason when set) or a `ScriptedTurn` (everything a scripted turn can do: text
    streamed in `chunks`, delays, tool calls, an `LLMError` raised after the chunks). The
    reply is streamed exactly as `ScriptedModel` streams that turn. A generator function (sync
    or async) instead streams the text as it yields it, one delta per `str` piece, for tests
    that act between chunks.

    Guarantees:
    - An async `fn` runs on the caller's event loop (an abort cancels it); a sync `fn` runs
      in a worker thread, so one that blocks holds up no other run.
    - Every call is recorded (`requests`, `call_count`, in call order; thread-safe) before
      `fn` runs, including calls whose `fn` raises; `record_requests=False` keeps
      `requests` empty for long soaks.
    - What `fn` raises propagates as the model's error (an `LLMError` is retried by the
      loop's policy like a provider's).
    - `info` is provider `function`, model `function:<fn's name>`, every capability, unless
      told otherwise.

    Raises (from the stream):
        TypeError: `fn` returned (or yielded) something else; the message names its type.
    """

    def __init__(
        self,
        fn: ReplyFunction,
        *,
        model: str | None = None,
        provider: str = "function",
        capabilities: Iterable[Capability] = ALL_CAPABILITIES,
        pricing: ModelPricing | None = None,
        record_requests: bool = True,
    ) -> None:
        """Raises:
        TypeError: `fn` is not callable.
        """
        if not callable(fn):
            raise TypeError(f"FunctionModel needs a callable, not {type(fn).__name__}")
        self.fn = fn
        self._name = getattr(fn, "__name__", None) or type(fn).__name__
        self._lock = threading.Lock()
        self._record = record_requests
        self._calls = 0
        self.requests: list[ChatRequest] = []
        self._info = ModelInfo(
            provider=provider,
            model=model if model is not None else f"function:{self._name}",
            capabilities=frozenset(capabilities),
            pricing=pricing,
        )

    @property
    def info(self) -> ModelInfo:
        """Provider, model name (`function:<fn's name>` unless given) and capabilities."""
        return self._info

    @property
    def call_count(self) -> int:
        """How many calls were made (including ones whose function raised)."""
        with self._lock:
            return self._calls

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        with self._lock:
            self._calls += 1
            if self._record:
                self.requests.append(request)
        reply = await self._reply(request)
        if isinstance(reply, AsyncIterator | GeneratorType):
            async for chunk in self._play_pieces(reply, request):
                yield chunk
            return
        async for chunk in play_turn(_turn_of(reply, self._name), request):
            yield chunk

    async def _play_pieces(
        self, pieces: AsyncIterator[object] | Iterator[object], request: ChatRequest
    ) -> AsyncIterator[StreamChunk]:
        text: list[str] = []
        async for piece in _each(pieces):
            if not isinstance(piece, str):
                raise TypeError(
                    f"FunctionModel function {self._name} yielded {type(piece).__name__} "
                    "(expected str pieces of the text)"
                )
            if piece:
                text.append(piece)
                yield TextDelta(text=piece)
        # The rest of the turn (usage, finish) as a scripted turn of that text ends.
        async for chunk in play_turn(ScriptedTurn(text="".join(text)), request):
            if not isinstance(chunk, TextDelta):
                yield chunk

    async def _reply(self, request: ChatRequest) -> object:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(request)
        reply = await asyncio.to_thread(self.fn, request)
        if inspect.isawaitable(reply):  # an async callable object, or one returning a coroutine
            return await reply
        return reply

    def __repr__(self) -> str:
        return f"<FunctionModel {self._name}>"


async def _each(pieces: AsyncIterator[object] | Iterator[object]) -> AsyncIterator[object]:
    """The pieces of an async iterator, or of a sync generator stepped in a worker thread."""
    if isinstance(pieces, AsyncIterator):
        async for piece in pieces:
            yield piece
        return
    end = object()
    while (piece := await asyncio.to_thread(next, pieces, end)) is not end:
        yield piece


def _turn_of(reply: object, name: str) -> ScriptedTurn:
    """The `ScriptedTurn` a FunctionModel's function's `reply` stands for.

    Raises:
        TypeError: `reply` is not a str, an AssistantMessage or a ScriptedTurn (named).
    """
    if isinstance(reply, ScriptedTurn):
        return reply
    if isinstance(reply, str):
        return ScriptedTurn(text=reply)
    if isinstance(reply, AssistantMessage):
        return _message_turn(reply)
    raise TypeError(
        f"FunctionModel function {name} returned {type(reply).__name__} "
        "(expected a str, an AssistantMessage or a ScriptedTurn)"
    )


def _message_turn(message: AssistantMessage) -> ScriptedTurn:
    thinking = [b for b in message.content if isinstance(b, ThinkingContent)]
    signatures = [b.signature for b in thinking if b.signature]
    given = message.model_fields_set  # usage and stop reason only as set, else derived
    return ScriptedTurn(
        text="".join(b.text for b in message.content if isinstance(b, TextContent)),
        tool_calls=message.tool_calls,
        thinking="".join(b.thinking for b in thinking),
        thinking_signature=signatures[-1] if signatures else None,
        usage=message.usage if "usage" in given else None,
        stop_reason=message.stop_reason if "stop_reason" in given else None,
    )
