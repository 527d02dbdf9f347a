"""CachingModel: an in-memory LRU of complete, deterministic answers."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.middleware._base import Middleware
from agent_runtime.llm.types import (
    ChatRequest,
    ChatResponse,
    FinishDelta,
    StreamChunk,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    UsageDelta,
)
from agent_runtime.messages import TextContent, ThinkingContent, ToolCall, Usage


class CachingModel(Middleware):
    """Answers a request seen before from memory.

    - Only deterministic requests are cached: `temperature` None or 0, unless `force=True`.
    - Truncated (`length`) and failed answers are never cached.
    - A hit reports zero usage and zero cost (nothing was spent); `hits`/`misses` count.
    - Streams are cached too: a hit replays the answer as chunks.
    The key covers the model identity and the whole request (messages, tools, options), not
    message timestamps. Thread-safe LRU of `max_entries`.
    """

    def __init__(self, inner: ChatModel, *, max_entries: int = 256, force: bool = False) -> None:
        super().__init__(inner)
        if max_entries < 1:
            raise ValueError(f"invalid max_entries {max_entries!r} (expected >= 1)")
        self.max_entries = max_entries
        self.force = force
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, ChatResponse] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def _key(self, request: ChatRequest) -> str | None:
        if not self.force and request.temperature not in (None, 0):
            return None
        info = self.inner.info
        payload = request.model_dump_json(exclude={"messages": {"__all__": {"timestamp"}}})
        digest = hashlib.sha256(f"{info.provider}\0{info.model}\0{payload}".encode())
        return digest.hexdigest()

    def _get(self, key: str | None) -> ChatResponse | None:
        if key is None:
            return None
        with self._lock:
            cached = self._entries.get(key)
            if cached is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return cached

    def _put(self, key: str | None, response: ChatResponse) -> None:
        if key is None or response.truncated or response.stop_reason == "error":
            return
        kept = response.model_copy(deep=True)  # the caller's answer may be changed by it
        with self._lock:
            self._entries[key] = kept
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """A cached answer (zero usage) or the inner model's, cached when eligible."""
        key = self._key(request)
        cached = self._get(key)
        if cached is not None:
            return _as_hit(cached)
        response = await self.inner.generate(request, signal=signal)
        self._put(key, response)
        return response

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """A replay of a cached answer, or the inner stream (cached once it completed)."""
        return self._cached_stream(request, signal)

    async def _cached_stream(
        self, request: ChatRequest, signal: AbortSignal | None
    ) -> AsyncIterator[StreamChunk]:
        key = self._key(request)
        cached = self._get(key)
        if cached is not None:
            for chunk in replay(_as_hit(cached)):
                yield chunk
            return
        info = self.inner.info
        builder = ChatResponseBuilder(model=info.model, provider=info.provider)
        async for chunk in self.inner.stream(request, signal=signal):
            builder.add(chunk)
            yield chunk
        if builder.finished:
            self._put(key, builder.build())


def _as_hit(response: ChatResponse) -> ChatResponse:
    zero = Usage()
    # Deep: a caller that changes its answer (a content list) must not change later hits.
    message = response.message.model_copy(update={"usage": zero}, deep=True)
    return response.model_copy(update={"usage": zero, "cost": 0.0, "message": message})


def replay(response: ChatResponse) -> Iterator[StreamChunk]:
    """A complete response as the stream chunks that would assemble to it."""
    for index, block in enumerate(response.message.content):
        if isinstance(block, TextContent):
            yield TextDelta(text=block.text)
        elif isinstance(block, ThinkingContent):
            yield ThinkingDelta(
                text=block.thinking, signature=block.signature, redacted=block.redacted
            )
        elif isinstance(block, ToolCall):
            yield ToolCallDelta(
                index=index,
                id=block.id,
                name=block.name,
                arguments=block.raw_arguments or json.dumps(block.arguments),
            )
    yield UsageDelta(usage=response.usage)
    yield FinishDelta(reason=response.stop_reason, raw_reason=response.raw_finish_reason)
