"""AsyncTaskSupervisor: a supervised thread running one asyncio event loop, for coroutine tasks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import pykka

from supervisors._actor import ExitReason, SupervisedActor, actor_of
from supervisors._handle import ActorHandle
from supervisors._hosted_loop import HostedEventLoop
from supervisors._loop_tasks import LoopTasks, TaskEnded
from supervisors._loop_thread import EventLoopThread

T = TypeVar("T")


class EventLoopActor(SupervisedActor):
    """Owns one loop's tasks (an EventLoopThread, or a HostedEventLoop): stopping the actor
    stops them, and the loop dying makes the actor exit abnormally (a crash its supervisor
    sees and restarts)."""

    def __init__(self, loop_thread: LoopTasks, stop_timeout: float) -> None:
        super().__init__()
        self.loop_thread = loop_thread
        self.stop_timeout = stop_timeout

    def on_start(self) -> None:
        self.loop_thread.watch(self._loop_died)

    def _loop_died(self, reason: str) -> None:
        # From the dying loop thread: this actor takes no further message and exits now.
        self._exit_abnormally(ExitReason("crash", f"event loop thread died: {reason}"))

    def on_stop(self) -> None:
        self.loop_thread.stop(self.stop_timeout)

    def on_exit(self, reason: object) -> None:
        self.loop_thread.stop(0.1)


class AsyncTaskSupervisor(ActorHandle):
    """One daemon thread running one asyncio event loop, under an actor.

    `submit(coro)` schedules the coroutine as a task from any thread and returns a
    `concurrent.futures.Future`; cancelling that Future cancels the task. A task's exception
    stays in its Future and is logged. Stopping (or killing) the actor cancels what is left.

    Nothing a task does ends the loop: an exception escaping it (asyncio lets `SystemExit`
    and `KeyboardInterrupt` out) or a stray `loop.stop()` is logged and the loop resumes. Should
    the thread end anyway (it gives up after 10 such escapes within 5 s), the actor exits
    abnormally, so its supervisor restarts a fresh loop, and the futures of the tasks that
    were on it fail with `EventLoopDied`.
    """

    def __init__(self, ref: pykka.ActorRef[Any]) -> None:
        actor = actor_of(ref)
        if not isinstance(actor, EventLoopActor):
            raise TypeError(f"{ref} is not an AsyncTaskSupervisor actor")
        super().__init__(ref)
        self._thread = actor.loop_thread

    @classmethod
    def start(
        cls,
        name: str | None = None,
        *,
        stop_timeout: float = 5.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> AsyncTaskSupervisor:
        """Start the loop thread and its owning actor.

        With `loop` (an event loop another thread runs, such as an application's), no thread
        is started: tasks run on that loop, and stopping cancels them but leaves the loop
        running. Blocking calls made on that loop's thread are then refused as on a loop
        thread of the supervisor's own (`on_event_loop_thread()` is True there).
        """
        tasks: LoopTasks
        if loop is None:
            tasks = EventLoopThread(name or "loop-tasks")
        else:
            tasks = HostedEventLoop(name or "loop-tasks", loop)
        return cls(EventLoopActor.start(tasks, stop_timeout))

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop; use `asyncio.run_coroutine_threadsafe` or `submit` from other threads."""
        return self._thread.loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run `coro` as a task on the loop.

        Raises:
            TypeError: `coro` is not a coroutine.
            RuntimeError: the supervisor was stopped, or its loop thread died (the
                coroutine is closed).
        """
        return self._thread.submit(coro)

    def spawn(self, coro: Coroutine[Any, Any, Any], ended: TaskEnded) -> None:
        """Run `coro` as a task on the loop and call `ended(cancelled, error)` once when it
        is over (on the loop's thread; with an `EventLoopDied` if the loop ends first, from
        the thread that finds it gone): `submit` for a task nobody waits on from another
        thread, without the concurrent future.

        Raises:
            TypeError, RuntimeError: as `submit`.
        """
        self._thread.spawn(coro, ended)

    def active(self) -> int:
        """Tasks submitted and not yet finished."""
        return self._thread.active()

    def stop(self, timeout: float | None = None) -> bool:
        """Cancel what is left, wait up to `timeout`, stop the loop and the actor."""
        finished = self._thread.stop(timeout)
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self._ref.stop(block=True, timeout=5.0)
        return finished
