"""ReplayBuffer and the hub's bounds, without a server: ids without gaps, losses counted, the
number of kept streams bounded."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_runtime.events import MessageDelta, MessageUpdate
from agent_runtime.messages import AssistantMessage
from agent_runtime.server import _hub
from agent_runtime.server._hub import EventHub
from agent_runtime.server._replay import ReplayBuffer
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


def test_wait_wakes_on_an_append_and_on_close_and_times_out_otherwise() -> None:
    async def scenario() -> None:
        buffer = ReplayBuffer(4)
        assert await buffer.wait(0, 0.01) is False
        waiter = asyncio.ensure_future(buffer.wait(0, 5))
        await asyncio.sleep(0)
        buffer.append(b"x")
        assert await waiter is True
        closing = asyncio.ensure_future(buffer.wait(1, 5))
        await asyncio.sleep(0)
        buffer.close()
        assert await closing is True

    asyncio.run(scenario())


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
