"""Helpers of the adapter tests: an adapter pointed at the mock server, and calls run to the end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import structlog
from structlog.testing import capture_logs
from structlog.typing import EventDict

from agent_runtime.llm import anthropic, gemini, openai_compatible
from agent_runtime.llm.builder import ChatResponseBuilder
from agent_runtime.llm.providers._http import HttpChatModel
from agent_runtime.llm.types import ChatRequest, ChatResponse, ModelInfo, StreamChunk
from agent_runtime.messages import UserMessage
from agent_runtime.testing import MockProviderServer

T = TypeVar("T")

HI = ChatRequest(messages=[UserMessage(content="hi")])
MODEL = {"openai": "gpt-test", "anthropic": "claude-test", "gemini": "gemini-test"}
KEY = {"openai": "sk-test", "anthropic": "sk-test", "gemini": "g-test"}


def adapter(wire: str, server: MockProviderServer, model: str | None = None, **options: Any) -> Any:
    """The adapter of `wire` (`openai`, `anthropic`, `gemini`) pointed at the mock server, for
    model `MODEL[wire]` with key `KEY[wire]` unless told otherwise."""
    options.setdefault("api_key", KEY[wire])
    model = model or MODEL[wire]
    if wire == "openai":
        return openai_compatible(server.base_url("openai"), model, **options)
    if wire == "anthropic":
        return anthropic(model, base_url=server.base_url("anthropic"), **options)
    return gemini(model, base_url=server.base_url("gemini"), **options)


def run(model: HttpChatModel, call: Callable[[], Awaitable[T]]) -> T:
    """Run `call()` on a fresh loop with a deadline, closing the model's client after."""

    async def main() -> T:
        try:
            return await asyncio.wait_for(call(), 10)
        finally:
            await model.aclose()

    return asyncio.run(main())


def collect(
    model: HttpChatModel, request: ChatRequest = HI, *, into: list[StreamChunk] | None = None
) -> list[StreamChunk]:
    """The chunks of `model.stream(request)`, each appended to `into` as it arrives (so a test
    sees what came before an error)."""
    chunks = [] if into is None else into

    async def read() -> list[StreamChunk]:
        async for chunk in model.stream(request):
            chunks.append(chunk)
        return chunks

    return run(model, read)


def generate(model: HttpChatModel, request: ChatRequest = HI) -> ChatResponse:
    return run(model, lambda: model.generate(request))


def assemble(chunks: list[StreamChunk], info: ModelInfo) -> ChatResponse:
    """The response the chunks of a model with `info` make."""
    builder = ChatResponseBuilder(model=info.model, provider=info.provider)
    for chunk in chunks:
        builder.add(chunk)
    return builder.build()


def assembled(model: HttpChatModel, request: ChatRequest = HI) -> ChatResponse:
    """The streamed answer, assembled as `generate` would return it."""
    return assemble(collect(model, request), model.info)


@contextlib.contextmanager
def debug_logs() -> Iterator[list[EventDict]]:
    """The log lines of the block, debug ones included, whatever level an earlier test
    configured (a filtering logger drops debug lines before any processor sees them)."""
    wrapper = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)
