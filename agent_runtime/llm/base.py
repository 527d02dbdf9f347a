"""BaseChatModel, which gives every adapter the shared behaviour of the ChatModel port.

`ChatModel` itself lives in `agent_runtime.llm._port` (so that `structured`, which only needs
the port, does not import this module back) and is re-exported here, its public path.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import TypeVar

from pydantic import BaseModel

from agent_runtime.abort import AbortSignal
from agent_runtime.llm._abortable import await_abortable, iterate_abortable
from agent_runtime.llm._port import ChatModel
from agent_runtime.llm._sync import run_sync
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.errors import CapabilityNotSupportedError
from agent_runtime.llm.structured import generate_structured
from agent_runtime.llm.types import (
    Capability,
    ChatRequest,
    ChatResponse,
    ModelInfo,
    StreamChunk,
    needed_capabilities,
    with_cost,
)
from agent_runtime.messages import UserMessage

__all__ = ["BaseChatModel", "ChatModel"]

M = TypeVar("M", bound=BaseModel)


_CONFORMING_MODELS: set[type] = set()  # types found to be ChatModels (not BaseChatModel's)


def check_chat_model(value: object, what: str = "model") -> object:
    """`value` if it is a ChatModel instance; TypeError naming `what` otherwise.

    The runtime-checkable Protocol's isinstance costs ~10-15 us: the project's own base class,
    and each type once found to conform, pass without it.
    """
    kind = type(value)
    if isinstance(value, BaseChatModel) or kind in _CONFORMING_MODELS:
        return value
    if isinstance(value, type):  # a class has the Protocol's methods, as functions
        raise TypeError(
            f"{what} must be a ChatModel instance, not the class {value.__name__} "
            "(create one, e.g. agent_runtime.llm.openai_compatible(...))"
        )
    if not isinstance(value, ChatModel):
        raise TypeError(f"{what} must be a ChatModel, not {type(value).__name__}")
    _CONFORMING_MODELS.add(kind)
    return value


class BaseChatModel(ABC):
    """What every adapter and middleware shares: capability checks before any I/O, abort
    handling, cost, `prompt`, the sync twins and a `generate` assembled from `stream`.

    Subclasses implement `info` and `_stream` (and `_generate` when the provider has a
    cheaper non-streaming call).
    """

    @property
    @abstractmethod
    def info(self) -> ModelInfo:
        """Provider, model name and capabilities."""

    @abstractmethod
    def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        """The provider's chunks for `request` (no capability check, no abort handling)."""

    async def _generate(self, request: ChatRequest) -> ChatResponse:
        builder = ChatResponseBuilder(model=self.info.model, provider=self.info.provider)
        async for chunk in self._stream(request):
            builder.add(chunk)
        return builder.build()

    def check_capabilities(self, request: ChatRequest, *, streaming: bool = False) -> None:
        """Raise before any HTTP call if the request needs what the model lacks.

        Raises:
            CapabilityNotSupportedError: names the model and the missing capability.
        """
        needed: set[Capability] = needed_capabilities(request)
        if streaming:
            needed.add("streaming")
        info = self.info
        missing = sorted(needed.difference(info.capabilities))
        if missing:
            raise CapabilityNotSupportedError(
                f"model {info.model!r} of {info.provider!r} does not support {', '.join(missing)}",
                provider=info.provider,
            )

    async def generate(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> ChatResponse:
        """One complete answer, with `cost` when the model has pricing.

        Raises:
            CapabilityNotSupportedError: before any I/O.
            LLMError: the provider failed (see agent_runtime.llm.errors).
            Aborted: `signal` was aborted.
        """
        self.check_capabilities(request)
        response = await await_abortable(self._generate(request), signal)
        return with_cost(response, self.info.pricing)

    def stream(
        self, request: ChatRequest, *, signal: AbortSignal | None = None
    ) -> AsyncIterator[StreamChunk]:
        """The answer as chunks (checked for capabilities at the first `anext`).

        Raises (while iterating):
            CapabilityNotSupportedError, LLMError, Aborted: as for `generate`.
        """
        # One generator, not a checking one around it: this is every streamed token's path.
        return iterate_abortable(functools.partial(self._checked_source, request), signal)

    def _checked_source(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.check_capabilities(request, streaming=True)
        return self._stream(request)

    async def prompt(
        self, text: str, system: str | None = None, *, signal: AbortSignal | None = None
    ) -> str:
        """One user message in, the answer text out."""
        request = ChatRequest(messages=[UserMessage(content=text)], system=system)
        return (await self.generate(request, signal=signal)).text

    def generate_sync(
        self,
        request: ChatRequest,
        *,
        signal: AbortSignal | None = None,
        timeout: float | None = None,
    ) -> ChatResponse:
        """`generate` on the sync bridge loop, waiting up to `timeout` seconds.

        Raises:
            RuntimeError: called from a running event loop (await `generate` instead).
            TimeoutError: `timeout` passed (the call was cancelled).
        """
        return run_sync(self.generate(request, signal=signal), timeout)

    def prompt_sync(
        self, text: str, system: str | None = None, *, timeout: float | None = None
    ) -> str:
        """`prompt` on the sync bridge loop, waiting up to `timeout` seconds."""
        return run_sync(self.prompt(text, system), timeout)

    async def generate_structured(
        self,
        request: ChatRequest,
        output_type: type[M],
        *,
        signal: AbortSignal | None = None,
    ) -> M:
        """An answer validated as the pydantic model `output_type`.

        Uses the provider's JSON-schema mode when the model has `structured_output`, JSON
        mode (a system instruction with the schema) otherwise; always validates.

        Raises:
            StructuredOutputError: the answer did not validate (carries `errors` and `raw`).
            TruncatedResponseError: the answer was cut off by the token limit.
        """
        return await generate_structured(self, request, output_type, signal=signal)

    def generate_structured_sync(
        self, request: ChatRequest, output_type: type[M], *, timeout: float | None = None
    ) -> M:
        """`generate_structured` for code without an event loop."""
        return run_sync(self.generate_structured(request, output_type), timeout)

    def __repr__(self) -> str:
        info = self.info
        return f"<{type(self).__name__} {info.provider}/{info.model}>"
