"""AsyncTaskSupervisor on a loop it adopts: tasks run on the owner's loop, stopping cancels
them and leaves the loop running, and a loop closed under it fails what was left."""

from __future__ import annotations

import asyncio
import threading

import pytest

from supervisors import AsyncTaskSupervisor, EventLoopDied, on_event_loop_thread


def test_tasks_run_on_the_adopted_loop_and_stop_leaves_it_running() -> None:
    async def main() -> None:
        host = asyncio.get_running_loop()
        aio = await asyncio.to_thread(AsyncTaskSupervisor.start, "hosted", loop=host)
        assert aio.loop is host
        assert on_event_loop_thread()  # blocking calls here are refused from now on

        async def where() -> int:
            return threading.get_ident()

        assert await asyncio.wrap_future(aio.submit(where())) == threading.get_ident()
        began = asyncio.Event()
        cancelled = asyncio.Event()

        async def forever() -> None:
            began.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        pending = aio.submit(forever())
        await began.wait()
        assert await asyncio.to_thread(aio.stop, 5.0) is True
        assert cancelled.is_set() and pending.cancelled()
        assert not on_event_loop_thread()  # released
        await asyncio.sleep(0)  # the host's loop goes on
        with pytest.raises(RuntimeError, match="stopped"):
            aio.submit(where())

    asyncio.run(main())


def test_a_loop_closed_before_the_stop_fails_what_was_left_on_it() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    aio = AsyncTaskSupervisor.start("hosted", loop=loop)
    began = threading.Event()
    try:

        async def never() -> None:
            began.set()
            await asyncio.Event().wait()

        future = aio.submit(never())
        assert began.wait(5)
        loop.call_soon_threadsafe(loop.stop)  # the application ends its loop, runtime or not
        thread.join(5)
        loop.close()
        with pytest.raises(RuntimeError, match="closed its event loop"):
            aio.submit(never())
        with pytest.raises(EventLoopDied):
            future.result(timeout=5)
    finally:
        aio.stop(1.0)


def test_a_loop_closed_before_the_stop_tells_what_was_spawned_on_it() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()
    aio = AsyncTaskSupervisor.start("hosted", loop=loop)
    began = threading.Event()
    ends: list[tuple[bool, BaseException | None]] = []
    try:

        async def never() -> None:
            began.set()
            await asyncio.Event().wait()

        aio.spawn(never(), lambda cancelled, error: ends.append((cancelled, error)))
        assert began.wait(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        late = never()
        with pytest.raises(RuntimeError, match="closed its event loop"):
            aio.spawn(late, lambda cancelled, error: ends.append((cancelled, error)))
        [(cancelled, error)] = ends  # the first one, once; the late one never started
        assert not cancelled and isinstance(error, EventLoopDied)
        assert aio.active() == 0
    finally:
        aio.stop(1.0)


def test_a_spawn_the_stop_came_before_is_told_it_was_cancelled() -> None:
    async def main() -> list[tuple[bool, BaseException | None]]:
        host = asyncio.get_running_loop()
        aio = await asyncio.to_thread(AsyncTaskSupervisor.start, "hosted", loop=host)
        ends: list[tuple[bool, BaseException | None]] = []
        ran = []

        async def job() -> None:
            ran.append(1)

        aio.spawn(job(), lambda cancelled, error: ends.append((cancelled, error)))
        aio.stop(0)  # on the loop's own thread: before the spawned task's first step
        await asyncio.sleep(0.01)
        assert not ran and aio.active() == 0
        return ends

    assert asyncio.run(main()) == [(True, None)]


def test_a_closed_loop_cannot_be_adopted() -> None:
    loop = asyncio.new_event_loop()
    loop.close()
    with pytest.raises(RuntimeError, match="it is closed"):
        AsyncTaskSupervisor.start("hosted", loop=loop)
