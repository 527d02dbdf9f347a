"""Tools from MCP servers, through the official `mcp` SDK (the optional extra `mcp`).

`await mcp_tools(url)` lists the tools of a server reached over streamable HTTP and returns
them as agent `Tool`s; `await mcp_stdio_tools(command, args)` does the same for a server
started as a subprocess speaking over its stdin/stdout. Each returned tool's schema is the
server's `inputSchema`, its description the server's, and each call goes to the server.

Connection lifetime:
- HTTP (`mcp_tools`): one session per operation. Listing opens a session and closes it
  before returning; every call opens its own session, makes the one `tools/call` and closes
  it (the MCP session is terminated with the server). The returned plain list owns no
  connection and needs no closing; the tools may be called from any thread or event loop,
  and a server that restarts fails only the calls in flight. The price is a handshake per
  call (a few ms locally); a server keeping state per MCP session does not see it here.
- stdio (`mcp_stdio_tools`): one server process and session, started by the listing and
  kept for every call (a process start per call would cost most of a second and lose the
  server's state). The returned `McpTools` (a `list[Tool]`) owns it: close it with
  `close()` / `await aclose()` or a `with` / `async with` block, which stops the process.
  Calls from any loop share the session, which lives on a private thread. If the process
  exits, the calls in flight get error results and the next call starts a new process. An
  unclosed one is stopped at interpreter exit at the latest (its stdin closes).

Results: the server's content blocks (text and images as they are, other blocks as their
JSON), `structuredContent` in `details["structured"]`. Results are `trust="untrusted"` by
default: a remote server's output is data, not instructions (pass `trust="trusted"` for a
server you control). Failures never raise from a call: a result the server marks `isError`,
a protocol error (`details["outcome"] == "mcp_protocol_error"`, with `code`) and a server
that cannot be reached or went away (`"mcp_unavailable"`) all become error results the model
can act on. Aborting the run cancels the in-flight MCP request (the SDK tells the server with
`notifications/cancelled`) and the call answers at once with an error result
(`"aborted"`).

The package imports without the SDK; using it then raises an `ImportError` naming the extra.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence

from agent_runtime.mcp._connection import Connection
from agent_runtime.mcp._endpoint import HttpEndpoint, StdioEndpoint
from agent_runtime.mcp._sdk import require_sdk
from agent_runtime.mcp._tools import (
    ApprovalRule,
    CallNext,
    Interceptor,
    McpCall,
    McpServerError,
    build_tools,
    list_server_tools,
)
from agent_runtime.mcp._toolset import McpTools
from agent_runtime.messages import Trust
from agent_runtime.tools import Tool

__all__ = [
    "CallNext",
    "Interceptor",
    "McpCall",
    "McpServerError",
    "McpTools",
    "mcp_stdio_tools",
    "mcp_stdio_tools_sync",
    "mcp_tools",
    "mcp_tools_sync",
]


async def mcp_tools(
    url: str,
    *,
    allowed: Collection[str] | None = None,
    headers: Mapping[str, str] | None = None,
    interceptor: Interceptor | None = None,
    trust: Trust = "untrusted",
    requires_approval: ApprovalRule = False,
) -> list[Tool]:
    """The tools of the MCP server at `url` (streamable HTTP, e.g. `http://host:8000/mcp`).

    - `allowed`: the server tool names to offer; the others are left out. None offers all.
    - `headers`: sent with every request to the server (e.g. `Authorization`).
    - `interceptor`: wraps every call of these tools (see `Interceptor`).
    - `requires_approval`: True or a predicate `(ctx, args) -> bool` for every tool, or the
      server tool names whose calls wait for `Agent.approve` / `Agent.deny` (see `Tool`).
    - A server tool name with characters providers reject gets them replaced by `_` in the
      agent tool's name (cut to 64); calls still use the server's name.

    Sessions: see the module docstring (one per listing and one per call; nothing to close).

    Raises:
        ImportError: the `mcp` extra is not installed.
        ValueError: `url` is not an http(s) URL; `allowed` names a tool the server does not
            list (the message names it and lists what the server has); two server tools
            map to one agent name.
        TypeError: `headers` is not a mapping of strings, or `allowed` is a string.
        McpServerError: the server cannot be reached or refuses the listing (the message
            names the server and the cause, which is chained).
    """
    require_sdk()
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"mcp_tools needs an http:// or https:// URL, got {url!r}")
    endpoint = HttpEndpoint(url, _headers(headers))
    listed = await list_server_tools(endpoint)
    return build_tools(
        endpoint,
        listed,
        allowed=allowed,
        interceptor=interceptor,
        trust=_trust(trust),
        requires_approval=requires_approval,
    )


def mcp_tools_sync(
    url: str,
    *,
    allowed: Collection[str] | None = None,
    headers: Mapping[str, str] | None = None,
    interceptor: Interceptor | None = None,
    trust: Trust = "untrusted",
    requires_approval: ApprovalRule = False,
) -> list[Tool]:
    """`mcp_tools` for synchronous code: blocks until the tools are listed.

    Raises:
        RuntimeError: called from a thread running an event loop (await `mcp_tools`).

    Otherwise it raises what `mcp_tools` raises.
    """
    _not_on_a_loop("mcp_tools_sync", "mcp_tools")
    return asyncio.run(
        mcp_tools(
            url,
            allowed=allowed,
            headers=headers,
            interceptor=interceptor,
            trust=trust,
            requires_approval=requires_approval,
        )
    )


async def mcp_stdio_tools(
    command: str,
    args: Sequence[str] = (),
    *,
    allowed: Collection[str] | None = None,
    env: Mapping[str, str] | None = None,
    interceptor: Interceptor | None = None,
    trust: Trust = "untrusted",
    requires_approval: ApprovalRule = False,
) -> McpTools:
    """The tools of the MCP server started as `command *args`, spoken to over stdio.

    `env` is added to the SDK's safe default environment (PATH, HOME, ...), not to this
    process's whole environment. The server process is started now and kept until the
    returned `McpTools` is closed (see the module docstring); its stderr goes to ours.
    `allowed`, `interceptor`, `trust` and `requires_approval` as in `mcp_tools`.

    Raises:
        ImportError: the `mcp` extra is not installed.
        ValueError: `command` is empty; `allowed` names a tool the server does not list.
        TypeError: `args` is a string, `env` is not a mapping of strings, or `allowed` is a
            string.
        McpServerError: the command cannot be started, or the server fails the listing.
    """
    require_sdk()
    if not isinstance(command, str) or not command:
        raise ValueError(f"mcp_stdio_tools needs a command, got {command!r}")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError(f"args must be a sequence of strings, got {args!r}")
    checked_trust = _trust(trust)
    connection = Connection(StdioEndpoint(command, tuple(args), _env(env)))
    try:
        listed = await list_server_tools(connection)
        tools = build_tools(
            connection,
            listed,
            allowed=allowed,
            interceptor=interceptor,
            trust=checked_trust,
            requires_approval=requires_approval,
        )
    except BaseException:
        await asyncio.to_thread(connection.close)
        raise
    return McpTools(tools, connection)


def mcp_stdio_tools_sync(
    command: str,
    args: Sequence[str] = (),
    *,
    allowed: Collection[str] | None = None,
    env: Mapping[str, str] | None = None,
    interceptor: Interceptor | None = None,
    trust: Trust = "untrusted",
    requires_approval: ApprovalRule = False,
) -> McpTools:
    """`mcp_stdio_tools` for synchronous code (see `mcp_tools_sync`)."""
    _not_on_a_loop("mcp_stdio_tools_sync", "mcp_stdio_tools")
    return asyncio.run(
        mcp_stdio_tools(
            command,
            args,
            allowed=allowed,
            env=env,
            interceptor=interceptor,
            trust=trust,
            requires_approval=requires_approval,
        )
    )


def _headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise TypeError(f"headers must be a mapping of strings to strings, got {headers!r}")
    return dict(headers)


def _env(env: Mapping[str, str] | None) -> dict[str, str] | None:
    if env is None:
        return None
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise TypeError(f"env must be a mapping of strings to strings, got {env!r}")
    return dict(env)


def _trust(trust: Trust) -> Trust:
    if trust not in ("trusted", "untrusted"):
        raise ValueError(f"unknown trust {trust!r} (expected one of: trusted, untrusted)")
    return trust


def _not_on_a_loop(name: str, instead: str) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{name} called on a thread running an event loop: await {instead}")
