"""The ChatModel port: the protocol every adapter, middleware and test double satisfies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.types import ChatRequest, ChatResponse, ModelInfo, StreamChunk


@runtime_checkable
class ChatModel(Protocol):
    """The one port to every LLM: async first, with sync twins for plain scripts.

    Cancelling the task that awaits `generate` or iterates `stream`, or aborting the
    `signal` given to them, closes the HTTP response at once; an abort raises
    `agent_runtime.Aborted`.
    """

    @property
    def info(self) -> ModelInfo:
        """Provider, model name and capabilities."""
        ...

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """One complete answer."""
        ...

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The answer as chunks, ending with a `FinishDelta`."""
        ...

    async def prompt(
        self, text: str, system: str | None = None, *, signal: AbortSignal | None = None
    ) -> str:
        """Shortcut: one user message in, the answer text out."""
        ...

    def generate_sync(
        self,
        request: ChatRequest,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> ChatResponse:
        """`generate` for code without an event loop."""
        ...

    def prompt_sync(
        self, text: str, system: str | None = None, *, timeout: float | None = None
    ) -> str:
        """`prompt` for code without an event loop."""
        ...
