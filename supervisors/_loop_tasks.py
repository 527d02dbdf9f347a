"""LoopTasks: the tasks one event loop runs for an `AsyncTaskSupervisor`, whoever runs the loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

from supervisors._describe import describe
from supervisors._errors import EventLoopDied
from supervisors._log import get_logger
from supervisors._step_watch import step_name, watched

log = get_logger(__name__)

T = TypeVar("T")

TaskEnded = Callable[[bool, BaseException | None], None]
"""`spawn`'s callback: (cancelled, the exception the task ended with, else None)."""

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
        self._closed = False  # stop() was called, or the loop died
        self._death: str | None = None
        self._on_death: Callable[[str], None] | None = None
        self._futures: set[Future[Any]] = set()  # of tasks not finished
        self._spawned: dict[int, TaskEnded] = {}  # (by spawn id) of spawned tasks not finished
        self._spawn_ids = itertools.count()
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
        _check_coroutine(coro, "submit")
        with self._lock:
            self._refuse_if_closed_locked(coro)
            tracked = watched(self._track(coro), self.loop.get_debug(), step_name(coro))
            future = asyncio.run_coroutine_threadsafe(tracked, self.loop)
            self._futures.add(future)
        future.add_done_callback(self._done)
        return future

    def spawn(self, coro: Coroutine[Any, Any, Any], ended: TaskEnded) -> None:
        """Run `coro` as a task on the loop, and call `ended(cancelled, error)` once when it
        is over: on the loop's thread when the task ends (`cancelled` also for one a stop
        came before), or with an `EventLoopDied` if the loop ends first (on the dying
        loop's thread; for an adopted loop that its application closed, on the thread that
        finds it closed). `submit` without its concurrent future, for tasks nobody waits on
        from another thread (a run's driver): a future, its condition and the chain between
        it and the task are ~21 objects per task in flight for the garbage collector.

        Raises:
            TypeError, RuntimeError: as `submit`.
        """
        _check_coroutine(coro, "spawn")
        on_loop = asyncio._get_running_loop() is self.loop
        with self._lock:
            self._refuse_if_closed_locked(coro)
            spawn_id = next(self._spawn_ids)
            if not on_loop:
                try:  # under the lock, as `submit`: a stop's cancellation comes after it
                    self.loop.call_soon_threadsafe(self._start_spawned, coro, spawn_id)
                except BaseException:  # the loop was closed meanwhile
                    coro.close()
                    raise
            self._spawned[spawn_id] = ended
        if on_loop:  # the task is made now: no thread-safe hop (a stop runs on this thread)
            self._start_spawned(coro, spawn_id)

    def _refuse_if_closed_locked(self, coro: Coroutine[Any, Any, Any]) -> None:
        """After a stop or the loop's death: close `coro` (it never runs, never warns) and
        raise RuntimeError saying why."""
        if self._closed:
            coro.close()
            why = f"stopped: {self._death}" if self._death else "stopped"
            raise RuntimeError(f"async task supervisor {self.name!r} is {why}")

    def _start_spawned(self, coro: Coroutine[Any, Any, Any], spawn_id: int) -> None:
        if self._closed:  # stopped since (a hosted loop's stop on its own thread cancels
            coro.close()  # only the tasks that exist): as cancelled before it began
            if (ended := self._take_ended(spawn_id)) is not None:
                self._tell_ended(ended, True, None)
            return
        task = self.loop.create_task(watched(coro, self.loop.get_debug()))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._spawned_ended, spawn_id))

    def _spawned_ended(self, spawn_id: int, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        ended = self._take_ended(spawn_id)
        if ended is None:  # the loop died first, and `_die` told it
            return
        cancelled = task.cancelled()
        error = None if cancelled else task.exception()
        if error is not None:
            log.warning("tasks.task.failed", loop=self.name, error=describe(error), exc_info=error)
        self._tell_ended(ended, cancelled, error)

    def _take_ended(self, spawn_id: int) -> TaskEnded | None:
        """The callback of a spawned task, once: None when another path took it."""
        with self._lock:
            return self._spawned.pop(spawn_id, None)

    def _tell_ended(self, ended: TaskEnded, cancelled: bool, error: BaseException | None) -> None:
        try:
            ended(cancelled, error)
        except Exception:  # the callback's own failure: the loop and the others go on
            log.exception("tasks.task.end_callback_failed", loop=self.name)

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None and not isinstance(exc, EventLoopDied):
            log.warning("tasks.task.failed", loop=self.name, error=describe(exc), exc_info=exc)

    def active(self) -> int:
        """Tasks submitted or spawned and not finished: those whose future or callback is
        still owed."""
        with self._lock:
            return len(self._futures) + len(self._spawned)

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
            spawned = list(self._spawned.values())
            self._spawned.clear()
        log.error("tasks.loop.died", loop=self.name, reason=why, tasks=len(futures) + len(spawned))
        if on_death is not None:
            _report(on_death, why, self.name)
        error = EventLoopDied(self.name, why)
        for future in futures:
            with contextlib.suppress(InvalidStateError):  # cancelled or ended meanwhile
                future.set_exception(error)
        for ended in spawned:
            self._tell_ended(ended, False, error)


def _check_coroutine(coro: object, what: str) -> None:
    if not asyncio.iscoroutine(coro):
        raise TypeError(f"{what} expects a coroutine, got {type(coro).__name__}")


def _report(on_death: Callable[[str], None], why: str, name: str) -> None:
    try:
        on_death(why)
    except Exception:
        log.exception("tasks.loop.death_callback_failed", loop=name)
