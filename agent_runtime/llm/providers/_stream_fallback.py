"""StreamFallbacks: the request shapes a server cannot stream, learned from its answers.

llama-cpp-python's function-calling chat formats answer a streamed `tool_choice: "auto"` after
a tool result with an empty 200 stream ("Automatic streaming tool choice is not supported")
and the same request without streaming with an answer. The adapter learns that once, the
first time the repeat without streaming answers, and afterwards sends requests of that shape
without streaming straight away (one request a turn instead of two). What is learned:

- a shape: the request's `tool_choice` as sent and whether its last message is a tool result;
  only requests with tools have one (a plain chat is never switched off streaming);
- only from a repeat that answered (an error, such as a context overflow, teaches nothing);
- for the life of the model instance, never persisted. A profile named where a model is
  taken (`start_agent(model="local")`, the gateway's `{"model": "local"}`) is built anew
  for each agent (`llm.from_config`), so each such agent learns once, on its first turn of
  that shape; share one model object among agents to learn once for all of them.

Each shape learned and each request sent without streaming because of it is logged at debug
level (`llm.stream.fallback.learned` / `.used`) and counted by the OpenTelemetry counter
`agent_runtime.llm.stream_fallbacks` (attribute `event`: `learned` or `used`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_runtime._semconv import GEN_AI_PROVIDER_NAME, GEN_AI_REQUEST_MODEL
from agent_runtime.llm.types import ChatRequest
from agent_runtime.messages import ToolResultMessage
from agent_runtime.telemetry import meter
from supervisors._log import get_logger

log = get_logger(__name__)

_EVENTS = {"learned": "llm.stream.fallback.learned", "used": "llm.stream.fallback.used"}

Shape = tuple[str, bool]
"""`(tool_choice as sent, or "" for none; whether the last message is a tool result)`."""

STREAM_FALLBACKS = meter().create_counter(
    "agent_runtime.llm.stream_fallbacks",
    unit="{request}",
    description="Streamed requests a server cannot stream: shapes learned (event=learned) "
    "and requests sent without streaming because of one (event=used)",
)


def shape_of(request: ChatRequest, wire: Mapping[str, Any]) -> Shape | None:
    """The shape of `request` (its wire body `wire`), or None when it has no tools."""
    if not request.tools:
        return None
    choice = wire.get("tool_choice")
    after_tool = bool(request.messages) and isinstance(request.messages[-1], ToolResultMessage)
    return ("" if choice is None else str(choice), after_tool)


class StreamFallbacks:
    """The shapes one model instance learned its server cannot stream.

    Thread-safety: a model may be used from several event loops (the runtime's, the sync
    bridge's); the set only grows, one `add` at a time (atomic in CPython), and a reader that
    misses a shape learned a moment ago streams once more, which is harmless.
    """

    def __init__(self, provider: str, model: str) -> None:
        self._shapes: set[Shape] = set()
        self._attributes = {GEN_AI_PROVIDER_NAME: provider, GEN_AI_REQUEST_MODEL: model}

    def learned(self, shape: Shape | None) -> bool:
        """Whether requests of `shape` go without streaming (noting the use if so)."""
        if shape is None or shape not in self._shapes:
            return False
        self._count("used", shape)
        return True

    def learn(self, shape: Shape | None) -> None:
        """Note that a request of `shape` got an empty stream and its repeat without streaming
        answered: later requests of that shape go without streaming."""
        if shape is None or shape in self._shapes:
            return
        self._shapes.add(shape)
        self._count("learned", shape)

    def _count(self, event: str, shape: Shape) -> None:
        choice, after_tool_result = shape
        log.debug(
            _EVENTS[event],
            provider=self._attributes[GEN_AI_PROVIDER_NAME],
            model=self._attributes[GEN_AI_REQUEST_MODEL],
            tool_choice=choice or None,
            after_tool_result=after_tool_result,
        )
        STREAM_FALLBACKS.add(1, {**self._attributes, "event": event})
