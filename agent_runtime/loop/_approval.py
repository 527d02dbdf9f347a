"""Tool calls that wait for a human's approval: the gate each such call passes in its batch.

A tool with `requires_approval` (True, or a predicate `(ctx, args) -> bool`) does not run
until its run's `Approver` (`LoopConfig.approvals`, wired by an agent) hands the call a
`Decision`. The call waits as its own task, without a thread, so the other calls of the batch
go on; an abort ends the wait at once (the call is `not_started`), and `approval_timeout`
denies it with reason `"approval_timeout"`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agent_runtime.abort import AbortSignal
from agent_runtime.events import Event, ToolApprovalDecided, ToolApprovalRequested
from agent_runtime.loop.types import LoopConfig
from agent_runtime.messages import AssistantMessage, ToolCall, ToolResult
from agent_runtime.tools import Tool, ToolContext, error_result, execute_tool_call, find_tool
from supervisors._log import get_logger

log = get_logger(__name__)

M = TypeVar("M")

APPROVAL_TIMEOUT = "approval_timeout"
"""The reason of a call denied because nobody decided within `approval_timeout`."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A human's decision on one waiting call: run it (with `args` in place of the model's,
    when given) or not, and why; `by` names who decided."""

    approved: bool
    args: dict[str, Any] | None = None
    reason: str | None = None
    by: str | None = None


class Approver(Protocol):
    """Where a run's waiting calls are decided (an agent's run is one)."""

    def decided(self, call_id: str) -> Decision | None:
        """A decision taken before this run asked (a resumed batch), else None."""
        ...

    def request(self, call: ToolCall) -> asyncio.Future[Decision]:
        """`call` waits: the future is set once a human decided."""
        ...

    def withdraw(self, call_id: str, decision: Decision | None) -> None:
        """The call stopped waiting without a human: timed out (`decision`) or aborted."""
        ...


@dataclass(frozen=True, slots=True)
class ApprovalNote:
    """An approval event of a call, queued like its progress updates and stamped by the
    batch in order with the run's other events."""

    kind: type[ToolApprovalRequested] | type[ToolApprovalDecided]
    fields: dict[str, Any] = field(default_factory=dict)


Put = Callable[[Any], None]

Screen = Callable[[ToolCall], Awaitable["ToolResult | None"]]
"""The batch's `tool_call` guardrails for one call: its blocked result, or None to run it."""


def call_task(
    call: ToolCall,
    tools: Sequence[Tool],
    ctx: ToolContext,
    config: LoopConfig,
    put: Put,
    screen: Screen | None = None,
) -> Coroutine[Any, Any, ToolResult]:
    """The coroutine a batch runs for `call`: `execute_tool_call` itself for a tool that needs
    no approval (as it always was), else the gate around it. `screen` checks arguments a
    human put in place of the model's, as the batch checked the model's before the gate."""
    found = find_tool(tools, call.name)
    if found is None or found.requires_approval is False:
        return execute_tool_call(
            call, tools, ctx, run_sync=config.run_sync, timeout=config.tool_timeout
        )
    return _gated(found, call, tools, ctx, config, put, screen)


async def _gated(
    tool: Tool,
    call: ToolCall,
    tools: Sequence[Tool],
    ctx: ToolContext,
    config: LoopConfig,
    put: Put,
    screen: Screen | None,
) -> ToolResult:
    approver: Approver | None = config.approvals
    decision = approver.decided(call.id) if approver is not None else None
    if decision is None:
        if not await _needs_approval(tool, call, ctx, config):
            return await _execute(call, tools, ctx, config)
        if approver is None:
            ctx.close()
            return error_result(
                f"Not run: {tool.name} needs a human's approval and this run has nobody to ask "
                "(run it as an agent's run).",
                outcome="denied",
                reason="no_approver",
            )
        future = approver.request(call)
        put(
            ApprovalNote(
                ToolApprovalRequested,
                {"tool_call_id": call.id, "name": tool.name, "args": dict(call.arguments)},
            )
        )
        try:
            waited = await _wait(future, ctx.signal, config.approval_timeout)
        except asyncio.CancelledError:
            approver.withdraw(call.id, None)
            raise
        if waited is None:  # aborted: paired as any call that never started
            approver.withdraw(call.id, None)
            ctx.close()
            reason = str(ctx.signal.reason)
            return error_result(
                f"Not run: {call.name} was cancelled before it started ({reason}).",
                outcome="not_started",
                cancelled=True,
            )
        if waited == APPROVAL_TIMEOUT:
            decision = Decision(False, reason=APPROVAL_TIMEOUT)
            approver.withdraw(call.id, decision)
        else:
            assert isinstance(waited, Decision)
            decision = waited
    put(
        ApprovalNote(
            ToolApprovalDecided,
            {
                "tool_call_id": call.id,
                "name": tool.name,
                "approved": decision.approved,
                "reason": decision.reason,
                "by": decision.by,
                "args": decision.args,
            },
        )
    )
    if not decision.approved:
        ctx.close()
        return denied_result(tool.name, decision)
    if decision.args is not None:
        call = call.model_copy(update={"arguments": dict(decision.args), "raw_arguments": None})
        # A human's edit meets the guardrails the model's arguments met: what runs is checked.
        blocked = await screen(call) if screen is not None else None
        if blocked is not None:
            ctx.close()
            return blocked
    return await _execute(call, tools, ctx, config)


def with_edited_args(
    message: AssistantMessage, call_id: str, args: dict[str, Any]
) -> AssistantMessage:
    """`message` with the arguments of its call `call_id` replaced by `args`, as a human
    approved it: what the history keeps, so the model reads the call that ran. `message`
    itself when it has no such call or the call has these arguments already."""
    content = list(message.content)
    for index, block in enumerate(content):
        if isinstance(block, ToolCall) and block.id == call_id:
            if block.arguments == args and block.raw_arguments is None:
                return message
            content[index] = ToolCall(id=block.id, name=block.name, arguments=dict(args))
            return message.model_copy(update={"content": content})
    return message


def replace_amended(messages: MutableSequence[M], old: M, new: M) -> None:
    """The last `old` in `messages` (itself, not an equal message) replaced by `new`, if
    there: where an answer amended by `with_edited_args` is kept (a run's transcript, an
    agent's history, its messages not yet seen in the store)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is old:
            messages[index] = new
            return


def edited_args(event: Event) -> tuple[str, dict[str, Any]] | None:
    """The call and the arguments a human put in place of the model's, if `event` approved
    a call so."""
    if isinstance(event, ToolApprovalDecided) and event.approved and event.args is not None:
        return event.tool_call_id, event.args
    return None


def denied_result(name: str, decision: Decision) -> ToolResult:
    """The result of a call a human denied (or nobody approved in time): the model reads why
    and can go on."""
    reason = decision.reason or "denied"
    by = f" by {decision.by}" if decision.by else ""
    return error_result(
        f"Denied{by}: {name} was not run ({reason}).",
        outcome="denied",
        reason=reason,
        by=decision.by,
    )


def _execute(
    call: ToolCall, tools: Sequence[Tool], ctx: ToolContext, config: LoopConfig
) -> Coroutine[Any, Any, ToolResult]:
    run_sync, timeout = config.run_sync, config.tool_timeout
    return execute_tool_call(call, tools, ctx, run_sync=run_sync, timeout=timeout)


async def _needs_approval(tool: Tool, call: ToolCall, ctx: ToolContext, config: LoopConfig) -> bool:
    """The tool's rule for this call; a predicate that fails counts as True (never run a
    call unapproved by mistake)."""
    rule = tool.requires_approval
    if isinstance(rule, bool):
        return rule
    args = dict(call.arguments)
    try:
        if inspect.iscoroutinefunction(rule) or inspect.iscoroutinefunction(
            getattr(rule, "__call__", None)  # noqa: B004  # an object with `async def __call__`
        ):
            return bool(await rule(ctx, args))  # type: ignore[misc]  # async: an awaitable
        if config.run_sync is not None:  # a plain predicate runs in the tool_tasks pool
            answer = await asyncio.wrap_future(config.run_sync(lambda: rule(ctx, args)))
        else:
            answer = await asyncio.to_thread(rule, ctx, args)
        if inspect.isawaitable(answer):
            answer = await answer
        return bool(answer)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.warning(
            "tool.approval.predicate_failed",
            tool=tool.name,
            call=call.id,
            error=f"{type(exc).__name__}: {exc}",
        )
        return True


async def _wait(
    future: asyncio.Future[Decision], signal: AbortSignal, timeout: float | None
) -> Decision | str | None:
    """The decision; None once `signal` is aborted (which wins over a decision that came at
    the same time); `APPROVAL_TIMEOUT` after `timeout` seconds."""
    if signal.aborted:
        return None
    loop = asyncio.get_running_loop()
    aborted: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not aborted.done():
            aborted.set_result(None)

    def wake(_reason: object) -> None:
        loop.call_soon_threadsafe(settle)

    remove = signal.on_abort(wake)
    try:
        waited: set[asyncio.Future[Any]] = {future, aborted}
        await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        aborted.cancel()
    if signal.aborted:
        return None
    if future.done() and not future.cancelled():
        return future.result()
    future.cancel()
    return APPROVAL_TIMEOUT


def stamped(note: ApprovalNote, stamp: Callable[..., Event]) -> Event:
    """The event of `note`, stamped as the run's next."""
    return stamp(note.kind, **note.fields)
