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

    - `ToolResult`: unchanged, but for `details` JSON cannot hold: made JSON-able as below
      (a result is stored and sent as JSON, with the turn it belongs to).
    - `str`: one text block; `""` and `None` become the text `"(no output)"`, because some
      providers reject empty tool results and a model reads the marker better than nothing.
    - `TextContent` / `ImageContent`, or a list of only those: the content as given.
    - a pydantic model: its JSON as text, `details = model_dump(mode="json")`.
    - a dict: its JSON as text, and the dict (made JSON-able) as `details`.
    - anything else (list, number, bool, dataclass, ...): its JSON as text, `details=None`;
      values JSON cannot hold are rendered with `str()`; a value that cannot be rendered at
      all (a cycle, bytes that are not UTF-8) is its `repr()`.
    """
    if isinstance(value, ToolResult):
        return _with_jsonable_details(value)
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
    try:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
    except (ValueError, RecursionError):  # a cycle, bytes that are not UTF-8: not renderable
        return ToolResult.text(repr(value))
    text = pydantic_core.to_json(plain).decode()
    if isinstance(value, BaseModel | dict) and isinstance(plain, dict):
        return ToolResult.text(text, details={str(k): v for k, v in plain.items()})
    return ToolResult.text(text)


def _with_jsonable_details(result: ToolResult) -> ToolResult:
    """`result`, with `details` JSON cannot hold made JSON-able (see `normalize_result`)."""
    details = result.details
    if details is None:
        return result
    try:
        pydantic_core.to_json(details)
    except (ValueError, RecursionError):  # PydanticSerializationError is a ValueError
        try:
            plain = pydantic_core.to_jsonable_python(details, fallback=str)
        except (ValueError, RecursionError):
            plain = {"value": repr(details)}
        return result.model_copy(update={"details": plain})
    return result


def error_result(message: str, /, **details: Any) -> ToolResult:
    """An `is_error` result with text `message`; `details` defaults `outcome` to `"error"`.

    Tools may return it to report a failure the model should read (instead of raising).
    """
    return ToolResult.text(message, is_error=True, details={"outcome": "error", **details})
