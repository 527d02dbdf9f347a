"""Journal: what the demo saw happen, as log lines and per-agent tallies, fed by events.

One reader thread feeds it the events of a subscription (`follow`), the demo's operator
adds its notes (`note`), the view reads it. Every method is thread-safe; its lock guards
only its own fields and is never held while calling out. Streamed tokens update a short
preview per agent and are never logged one by one.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_runtime._key import AgentKey
from agent_runtime.event_stream import Subscription
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    Error,
    Event,
    EventsDropped,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from agent_runtime.messages import AssistantMessage, UserMessage


@dataclass(frozen=True)
class Line:
    """One line of the event log: seconds since the demo started, who, what, a rich style."""

    seq: int
    at: float
    who: str
    text: str
    style: str = ""


@dataclass(frozen=True)
class RunSpan:
    """One run of an agent: when it started and ended (None while it runs), how it ended."""

    run_id: str
    start: float
    end: float | None = None
    outcome: str = ""  # completed | failed | canceled


@dataclass
class Tally:
    """Counts for one agent, from its events: turns started, tool calls ended, the tokens
    of turns that ended, provider retries scheduled, and its runs."""

    turns: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    runs: list[RunSpan] = field(default_factory=list)

    @property
    def busy(self) -> float:
        """Seconds spent in runs that ended."""
        return sum(r.end - r.start for r in self.runs if r.end is not None)


def who(key: AgentKey | None) -> str:
    """`role/index`, as the view names an agent (the demo has one session)."""
    return "?" if key is None else f"{key.role}/{key.index}"


def _short(text: str, limit: int = 90) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Journal:
    """The demo's record of events: a bounded log, tallies and run spans per agent."""

    def __init__(self, started: float | None = None, max_lines: int = 500) -> None:
        self.started = time.time() if started is None else started
        self._lock = threading.Condition()
        self._lines: deque[Line] = deque(maxlen=max_lines)
        self._seq = 0
        self._tallies: dict[AgentKey, Tally] = {}
        self._preview: dict[AgentKey, str] = {}

    # -- writing ------------------------------------------------------------------------------

    def note(self, text: str, style: str = "bold yellow", who: str = "operator") -> None:
        """Log what the demo's operator does (or checks), or what `who` says."""
        with self._lock:
            self._add(time.time(), who, text, style)

    def record(self, event: Event) -> None:
        """Take one event into the log and the tallies."""
        key = event.agent
        with self._lock:
            if key is None:
                return
            tally = self._tallies.setdefault(key, Tally())
            if isinstance(event, MessageUpdate):
                if event.delta.kind == "text":
                    self._preview[key] = (self._preview.get(key, "") + event.delta.delta)[-120:]
                return
            line = self._describe(event, key, tally)
            if line is not None:
                text, style = line
                self._add(event.ts, who(key), text, style)

    def _describe(self, event: Event, key: AgentKey, tally: Tally) -> tuple[str, str] | None:
        if isinstance(event, AgentStart):
            tally.runs.append(RunSpan(event.run_id, event.ts))
            return "▶ run started", "dim"
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            self._preview[key] = ""
        elif isinstance(event, MessageEnd):
            message = event.message
            if isinstance(message, AssistantMessage):
                self._preview.pop(key, None)  # the preview is of an answer being streamed
            if isinstance(message, UserMessage) and tally.runs and tally.runs[-1].end is None:
                return f"hears: {_short(message.text)}", "cyan"
            if isinstance(message, AssistantMessage) and message.text.strip():
                return f"says: {_short(message.text)}", ""
        elif isinstance(event, TurnStart):
            tally.turns += 1  # turns started, as `RuntimeStats.turns` counts them
        elif isinstance(event, TurnEnd):
            tally.input_tokens += event.message.usage.input_tokens
            tally.output_tokens += event.message.usage.output_tokens
        elif isinstance(event, ToolExecutionStart):
            return f"→ {event.name}({_args(event.args)})", "blue"
        elif isinstance(event, ToolExecutionEnd):
            tally.tool_calls += 1
            text = _short(" ".join(c.text for c in event.result.content if c.type == "text"), 70)
            if event.is_error:
                return f"← {event.name} error: {text}", "red"
            return f"← {event.name} ok: {text}", "green"
        elif isinstance(event, ProviderRetry):
            tally.retries += 1
            return (
                f"⟳ provider retry {event.attempt} in {event.delay:.1f}s: {_short(event.error)}",
                "magenta",
            )
        elif isinstance(event, EventsDropped):
            return f"! {event.count} events dropped", "red"
        elif isinstance(event, AgentEnd | Error | Canceled):
            return self._ended(event, tally)
        return None

    def _ended(self, event: AgentEnd | Error | Canceled, tally: Tally) -> tuple[str, str]:
        for i, span in enumerate(tally.runs):
            if span.run_id == event.run_id and span.end is None:
                outcome = (
                    "completed"
                    if isinstance(event, AgentEnd)
                    else "failed"
                    if isinstance(event, Error)
                    else "canceled"
                )
                tally.runs[i] = RunSpan(span.run_id, span.start, event.ts, outcome)
        if isinstance(event, AgentEnd):
            return "■ run completed", "dim"
        if isinstance(event, Error):
            return f"✖ run failed: {_short(event.reason, 70)}", "bold red"
        return f"■ run canceled: {_short(event.reason, 70)}", "yellow"

    def _add(self, ts: float, who: str, text: str, style: str) -> None:
        self._seq += 1
        self._lines.append(Line(self._seq, max(ts - self.started, 0.0), who, text, style))
        self._lock.notify_all()

    # -- reading ------------------------------------------------------------------------------

    def lines(self, after: int = 0, last: int | None = None) -> list[Line]:
        """The log lines with `seq > after` (at most the `last` newest), oldest first."""
        with self._lock:
            found = [line for line in self._lines if line.seq > after]
        return found if last is None else found[-last:]

    def wait_lines(self, after: int, timeout: float) -> bool:
        """Wait up to `timeout` s for a line with `seq > after`; True if there is one."""
        with self._lock:
            return self._lock.wait_for(lambda: self._seq > after, timeout)

    def tallies(self) -> dict[AgentKey, Tally]:
        """A copy of each agent's tally, by key (sorted)."""
        with self._lock:
            return {
                k: Tally(
                    t.turns, t.tool_calls, t.input_tokens, t.output_tokens, t.retries, [*t.runs]
                )
                for k, t in sorted(self._tallies.items())
            }

    def preview(self, key: AgentKey) -> str:
        """The last words of the answer `key` is streaming now ('' when it streams none)."""
        with self._lock:
            return self._preview.get(key, "")

    def wait_for(self, predicate: Callable[[Journal], bool], timeout: float) -> bool:
        """Wait until `predicate(journal)` holds, checked after each new line (and every
        50 ms); False on timeout. The predicate runs without the lock and may read."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._lock:
                seen = self._seq
            self.wait_lines(seen, min(left, 0.05))
        return True


def _args(args: dict[str, object]) -> str:
    if set(args) == {"role", "task"}:
        return f"{args['role']}: {_short(str(args['task']), 50)}"
    return _short(", ".join(f"{k}={v!r}" for k, v in args.items()), 60)


def follow(sub: Subscription, journal: Journal) -> threading.Thread:
    """Start a daemon thread that records every event of `sub` into `journal` until `sub`
    is closed (the thread ends then)."""

    def read() -> None:
        for event in sub:
            journal.record(event)

    thread = threading.Thread(target=read, name="demo-journal", daemon=True)
    thread.start()
    return thread
