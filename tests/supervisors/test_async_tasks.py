"""AsyncTaskSupervisor: coroutines on one supervised event-loop thread, driven from others."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading

import pytest

from agent_runtime.testing import wait_until
from tests.supervisors.conftest import Started


class Watched:
    """A coroutine factory whose tasks report, across threads, that they began and how they
    ended (`cancelled` is set when CancelledError reached the coroutine)."""

    def __init__(self) -> None:
        self.began = threading.Event()
        self.cancelled = threading.Event()

    async def forever(self) -> None:
        self.began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def test_submit_returns_a_concurrent_future_with_the_coroutine_result(started: Started) -> None:
    aio = started.aio()

    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    future = aio.submit(add(2, 3))

    assert isinstance(future, concurrent.futures.Future)
    assert future.result(timeout=5.0) == 5


def test_tasks_run_on_the_supervisors_own_loop_thread(started: Started) -> None:
    aio = started.aio()

    async def where() -> tuple[asyncio.AbstractEventLoop, int]:
        return asyncio.get_running_loop(), threading.get_ident()

    loop, thread = aio.submit(where()).result(timeout=5.0)

    assert loop is aio.loop
    assert thread != threading.get_ident()


def test_cancelling_the_future_cancels_the_task(started: Started) -> None:
    aio = started.aio()
    watched = Watched()
    future = aio.submit(watched.forever())
    assert watched.began.wait(timeout=5.0)

    assert future.cancel()

    assert watched.cancelled.wait(timeout=5.0)
    wait_until(lambda: aio.active() == 0)
    assert aio.alive


def test_stop_cancels_the_tasks_that_are_left(started: Started) -> None:
    aio = started.aio()
    watched = [Watched() for _ in range(3)]
    futures = [aio.submit(w.forever()) for w in watched]
    assert all(w.began.wait(timeout=5.0) for w in watched)

    assert aio.stop(timeout=5.0) is True

    assert all(w.cancelled.is_set() for w in watched)
    assert all(f.cancelled() for f in futures)
    assert not aio.alive
    assert not aio.loop.is_running()


def test_a_task_exception_stays_in_its_future_and_the_loop_keeps_running(
    started: Started,
) -> None:
    aio = started.aio()
    error = LookupError("no such key")

    async def fail() -> None:
        raise error

    async def ok() -> str:
        return "fine"

    failed = aio.submit(fail())
    fine = aio.submit(ok())

    assert failed.exception(timeout=5.0) is error
    assert fine.result(timeout=5.0) == "fine"
    assert aio.submit(ok()).result(timeout=5.0) == "fine"
    assert aio.alive


def test_active_counts_submitted_unfinished_tasks(started: Started) -> None:
    aio = started.aio()
    watched = [Watched() for _ in range(2)]
    futures = [aio.submit(w.forever()) for w in watched]

    assert aio.active() == 2
    futures[0].cancel()
    assert aio.active() == 1


def test_submit_after_stop_raises_and_closes_the_coroutine(started: Started) -> None:
    aio = started.aio()
    aio.stop()
    watched = Watched()
    coro = watched.forever()

    with pytest.raises(RuntimeError, match="stopped"):
        aio.submit(coro)

    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED  # never runs, never warns
    assert not watched.began.is_set()


def test_submit_rejects_what_is_not_a_coroutine(started: Started) -> None:
    aio = started.aio()

    async def job() -> None:
        return None

    with pytest.raises(TypeError, match="coroutine"):
        aio.submit(job)  # type: ignore[arg-type]


class Ends:
    """`spawn`'s callback: records each call (cancelled, error, thread) across threads."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, BaseException | None, int]] = []
        self.called = threading.Event()

    def __call__(self, cancelled: bool, error: BaseException | None) -> None:
        self.calls.append((cancelled, error, threading.get_ident()))
        self.called.set()


def test_spawn_runs_the_task_and_calls_back_once_on_the_loop_thread(started: Started) -> None:
    aio = started.aio()
    ran = threading.Event()
    ends = Ends()

    async def job() -> None:
        await asyncio.sleep(0)
        ran.set()

    aio.spawn(job(), ends)

    assert ends.called.wait(timeout=5.0) and ran.is_set()
    wait_until(lambda: aio.active() == 0)
    assert [(c, e) for c, e, _ in ends.calls] == [(False, None)]
    assert ends.calls[0][2] != threading.get_ident()


def test_spawn_reports_a_task_failure_and_the_loop_keeps_running(started: Started) -> None:
    aio = started.aio()
    error = LookupError("no such key")
    ends = Ends()

    async def fail() -> None:
        raise error

    aio.spawn(fail(), ends)

    assert ends.called.wait(timeout=5.0)
    assert [(c, e) for c, e, _ in ends.calls] == [(False, error)]
    assert aio.submit(asyncio.sleep(0, "fine")).result(timeout=5.0) == "fine"


def test_stop_cancels_spawned_tasks_and_says_so_to_their_callbacks(started: Started) -> None:
    aio = started.aio()
    watched = [Watched() for _ in range(3)]
    ends = [Ends() for _ in watched]
    for w, e in zip(watched, ends, strict=True):
        aio.spawn(w.forever(), e)
    assert all(w.began.wait(timeout=5.0) for w in watched)
    assert aio.active() == 3

    assert aio.stop(timeout=5.0) is True

    assert all(w.cancelled.is_set() for w in watched)
    assert [[(c, err) for c, err, _ in e.calls] for e in ends] == [[(True, None)]] * 3


def test_spawn_after_stop_raises_and_closes_the_coroutine(started: Started) -> None:
    aio = started.aio()
    aio.stop()
    watched = Watched()
    coro = watched.forever()
    ends = Ends()

    with pytest.raises(RuntimeError, match="stopped"):
        aio.spawn(coro, ends)

    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED
    assert not ends.calls and not watched.began.is_set()
