"""MCP server tools as agent `Tool`s: listing, the allow-list, calls, interception, abort."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agent_runtime._errors import AgentRuntimeError
from agent_runtime.abort import AbortSignal
from agent_runtime.mcp._convert import call_result
from agent_runtime.mcp._sdk import require_sdk
from agent_runtime.messages import ToolResult, Trust
from agent_runtime.tools import Tool, ToolContext, ToolDefinitionError, error_result
from supervisors._log import get_logger

log = get_logger(__name__)

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class McpCall:
    """One call of an MCP tool, as an interceptor sees it.

    `server` is the URL or the command line of the server, `tool` the tool's name on the
    server (which may differ from the agent-side `Tool.name`, see `mcp_tools`), `arguments`
    the model's arguments, `context` the call's `ToolContext`. To change a call, pass
    `dataclasses.replace(call, arguments=...)` (or another `tool`) on to `call_next`.
    """

    server: str
    tool: str
    arguments: Mapping[str, Any]
    context: ToolContext


CallNext = Callable[[McpCall], Awaitable[ToolResult]]
"""Sends a call to the server and returns its result (never raises but `CancelledError`)."""

Interceptor = Callable[[McpCall, CallNext], Awaitable[ToolResult]]
"""`async def interceptor(call, call_next) -> ToolResult`: wraps every call of the tools it
is given to. It may inspect or change the call before `await call_next(call)`, inspect or
change the result after, or answer without calling the server at all (to block a call).
An exception it raises becomes the call's error result, like any tool's."""


class Server(Protocol):
    """Where calls go: a server reached per call (HTTP) or over a kept `Connection`."""

    @property
    def label(self) -> str: ...

    async def list_tools(self) -> list[Any]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any: ...


class McpServerError(AgentRuntimeError):
    """Listing the tools of an MCP server failed: it could not be reached or answered with an
    error. The message names the server and the cause (chained as `__cause__`).

    Attributes:
        server: its URL or command line.
    """

    def __init__(self, server: str, cause: BaseException) -> None:
        super().__init__(f"MCP server {server}: listing its tools failed: {_describe(cause)}")
        self.server = server


async def list_server_tools(server: Server) -> list[Any]:
    """Every tool the server lists (all pages).

    Raises:
        McpServerError: the server could not be reached or refused (the cause chained).
    """
    try:
        return await server.list_tools()
    except Exception as exc:
        raise McpServerError(server.label, _leaf(exc)) from exc


def build_tools(
    server: Server,
    listed: list[Any],
    *,
    allowed: Collection[str] | None,
    interceptor: Interceptor | None,
    trust: Trust,
    requires_approval: ApprovalRule = False,
) -> list[Tool]:
    """The agent tools for the server's `listed` tools that `allowed` lets through, each
    with its `requires_approval` (`approval_of`).

    Raises:
        ValueError: `allowed` names a tool the server does not list (the message names it
            and lists the server's tools), or two server names map to one agent name.
        TypeError: `allowed` is a string rather than a collection of names.
    """
    by_name = {spec.name: spec for spec in listed}
    if allowed is not None:
        if isinstance(allowed, str):
            raise TypeError(
                f"allowed must be a collection of tool names, not the string {allowed!r}"
            )
        unknown = [name for name in allowed if name not in by_name]
        if unknown:
            available = ", ".join(sorted(by_name)) or "(none)"
            raise ValueError(
                f"MCP server {server.label} has no tool named "
                f"{', '.join(repr(n) for n in unknown)} (it lists: {available})"
            )
        listed = [spec for spec in listed if spec.name in set(allowed)]
    tools: list[Tool] = []
    seen: dict[str, str] = {}
    for spec in listed:
        name = agent_name(spec.name)
        if name in seen:
            raise ValueError(
                f"MCP server {server.label}: tools {seen[name]!r} and {spec.name!r} "
                f"both become the tool name {name!r}; pass allowed= to pick one"
            )
        seen[name] = spec.name
        approval = approval_of(spec.name, requires_approval)
        tools.append(_tool(server, spec, name, interceptor, trust, approval))
    return tools


ApprovalRule = bool | Callable[..., Any] | Collection[str]
"""`requires_approval=` of the MCP tool factories: True / a predicate `(ctx, args) -> bool`
for every tool, or the collection of server tool names whose calls need approval."""


def approval_of(server_name: str, rule: ApprovalRule) -> Any:
    """The `Tool.requires_approval` of the server tool `server_name` under `rule`.

    Raises:
        TypeError: `rule` is a string (a collection of names is meant).
    """
    if isinstance(rule, bool) or callable(rule):
        return rule
    if isinstance(rule, str):
        raise TypeError(
            f"requires_approval must be a bool, a predicate or a collection of tool names, "
            f"not the string {rule!r}"
        )
    return server_name in set(rule)


def agent_name(server_name: str) -> str:
    """The agent-side name of a server tool: characters providers reject become `_`, and the
    name is cut to 64 characters."""
    name = _INVALID.sub("_", server_name)[:64]
    if not name:
        raise ToolDefinitionError(f"MCP tool name {server_name!r} is empty")
    return name


def _tool(
    server: Server,
    spec: Any,
    name: str,
    interceptor: Interceptor | None,
    trust: Trust,
    approval: Any = False,
) -> Tool:
    annotations = getattr(spec, "annotations", None)
    read_only = getattr(annotations, "read_only_hint", None) is True

    async def send(call: McpCall) -> ToolResult:
        return await _send(server, call, trust)

    async def execute(arguments: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        call = McpCall(server.label, spec.name, dict(arguments), ctx)
        work = interceptor(call, send) if interceptor is not None else send(call)
        return await _abortable(work, ctx, spec.name)

    return Tool(
        name,
        spec.description or "",
        dict(spec.input_schema),
        execute,
        parallel_safe=read_only,
        trust=trust,
        requires_approval=approval,
    )


async def _send(server: Server, call: McpCall, trust: Trust) -> ToolResult:
    """One `tools/call`; every failure is an error result."""
    sdk = require_sdk()
    try:
        result = await server.call_tool(call.tool, dict(call.arguments))
    except Exception as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, sdk.MCPError) and leaf.code != sdk.types.CONNECTION_CLOSED:
            return error_result(
                f"MCP server {server.label} returned an error for {call.tool}: "
                f"{leaf.message} (code {leaf.code})",
                outcome="mcp_protocol_error",
                code=leaf.code,
                mcp_server=server.label,
                mcp_tool=call.tool,
            )
        log.info("mcp.call.failed", server=server.label, tool=call.tool, exc_info=exc)
        kind = type(leaf).__name__
        return error_result(
            f"MCP server {server.label} could not be reached for {call.tool}: {_describe(leaf)}",
            outcome="mcp_unavailable",
            exception=kind,
            mcp_server=server.label,
            mcp_tool=call.tool,
        )
    return call_result(server.label, call.tool, result, trust)


async def _abortable(work: Awaitable[ToolResult], ctx: ToolContext, tool: str) -> ToolResult:
    """Run `work`, cancelling it the moment the run's abort signal fires.

    Cancelling the in-flight request makes the SDK tell the server (`notifications/cancelled`)
    and close the session; the call then answers an error result at once instead of running
    out the loop's abort grace.
    """
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()

    def cancel(_: AbortSignal) -> None:
        loop.call_soon_threadsafe(task.cancel)

    remove = ctx.signal.on_abort(cancel)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if (current is not None and current.cancelling()) or not ctx.signal.aborted:
            raise
        return error_result(
            f"MCP call {tool} was cancelled: the run was aborted ({ctx.signal.reason})",
            outcome="aborted",
            cancelled=True,
        )
    finally:
        remove()


def _describe(exc: BaseException) -> str:
    sdk = require_sdk()
    if isinstance(exc, sdk.MCPError):
        return f"{exc.message} (code {exc.code})"
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _leaf(exc: BaseException) -> BaseException:
    """The first exception at the bottom of (nested) exception groups, anyio's wrapping."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
