"""Cooperative cancellation: AbortSignal, and the AbortTable that owns a runtime's signals.

One mechanism for cancellation, used everywhere (trio's lesson): a run, its provider stream,
its retry backoff and its tools all watch the same AbortSignal. Waiting on a signal never
polls: threads block on an Event, coroutines await a future woken from the aborting thread.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

from agent_runtime._errors import AgentRuntimeError
from agent_runtime._wakeup import resolve
from supervisors._gate import Gate, wait_on_gate
from supervisors._log import get_logger

log = get_logger(__name__)

AbortCallback = Callable[["AbortSignal"], None]

RUNTIME_STOPPING = "runtime_stopping"
"""The abort reason, and so the `Canceled` reason, of the runs a runtime's stop ends."""


def parent_aborted(reason: Any) -> str:
    """The reason a delegated subagent's run is aborted with when its parent's run is:
    `parent_aborted: <reason>`, except a runtime's stop, which every run ends with as it is
    (`RUNTIME_STOPPING`), whichever of its aborts reaches it first."""
    return RUNTIME_STOPPING if reason == RUNTIME_STOPPING else f"parent_aborted: {reason}"


class AbortSignal:
    """A thread-safe, resettable abort flag with a reason.

    Guarantees:
    - `abort()` is idempotent: the first reason wins until `clear()`.
    - Every waiter (`wait`, `wait_async`) and every callback registered with `on_abort` is
      woken exactly once per abort, from the aborting thread; callbacks run outside the
      signal's lock, so they may call back into the signal.
    - `on_abort` on an already aborted signal calls the callback at once.
    """

    def __init__(self, signal_id: int | None = None) -> None:
        self.id = signal_id if signal_id is not None else next(_ids)
        # Reentrant: a collection that starts while a thread holds it (at an allocation) runs
        # finalizers there, and a forgotten run stream's finalizer aborts its run's signal.
        self._lock = threading.RLock()
        self._aborted = False  # written under the lock; read without it (one bool)
        # Made by the first `wait()`: most runs' signals are never waited on by a thread.
        self._event: Gate | None = None
        self._reason: Any = None
        self._callbacks: dict[int, AbortCallback] = {}
        self._next_callback = 0

    @property
    def aborted(self) -> bool:
        """True once `abort()` was called (and not cleared since)."""
        return self._aborted

    @property
    def reason(self) -> Any:
        """The reason given to the first `abort()` since the last `clear()`, else None."""
        return self._reason

    def abort(self, reason: Any = None) -> bool:
        """Abort; returns True if this call aborted it, False if it already was."""
        with self._lock:
            if self._aborted:
                return False
            self._reason = reason if reason is not None else "aborted"
            self._aborted = True
            if self._event is not None:
                self._event.open()
            callbacks = list(self._callbacks.values())
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("abort.callback.failed", signal=self.id)
        return True

    def clear(self) -> None:
        """Reset to not aborted, forgetting the reason; registered callbacks stay."""
        with self._lock:
            if self._aborted:  # its gate is open for good: the next wait makes a new one
                self._event = None
            self._aborted = False
            self._reason = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until aborted or `timeout` seconds pass; True if aborted."""
        return wait_on_gate(self, "_event", lambda: self._aborted, self._lock, timeout)

    async def wait_async(self, timeout: float | None = None) -> bool:
        """Await the abort without blocking the event loop; True if aborted in time."""
        if self.aborted:
            return True
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake(_: AbortSignal) -> None:
            loop.call_soon_threadsafe(resolve, woken)

        remove = self.on_abort(wake)
        try:
            await asyncio.wait_for(asyncio.shield(woken), timeout)
        except TimeoutError:
            return self.aborted
        finally:
            remove()
        return True

    def on_abort(self, callback: AbortCallback) -> Callable[[], None]:
        """Call `callback(signal)` on abort (at once if already aborted).

        Returns a function that unregisters the callback. The callback runs in the aborting
        thread and must not block.
        """
        with self._lock:
            key = self._next_callback
            self._next_callback += 1
            self._callbacks[key] = callback
            already = self._aborted

        def remove() -> None:
            with self._lock:
                self._callbacks.pop(key, None)

        if already:
            callback(self)
        return remove

    def raise_if_aborted(self) -> None:
        """Raise `Aborted(reason)` if the signal is aborted."""
        if self._aborted:
            raise Aborted(self._reason)

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self.aborted else "clear"
        return f"<AbortSignal {self.id} {state}>"


class Aborted(AgentRuntimeError):
    """Raised by `AbortSignal.raise_if_aborted`; carries the abort reason.

    Attributes:
        reason: the reason the signal was aborted with.
    """

    def __init__(self, reason: Any) -> None:
        super().__init__(f"aborted: {reason}")
        self.reason = reason


_ids = itertools.count(1)


class _Signals(dict[int, "weakref.KeyedRef[int, AbortSignal]"]):
    """The table's entries: a dict that can be referred to weakly."""


class AbortTable:
    """The runtime's table of live abort signals (Lemon's ETS table owner).

    The table belongs to the Runtime object, not to the actor that represents it in the
    supervision tree, so its signals survive the crash and restart of any component. Signals
    are held weakly: a signal nobody references any more leaves the table by itself, so the
    table never grows without bound. Thread-safe without a lock: every change is one
    operation on a dict, which the interpreter makes atomic, so the event loop's thread
    (which releases each run's signal) never waits for an actor's thread (which makes it).
    """

    def __init__(self) -> None:
        self._signals = _Signals()
        entries = weakref.ref(self._signals)  # not the dict: no cycle through its entries

        def forget(ref: weakref.KeyedRef[int, AbortSignal]) -> None:
            """A signal nobody holds any more leaves (its id is never given to another)."""
            signals = entries()
            if signals is not None:
                signals.pop(ref.key, None)

        self._forget = forget  # one for all signals

    def new(self) -> AbortSignal:
        """Create and register a fresh, not aborted signal."""
        signal = AbortSignal(next(_ids))
        self._signals[signal.id] = weakref.KeyedRef(signal, self._forget, signal.id)
        return signal

    def get(self, signal_id: int) -> AbortSignal | None:
        """The live signal with this id, or None."""
        ref = self._signals.get(signal_id)
        return ref() if ref is not None else None

    def release(self, signal: AbortSignal) -> None:
        """Forget a signal (it keeps working for whoever still holds it)."""
        self._signals.pop(signal.id, None)

    def count(self) -> int:
        """How many signals are live in the table (a collected one leaves it at once)."""
        return len(self._signals)

    def abort_all(self, reason: Any = "shutdown") -> int:
        """Abort every live signal; returns how many this call aborted."""
        return sum(1 for signal in self._live() if signal.abort(reason))

    def _live(self) -> list[AbortSignal]:
        # A copy is one operation; iterating the dict itself could see it change under it.
        refs = self._signals.copy().values()
        return [signal for ref in refs if (signal := ref()) is not None]
