"""`delegate(...)`: a tool through which a model hands a task to a subagent by role."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field

from agent_runtime._errors import AgentBusy, AgentStopped, RunCanceled, RunFailed
from agent_runtime.abort import parent_aborted
from agent_runtime.agent._handle import Agent
from agent_runtime.agent._protocol import Abort, StartRun
from agent_runtime.agent._state import run_result
from agent_runtime.messages import TextContent, ToolResult
from agent_runtime.tools import Tool, ToolContext, error_result


def delegate(
    roles: Sequence[str] | None = None,
    *,
    name: str = "delegate",
    description: str | None = None,
    timeout: float | None = None,
    parallel_safe: bool = False,
    **subagent_options: Any,
) -> Tool:
    """A tool that runs `task` on a subagent of `role` and returns its final text.

    The subagent is an idle subagent of that role already spawned by the calling agent, or a
    new one started with `ToolContext.spawn(role, **subagent_options)` (same session, next
    free index, stopped with its parent). Its events reach the caller's subscribers tagged
    with its own key; aborting the caller aborts it. `roles` limits which roles may be asked
    for (None: any); the tool's schema gives them as an `enum` of `role`. Failures come back
    as error results the model can read.
    `parallel_safe=True` lets several delegations of one answer run at once (each claims its
    own subagent: an idle one, or a new one).

    Raises:
        ValueError: `roles` is empty, or holds something other than non-empty strings.
    """
    allowed = _allowed_roles(roles)
    what = f"One of: {', '.join(allowed)}." if allowed else "Any role name, e.g. 'research'."
    # The roles as a JSON-schema `enum`, which grammar-constrained decoding (llama.cpp) and
    # strict tool schemas enforce; the check below stays for models that ignore schemas.
    extra = {"enum": allowed} if allowed is not None else None

    async def run_delegate(
        role: Annotated[
            str,
            Field(description=f"Which kind of subagent to ask. {what}", json_schema_extra=extra),
        ],
        task: Annotated[
            str, Field(description="The task, stated completely: it is all the subagent sees.")
        ],
        ctx: ToolContext,
    ) -> ToolResult:
        if allowed is not None and role not in allowed:
            return error_result(f"unknown role {role!r}; choose one of: {', '.join(allowed)}")
        runtime = ctx.runtime
        if runtime is None or ctx.agent_key is None:
            return error_result("delegate needs to run inside an agent of a runtime")
        parent = runtime.registry.lookup(ctx.agent_key)
        if not isinstance(parent, Agent):
            return error_result("delegate needs to run inside an agent of a runtime")
        # Picking an idle subagent (or spawning one) and starting its run happen under one
        # lock per parent, so parallel delegations never claim the same subagent.
        async with _claim_lock(parent):
            claimed = await _claim_idle_child(parent, role, task)
            if claimed is None:
                subagent: Agent = await ctx.aspawn(role, **subagent_options)
                try:
                    start = await subagent._astart(task)
                except (AgentBusy, AgentStopped):
                    return error_result(f"subagent {tuple(subagent.key)} is busy")
            else:
                subagent, start = claimed

        def abort_subagent(signal: Any) -> None:
            with contextlib.suppress(AgentStopped):
                subagent._tell(Abort(parent_aborted(signal.reason)))

        remove = ctx.signal.on_abort(abort_subagent)
        try:
            terminal = await asyncio.wait_for(_outcome(start), timeout)
            result = run_result(start.run_id, terminal)
        except RunCanceled as exc:
            return error_result(f"subagent {tuple(subagent.key)} was canceled: {exc.reason}")
        except RunFailed as exc:
            return error_result(f"subagent {tuple(subagent.key)} failed: {exc.reason}")
        except (AgentBusy, AgentStopped) as exc:  # its start lost a race with its stop
            return error_result(f"subagent {tuple(subagent.key)} did not start: {exc}")
        except TimeoutError:
            with contextlib.suppress(AgentStopped):
                subagent._tell(Abort("delegate_timeout"))
            return error_result(f"subagent {tuple(subagent.key)} did not finish within {timeout}s")
        finally:
            remove()
        return ToolResult(
            content=[TextContent(text=result.text or "(no answer)")],
            details={"subagent": list(subagent.key), "run_id": result.run_id},
        )

    return Tool.from_function(
        run_delegate,
        name=name,
        description=description
        or "Hand a self-contained task to a subagent and get its final answer back.",
        parallel_safe=parallel_safe,
    )


def _allowed_roles(roles: Sequence[str] | None) -> list[str] | None:
    if roles is None:
        return None
    if isinstance(roles, str):
        raise ValueError(f"roles must be a list of role names, not the string {roles!r}")
    allowed = list(dict.fromkeys(roles))
    if not allowed:
        raise ValueError("roles must name at least one role (or be None for any role)")
    bad = [role for role in allowed if not isinstance(role, str) or not role]
    if bad:
        raise ValueError(f"roles must be non-empty strings, not {bad[0]!r}")
    return allowed


_locks: weakref.WeakKeyDictionary[Agent, asyncio.Lock] = weakref.WeakKeyDictionary()


def _claim_lock(parent: Agent) -> asyncio.Lock:
    lock = _locks.get(parent)
    if lock is None:
        lock = _locks[parent] = asyncio.Lock()
    return lock


async def _outcome(start: StartRun) -> Any:
    return await start.outcome


async def _claim_idle_child(parent: Agent, role: str, task: str) -> tuple[Agent, StartRun] | None:
    """Start `task` on a live subagent of `role` that `parent` spawned and that is idle."""
    for child in sorted(parent._cell.children, key=lambda c: c.key):
        handle = child.handle
        if child.key.role != role or not isinstance(handle, Agent) or not handle.alive:
            continue
        try:
            return handle, await handle._astart(task)
        except (AgentBusy, AgentStopped):
            continue
    return None
