"""Models and tools the cluster tests send to their nodes: module-level, so every node imports
them by reference (and the models pickle as their function, not their lock)."""

from __future__ import annotations

from typing import Any

from agent_runtime.llm.types import ChatRequest
from agent_runtime.messages import UserMessage
from agent_runtime.testing import FunctionModel, ScriptedTurn
from agent_runtime.tools import tool


class NodeModel(FunctionModel):
    """A FunctionModel that travels to a node as its function (FunctionModel holds a lock)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.fn,))


def _last_text(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def echo(request: ChatRequest) -> ScriptedTurn:
    """`echo: <prompt>` in three chunks; a prompt starting with `slow` waits 60 s first (a run
    to interrupt), one starting with `many` streams 50 chunks."""
    text = _last_text(request)
    if text.startswith("many"):
        return ScriptedTurn(chunks=[f"{i};" for i in range(50)])
    delay = 60.0 if text.startswith("slow") else 0.0
    return ScriptedTurn(chunks=["echo", ": ", text], delay=delay)


def echo_model() -> NodeModel:
    """A model every node can run."""
    return NodeModel(echo)


@tool
def shout(text: str) -> str:
    """Upper-case `text`."""
    return text.upper()
