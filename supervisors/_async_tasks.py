"""AsyncTaskSupervisor: one thread running one asyncio event loop, for coroutine tasks."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import pykka
import structlog

from supervisors._actor import SupervisedActor, actor_of
from supervisors._handle import ActorHandle

log = structlog.get_logger(__name__)

T = TypeVar("T")


class EventLoopThread:
    """An asyncio event loop running for ever on a daemon thread, until `stop`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._on_loop_error)
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            try:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        log.error("tasks.loop.error", loop=self.name, message=context.get("message"), exc_info=exc)

    async def _track(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coro
        finally:
            self._tasks.discard(task)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if not asyncio.iscoroutine(coro):
            raise TypeError(f"submit expects a coroutine, got {type(coro).__name__}")
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError(f"async task supervisor {self.name!r} is stopped")
            self._pending += 1
        future = asyncio.run_coroutine_threadsafe(self._track(coro), self.loop)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending -= 1
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.warning(
                "tasks.task.failed",
                loop=self.name,
                error=f"{type(exc).__name__}: {exc}",
                exc_info=exc,
            )

    def active(self) -> int:
        with self._lock:
            return self._pending

    def stop(self, timeout: float | None) -> bool:
        """Cancel every task, wait up to `timeout` for them to end, stop the loop and thread.

        Returns True if everything ended in time; a task that ignores cancellation past the
        timeout is abandoned with its (daemon) thread.
        """
        with self._lock:
            if self._closed:
                return not self._thread.is_alive()
            self._closed = True
        if self.loop.is_closed():
            return True

        async def cancel_all() -> None:
            tasks = [t for t in self._tasks if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)

        finished = True
        try:
            asyncio.run_coroutine_threadsafe(cancel_all(), self.loop).result(timeout)
        except TimeoutError:
            finished = False
        except RuntimeError:
            pass  # the loop already stopped
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("tasks.loop.abandoned", loop=self.name)
            return False
        return finished and not any(not t.done() for t in self._tasks)


class EventLoopActor(SupervisedActor):
    def __init__(self, loop_thread: EventLoopThread, stop_timeout: float) -> None:
        super().__init__()
        self.loop_thread = loop_thread
        self.stop_timeout = stop_timeout

    def on_stop(self) -> None:
        self.loop_thread.stop(self.stop_timeout)

    def on_exit(self, reason: object) -> None:
        self.loop_thread.stop(0.1)


class AsyncTaskSupervisor(ActorHandle):
    """One daemon thread running one asyncio event loop, under an actor.

    `submit(coro)` schedules the coroutine as a task from any thread and returns a
    `concurrent.futures.Future`; cancelling that Future cancels the task. A task's exception
    stays in its Future and is logged. Stopping (or killing) the actor cancels what is left.
    """

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        actor = actor_of(ref)
        if not isinstance(actor, EventLoopActor):
            raise TypeError(f"{ref} is not an AsyncTaskSupervisor actor")
        super().__init__(ref)
        self._thread = actor.loop_thread

    @classmethod
    def start(cls, name: str | None = None, *, stop_timeout: float = 5.0) -> AsyncTaskSupervisor:
        """Start the loop thread and its owning actor."""
        loop_thread = EventLoopThread(name or "loop-tasks")
        return cls(EventLoopActor.start(loop_thread, stop_timeout))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop; use `asyncio.run_coroutine_threadsafe` or `submit` from other threads."""
        return self._thread.loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a task on the loop.

        Raises:
            TypeError: `coro` is not a coroutine.
            RuntimeError: the supervisor was stopped (the coroutine is closed).
        """
        return self._thread.submit(coro)

    def active(self) -> int:
        """Tasks submitted and not yet finished."""
        return self._thread.active()

    def stop(self, timeout: float | None = None) -> bool:
        """Cancel what is left, wait up to `timeout`, stop the loop and the actor."""
        finished = self._thread.stop(timeout)
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self._ref.stop(block=True, timeout=5.0)
        return finished
