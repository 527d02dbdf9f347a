"""Helpers for driving the stateless loop in tests."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent_runtime.abort import AbortSignal
from agent_runtime.events import Event, MessageEnd
from agent_runtime.loop import AgentContext, LoopConfig, run
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import Tool


def call(call_id: str, tool_name: str, /, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=tool_name, arguments=arguments)


def calls_turn(*calls: ToolCall) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=list(calls))


def names(events: Sequence[Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def committed(events: Sequence[Event]) -> list[Message]:
    """The transcript a consumer keeps: every MessageEnd but failed or aborted attempts."""
    out: list[Message] = []
    for event in events:
        if isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, AssistantMessage) and message.stop_reason in (
                "error",
                "aborted",
            ):
                continue
            out.append(message)
    return out


def results_of(events: Sequence[Event]) -> list[ToolResultMessage]:
    return [m for m in committed(events) if isinstance(m, ToolResultMessage)]


def daemon_run_sync(fn: Callable[[], Any]) -> concurrent.futures.Future[Any]:
    """A `LoopConfig.run_sync` on daemon threads (not asyncio's default executor, which
    `asyncio.run` would wait for when a test abandons a tool)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=work, daemon=True).start()
    return future


def drive(
    model: ScriptedModel,
    tools: Sequence[Tool] = (),
    prompt: str = "go",
    *,
    history: Sequence[Message] = (),
    signal: AbortSignal | None = None,
    abort_when: Callable[[Event], bool] | None = None,
    abort_reason: str = "user_abort",
    **options: Any,
) -> list[Event]:
    """Run the loop to its end on a fresh event loop; optionally abort when an event matches.

    Sync tools run on daemon threads (`daemon_run_sync`).
    """
    signal = signal or AbortSignal()
    config = LoopConfig(model=model, run_sync=daemon_run_sync, **options)
    context = AgentContext(system_prompt="sys", messages=list(history), tools=list(tools))
    prompts: list[Message] = [UserMessage(content=prompt)] if prompt else []

    async def collect() -> list[Event]:
        out: list[Event] = []
        async for event in run(prompts, context, config, signal):
            out.append(event)
            if abort_when is not None and abort_when(event):
                signal.abort(abort_reason)
        return out

    return asyncio.run(collect())


class Clock:
    """Records when things happen, relative to its creation."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.marks: dict[str, float] = {}
        self.lock = threading.Lock()

    def mark(self, name: str) -> None:
        with self.lock:
            self.marks[name] = time.monotonic() - self.start
