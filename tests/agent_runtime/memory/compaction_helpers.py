"""Helpers of the compaction tests: summary answers and a model whose calls wait for a gate."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterable

from agent_runtime.llm.types import ChatRequest, StreamChunk
from agent_runtime.memory import CompactionSummary
from agent_runtime.messages import AssistantMessage, Message, TextContent, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn


def summary_turn(user: str = "U: the gist", assistant: str = "A: what was done") -> ScriptedTurn:
    """A scripted answer that is a valid `CompactionSummary`."""
    return ScriptedTurn(
        text=CompactionSummary(user_message=user, assistant_message=assistant).model_dump_json()
    )


def summary_texts(messages: list[Message]) -> tuple[str, str]:
    """The texts of the summary pair that starts `messages`."""
    first, second = messages[0], messages[1]
    assert isinstance(first, UserMessage) and isinstance(second, AssistantMessage)
    return first.text, second.text


def exchange(tag: str) -> list[Message]:
    """One user message and its answer, tagged."""
    return [
        UserMessage(content=f"ask {tag}", timestamp=float(len(tag))),
        AssistantMessage(content=[TextContent(text=f"answer {tag}")], timestamp=float(len(tag))),
    ]


class GatedModel(ScriptedModel):
    """A ScriptedModel whose every call sets `started`, then waits until `release` is set."""

    def __init__(self, turns: Iterable[ScriptedTurn | str]) -> None:
        super().__init__(turns)
        self.started = threading.Event()
        self.release = threading.Event()

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        self.started.set()
        await asyncio.to_thread(self.release.wait, 30)
        async for chunk in super()._stream(request):
            yield chunk
