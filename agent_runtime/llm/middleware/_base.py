"""Middleware: a ChatModel that wraps a ChatModel and adds one cross-cutting behaviour."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.base import BaseChatModel, ChatModel
from agent_runtime.llm.types import ChatRequest, ChatResponse, ModelInfo, StreamChunk


class Middleware(BaseChatModel):
    """Delegates to `inner` unchanged; subclasses override `generate` and/or `stream`.

    The inner model keeps doing its own capability checks and abort handling, so a
    middleware only adds its behaviour and passes `signal` through.
    """

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    @property
    def info(self) -> ModelInfo:
        """The wrapped model's info."""
        return self.inner.info

    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        return self.inner.stream(request)

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """The wrapped model's `generate`."""
        return await self.inner.generate(request, signal=signal)

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The wrapped model's `stream`."""
        return self.inner.stream(request, signal=signal)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"
