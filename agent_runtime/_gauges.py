"""Observable gauges of the live runtimes, read when a metric reader collects (DESIGN.md 10).

Nothing is recorded per event: at each collection the callbacks read state the runtime keeps
anyway, each under its own short lock and never through an agent's actor, so a busy or
blocked agent cannot hold a collection up. Each point carries `agent_runtime.runtime` (the
runtime's name); a stopped runtime reports nothing. Without an OpenTelemetry SDK no reader
ever calls them, and `watch` costs one weak reference per runtime.

- `agent_runtime.agents.live` ({agent}): agents registered and alive (`registry.count()`).
- `agent_runtime.runs.active` ({run}): runs whose abort signal is live in the runtime's abort
  table (an agent's run releases its signal as it ends; a `loop.stream` run's lives while
  something holds it).
- `agent_runtime.subscription.depth` ({event}): events waiting in the open subscriptions,
  with `aggregation` = `max` (the fullest one) and `sum` (all of them).
- `agent_runtime.events.dropped` ({event}): events the open subscriptions dropped on
  overflow, summed (each counts since it opened; a closed subscription leaves the sum).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import structlog
from opentelemetry.metrics import CallbackOptions, Observation

from agent_runtime.event_stream import StreamStats
from agent_runtime.telemetry import meter

log = structlog.get_logger(__name__)


class _Counts(Protocol):
    def count(self) -> int: ...


class _Registry(_Counts, Protocol):
    def list(self) -> list[tuple[Any, Any]]: ...


class Watched(Protocol):
    """What the gauges read of a runtime (`Runtime` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def registry(self) -> _Registry: ...
    @property
    def abort_table(self) -> _Counts: ...


_lock = threading.Lock()
_runtimes: weakref.WeakSet[Any] = weakref.WeakSet()


def watch(runtime: Watched) -> None:
    """Report `runtime` in the gauges until it stops (or is collected). Idempotent."""
    with _lock:
        _runtimes.add(runtime)


def _live() -> list[Watched]:
    with _lock:
        runtimes = list(_runtimes)
    return [r for r in runtimes if not r.stopping]


def subscription_stats(agent: Any) -> Iterator[StreamStats]:
    """The counters of `agent`'s open subscriptions (read without asking its actor: the
    agent's cell holds them as an immutable tuple of weak references)."""
    shell = getattr(agent, "_cell", None)
    for ref in getattr(shell, "subscriptions", ()):
        sub = ref()
        if sub is not None and not sub.closed:
            yield sub.stream.stats()


def _observed(read: Any) -> Any:
    """A gauge callback: `read(runtime)`'s observations for each live runtime; a runtime
    whose state cannot be read now (it is stopping) is left out, never fails the reader."""

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        points: list[Observation] = []
        for runtime in _live():
            attributes = {"agent_runtime.runtime": runtime.name}
            try:
                points.extend(Observation(v, {**attributes, **a}) for v, a in read(runtime))
            except Exception as exc:  # a collection must not fail for one runtime
                log.debug("telemetry.gauge.unreadable", runtime=runtime.name, error=repr(exc))
        return points

    return callback


def _agents(runtime: Watched) -> list[tuple[int, dict[str, str]]]:
    return [(runtime.registry.count(), {})]


def _runs(runtime: Watched) -> list[tuple[int, dict[str, str]]]:
    return [(runtime.abort_table.count(), {})]


def _stats(runtime: Watched) -> list[StreamStats]:
    return [s for _, agent in runtime.registry.list() for s in subscription_stats(agent)]


def _depth(runtime: Watched) -> list[tuple[int, dict[str, str]]]:
    depths = [s.queue_size for s in _stats(runtime)]
    return [
        (max(depths, default=0), {"aggregation": "max"}),
        (sum(depths), {"aggregation": "sum"}),
    ]


def _dropped(runtime: Watched) -> list[tuple[int, dict[str, str]]]:
    return [(sum(s.dropped for s in _stats(runtime)), {})]


_meter = meter()
AGENTS_LIVE = _meter.create_observable_gauge(
    "agent_runtime.agents.live",
    [_observed(_agents)],
    unit="{agent}",
    description="Agents registered and alive",
)
RUNS_ACTIVE = _meter.create_observable_gauge(
    "agent_runtime.runs.active",
    [_observed(_runs)],
    unit="{run}",
    description="Runs whose abort signal is live",
)
SUBSCRIPTION_DEPTH = _meter.create_observable_gauge(
    "agent_runtime.subscription.depth",
    [_observed(_depth)],
    unit="{event}",
    description="Events waiting in the open subscriptions: the fullest one (max) and all (sum)",
)
EVENTS_DROPPED = _meter.create_observable_gauge(
    "agent_runtime.events.dropped",
    [_observed(_dropped)],
    unit="{event}",
    description="Events the open subscriptions dropped on overflow",
)
