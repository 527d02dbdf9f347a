"""SwitchableModel: swap the model behind a handle at run time."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator

from agent_runtime.abort import AbortSignal
from agent_runtime.llm.base import BaseChatModel, ChatModel
from agent_runtime.llm.types import ChatRequest, ChatResponse, ModelInfo, StreamChunk
from supervisors._log import get_logger

log = get_logger(__name__)


class SwitchableModel(BaseChatModel):
    """Delegates to a current model that `switch_to` replaces.

    A switch takes effect for the next request; a call already under way (including a
    stream being iterated) finishes on the model it started with. Thread-safe.
    """

    def __init__(self, model: ChatModel) -> None:
        self._lock = threading.Lock()
        self._current = model

    @property
    def current(self) -> ChatModel:
        """The model the next request goes to."""
        with self._lock:
            return self._current

    def switch_to(self, model: ChatModel) -> ChatModel:
        """Make `model` current; returns the previous one."""
        with self._lock:
            previous, self._current = self._current, model
        log.info(
            "llm.model.switched",
            previous=f"{previous.info.provider}/{previous.info.model}",
            current=f"{model.info.provider}/{model.info.model}",
        )
        return previous

    @property
    def info(self) -> ModelInfo:
        """The current model's info."""
        return self.current.info

    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        return self.current.stream(request)

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """The current model's answer."""
        return await self.current.generate(request, signal=signal)

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The current model's stream (bound now: a later switch does not affect it)."""
        return self.current.stream(request, signal=signal)
