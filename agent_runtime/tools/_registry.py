"""The `@tool` decorator, the `ToolRegistry`, and checks over lists of tools."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from agent_runtime.messages import Trust
from agent_runtime.tools._schema import ToolDefinitionError
from agent_runtime.tools._tool import RequiresApproval, Tool, caller_locals, function_tool


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = False,
    timeout: float | None = None,
    trust: Trust = "trusted",
    requires_approval: RequiresApproval = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    parallel_safe: bool = False,
    timeout: float | None = None,
    trust: Trust = "trusted",
    requires_approval: RequiresApproval = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator making a `Tool` of a function, bare (`@tool`) or with options.

    `@tool(parallel_safe=True, timeout=30.0, name=..., description=..., trust=...,
    requires_approval=...)`; see `Tool.from_function` for the rules and `Tool` for
    `requires_approval` (True, or a predicate `(ctx, args) -> bool` deciding per call).
    Type hints may name classes local to the defining scope (the caller's namespace is used
    to resolve them).

    Raises:
        ToolDefinitionError: see `Tool.from_function`.
    """
    localns = caller_locals()

    def make(f: Callable[..., Any]) -> Tool:
        return function_tool(
            f,
            name=name,
            description=description,
            parallel_safe=parallel_safe,
            timeout=timeout,
            trust=trust,
            localns=localns,
            requires_approval=requires_approval,
        )

    return make if fn is None else make(fn)


class ToolRegistry:
    """A runtime-wide, thread-safe table of tools by name (Lemon's ToolRegistry).

    Agents created with `tool_registry=` see the registered tools next to their own, their own
    winning on a name clash (`merge_tools`). All methods are safe to call from any thread; the
    lock is never held while calling user code.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.register(t)

    def register(self, tool: Tool, *, replace: bool = False) -> None:
        """Add `tool` under its name; with `replace`, an existing tool of that name is replaced.

        Raises:
            ToolDefinitionError: `tool` is not a Tool, or its name is taken and not `replace`.
        """
        if not isinstance(tool, Tool):
            raise ToolDefinitionError(f"cannot register {tool!r}: not a Tool")
        with self._lock:
            if not replace and tool.name in self._tools:
                raise ToolDefinitionError(
                    f"tool {tool.name!r} is already registered (pass replace=True to replace it)",
                    tool.name,
                )
            self._tools[tool.name] = tool

    def unregister(self, name: str) -> bool:
        """Remove the tool called `name`; True if there was one."""
        with self._lock:
            return self._tools.pop(name, None) is not None

    def get(self, name: str) -> Tool | None:
        """The tool called exactly `name`, or None."""
        with self._lock:
            return self._tools.get(name)

    def all(self) -> list[Tool]:
        """A snapshot of the registered tools, sorted by name."""
        with self._lock:
            return [self._tools[n] for n in sorted(self._tools)]

    def names(self) -> list[str]:
        """The registered names, sorted."""
        with self._lock:
            return sorted(self._tools)

    def __len__(self) -> int:
        with self._lock:
            return len(self._tools)

    def __contains__(self, item: object) -> bool:
        """`name in registry`, or `tool in registry` (that very Tool is registered)."""
        with self._lock:
            if isinstance(item, Tool):
                return self._tools.get(item.name) is item
            return item in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.all())

    def __repr__(self) -> str:
        return f"<ToolRegistry {self.names()}>"


def merge_tools(own: Sequence[Tool], registry: ToolRegistry | None) -> list[Tool]:
    """`own` tools in order, then the registry's (by name) whose names `own` does not use."""
    merged = list(own)
    if registry is not None:
        taken = {t.name for t in own}
        merged.extend(t for t in registry.all() if t.name not in taken)
    return merged


def check_unique(tools: Iterable[Tool]) -> None:
    """Check that `tools` are Tools with distinct names.

    Raises:
        ToolDefinitionError: an item is not a Tool, or a name occurs twice (it is named).
    """
    seen: set[str] = set()
    for t in tools:
        if not isinstance(t, Tool):
            raise ToolDefinitionError(f"{t!r} is not a Tool")
        if t.name in seen:
            raise ToolDefinitionError(f"duplicate tool name {t.name!r}", t.name)
        seen.add(t.name)
