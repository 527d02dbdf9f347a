"""Watchdog: ends something (a stream) when its lifetime elapses or when its owner actor exits."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_runtime.event_stream._timers import TimerHandle, call_later

if TYPE_CHECKING:
    import pykka

    from supervisors import Monitor


class Watchdog:
    """Calls `target.cancel(reason)` once a bound is hit: `"timeout"` or `"owner_down"`.

    Holds `target` weakly, so an abandoned target can be collected before its deadline. Costs a
    heap entry on the shared timer thread and a monitor on the owner, no thread. `disarm()` (call
    it when the target ends) cancels both; it is idempotent and safe from any thread, also before
    `arm()` finished (a bound that fires during `arm()` is then disarmed at once).
    """

    __slots__ = ("_disarmed", "_lock", "_monitor", "_timer")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._disarmed = False
        self._timer: TimerHandle | None = None
        self._monitor: Monitor | None = None

    def arm(self, target: Any, timeout: float | None, owner: pykka.ActorRef[Any] | None) -> None:
        """Start watching `timeout` seconds and `owner` (either may be None: not watched).

        Raises:
            TypeError: `owner` is not the ref of a `supervisors.SupervisedActor`.
        """
        if timeout is not None:
            timer: TimerHandle | None = call_later(timeout, _weak_cancel(target, "timeout"))
            with self._lock:
                if not self._disarmed:
                    self._timer, timer = timer, None
            if timer is not None:
                timer.cancel()
        if owner is not None:
            from supervisors import monitor

            # Calls back at once if the owner is already dead: no lock may be held here.
            handle: Monitor | None = monitor(owner, _weak_cancel(target, "owner_down"))
            with self._lock:
                if not self._disarmed:
                    self._monitor, handle = handle, None
            if handle is not None:
                handle.cancel()

    def disarm(self) -> None:
        """Stop watching: neither bound fires after this returns (unless already running)."""
        with self._lock:
            self._disarmed = True
            timer, monitor = self._timer, self._monitor
            self._timer = self._monitor = None
        if timer is not None:
            timer.cancel()
        if monitor is not None:
            monitor.cancel()


def _weak_cancel(target: Any, reason: str) -> Callable[..., None]:
    ref = weakref.ref(target)

    def cancel(*_: object) -> None:
        alive = ref()
        if alive is not None:
            alive.cancel(reason)

    return cancel
