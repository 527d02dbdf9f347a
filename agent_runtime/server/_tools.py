"""Tools named in the gateway's config: `"package.module:name"` imported into `runtime.tools`.

`[server] tools` and `agent-runtime serve --tool` name tools the way uvicorn names an app: the
module is imported and `name` (dotted for an attribute of an attribute) looked up in it. The
object is a `Tool` (what `@tool` makes), or a plain function, made a tool with `tool(fn)`.
Clients then name these tools in `POST /v1/agents/...` (`{"tools": ["add"]}`); they cannot
send code.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from agent_runtime._errors import ConfigError
from agent_runtime.config import check_tool_spec
from agent_runtime.tools import Tool, ToolRegistry, tool


def load_tool(spec: str) -> Tool:
    """The tool `spec` names, imported (a function is made a tool with `tool(fn)`).

    Raises:
        ConfigError: `spec` is malformed, its module cannot be imported (or fails while
            importing), it has no such attribute, or the attribute is neither a Tool nor a
            function; the message names `spec`.
    """
    try:
        check_tool_spec(spec)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    module_name, _, qualname = spec.partition(":")
    try:
        found: object = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or the module's own code failing
        raise ConfigError(
            f"tool {spec!r}: module {module_name!r} cannot be imported "
            f"({type(exc).__name__}: {exc})"
        ) from None
    for part in qualname.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"tool {spec!r}: module {module_name!r} has no {qualname!r}")
        found = getattr(found, part)
    if isinstance(found, Tool):
        return found
    if callable(found) and not isinstance(found, type):
        try:
            return tool(found)
        except Exception as exc:
            raise ConfigError(f"tool {spec!r} cannot be made a tool: {exc}") from None
    raise ConfigError(
        f"tool {spec!r} is neither an agent_runtime Tool nor a function "
        f"(it is {type(found).__name__})"
    )


def load_tools(specs: Iterable[str]) -> list[Tool]:
    """`load_tool` of each spec, in order, duplicates of a spec once.

    Raises:
        ConfigError: as `load_tool`, or two specs name tools of the same name.
    """
    tools: dict[str, tuple[str, Tool]] = {}
    for spec in dict.fromkeys(specs):
        loaded = load_tool(spec)
        taken = tools.get(loaded.name)
        if taken is not None and taken[1] is not loaded:
            raise ConfigError(
                f"tool {spec!r} is named {loaded.name!r}, as is tool {taken[0]!r}: "
                "tool names must be unique"
            )
        tools[loaded.name] = (spec, loaded)
    return [loaded for _, loaded in tools.values()]


def register_tools(registry: ToolRegistry, tools: Iterable[Tool]) -> None:
    """Register `tools` in `registry` (the runtime's `runtime.tools`).

    Raises:
        ConfigError: a tool of that name is registered already (by the application).
    """
    for loaded in tools:
        if registry.get(loaded.name) is not None:
            raise ConfigError(f"a tool named {loaded.name!r} is registered already")
        registry.register(loaded)
