"""ReplayBuffer and the hub's bounds, without a server: ids without gaps, losses counted, the
number of kept streams bounded."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.event_stream._alarm import LoopAlarm
from agent_runtime.events import MessageDelta, MessageUpdate
from agent_runtime.messages import AssistantMessage
from agent_runtime.server import _hub
from agent_runtime.server._hub import EventHub
from agent_runtime.server._replay import ReplayBuffer
from agent_runtime.server._sse import KEEPALIVE, frames
from agent_runtime.server._wire import Frame


@given(
    capacity=st.integers(1, 20),
    appended=st.integers(0, 60),
    last_seen=st.integers(0, 80),
)
def test_a_reader_gets_every_later_frame_or_a_count_of_those_lost(
    capacity: int, appended: int, last_seen: int
) -> None:
    buffer = ReplayBuffer(capacity)
    for i in range(appended):
        assert buffer.append(b"%d" % (i + 1)) == i + 1
    window = buffer.after(last_seen)
    ids = [i for i, _ in window.frames]
    assert [body for _, body in window.frames] == [b"%d" % i for i in ids]
    assert len(buffer) == min(capacity, appended)
    if last_seen >= appended:  # nothing new (or ids of an earlier server): from now on
        assert (window.dropped, ids) == (0, [])
    else:
        assert ids == list(range(window.first_id, appended + 1))
        assert window.dropped + len(ids) == appended - last_seen  # every one, once
        assert window.dropped == max(0, appended - capacity - last_seen)


def alarm_in(seconds: float) -> LoopAlarm:
    return LoopAlarm(time.monotonic() + seconds)


def test_wait_wakes_on_an_append_and_on_close_and_times_out_otherwise() -> None:
    async def scenario() -> None:
        buffer = ReplayBuffer(4)
        assert await buffer.wait(0, alarm_in(0.01)) is False
        waiter = asyncio.ensure_future(buffer.wait(0, alarm_in(5)))
        await asyncio.sleep(0)
        buffer.append(b"x")
        assert await waiter is True
        closing = asyncio.ensure_future(buffer.wait(1, alarm_in(5)))
        await asyncio.sleep(0)
        buffer.close()
        assert await closing is True
        # a waiter cancelled (its client went away) or timed out is not kept
        idle = ReplayBuffer(4)
        gone = asyncio.ensure_future(idle.wait(0, alarm_in(5)))
        late = asyncio.ensure_future(idle.wait(0, alarm_in(0.01)))
        await asyncio.sleep(0)
        assert len(idle._waiters) == 2
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert await late is False
        assert idle._waiters == []

    asyncio.run(scenario())


@pytest.mark.timing
def test_an_sse_reader_gets_a_keepalive_only_after_a_quiet_keepalive_period() -> None:
    # The keepalive restarts with each frame sent: frames 30 ms apart for 0.4 s with a
    # 0.15 s keepalive get none; then, idle, the reader gets one about 0.15 s later.
    async def scenario() -> list[tuple[float, bytes]]:
        buffer: ReplayBuffer[Any] = ReplayBuffer(100)
        got: list[tuple[float, bytes]] = []
        started = time.monotonic()

        async def read() -> None:
            async for chunk in frames(buffer, 0, None, 0.15):
                got.append((time.monotonic() - started, chunk))

        reader = asyncio.ensure_future(read())
        for _ in range(13):
            await asyncio.sleep(0.03)
            buffer.append(SimpleNamespace(body=lambda: b"data: x\n\n"))
        quiet_from = time.monotonic() - started
        while not any(chunk == KEEPALIVE for _, chunk in got):
            assert time.monotonic() - started < 5
            await asyncio.sleep(0.01)
        buffer.close()
        await asyncio.wait_for(reader, 5)
        return [(at - quiet_from, chunk) for at, chunk in got]

    got = asyncio.run(scenario())
    keepalives = [at for at, chunk in got if chunk == KEEPALIVE]
    assert len([c for _, c in got if c.startswith(b"id: ")]) == 13
    assert len(keepalives) == 1
    assert 0.1 <= keepalives[0] < 1.0  # after the frames stopped, not during them


def test_a_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity 0"):
        ReplayBuffer(0)


def test_streams_of_sessions_nobody_uses_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hub, "RETAINED", 3)
    runtime = SimpleNamespace(registry=SimpleNamespace(list=lambda: []))

    async def scenario() -> int:
        hub = EventHub(runtime, capacity=10)
        busy = hub.session_buffer("read-now")
        busy.readers = 1
        for i in range(50):
            hub.session_buffer(f"s{i}")
            await hub.sweep()
        assert hub._sessions.get("read-now") is busy  # a stream being read is kept
        return len(hub._sessions)

    assert asyncio.run(scenario()) <= 3 + 1


def test_a_message_update_frame_is_encoded_once_without_building_the_message() -> None:
    def snapshot() -> AssistantMessage:
        raise AssertionError("the growing message was built")

    update = MessageUpdate.deferred(
        snapshot, MessageDelta(kind="text", content_index=0, delta="hi"), run_id="r", seq=4
    )
    frame = Frame.of(update)
    body = frame.body()
    assert frame.body() is body  # once, however many readers
    event_line, data_line = body.decode().strip().split("\n")
    assert event_line == "event: message_update"
    data = json.loads(data_line.removeprefix("data: "))
    assert (data["delta"]["delta"], data["seq"], "message" in data) == ("hi", 4, False)
