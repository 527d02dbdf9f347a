"""Usage estimates for answers whose provider reported none (marked `Usage.estimated`)."""

from __future__ import annotations

import math

from agent_runtime.context import CHARS_PER_TOKEN
from agent_runtime.llm.types import StreamChunk, TextDelta, ThinkingDelta, ToolCallDelta
from agent_runtime.messages import Usage


def answer_chars(chunk: StreamChunk) -> int:
    """The characters of model output in one chunk (text, thinking, tool name and arguments)."""
    if isinstance(chunk, TextDelta | ThinkingDelta):
        return len(chunk.text)
    if isinstance(chunk, ToolCallDelta):
        return len(chunk.arguments) + len(chunk.name or "")
    return 0


def estimated_usage(request_bytes: int, output_chars: int) -> Usage:
    """`Usage(estimated=True)` at `CHARS_PER_TOKEN` characters a token: the input from the size
    of the request body sent (its JSON framing and tool schemas included: servers render the
    tools into the prompt too), the output from the characters the answer carried."""
    return Usage(
        input_tokens=math.ceil(request_bytes / CHARS_PER_TOKEN),
        output_tokens=math.ceil(output_chars / CHARS_PER_TOKEN),
        estimated=True,
    )
