"""HostedEventLoop: an `AsyncTaskSupervisor`'s tasks on an event loop that another thread runs."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from supervisors._loop_tasks import LoopTasks, TaskEnded, adopt, release

T = TypeVar("T")


class HostedEventLoop(LoopTasks):
    """The tasks of a supervisor that borrows a running loop (an application's) instead of
    running one on a thread of its own.

    Guarantees:
    - The loop is never stopped or closed by this object: `stop()` cancels the tasks it
      submitted, waits up to its timeout for them, and gives the loop back.
    - While adopted, `on_event_loop_thread()` is True on the loop's thread, so blocking
      calls made there are refused as on a runtime's own loop thread.
    - If the owner closes the loop before `stop()`, the next `submit` or `stop` notices:
      `on_death(reason)` is called once and the future of every task still open fails with
      `EventLoopDied`.
    """

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop) -> None:
        if loop.is_closed():
            raise RuntimeError(f"cannot adopt event loop for {name!r}: it is closed")
        super().__init__(name, loop)
        adopt(loop)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        self._check_alive()
        return super().submit(coro)

    def spawn(self, coro: Coroutine[Any, Any, Any], ended: TaskEnded) -> None:
        self._check_alive()
        super().spawn(coro, ended)

    def _check_alive(self) -> None:
        if self.loop.is_closed() and self._death is None and not self._closed:
            release(self.loop)
            self._die("the application closed its event loop before stopping the runtime")

    def stop(self, timeout: float | None) -> bool:
        """Cancel every task, wait up to `timeout` for them to end, and release the loop.

        On the loop's own thread it cannot wait: it cancels and returns whether every task
        had ended already."""
        self._check_alive()
        if not self._refuse_new():
            return not self._unfinished()
        try:
            if self.loop.is_closed():
                return not self._unfinished()
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is self.loop:
                for task in list(self._tasks):
                    task.cancel()
                return not self._unfinished()
            try:
                cancelled = asyncio.run_coroutine_threadsafe(self._cancel_all(timeout), self.loop)
            except RuntimeError:  # closed meanwhile
                return not self._unfinished()
            return self._wait(cancelled, timeout) and not self._unfinished()
        finally:
            release(self.loop)

    def _loop_gone(self) -> bool:
        return self.loop.is_closed()
