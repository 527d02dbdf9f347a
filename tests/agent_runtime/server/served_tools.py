"""Tools that `agent-runtime serve --tool` and `[server] tools` import in the tests."""

from __future__ import annotations

from agent_runtime import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two numbers (a plain function: serve makes it a tool)."""
    return a * b


not_a_tool = 42
