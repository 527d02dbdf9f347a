"""The wire formats the mock server speaks, chosen by request path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from agent_runtime.llm.errors import LLMError
from agent_runtime.testing.scripted import ScriptedTurn


class WireFormat(Protocol):
    """How one provider's API looks on the wire, for the mock server."""

    name: str

    def base_url(self, root: str) -> str:
        """The base URL its adapter takes, given the server root `http://127.0.0.1:port`."""
        ...

    def matches(self, method: str, path: str, headers: Mapping[str, str]) -> bool:
        """Whether a request belongs to this format."""
        ...

    def is_stream(self, path: str, body: Mapping[str, Any]) -> bool:
        """Whether the request asked for a streamed answer."""
        ...

    def render_json(self, turn: ScriptedTurn, request: Mapping[str, Any], model: str) -> Any:
        """The non-streamed success body of `turn`."""
        ...

    def render_events(
        self, turn: ScriptedTurn, request: Mapping[str, Any], model: str
    ) -> list[bytes]:
        """The SSE frames of `turn`, ending with the format's terminal marker (or, when the
        turn has an error, with the format's in-stream error event)."""
        ...

    def render_error(self, error: LLMError) -> tuple[int, Any, dict[str, str]]:
        """`(status, body, headers)` of an error answer in this format (retry-after included)."""
        ...

    def render_models(self, models: list[str]) -> Any:
        """The body of the format's list-models endpoint."""
        ...


def _formats() -> dict[str, WireFormat]:
    from agent_runtime.testing._wire_anthropic import AnthropicWire
    from agent_runtime.testing._wire_gemini import GeminiWire
    from agent_runtime.testing._wire_openai import OpenAIWire

    # Anthropic first: it shares GET /v1/models with OpenAI and is told apart by its header.
    return {"anthropic": AnthropicWire(), "openai": OpenAIWire(), "gemini": GeminiWire()}


WIRE_FORMATS: dict[str, WireFormat] = _formats()
