"""The loop thread of an AsyncTaskSupervisor: nothing a task does ends it, and should it die
anyway, its waiters learn it and its supervisor restarts it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pykka
import pytest

from agent_runtime.testing import wait_until
from supervisors import (
    AsyncTaskSupervisor,
    ChildSpec,
    EventLoopDied,
    exit_reason,
    on_event_loop_thread,
)
from tests.supervisors.conftest import Started


async def ok() -> str:
    return "fine"


async def forever(began: threading.Event) -> None:
    began.set()
    await asyncio.Event().wait()


def kill_the_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Schedule a callback that raises SystemExit out of the loop and again each time it is
    resumed, so the loop thread gives up and dies."""

    def bomb() -> None:
        loop.call_soon(bomb)
        raise SystemExit("bomb")

    loop.call_soon_threadsafe(bomb)


@pytest.mark.parametrize("exc_type", [SystemExit, KeyboardInterrupt], ids=lambda e: e.__name__)
def test_a_base_exception_escaping_a_task_leaves_the_loop_running(
    started: Started, exc_type: type[BaseException]
) -> None:
    aio = started.aio()
    began = threading.Event()
    waiting = aio.submit(forever(began))
    assert began.wait(5.0)

    async def escape() -> None:
        raise exc_type("out")

    failed = aio.submit(escape())

    assert isinstance(failed.exception(timeout=5.0), exc_type)
    assert aio.submit(ok()).result(timeout=5.0) == "fine"
    assert not waiting.done() and aio.alive


def test_a_stray_loop_stop_does_not_end_the_loop(started: Started) -> None:
    aio = started.aio()

    async def stop_the_loop() -> str:
        asyncio.get_running_loop().stop()
        return "stopped"

    for _ in range(2):  # its result comes back only once the loop ran again
        assert aio.submit(stop_the_loop()).result(timeout=5.0) == "stopped"
    assert aio.submit(ok()).result(timeout=5.0) == "fine"
    assert aio.alive and not aio.loop.is_closed()


def test_a_loop_thread_that_dies_fails_its_tasks_and_crashes_its_actor(started: Started) -> None:
    aio = started.aio(name="doomed")
    began = threading.Event()
    waiting = aio.submit(forever(began))
    assert began.wait(5.0)

    kill_the_loop(aio.loop)

    error = waiting.exception(timeout=10.0)
    assert isinstance(error, EventLoopDied) and error.loop == "doomed"
    assert "SystemExit: bomb" in error.reason
    wait_until(lambda: not aio.alive, what="the actor's exit")
    reason = exit_reason(aio.ref)
    assert reason is not None and reason.kind == "crash"
    assert "event loop thread died" in reason.detail
    with pytest.raises(RuntimeError, match="doomed"):
        aio.submit(ok())


def test_the_supervisor_restarts_a_loop_thread_that_died(started: Started) -> None:
    handles: list[AsyncTaskSupervisor] = []

    def start() -> pykka.ActorRef[Any]:
        handles.append(AsyncTaskSupervisor.start(name=f"loop-{len(handles)}"))
        return handles[-1].ref

    sup = started.supervisor([ChildSpec(id="loop", start=start)])
    first = handles[0]
    kill_the_loop(first.loop)

    wait_until(lambda: len(handles) == 2 and handles[1].alive, what="a restarted loop")
    assert handles[1].submit(ok()).result(timeout=5.0) == "fine"
    (child,) = sup.which_children()
    assert child.alive and child.ref is handles[1].ref
    assert not first.alive


def test_on_event_loop_thread_is_true_only_on_a_loop_thread(started: Started) -> None:
    aio = started.aio()

    async def where() -> bool:
        return on_event_loop_thread()

    assert aio.submit(where()).result(timeout=5.0) is True
    assert on_event_loop_thread() is False

    async def here() -> bool:
        return on_event_loop_thread()

    assert asyncio.run(here()) is False  # an application's own loop is not one of ours


def test_a_loop_thread_that_dies_tells_its_spawned_tasks_once(started: Started) -> None:
    aio = started.aio(name="doomed")
    began = threading.Event()
    ends: list[tuple[bool, BaseException | None]] = []
    told = threading.Event()

    def ended(cancelled: bool, error: BaseException | None) -> None:
        ends.append((cancelled, error))
        told.set()

    aio.spawn(forever(began), ended)
    assert began.wait(5.0)

    kill_the_loop(aio.loop)

    assert told.wait(10.0)
    wait_until(lambda: not aio.alive, what="the actor's exit")
    [(cancelled, error)] = ends
    assert not cancelled and isinstance(error, EventLoopDied) and error.loop == "doomed"
