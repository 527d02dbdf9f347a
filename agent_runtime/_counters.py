"""RuntimeCounters: what one runtime counted since it started (behind `Runtime.stats()`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_runtime.event_stream import EventStream

RUN_OUTCOMES = ("completed", "failed", "canceled")
"""How a run ends: `AgentEnd`, `Error`, `Canceled`."""

TOOL_OUTCOMES = (
    "ok",
    "error",
    "timeout",
    "invalid_arguments",
    "not_found",
    "blocked",
    "skipped",
    "not_started",
    "unknown",
)
"""How a tool call ends: `ok`, or the `details["outcome"]` of its error result (`error` when a
result names none, or one outside this list)."""


@dataclass(frozen=True, slots=True)
class CounterValues:
    """One reading of a runtime's counters."""

    runs: dict[str, int]
    turns: int
    tool_calls: dict[str, int]
    input_tokens: int
    output_tokens: int
    retries: int
    restarts: int
    dropped_events: int  # of the subscriptions that ended; live ones are read from them
    loop_waits: int
    loop_wait_seconds: float


class RuntimeCounters:
    """The counters of one runtime, updated where things happen and never behind another
    module's lock.

    Writers:
    - turns, tool calls, tokens, provider retries and waits for the loop are counted by the
      run drivers, which all run on the runtime's one event-loop thread: one writer, plain
      numbers, no lock.
    - runs, restarts and the events dropped by ended subscriptions have writers on several
      threads (a run whose driver was cancelled before it ran ends on the stopping thread;
      restarts are seen on supervisor and actor threads; a subscription ends on whichever
      thread ends it). They change once per run, restart or subscription, under this
      object's own lock, which nothing else takes and which is never held while calling out.
      It is reentrant: a collection during a `read()` may run a forgotten subscription's
      finalizer, which ends its stream and adds the stream's drops on that same thread.
    A reading from another thread sees whole values and may be a few milliseconds behind.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs = dict.fromkeys(RUN_OUTCOMES, 0)
        self._restarts = 0
        self._dropped = 0
        # The event-loop thread's alone (see the class docstring).
        self._turns = 0
        # Every key is there from the start: a reader's copy never meets an insertion.
        self._tools = dict.fromkeys(TOOL_OUTCOMES, 0)
        self._input_tokens = 0
        self._output_tokens = 0
        self._retries = 0
        self._loop_waits = 0
        self._loop_wait_seconds = 0.0

    # -- the run drivers, on the event-loop thread ---------------------------------------------

    def turn_started(self) -> None:
        self._turns += 1

    def tool_ended(self, is_error: bool, details: Any) -> None:
        """A tool call ended; an error counts under its `details["outcome"]` (see
        `TOOL_OUTCOMES`)."""
        if not is_error:
            self._tools["ok"] += 1
            return
        outcome = details.get("outcome") if isinstance(details, dict) else None
        self._tools[outcome if outcome in TOOL_OUTCOMES else "error"] += 1

    def tokens_used(self, input_tokens: int, output_tokens: int) -> None:
        self._input_tokens += input_tokens
        self._output_tokens += output_tokens

    def retry_scheduled(self) -> None:
        self._retries += 1

    def loop_waited(self, seconds: float) -> None:
        """A run waited `seconds` for its turn of the event loop (`agent._loop_share`)."""
        self._loop_waits += 1
        self._loop_wait_seconds += seconds

    # -- any thread -----------------------------------------------------------------------------

    def run_ended(self, outcome: str) -> None:
        """A run ended with `outcome` (one of `RUN_OUTCOMES`)."""
        with self._lock:
            self._runs[outcome if outcome in self._runs else "canceled"] += 1

    def restarted(self) -> None:
        """A child of the runtime's tree (an agent, or a child of the root) was restarted."""
        with self._lock:
            self._restarts += 1

    def watch_dropped(self, stream: EventStream) -> None:
        """Add what `stream` (a subscription's) dropped on overflow once it ends; while it is
        open, its reader counts it live."""
        stream.on_end_dropped(self._dropped_by)

    def _dropped_by(self, count: int) -> None:
        if count:
            with self._lock:
                self._dropped += count

    def read(self) -> CounterValues:
        """The counters now (every key of `RUN_OUTCOMES` and `TOOL_OUTCOMES` present)."""
        with self._lock:
            runs, restarts, dropped = dict(self._runs), self._restarts, self._dropped
        return CounterValues(
            runs=runs,
            turns=self._turns,
            tool_calls=dict(self._tools),
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            retries=self._retries,
            restarts=restarts,
            dropped_events=dropped,
            loop_waits=self._loop_waits,
            loop_wait_seconds=self._loop_wait_seconds,
        )
