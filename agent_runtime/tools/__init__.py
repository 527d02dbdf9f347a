"""Tools: `Tool`, the `@tool` decorator, `ToolContext`, the `ToolRegistry`, and running a call.

A tool is a name, a description, a JSON schema of its parameters and an `execute` callable,
sync or `async def`. `@tool` builds all of it from a function: the schema from the signature
(pydantic), the description from the docstring's first paragraph, parameter descriptions from
the docstring's `Args:` section or `Annotated[..., Field(description=...)]` / `Field(...)`
defaults; a parameter annotated `ToolContext` is injected and hidden from the model.

`execute_tool_call` is what the agent loop calls: it never raises (except `CancelledError`);
unknown tools, invalid arguments, exceptions and timeouts all become `is_error` results the
model can act on.
"""

from agent_runtime.messages import ToolResult
from agent_runtime.tools._args import ToolArgumentsError
from agent_runtime.tools._context import ToolContext
from agent_runtime.tools._exec import execute_tool_call, find_tool
from agent_runtime.tools._registry import ToolRegistry, check_unique, merge_tools, tool
from agent_runtime.tools._results import error_result, normalize_result
from agent_runtime.tools._schema import ToolDefinitionError
from agent_runtime.tools._tool import Tool

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolDefinitionError",
    "ToolRegistry",
    "ToolResult",
    "check_unique",
    "error_result",
    "execute_tool_call",
    "find_tool",
    "merge_tools",
    "normalize_result",
    "tool",
]
