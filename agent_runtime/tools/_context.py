"""ToolContext: what a running tool receives besides its arguments."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_runtime._key import AgentKey
from agent_runtime.abort import AbortSignal
from agent_runtime.events import CustomEvent
from agent_runtime.messages import ToolResult
from agent_runtime.tools._results import normalize_result
from supervisors._log import get_logger

if TYPE_CHECKING:
    from agent_runtime.memory import SessionState

log = get_logger(__name__)

UpdateCallback = Callable[[ToolResult], None]
"""Receives each partial result of a tool, in the thread that called `update`."""

EmitCallback = Callable[[CustomEvent], None]
"""Receives each event a tool emits (not yet stamped with the run's identity), in the thread
that called `emit`."""

Spawner = Callable[..., Any]
"""`spawner(role, **options)`: starts a subagent for a tool (wired by the agent runtime). A
spawner that also has `async aspawn(role, **options)` is awaited by `ToolContext.aspawn`
instead of being called on a worker thread."""


class ToolContext:
    """The live context of one tool call: identity, abort signal, runtime, progress updates.

    A plain object, not a pydantic model: it carries live objects (signal, runtime, callbacks).
    A tool receives it by annotating a parameter with `ToolContext` (any name, keyword or
    positional); hand-written `Tool`s receive it as the second argument of `execute`.

    Guarantees:
    - `update()` is thread-safe (sync tools call it from a worker thread); the `on_update`
      callback runs in the calling thread, outside the context's lock, and an exception it
      raises is logged, never passed to the tool.
    - `last_partial` is the partial of the most recent `update()` that was accepted.
    - `emit()` is thread-safe like `update()`; in a run, its events reach the run's stream
      (and the agent's subscribers) in the order they were emitted, after the call's
      `ToolExecutionStart` and before its `ToolExecutionEnd`.
    - After `close()` (which `execute_tool_call` does when the call returns, times out or is
      cancelled), updates and emitted events are dropped: an abandoned tool cannot add output
      to a closed call.
    """

    def __init__(
        self,
        tool_call_id: str = "",
        tool_name: str = "",
        *,
        agent_key: AgentKey | None = None,
        signal: AbortSignal | None = None,
        runtime: Any = None,
        on_update: UpdateCallback | None = None,
        spawner: Spawner | None = None,
        on_emit: EmitCallback | None = None,
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.agent_key = agent_key
        self.signal = signal if signal is not None else AbortSignal()
        self.runtime = runtime
        self._on_update = on_update
        self._spawner = spawner
        self._on_emit = on_emit
        self._lock = threading.Lock()
        self._last_partial: ToolResult | None = None
        self._closed = False

    @property
    def aborted(self) -> bool:
        """True once the run's abort signal fired; a long tool should check it and stop."""
        return self.signal.aborted

    @property
    def session_state(self) -> SessionState:
        """The key-value state of the calling agent's session (`runtime.memory.kv(session)`,
        the session of `agent_key`): JSON values shared by every agent of the session and
        durable in its memory store. See `agent_runtime.memory.SessionState`.

        Raises:
            RuntimeError: the context has no agent key or no runtime with session memory
                (the tool runs outside an agent runtime).
        """
        memory = getattr(self.runtime, "memory", None)
        if self.agent_key is None or memory is None:
            raise RuntimeError(
                "session_state needs an agent's tool call in a runtime with session memory "
                f"(this context has agent_key={self.agent_key!r}, runtime={self.runtime!r})"
            )
        state: SessionState = memory.kv(self.agent_key.session)
        return state

    @property
    def last_partial(self) -> ToolResult | None:
        """The most recent accepted partial result, or None."""
        with self._lock:
            return self._last_partial

    @property
    def closed(self) -> bool:
        """True once `close()` was called; further updates are dropped."""
        with self._lock:
            return self._closed

    def update(self, partial: str | ToolResult) -> None:
        """Report progress: `partial` (a string becomes one text block) goes to `on_update`.

        Thread-safe; a no-op after `close()`. Values other than a string or `ToolResult` are
        normalised like a tool's return value.
        """
        result = ToolResult.text(partial) if isinstance(partial, str) else normalize_result(partial)
        with self._lock:
            if self._closed:
                return
            self._last_partial = result
        if self._on_update is not None:
            try:
                self._on_update(result)
            except Exception:
                log.exception("tool.update.failed", tool=self.tool_name, call=self.tool_call_id)

    def emit(self, name: str, data: Any = None) -> None:
        """Send `CustomEvent(name, data)` to the run's event stream and the agent's subscribers.

        `data` is any JSON value. Thread-safe; a no-op after `close()` and outside a run (a
        context made without an `on_emit` receiver), like `update()`. The event carries the
        run's `agent`, `run_id` and next `seq` when the run yields it.

        Raises:
            pydantic.ValidationError: `name` is not a non-empty str or `data` is not a JSON
                value (a `ValueError`; nothing is emitted).
        """
        event = CustomEvent(name=name, data=data)
        with self._lock:
            if self._closed:
                return
        if self._on_emit is not None:
            try:
                self._on_emit(event)
            except Exception:
                log.exception("tool.emit.failed", tool=self.tool_name, call=self.tool_call_id)

    def close(self) -> None:
        """Stop accepting updates (idempotent); `last_partial` is frozen from here on."""
        with self._lock:
            self._closed = True

    def spawn(self, role: str, **options: Any) -> Any:
        """Start a subagent with `role` through the runtime's spawner and return its handle.

        Raises:
            NotImplementedError: this context has no spawner (the tool runs outside an agent
                runtime).
        """
        if self._spawner is None:
            raise NotImplementedError("spawn needs an agent runtime")
        return self._spawner(role, **options)

    async def aspawn(self, role: str, **options: Any) -> Any:
        """`spawn` for `async def` tools, which run on the runtime's event loop: there the
        subagent starts in place, with no thread and no hop (its history, if its memory
        policy reads one, is read on the session writer's threads while the loop goes on).
        A spawner without `aspawn` is called on a worker thread.

        Raises:
            NotImplementedError: as `spawn`.
        """
        if self._spawner is None:
            raise NotImplementedError("spawn needs an agent runtime")
        aspawn = getattr(self._spawner, "aspawn", None)
        if aspawn is not None:
            return await aspawn(role, **options)
        return await asyncio.to_thread(self._spawner, role, **options)

    def __repr__(self) -> str:
        return f"<ToolContext {self.tool_name} call={self.tool_call_id!r} agent={self.agent_key!r}>"
