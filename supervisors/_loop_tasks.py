"""LoopTasks: the tasks one event loop runs for an `AsyncTaskSupervisor`, whoever runs the loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

import structlog

from supervisors._describe import describe
from supervisors._errors import EventLoopDied

log = structlog.get_logger(__name__)

T = TypeVar("T")

_adopted: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
_adopted_lock = threading.Lock()


def adopt(loop: asyncio.AbstractEventLoop) -> None:
    """Count `loop` (run by somebody else's thread) as a supervisor's loop from now on."""
    with _adopted_lock:
        _adopted.add(loop)


def release(loop: asyncio.AbstractEventLoop) -> None:
    with _adopted_lock:
        _adopted.discard(loop)


def running_loop_adopted() -> bool:
    """True when the asyncio loop running on the calling thread is an adopted one."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return loop in _adopted


class LoopTasks:
    """The coroutines submitted to one event loop: their futures, the count of those not
    finished, their cancellation, and the death of the loop that runs them.

    Subclasses run the loop (`EventLoopThread`) or adopt one that runs already
    (`HostedEventLoop`); both call `_refuse_new()` when they stop and `_die(why)` when the
    loop ends without a stop.
    """

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        self.name = name
        self.loop = loop
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False  # stop() was called, or the loop died
        self._death: str | None = None
        self._on_death: Callable[[str], None] | None = None
        self._futures: set[Future[Any]] = set()  # of tasks not finished
        self._tasks: set[asyncio.Task[Any]] = set()  # the loop's

    def watch(self, on_death: Callable[[str], None]) -> None:
        """Call `on_death(reason)` once if the loop dies (at once if it already has)."""
        with self._lock:
            why = self._death
            if why is None:
                self._on_death = on_death
                return
        _report(on_death, why, self.name)

    async def _track(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coro
        finally:
            self._tasks.discard(task)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a task on the loop; see `AsyncTaskSupervisor.submit`."""
        if not asyncio.iscoroutine(coro):
            raise TypeError(f"submit expects a coroutine, got {type(coro).__name__}")
        with self._lock:
            if self._closed:
                coro.close()
                why = f"stopped: {self._death}" if self._death else "stopped"
                raise RuntimeError(f"async task supervisor {self.name!r} is {why}")
            future = asyncio.run_coroutine_threadsafe(self._track(coro), self.loop)
            self._pending += 1
            self._futures.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1
            self._futures.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None and not isinstance(exc, EventLoopDied):
            log.warning("tasks.task.failed", loop=self.name, error=describe(exc), exc_info=exc)

    def active(self) -> int:
        with self._lock:
            return self._pending

    def stop(self, timeout: float | None) -> bool:
        """Cancel every task and wait up to `timeout` for them; True if all ended in time."""
        raise NotImplementedError

    def _refuse_new(self) -> bool:
        """From now on `submit` raises; False if that was so already."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True

    async def _cancel_all(self, timeout: float | None) -> None:
        """On the loop: cancel every task but the caller, and wait up to `timeout` for them."""
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _wait(self, future: Future[None], timeout: float | None) -> bool:
        """Wait for `future` (of a coroutine on the loop) up to `timeout`, or until the loop
        is gone (`_loop_gone`: then it never ends)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 0.05 if deadline is None else min(deadline - time.monotonic(), 0.05)
            try:
                future.result(max(left, 0.0))
                return True
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    return False
                if self._loop_gone():
                    return False
            except Exception:  # the loop was closed with it pending
                return False

    def _loop_gone(self) -> bool:
        """True once the loop will run nothing more."""
        raise NotImplementedError

    def _unfinished(self) -> bool:
        return any(not t.done() for t in self._tasks)

    def _die(self, why: str) -> None:
        """The loop ended without a stop: refuse new tasks, tell the watcher, fail every
        future still open with EventLoopDied."""
        with self._lock:
            self._closed = True
            self._death = why
            on_death, self._on_death = self._on_death, None
            futures = list(self._futures)
            self._futures.clear()
        log.error("tasks.loop.died", loop=self.name, reason=why, tasks=len(futures))
        if on_death is not None:
            _report(on_death, why, self.name)
        error = EventLoopDied(self.name, why)
        for future in futures:
            with contextlib.suppress(InvalidStateError):  # cancelled or ended meanwhile
                future.set_exception(error)


def _report(on_death: Callable[[str], None], why: str, name: str) -> None:
    try:
        on_death(why)
    except Exception:
        log.exception("tasks.loop.death_callback_failed", loop=name)
