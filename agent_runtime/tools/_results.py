"""Turning what a tool returns into a `ToolResult` (used by `tools` and `ToolContext.update`)."""

from __future__ import annotations

from typing import Any

import pydantic_core
from pydantic import BaseModel

from agent_runtime.messages import ImageContent, TextContent, ToolResult

NO_OUTPUT = "(no output)"
"""The text of a result whose tool returned None or an empty string."""


def normalize_result(value: Any) -> ToolResult:
    """Turn a tool's return value into a `ToolResult`; never raises.

    - `ToolResult`: unchanged.
    - `str`: one text block; `""` and `None` become the text `"(no output)"`, because some
      providers reject empty tool results and a model reads the marker better than nothing.
    - `TextContent` / `ImageContent`, or a list of only those: the content as given.
    - a pydantic model: its JSON as text, `details = model_dump(mode="json")`.
    - a dict: its JSON as text, and the dict (made JSON-able) as `details`.
    - anything else (list, number, bool, dataclass, ...): its JSON as text, `details=None`;
      values JSON cannot hold are rendered with `str()`.
    """
    if isinstance(value, ToolResult):
        return value
    if value is None or (isinstance(value, str) and not value):
        return ToolResult.text(NO_OUTPUT)
    if isinstance(value, str):
        return ToolResult.text(value)
    if isinstance(value, TextContent | ImageContent):
        return ToolResult(content=[value])
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, TextContent | ImageContent) for v in value)
    ):
        return ToolResult(content=list(value))
    text = pydantic_core.to_json(value, fallback=str).decode()
    if isinstance(value, BaseModel | dict):
        details = pydantic_core.to_jsonable_python(value, fallback=str)
        return ToolResult.text(text, details={str(k): v for k, v in details.items()})
    return ToolResult.text(text)


def error_result(message: str, /, **details: Any) -> ToolResult:
    """An `is_error` result with text `message`; `details` defaults `outcome` to `"error"`.

    Tools may return it to report a failure the model should read (instead of raising).
    """
    return ToolResult.text(message, is_error=True, details={"outcome": "error", **details})
