"""Helpers of the live tests: run a model call to the end on a fresh event loop."""

from __future__ import annotations

import asyncio

from agent_runtime.llm import ChatModel, ChatRequest, ChatResponseBuilder, OpenAICompatibleModel
from agent_runtime.llm.types import ChatResponse, StreamChunk
from agent_runtime.messages import UserMessage

SECONDS = 120.0  # a bound on a hung call only: a call on this machine takes a second or two


def ask(text: str, **fields: object) -> ChatRequest:
    """One user message, answered briefly and deterministically unless told otherwise."""
    options: dict[str, object] = {"max_output_tokens": 24, "temperature": 0.0, **fields}
    return ChatRequest(messages=[UserMessage(content=text)], **options)  # type: ignore[arg-type]


def chunks_of(model: ChatModel, request: ChatRequest) -> list[StreamChunk]:
    """The chunks of `model.stream(request)`, read on a fresh loop (its client closed after)."""
    adapter = getattr(model, "inner", model)

    async def read() -> list[StreamChunk]:
        try:
            return [chunk async for chunk in model.stream(request)]
        finally:
            if isinstance(adapter, OpenAICompatibleModel):
                await adapter.aclose()

    return asyncio.run(asyncio.wait_for(read(), SECONDS))


def assemble(model: OpenAICompatibleModel, chunks: list[StreamChunk]) -> ChatResponse:
    builder = ChatResponseBuilder(model=model.info.model, provider=model.info.provider)
    for chunk in chunks:
        builder.add(chunk)
    return builder.build()
