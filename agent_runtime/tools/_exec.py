"""Running one tool call for the loop: resolve, validate, execute with a deadline, never crash."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_runtime.messages import ToolCall, ToolResult
from agent_runtime.tools._args import ToolArgumentsError, arguments_from_raw
from agent_runtime.tools._context import ToolContext
from agent_runtime.tools._results import error_result, normalize_result
from agent_runtime.tools._tool import Tool
from supervisors._log import get_logger

log = get_logger(__name__)

RunSync = Callable[[Callable[[], Any]], "concurrent.futures.Future[Any]"]
"""Submits a zero-argument callable to a thread pool and returns its Future."""


def find_tool(tools: Sequence[Tool], name: str) -> Tool | None:
    """The tool a call named `name` means, or None.

    Rule: the first tool whose name equals `name` exactly; failing that, the first whose name
    equals `name` with surrounding whitespace stripped and each inner run of whitespace
    (Unicode included) replaced by one `_`. So `" read_file "`, `"read_file\\n"` and
    `"read file"` all find `read_file`; case and other characters are never changed.
    """
    for t in tools:
        if t.name == name:
            return t
    key = _normalize(name)
    if not key:
        return None
    for t in tools:
        if _normalize(t.name) == key:
            return t
    return None


async def execute_tool_call(
    call: ToolCall,
    tools: Sequence[Tool],
    ctx: ToolContext,
    *,
    run_sync: RunSync | None = None,
    timeout: float | None = None,
) -> ToolResult:
    """Run one tool call and return its result; never raises except `asyncio.CancelledError`.

    - The tool is found with `find_tool`; none -> an error result "Tool X not found. Available
      tools: a, b" with `details = {"outcome": "not_found", ...}`.
    - Arguments are validated (see `Tool.validate_arguments`); invalid -> an error result
      naming each bad field, `details = {"outcome": "invalid_arguments", "errors": [...]}`,
      and the tool does not run. Arguments the LLM layer could not parse (`raw_arguments`)
      are invalid too, unless they are a JSON object encoded twice.
    - `async def` tools run on the running event loop; sync tools via `run_sync` (the
      runtime's thread pool), else `asyncio.to_thread`, with the caller's contextvars.
    - The deadline is `tool.timeout`, else `timeout`, else none. On expiry -> an error result
      "Tool X timed out after Ns" (`outcome = "timeout"`). An async tool is cancelled; a sync
      tool cannot be killed and keeps running in its thread, its later output discarded.
    - An exception -> an error result naming its type and message (`outcome = "error"`,
      `exception = type name`). That holds for every exception a tool raises, sync or
      `async def`: `SystemExit`, `KeyboardInterrupt` and `GeneratorExit` too (on the shared
      event loop they would otherwise stop the loop thread of every agent), and one whose
      `__str__` itself raises (the result then says its message could not be read). An async
      tool's `GeneratorExit` that comes back through a future it awaits is thrown into the
      root coroutine of the task, so it is caught only where this call is that root, as the
      agent loop runs each call (`asyncio.ensure_future(execute_tool_call(...))`). A
      success keeps the tool's own `details`; unknown arguments that were ignored are added
      as `details["ignored_arguments"]`.
    - A tool with `trust="untrusted"` makes its results untrusted (a result may also say so).
    - Cancelling the awaiting task (the loop's abort) propagates `CancelledError`: an async
      tool is cancelled, a sync tool not yet started never starts, a started one is
      abandoned. A `CancelledError` coming from inside the tool while this task is not being
      cancelled is reported as an error result instead.
    - `ctx` is closed when this returns or raises: later updates from the tool are dropped.
    """
    try:
        return await _execute(call, tools, ctx, run_sync, timeout)
    except GeneratorExit as exc:
        # A GeneratorExit *thrown* into this task (an async tool awaiting a future that holds
        # one) closes the coroutines it awaits and surfaces here, not inside `_execute`.
        found = find_tool(tools, call.name)
        name = found.name if found is not None else call.name
        result = _raised(name, call, exc)
        return _untrusted(found, result) if found is not None else result
    finally:
        ctx.close()


async def _execute(
    call: ToolCall,
    tools: Sequence[Tool],
    ctx: ToolContext,
    run_sync: RunSync | None,
    default_timeout: float | None,
) -> ToolResult:
    found = find_tool(tools, call.name)
    if found is None:
        return _not_found(call.name, tools)
    try:
        arguments = arguments_from_raw(call.arguments, call.raw_arguments)
        values, ignored = found.validate_arguments(arguments)
    except ToolArgumentsError as exc:
        details: dict[str, Any] = {"outcome": "invalid_arguments", "errors": exc.errors}
        if exc.ignored:
            details["ignored_arguments"] = exc.ignored
        return ToolResult.text(exc.describe(found.name), is_error=True, details=details)
    except Exception as exc:
        return _raised(found.name, call, exc)

    limit = found.timeout if found.timeout is not None else default_timeout
    deadline = asyncio.timeout(limit)
    try:
        if limit is not None and found.is_async:  # bounded even if it catches its cancel
            value = await _within(found.execute(values, ctx), limit)
        else:
            async with deadline:
                value = await _invoke(found, values, ctx, run_sync)
        result = normalize_result(value)
    except TimeoutError as exc:
        if not (deadline.expired() or isinstance(exc, _Expired)):
            return _untrusted(found, _raised(found.name, call, exc))
        log.info("tool.call.timed_out", tool=found.name, call=call.id, timeout=limit)
        return error_result(f"Tool {found.name} timed out after {limit:g}s", outcome="timeout")
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        return _untrusted(found, _raised(found.name, call, exc))
    except BaseException as exc:  # SystemExit & co. are the tool's failure, not a stop of ours
        return _untrusted(found, _raised(found.name, call, exc))

    if ignored:
        details = dict(result.details or {})
        details.setdefault("ignored_arguments", ignored)
        result = result.model_copy(update={"details": details})
    return _untrusted(found, result)


class _Expired(TimeoutError):
    """An `async def` tool's time ran out (`_within`)."""


# Timed-out `async def` tools that ignored their cancellation and still run: held until they
# end, so none is destroyed while pending.
_ABANDONED: set[asyncio.Future[Any]] = set()


# How long a timed-out `async def` tool gets to finish its cancellation (its cleanup) before
# it is left to end on its own: the default `abort_grace`.
CANCEL_GRACE = 0.25


async def _within(call: Any, limit: float) -> Any:
    """Await the coroutine `call` (an `async def` tool's) for at most `limit` seconds, in a
    task of its own: when time runs out it is cancelled, and given `CANCEL_GRACE` to end; a
    tool that catches its cancellation is left to end on its own, so it cannot hold the run
    past its timeout.

    Raises:
        _Expired: the time ran out.
    """
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait((task,), timeout=limit)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait((task,), timeout=CANCEL_GRACE)
    except asyncio.CancelledError:  # the run was aborted or stopped: the tool goes with it
        task.cancel()
        raise
    if not task.done():  # it caught its cancellation: left to end on its own
        _ABANDONED.add(task)
    task.add_done_callback(_forget)
    raise _Expired


def _forget(task: asyncio.Future[Any]) -> None:
    """An abandoned tool ended: let it go, its outcome read (nobody waits for it)."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


async def _invoke(
    found: Tool, values: dict[str, Any], ctx: ToolContext, run_sync: RunSync | None
) -> Any:
    if found.is_async:
        value = await found.execute(values, ctx)
    else:
        thunk = functools.partial(_contained, functools.partial(found.execute, values, ctx))
        if run_sync is None:
            value = await asyncio.to_thread(thunk)
        else:
            context = contextvars.copy_context()
            value = await asyncio.wrap_future(run_sync(functools.partial(context.run, thunk)))
        if isinstance(value, _Raised):
            raise value.exception  # raised here, it is caught like any other exception
    if inspect.isawaitable(value):  # a sync callable that returned a coroutine
        value = await value
    return value


@dataclass(frozen=True)
class _Raised:
    """What a sync tool raised, carried back from its thread as a value."""

    exception: BaseException


def _contained(thunk: Callable[[], Any]) -> Any:
    """Run a sync tool in its thread; what it raises beyond `Exception` comes back as a value.

    A `GeneratorExit` coming back through a future would be thrown into the awaiting task,
    which closes the coroutines it awaits instead of raising where it can be caught; and a
    `SystemExit` or `KeyboardInterrupt` failing the pool's future would be logged as a
    failure of the pool.
    """
    try:
        return thunk()
    except Exception:
        raise
    except BaseException as exc:
        return _Raised(exc)


def _not_found(name: str, tools: Sequence[Tool]) -> ToolResult:
    available = list(dict.fromkeys(t.name for t in tools))
    listing = f"Available tools: {', '.join(available)}" if available else "No tools are available."
    return error_result(
        f"Tool {name} not found. {listing}",
        outcome="not_found",
        requested=name,
        available=available,
    )


def _raised(name: str, call: ToolCall, exc: BaseException) -> ToolResult:
    kind = type(exc).__name__
    message = _message_of(exc)
    log.info("tool.call.raised", tool=name, call=call.id, exception=kind, exc_info=exc)
    text = f"Tool {name} raised {kind}: {message}" if message else f"Tool {name} raised {kind}"
    return error_result(text, exception=kind, message=message)


def _message_of(exc: BaseException) -> str:
    """`str(exc)`, or a note saying why it could not be had: a tool's exception is data, and
    its `__str__` is the tool's code too."""
    try:
        return str(exc)
    except BaseException as failure:
        kind, why = type(exc).__name__, type(failure).__name__
        return f"<the message of this {kind} could not be read: its __str__ raised {why}>"


def _untrusted(found: Tool, result: ToolResult) -> ToolResult:
    if found.trust == "untrusted" and result.trust != "untrusted":
        return result.model_copy(update={"trust": "untrusted"})
    return result


def _normalize(name: str) -> str:
    return "_".join(name.split())
