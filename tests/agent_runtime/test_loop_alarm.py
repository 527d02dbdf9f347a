"""LoopAlarm: one timer for an async reader's whole deadline (Subscription.auntil_end)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from agent_runtime.event_stream._alarm import LoopAlarm


@pytest.mark.timing
def test_a_wait_ends_when_its_future_is_done_or_at_the_deadline() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        alarm = LoopAlarm(time.monotonic() + 0.2)
        for _ in range(100):  # many waits, one timer
            fut: asyncio.Future[None] = loop.create_future()
            loop.call_soon(fut.set_result, None)
            assert await alarm.wait(fut) is True
        started = time.monotonic()
        late: asyncio.Future[None] = loop.create_future()
        assert await alarm.wait(late) is False
        assert late.cancelled()
        assert 0.1 <= time.monotonic() - started < 2.0
        alarm.cancel()

    asyncio.run(main())


def test_a_deadline_already_past_ends_the_wait_at_once() -> None:
    async def main() -> None:
        alarm = LoopAlarm(time.monotonic() - 1.0)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        assert await asyncio.wait_for(alarm.wait(fut), 2.0) is False

    asyncio.run(main())


@pytest.mark.timing
def test_a_deadline_moved_later_is_the_one_kept() -> None:
    # As an SSE keepalive restarts with each frame: the timer armed for the first deadline
    # fires early and arms itself again for the new one.
    async def main() -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        alarm = LoopAlarm(started + 0.05)
        fut: asyncio.Future[None] = loop.create_future()
        waiting = asyncio.ensure_future(alarm.wait(fut))
        await asyncio.sleep(0.01)
        alarm.deadline = time.monotonic() + 0.3
        assert await waiting is False
        assert time.monotonic() - started >= 0.25
        alarm.cancel()

    asyncio.run(main())


def test_cancelling_the_waiting_task_is_a_cancellation_not_a_timeout() -> None:
    async def main() -> None:
        alarm = LoopAlarm(time.monotonic() + 60.0)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(alarm.wait(fut))
        await asyncio.sleep(0)
        task.cancel()
        alarm.deadline = time.monotonic() - 1.0
        alarm._ring()  # the deadline comes at the same moment: the cancellation still wins
        with pytest.raises(asyncio.CancelledError):
            await task
        alarm.cancel()

    asyncio.run(main())


def test_the_deadline_is_a_timeout_also_in_a_task_that_swallowed_a_cancellation() -> None:
    # A task that caught a CancelledError without uncancel() keeps a cancel count above 0:
    # the deadline must still read as the deadline there, not as a cancellation.
    async def main() -> bool:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        assert task.cancelling() == 1
        alarm = LoopAlarm(time.monotonic() + 0.01)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        return await alarm.wait(fut)

    assert asyncio.run(main()) is False


def test_an_alarm_cancelled_arms_again_for_a_later_wait() -> None:
    async def main() -> bool:
        alarm = LoopAlarm(time.monotonic() + 0.01)
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        first.set_result(None)
        assert await alarm.wait(first) is True
        alarm.cancel()
        second: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        return await asyncio.wait_for(alarm.wait(second), 5)

    assert asyncio.run(main()) is False
