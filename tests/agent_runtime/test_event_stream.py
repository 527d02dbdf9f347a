"""EventStream: overflow policies, visible gaps, terminals, lifetime, owner, readers, asyncio."""

from __future__ import annotations

import asyncio
import functools
import gc
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import supervisors
from agent_runtime._counters import RuntimeCounters
from agent_runtime._key import AgentKey
from agent_runtime.event_stream import (
    EventStream,
    OverflowPolicy,
    RunCanceled,
    RunFailed,
    StreamClosed,
    StreamOverflow,
)
from agent_runtime.event_stream._gap_queue import GapQueue
from agent_runtime.event_stream._timers import TimerHandle, _TimerThread, pending_timers
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    CustomEvent,
    Error,
    Event,
    EventsDropped,
    TurnStart,
    is_terminal,
)
from agent_runtime.messages import AssistantMessage, TextContent, UserMessage
from agent_runtime.testing import wait_until
from tests.gc_finalizers import FinalizerProbe, run_steps_on_a_thread

# -- helpers ---------------------------------------------------------------------------------


def ev(seq: int, source: str = "") -> TurnStart:
    """A cheap event; `seq` identifies it, `run_id` names its producer."""
    return TurnStart(seq=seq, run_id=source)


def drain(stream: EventStream) -> list[Event]:
    """Everything a fresh reader sees, up to and including the terminal."""
    return list(stream)


def seqs(events: list[Event]) -> list[Any]:
    """Events as seqs, markers as ("gap", n), the terminal as its type name."""
    out: list[Any] = []
    for e in events:
        if isinstance(e, EventsDropped):
            out.append(("gap", e.count))
        elif is_terminal(e):
            out.append(e.type)
        else:
            out.append(e.seq)
    return out


def blocked_pushers(stream: EventStream) -> int:
    """White box: how many threads wait for space (to start a test once a pusher is parked)."""
    return stream._writable.waiting  # type: ignore[attr-defined]


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run `fn` in a daemon thread; the dict gets its "result" or "error"."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def full_stream(overflow: Any, max_queue: int = 2, **kw: Any) -> EventStream:
    stream = EventStream(max_queue=max_queue, overflow=overflow, **kw)
    for i in range(1, max_queue + 1):
        stream.push(ev(i))
    return stream


# -- construction ----------------------------------------------------------------------------


def test_an_unknown_overflow_policy_is_named_in_the_error() -> None:
    with pytest.raises(ValueError) as info:
        EventStream(overflow="drop-old")  # type: ignore[arg-type]
    assert str(info.value) == (
        "unknown overflow policy 'drop-old'"
        " (expected one of: error, drop_oldest, drop_newest, block)"
    )


@pytest.mark.parametrize("max_queue", [0, -1, True])
def test_max_queue_below_one_is_rejected(max_queue: int) -> None:
    with pytest.raises(ValueError, match=f"max_queue {max_queue!r}"):
        EventStream(max_queue=max_queue)


@pytest.mark.parametrize("timeout", [0, -1.5])
def test_a_lifetime_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ValueError, match=f"timeout {timeout!r}"):
        EventStream(timeout=timeout)


def test_a_negative_push_timeout_is_rejected() -> None:
    with pytest.raises(ValueError, match="push timeout -1"):
        EventStream().push(ev(1), timeout=-1)


# -- overflow policies -----------------------------------------------------------------------


def test_error_policy_raises_and_does_not_accept_the_event() -> None:
    stream = full_stream("error")
    with pytest.raises(StreamOverflow, match="full"):
        stream.push(ev(3))
    stream.complete()
    assert seqs(drain(stream)) == [1, 2, "agent_end"]
    assert stream.stats().dropped == 0


def test_drop_oldest_evicts_and_marks_the_gap_before_the_next_event() -> None:
    stream = full_stream("drop_oldest", max_queue=2)
    assert stream.push(ev(3)) is True
    assert stream.push(ev(4)) is True
    stream.complete()
    assert seqs(drain(stream)) == [("gap", 2), 3, 4, "agent_end"]


def test_drop_newest_discards_and_marks_the_gap_before_the_next_event() -> None:
    stream = full_stream("drop_newest", max_queue=2)
    assert stream.push(ev(3)) is False
    assert stream.push(ev(4)) is False
    assert seqs(stream.pull_many(max_items=1)) == [1]  # one slot frees
    stream.push(ev(5))
    stream.complete()
    assert seqs(drain(stream)) == [2, ("gap", 2), 5, "agent_end"]


def test_a_gap_at_the_end_is_marked_before_the_terminal() -> None:
    stream = full_stream("drop_newest", max_queue=1)
    stream.push(ev(2))
    stream.cancel()
    events = drain(stream)
    assert seqs(events) == [1, ("gap", 1), "canceled"]
    assert events[1].seq == events[2].seq == 3


def test_markers_take_no_queue_space() -> None:
    stream = full_stream("drop_oldest", max_queue=1)
    stream.push(ev(2))
    assert stream.stats().queue_size == 1
    assert stream.push(ev(3)) is True
    stream.complete()
    assert seqs(drain(stream)) == [("gap", 2), 3, "agent_end"]


def test_a_marker_carries_the_stream_identity_and_the_seq_of_the_event_after_it() -> None:
    key = AgentKey("s", "r", 0)
    stream = full_stream("drop_oldest", max_queue=1, agent=key, run_id="run-1")
    stream.push(ev(7))
    marker, event = stream.pull_many(max_items=2)
    assert isinstance(marker, EventsDropped)
    assert (marker.agent, marker.run_id, marker.seq, marker.count) == (key, "run-1", 7, 1)
    assert event.seq == 7


@pytest.mark.parametrize("overflow", ["error", "block", "drop_newest"])
def test_push_async_drops_the_new_event_when_full(overflow: Any) -> None:
    stream = full_stream(overflow, max_queue=1)
    assert stream.push_async(ev(2)) is False
    stream.push_async(ev(3))
    stream.complete()
    assert seqs(drain(stream)) == [1, ("gap", 2), "agent_end"]
    assert stream.stats().dropped == 2


def test_push_async_under_drop_oldest_evicts() -> None:
    stream = full_stream("drop_oldest", max_queue=1)
    assert stream.push_async(ev(2)) is True
    stream.complete()
    assert seqs(drain(stream)) == [("gap", 1), 2, "agent_end"]


@pytest.mark.timing
def test_block_waits_for_the_timeout_then_raises() -> None:
    stream = full_stream("block", max_queue=1)
    start = time.monotonic()
    with pytest.raises(StreamOverflow, match=r"after waiting 0\.05s"):
        stream.push(ev(2), timeout=0.05)
    assert time.monotonic() - start >= 0.05
    assert stream.stats().queue_size == 1


def test_block_with_zero_timeout_does_not_wait() -> None:
    stream = full_stream("block", max_queue=1)
    with pytest.raises(StreamOverflow):
        stream.push(ev(2), timeout=0)


def test_a_blocked_pusher_proceeds_when_a_reader_makes_space() -> None:
    stream = full_stream("block", max_queue=1)
    thread, box = in_thread(lambda: stream.push(ev(2), timeout=10))
    wait_until(lambda: blocked_pushers(stream) == 1, what="pusher parked")
    assert seqs(stream.pull_many(max_items=1)) == [1]
    thread.join(5)
    assert box == {"result": True}
    assert seqs(stream.pull_many(max_items=1)) == [2]


def test_a_blocked_pusher_is_released_by_cancel() -> None:
    stream = full_stream("block", max_queue=1)
    thread, box = in_thread(lambda: stream.push(ev(2)))
    wait_until(lambda: blocked_pushers(stream) == 1, what="pusher parked")
    stream.cancel()
    thread.join(5)
    assert isinstance(box.get("error"), StreamClosed)
    assert seqs(drain(stream)) == [1, "canceled"]


# -- terminals -------------------------------------------------------------------------------


def test_the_terminal_is_never_lost_on_a_full_queue() -> None:
    stream = full_stream("error", max_queue=2)
    assert stream.complete([UserMessage(content="hi", timestamp=1.0)]) is True
    assert seqs(drain(stream)) == [1, 2, "agent_end"]
    assert stream.result(timeout=1) == [UserMessage(content="hi", timestamp=1.0)]


def test_the_first_terminal_wins() -> None:
    stream = EventStream()
    assert stream.error("boom") is True
    assert stream.complete() is False
    assert stream.cancel() is False
    assert isinstance(stream.terminal, Error)
    assert seqs(drain(stream)) == ["error"]


def test_exactly_one_of_racing_terminals_wins() -> None:
    stream = EventStream()
    barrier = threading.Barrier(6)
    wins: list[bool] = []

    def end(i: int) -> None:
        barrier.wait(5)
        wins.append(stream.cancel(f"r{i}") if i % 2 else stream.complete())

    threads = [threading.Thread(target=end, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(wins) == [False] * 5 + [True]
    assert [e.type for e in drain(stream)] == [stream.terminal.type]  # type: ignore[union-attr]


@pytest.mark.parametrize("overflow", ["error", "drop_oldest", "drop_newest", "block"])
def test_push_after_the_terminal_raises_stream_closed(overflow: Any) -> None:
    stream = EventStream(overflow=overflow)
    stream.complete()
    with pytest.raises(StreamClosed):
        stream.push(ev(1))
    assert stream.push_async(ev(2)) is False
    assert stream.stats().dropped == 0


def test_apush_after_the_terminal_raises_stream_closed() -> None:
    stream = EventStream()
    stream.cancel()
    with pytest.raises(StreamClosed):
        asyncio.run(stream.apush(ev(1)))


@pytest.mark.parametrize("terminal", [AgentEnd(), Error(reason="x"), Canceled(reason="y")])
def test_a_pushed_terminal_ends_the_stream_and_push_async_never_raises(terminal: Event) -> None:
    stream = EventStream(run_id="r")
    stream.push(ev(1))
    assert stream.push_async(terminal) is True
    assert stream.done and type(stream.terminal) is type(terminal)
    assert stream.terminal is not None and stream.terminal.seq == 2
    assert stream.push_async(terminal) is False  # already ended: ignored, not raised
    with pytest.raises(StreamClosed):
        stream.push(terminal)
    assert [type(e) for e in stream] == [type(ev(1)), type(terminal)]


def test_forwarding_every_event_of_a_run_through_push_async_ends_it_properly() -> None:
    stream = EventStream()
    for event in [ev(1), ev(2), AgentEnd(new_messages=[], seq=3)]:
        stream.push_async(event)
    assert stream.result(timeout=1) == []


def test_cancel_keeps_accepted_events_for_a_late_consumer() -> None:
    stream = EventStream()
    for i in (1, 2, 3):
        stream.push(ev(i))
    stream.cancel("user_abort")
    assert seqs(drain(stream)) == [1, 2, 3, "canceled"]
    assert seqs(drain(stream)) == ["canceled"]  # a second late reader still sees the end
    with pytest.raises(RunCanceled) as info:
        stream.result(timeout=1)
    assert info.value.reason == "user_abort"


def test_terminal_carries_the_stream_identity_and_the_next_seq() -> None:
    key = AgentKey("s1", "research", 0)
    stream = EventStream(agent=key, run_id="run-9")
    stream.push(ev(4))
    stream.push(ev(2))
    stream.complete()
    terminal = stream.terminal
    assert terminal is not None
    assert (terminal.agent, terminal.run_id, terminal.seq) == (key, "run-9", 5)


def test_result_raises_run_failed_with_the_partial_message() -> None:
    stream = EventStream()
    partial = AssistantMessage(content=[TextContent(text="half")], stop_reason="error")
    stream.error("provider_down", partial)
    with pytest.raises(RunFailed) as info:
        stream.result()
    assert (info.value.reason, info.value.partial) == ("provider_down", partial)


def test_result_times_out_on_an_open_stream() -> None:
    with pytest.raises(TimeoutError):
        EventStream().result(timeout=0.01)


def test_result_does_not_consume_events() -> None:
    stream = EventStream()
    stream.push(ev(1))
    stream.complete()
    assert stream.result() == []
    assert seqs(drain(stream)) == [1, "agent_end"]


def test_done_and_terminal_report_the_end() -> None:
    stream = EventStream()
    assert (stream.done, stream.terminal) == (False, None)
    stream.cancel()
    assert stream.done
    assert isinstance(stream.terminal, Canceled)


# -- lifetime and owner ----------------------------------------------------------------------


@pytest.mark.timing
def test_the_lifetime_timeout_cancels_with_reason_timeout() -> None:
    start = time.monotonic()
    stream = EventStream(timeout=0.1)
    stream.push(ev(1))
    with pytest.raises(RunCanceled, match="timeout"):
        stream.result(timeout=5)
    assert 0.09 <= time.monotonic() - start < 3
    assert seqs(drain(stream)) == [1, "canceled"]


def test_a_terminal_cancels_the_lifetime_timer() -> None:
    before = pending_timers()
    stream = EventStream(timeout=60)
    assert pending_timers() == before + 1
    stream.complete()
    assert pending_timers() == before


def test_lifetime_timers_share_one_thread_and_do_not_keep_streams_alive() -> None:
    streams = [EventStream(timeout=60) for _ in range(50)]
    assert sum(t.name == "agent-runtime-timers" for t in threading.enumerate()) == 1
    ref = weakref.ref(streams[0])
    del streams
    gc.collect()
    assert ref() is None


class _Owner(supervisors.SupervisedActor):
    pass


@pytest.fixture
def owner() -> Iterator[pykka.ActorRef[Any]]:
    ref = _Owner.start()
    yield ref
    if ref.is_alive():
        ref.stop()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_owner_exiting_cancels_with_owner_down(owner: pykka.ActorRef[Any], how: str) -> None:
    stream = EventStream(owner=owner)
    stream.push(ev(1))
    if how == "stop":
        owner.stop()
    else:
        supervisors.kill(owner)
    with pytest.raises(RunCanceled, match="owner_down"):
        stream.result(timeout=5)
    assert seqs(drain(stream)) == [1, "canceled"]


def test_a_dead_owner_cancels_at_once(owner: pykka.ActorRef[Any]) -> None:
    owner.stop()
    stream = EventStream(owner=owner)
    assert isinstance(stream.terminal, Canceled)
    assert stream.terminal.reason == "owner_down"


def test_a_terminal_cancels_the_owner_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    handles: list[Any] = []

    class FakeMonitor:
        cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def fake_monitor(ref: Any, callback: Any) -> FakeMonitor:
        handle = FakeMonitor()
        handles.append(handle)
        return handle

    monkeypatch.setattr(supervisors, "monitor", fake_monitor)
    stream = EventStream(owner=object())  # type: ignore[arg-type]
    assert not handles[0].cancelled
    stream.complete()
    assert handles[0].cancelled


# -- the end, for the producer --------------------------------------------------------------


def end_by(stream: EventStream, how: str) -> None:
    if how == "complete":
        stream.complete()
    elif how == "error":
        stream.error("boom")
    elif how == "cancel":
        stream.cancel("reader_gone")
    else:
        stream.push(Canceled(reason="pushed"))


@pytest.mark.parametrize("how", ["complete", "error", "cancel", "terminal_push"])
def test_on_end_callbacks_run_once_with_the_terminal(how: str) -> None:
    stream = EventStream(run_id="r")
    seen: list[Event] = []
    stream.on_end(seen.append)
    stream.push(ev(1))
    assert seen == []
    end_by(stream, how)
    stream.cancel("again")
    assert seen == [stream.terminal]
    assert seen[0].run_id == "r" and seen[0].seq == 2


def test_on_end_runs_when_the_lifetime_timeout_ends_the_stream() -> None:
    stream = EventStream(timeout=0.05)
    seen: list[Event] = []
    stream.on_end(seen.append)
    wait_until(lambda: seen, timeout=5)
    assert isinstance(seen[0], Canceled) and seen[0].reason == "timeout"


def test_on_end_runs_when_the_owner_exits(owner: pykka.ActorRef[Any]) -> None:
    stream = EventStream(owner=owner)
    seen: list[Event] = []
    stream.on_end(seen.append)
    supervisors.kill(owner)
    wait_until(lambda: seen, timeout=5)
    assert isinstance(seen[0], Canceled) and seen[0].reason == "owner_down"


def test_on_end_on_an_ended_stream_runs_at_once() -> None:
    stream = EventStream()
    stream.cancel("gone")
    seen: list[Event] = []
    stream.on_end(seen.append)
    assert seen == [stream.terminal]


def test_a_removed_on_end_callback_never_runs() -> None:
    stream = EventStream()
    seen: list[Event] = []
    remove = stream.on_end(seen.append)
    remove()
    remove()
    stream.complete()
    assert seen == []


def test_a_failing_on_end_callback_does_not_reach_who_ended_the_stream() -> None:
    stream = EventStream()
    seen: list[Event] = []

    def broken(_: Event) -> None:
        raise RuntimeError("callback bug")

    stream.on_end(broken)
    stream.on_end(seen.append)
    assert stream.cancel("x") is True
    assert seen == [stream.terminal]


# -- what may be pushed ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [5, "text", {"type": "custom"}, None, UserMessage(content="x")])
def test_pushing_a_non_event_raises_a_type_error_naming_the_expected_types(bad: object) -> None:
    stream = EventStream()
    for push in (stream.push, stream.push_async):
        with pytest.raises(TypeError, match=r"takes an event \(AgentStart, .*CustomEvent"):
            push(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="apush"):
        asyncio.run(stream.apush(bad))  # type: ignore[arg-type]
    assert stream.stats().accepted == 0 and not stream.done


def test_a_non_event_is_refused_also_after_the_end_and_in_a_subscription_stream() -> None:
    ended = EventStream()
    ended.complete()
    with pytest.raises(TypeError, match="not int"):
        ended.push(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not int"):
        EventStream(multi_run=True).push_async(1)  # type: ignore[arg-type]


def test_an_application_pushes_its_own_custom_events_through_the_stream() -> None:
    stream = EventStream()
    mine = CustomEvent(name="progress", data={"pct": 50, "steps": ["a", "b"]}, seq=1)
    stream.push(ev(0))
    assert stream.push(mine) is True
    assert stream.push_async(CustomEvent(name="done", seq=2)) is True
    stream.complete()
    events = drain(stream)
    assert events[1] is mine
    assert [type(e).__name__ for e in events] == [
        "TurnStart",
        "CustomEvent",
        "CustomEvent",
        "AgentEnd",
    ]


# -- readers ---------------------------------------------------------------------------------


def test_pull_many_returns_what_is_available_up_to_max_items() -> None:
    stream = EventStream()
    for i in range(5):
        stream.push(ev(i))
    assert seqs(stream.pull_many(max_items=3)) == [0, 1, 2]
    assert seqs(stream.pull_many(max_items=3)) == [3, 4]
    assert stream.pull_many(timeout=0.01) == []
    stream.complete()
    assert seqs(stream.pull_many()) == ["agent_end"]
    assert stream.pull_many() == []


def test_pull_many_waits_for_a_first_event() -> None:
    stream = EventStream()
    thread, box = in_thread(lambda: stream.pull_many(timeout=10))
    stream.push(ev(1))
    thread.join(5)
    assert seqs(box["result"]) == [1]


def test_every_reader_receives_the_terminal() -> None:
    stream = EventStream()
    readers = [in_thread(lambda: drain(stream)) for _ in range(3)]
    stream.cancel()
    for thread, box in readers:
        thread.join(5)
        assert seqs(box["result"]) == ["canceled"]


def test_many_producers_and_readers_deliver_every_event_once_in_producer_order() -> None:
    producers, per_producer = 8, 2000
    stream = EventStream(max_queue=64, overflow="block")

    def produce(p: int) -> None:
        for i in range(per_producer):
            stream.push(ev(i, source=f"p{p}"), timeout=10)

    readers = [in_thread(lambda: drain(stream)) for _ in range(4)]
    writers = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(10)
    stream.complete()
    seen: list[tuple[str, int]] = []
    for thread, box in readers:
        thread.join(10)
        events = box["result"]
        assert isinstance(events[-1], AgentEnd)
        mine = [(e.run_id, e.seq) for e in events[:-1]]
        for p in range(producers):
            own = [i for src, i in mine if src == f"p{p}"]
            assert own == sorted(own)  # per-producer FIFO within each reader
        seen += mine
    assert sorted(seen) == sorted(
        (f"p{p}", i) for p in range(producers) for i in range(per_producer)
    )
    stats = stream.stats()
    assert (stats.accepted, stats.delivered, stats.dropped) == (16000, 16000, 0)


# -- asyncio ---------------------------------------------------------------------------------


def test_apush_waits_for_space_without_blocking_the_loop() -> None:
    stream = full_stream("block", max_queue=1)

    async def main() -> None:
        pusher = asyncio.create_task(stream.apush(ev(2), timeout=10))
        ticks = 0
        while ticks < 20:  # the loop keeps running while the pusher waits
            await asyncio.sleep(0)
            ticks += 1
        assert not pusher.done()
        in_thread(lambda: stream.pull_many(max_items=1))
        assert await asyncio.wait_for(pusher, 5) is True

    asyncio.run(main())
    assert seqs(stream.pull_many()) == [2]


def test_apush_times_out_with_stream_overflow() -> None:
    stream = full_stream("block", max_queue=1)
    with pytest.raises(StreamOverflow):
        asyncio.run(stream.apush(ev(2), timeout=0.02))


def test_a_waiting_apush_is_released_by_cancel() -> None:
    stream = full_stream("block", max_queue=1)

    async def main() -> None:
        pusher = asyncio.create_task(stream.apush(ev(2)))
        await asyncio.sleep(0)
        in_thread(stream.cancel)
        with pytest.raises(StreamClosed):
            await asyncio.wait_for(pusher, 5)

    asyncio.run(main())


def test_async_for_reads_events_from_another_thread_without_blocking_the_loop() -> None:
    stream = EventStream()

    async def main() -> tuple[list[Event], int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)

        def produce() -> None:
            wait_until(lambda: ticks >= 5, what="the loop ran while the reader waited")
            for i in range(100):
                stream.push(ev(i))
            stream.complete()

        in_thread(produce)
        got = [e async for e in stream]
        stop.set()
        await task
        return got, ticks

    got, ticks = asyncio.run(asyncio.wait_for(main(), 10))
    assert seqs(got) == [*range(100), "agent_end"]
    assert ticks >= 5


def test_async_and_thread_readers_and_pushers_share_one_stream() -> None:
    stream = EventStream(max_queue=8, overflow="block")

    def produce(p: int) -> None:
        for i in range(300):
            stream.push(ev(i, source=f"t{p}"), timeout=10)

    thread_readers = [in_thread(lambda: drain(stream)) for _ in range(2)]
    thread_pushers = [in_thread(functools.partial(produce, p)) for p in range(2)]

    async def main() -> list[list[Event]]:
        async def read() -> list[Event]:
            return [e async for e in stream]

        async def push(p: int) -> None:
            for i in range(300):
                await stream.apush(ev(i, source=f"a{p}"), timeout=10)

        readers = [asyncio.create_task(read()) for _ in range(2)]
        await asyncio.gather(*(push(p) for p in range(2)))
        for thread, _ in thread_pushers:
            await asyncio.to_thread(thread.join, 10)
        stream.complete()
        return list(await asyncio.gather(*readers))

    results = asyncio.run(asyncio.wait_for(main(), 10))
    for thread, box in thread_readers:
        thread.join(10)
        results.append(box["result"])
    assert all(isinstance(r[-1], AgentEnd) for r in results)
    seen = sorted((e.run_id, e.seq) for r in results for e in r[:-1])
    sources = ["a0", "a1", "t0", "t1"]
    assert seen == sorted((src, i) for src in sources for i in range(300))


def test_aresult_waits_for_the_terminal() -> None:
    stream = EventStream()

    async def main() -> list[Any]:
        in_thread(lambda: stream.complete([UserMessage(content="x", timestamp=0.0)]))
        return await stream.aresult(timeout=5)

    assert asyncio.run(main()) == [UserMessage(content="x", timestamp=0.0)]


def test_aresult_times_out() -> None:
    with pytest.raises(TimeoutError):
        asyncio.run(EventStream().aresult(timeout=0.01))


# -- the invariant ---------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.none()),
        st.tuples(st.just("push_async"), st.none()),
        st.tuples(st.just("read"), st.integers(1, 4)),
        st.tuples(st.just("end"), st.sampled_from(["complete", "error", "cancel"])),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    ops=ops,
    overflow=st.sampled_from(["error", "drop_oldest", "drop_newest", "block"]),
    max_queue=st.integers(1, 4),
)
def test_a_reader_sees_a_fifo_subsequence_with_every_gap_marked(
    ops: list[tuple[str, Any]], overflow: Any, max_queue: int
) -> None:
    stream = EventStream(max_queue=max_queue, overflow=overflow)
    offered: list[int] = []  # seqs of events the stream took responsibility for
    highest = 0  # highest seq pushed before the end, also by a push that raised
    seen: list[Event] = []
    endings = {"complete": stream.complete, "error": lambda: stream.error("boom")}
    for op, arg in ops:
        seq = len(offered) + 1
        if op in ("push", "push_async") and not stream.done:
            highest = seq
        if op == "push":
            try:
                stream.push(ev(seq), timeout=0)
                offered.append(seq)
            except (StreamOverflow, StreamClosed):
                pass
        elif op == "push_async":
            if not stream.done:
                stream.push_async(ev(seq))
                offered.append(seq)
        elif op == "read":
            seen += stream.pull_many(max_items=arg, timeout=0)
        else:
            endings.get(arg, stream.cancel)()
        stats = stream.stats()
        assert stats.accepted == stats.delivered + stats.evicted + stats.queue_size
    stream.cancel()
    if seen and is_terminal(seen[-1]):
        assert stream.pull_many() == []
    else:
        seen += stream.pull_many(max_items=1000)
    assert seqs(drain(stream))[-1:] == [stream.terminal.type]  # type: ignore[union-attr]

    # exactly one terminal, last, with the next seq
    assert is_terminal(seen[-1]) and not any(is_terminal(e) for e in seen[:-1])
    assert seen[-1].seq == highest + 1
    # events form a FIFO subsequence; a marker sits exactly where (and only where) a gap is
    previous = pending_gap = marker_seq = 0
    for e in seen:
        if isinstance(e, EventsDropped):
            assert pending_gap == 0, "two markers in a row"
            pending_gap = e.count
            marker_seq = e.seq
            continue
        if pending_gap:
            assert marker_seq == e.seq  # the marker carries the seq of the event after the gap
        position = e.seq if not is_terminal(e) else len(offered) + 1
        assert position - previous - 1 == pending_gap
        previous, pending_gap = position, 0
    stats = stream.stats()
    delivered = [e for e in seen if not isinstance(e, EventsDropped) and not is_terminal(e)]
    assert stats.queue_size == 0
    assert stats.delivered == len(delivered)
    assert stats.dropped == sum(e.count for e in seen if isinstance(e, EventsDropped))
    assert stats.accepted == stats.delivered + stats.evicted
    assert stats.delivered + stats.dropped == len(offered)


def test_offer_queues_without_ever_waiting_and_says_when_a_push_would_wait() -> None:
    stream = EventStream(max_queue=1, overflow="block")
    assert stream.offer(ev(1)) is True
    assert stream.offer(ev(2)) is None  # full under "block": nothing queued, nothing waited
    assert [e.seq for e in stream.pull_many(10, timeout=1)] == [1]
    dropping = EventStream(max_queue=1, overflow="drop_newest")
    assert dropping.offer(ev(1)) is True and dropping.offer(ev(2)) is False
    with pytest.raises(TypeError, match="CustomEvent"):
        stream.offer(42)  # type: ignore[arg-type]
    stream.complete()
    with pytest.raises(StreamClosed):
        stream.offer(ev(3))


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(["event", "end"]), max_size=12),
    multi_run=st.booleans(),
    max_queue=st.integers(min_value=1, max_value=4),
)
def test_an_offer_whose_checks_the_caller_made_is_an_offer(
    kinds: list[str], multi_run: bool, max_queue: int
) -> None:
    # What a fan-out to many subscriptions uses: `offer_known(event, is_terminal(event))`.
    made = [ev(i + 1) if kind == "event" else AgentEnd(seq=i + 1) for i, kind in enumerate(kinds)]
    outcomes: list[list[Any]] = []
    streams = []
    for known in (False, True):
        stream = EventStream(max_queue=max_queue, overflow="drop_newest", multi_run=multi_run)
        seen: list[Any] = []
        for event in made:
            try:
                seen.append(
                    stream.offer_known(event, is_terminal(event)) if known else stream.offer(event)
                )
            except StreamClosed:
                seen.append("closed")
        outcomes.append(seen)
        streams.append(stream)
    assert_alike(outcomes, streams)


def assert_alike(outcomes: list[list[Any]], streams: list[EventStream]) -> None:
    """Two ways of offering the same events left the same answers, counters and queue."""
    assert outcomes[0] == outcomes[1]
    first, second = streams
    assert first.stats() == second.stats()
    assert seqs(first.pull_many(100, timeout=0)) == seqs(second.pull_many(100, timeout=0))


@settings(max_examples=80, deadline=None)
@given(
    ops=st.lists(st.sampled_from(["data", "end", "take"]), max_size=16),
    multi_run=st.booleans(),
    max_queue=st.integers(min_value=1, max_value=4),
)
def test_offer_data_is_offer_known_of_an_event_that_is_no_terminal(
    ops: list[str], multi_run: bool, max_queue: int
) -> None:
    # The run's per-delta fan-out to a "block" subscription takes `offer_data`.
    outcomes: list[list[Any]] = []
    streams = []
    for fast in (False, True):
        stream = EventStream(max_queue=max_queue, overflow="block", multi_run=multi_run)
        seen: list[Any] = []
        for seq, op in enumerate(ops, start=1):
            if op == "take":
                seen.append(seqs(stream.pull_many(1, timeout=0)))
                continue
            event: Event = ev(seq) if op == "data" else AgentEnd(seq=seq)
            try:
                if op == "data" and fast:
                    seen.append(stream.offer_data(event))
                else:
                    seen.append(stream.offer_known(event, is_terminal(event)))
            except StreamClosed:
                seen.append(False)  # what offer_data answers once the stream has ended
        outcomes.append(seen)
        streams.append(stream)
    assert_alike(outcomes, streams)


@settings(max_examples=400, deadline=None)
@given(
    ops=st.lists(
        st.one_of(st.integers(min_value=1, max_value=5), st.sampled_from(["end", "take"])),
        max_size=12,
    ),
    overflow=st.sampled_from(["block", "drop_oldest", "drop_newest", "error"]),
    max_queue=st.integers(min_value=1, max_value=4),
)
def test_offer_many_is_each_event_offered_in_turn(
    ops: list[int | str], overflow: OverflowPolicy, max_queue: int
) -> None:
    # The fan-out of a loop step's tokens: `offer_many` of a batch to each subscription. Under
    # "block" the fan-out gathers no more than `room()`, so only such batches are offered.
    outcomes: list[list[Any]] = []
    streams = []
    for many in (False, True):
        stream = EventStream(max_queue=max_queue, overflow=overflow, multi_run=True)
        seen: list[Any] = []
        seq = 0
        for op in ops:
            if op == "take":
                seen.append(seqs(stream.pull_many(1, timeout=0)))
                continue
            if op == "end":
                seq += 1
                seen.append(stream.offer_known(AgentEnd(seq=seq), True))
                continue
            count = op if overflow != "block" else min(op, stream.room())
            batch = [ev(seq + i + 1) for i in range(count)]
            seq += count
            seen.append(("room", stream.room()))
            try:
                if many:
                    seen.append(stream.offer_many(batch))
                else:
                    for event in batch:
                        if overflow == "block":
                            assert stream.offer_data(event) is True
                        elif overflow == "error":
                            stream.push(event, timeout=0)
                        else:
                            stream.push_async(event)
                    seen.append(True)
            except StreamOverflow:
                seen.append("overflow")
        outcomes.append(seen)
        streams.append(stream)
    assert_alike(outcomes, streams)


def test_room_keeps_a_freed_place_for_the_pusher_waiting_for_it() -> None:
    async def scenario() -> tuple[list[int], list[Any]]:
        stream = EventStream(max_queue=2, overflow="block", multi_run=True)
        assert stream.offer_many([ev(1), ev(2)]) is True
        rooms = [stream.room()]
        waiting = asyncio.ensure_future(stream.apush(ev(3)))
        await asyncio.sleep(0)  # it waits for space
        taken = seqs(stream.pull_many(1, timeout=0))
        rooms.append(stream.room())  # the freed place is the waiting pusher's
        assert await waiting is True
        rooms.append(stream.room())
        return rooms, taken + seqs(stream.pull_many(10, timeout=0))

    rooms, taken = asyncio.run(scenario())
    assert rooms == [0, 0, 0]
    assert taken == [1, 2, 3]


def test_offer_many_of_nothing_queues_nothing_and_of_an_ended_stream_is_refused() -> None:
    stream = EventStream(max_queue=2, overflow="block", multi_run=True)
    assert stream.offer_many([]) is True and stream.room() == 2
    assert stream.offer_many([ev(1)]) is True and stream.room() == 1
    stream.complete()
    assert stream.room() == 0
    assert stream.offer_many([ev(2)]) is False
    assert [e.seq for e in stream.pull_many(10, timeout=0) if not is_terminal(e)] == [1]


# -- readers on other threads, woken once per step of a producing event loop -------------------


def in_reader_thread(stream: EventStream, how: str) -> Callable[[], list[Event]]:
    """A thread reading `stream` to its end (`pull_many` batches, or iterating it), parked
    before this returns; the function returned waits for it and gives what it read (or
    raises what it raised)."""

    def read() -> list[Event]:
        got: list[Event] = list(stream) if how == "iterate" else []
        while not got or not is_terminal(got[-1]):
            got.extend(stream.pull_many(1000, timeout=10))
        return got

    thread, box = in_thread(read)
    wait_until(lambda: stream._readable.waiting > 0, timeout=5)  # parked before the burst

    def result() -> list[Event]:
        thread.join(10)
        if "error" in box:
            raise box["error"]
        return box["result"]  # type: ignore[no-any-return]

    return result


@pytest.mark.parametrize("how", ["pull_many", "iterate"])
def test_a_burst_offered_on_an_event_loop_reaches_a_waiting_thread_reader_in_one_wake_up(
    how: str,
) -> None:
    stream = EventStream(max_queue=1000, overflow="block")  # never half full here
    reader = in_reader_thread(stream, how)
    delivered_in_step: list[int] = []

    async def burst() -> None:
        for i in range(1, 51):
            assert stream.offer(ev(i)) is True
            if i == 1:
                time.sleep(0.05)  # the GIL is free: a reader woken now would take event 1
        delivered_in_step.append(stream.stats().delivered)
        await asyncio.sleep(0)  # the step ends: the reader is woken once, for all 50
        await asyncio.to_thread(wait_until, lambda: stream.stats().delivered == 50, 5)
        stream.complete()

    asyncio.run(burst())
    assert delivered_in_step == [0]
    assert seqs(reader()) == [*range(1, 51), "agent_end"]


def test_an_offer_from_a_plain_thread_wakes_a_reader_at_once() -> None:
    stream = EventStream(max_queue=10)
    reader = in_reader_thread(stream, "iterate")
    stream.offer(ev(1))
    wait_until(lambda: stream.stats().delivered == 1, timeout=5)  # no loop step to wait for
    stream.complete()
    assert seqs(reader()) == [1, "agent_end"]


def test_every_thread_reader_is_woken_for_a_burst() -> None:
    stream = EventStream(max_queue=100, overflow="block")  # the policy that defers
    taken: list[Event] = []

    def pull_one() -> None:
        taken.extend(stream.pull_many(1, timeout=10))

    readers = [in_thread(pull_one)[0] for _ in range(3)]
    wait_until(lambda: stream._readable.waiting == 3, timeout=5)

    async def burst() -> None:
        for i in range(1, 4):
            stream.offer(ev(i))

    asyncio.run(burst())
    wait_until(lambda: len(taken) == 3, timeout=3)  # not at the readers' 10 s timeout
    for r in readers:
        r.join(10)
    assert sorted(e.seq for e in taken) == [1, 2, 3]


@pytest.mark.timing
def test_a_blocking_push_on_an_event_loop_first_wakes_the_reader_that_makes_space() -> None:
    # The loop's step cannot end while its thread waits in `push`: the wake-up owed to the
    # reader is given before waiting, or both would wait until the push timeout.
    stream = EventStream(max_queue=2, overflow="block")
    reader = in_reader_thread(stream, "iterate")

    async def producer() -> None:
        for i in range(1, 11):
            stream.push(ev(i), timeout=5)  # blocks the loop's thread: allowed on a bare stream
        stream.complete()

    started = time.monotonic()
    asyncio.run(producer())
    assert seqs(reader()) == [*range(1, 11), "agent_end"]
    assert time.monotonic() - started < 4


def test_an_async_reader_on_another_loop_is_woken_for_a_burst() -> None:
    stream = EventStream(max_queue=100, overflow="block")  # the policy that defers
    got: list[Event] = []
    ready = threading.Event()

    def reader_loop() -> None:
        async def read() -> None:
            ready.set()
            async for event in stream:
                got.append(event)

        asyncio.run(read())

    reader, box = in_thread(reader_loop)
    ready.wait(5)
    wait_until(lambda: bool(stream._async_readable._waiters), timeout=5)

    async def burst() -> None:
        for i in range(1, 21):
            stream.offer(ev(i))
        await asyncio.sleep(0)
        await asyncio.to_thread(wait_until, lambda: len(got) == 20, 5)
        stream.complete()

    asyncio.run(burst())
    reader.join(10)
    assert "error" not in box, box
    assert seqs(got) == [*range(1, 21), "agent_end"]


def test_a_wake_up_owed_by_a_closed_loop_does_not_strand_the_stream_on_the_next_loop() -> None:
    stream = EventStream(max_queue=10, overflow="block")  # the policy that defers
    reader = in_reader_thread(stream, "pull_many")
    loop = asyncio.new_event_loop()
    loop.call_soon(lambda: stream.offer(ev(1)))
    loop.call_soon(loop.stop)
    loop.run_forever()  # the wake-up's callback was scheduled after stop(): it never runs
    loop.close()

    async def offer_again() -> None:
        stream.offer(ev(2))
        await asyncio.sleep(0)
        # woken at this step's end, not at the reader's 10 s pull timeout
        await asyncio.to_thread(wait_until, lambda: stream.stats().delivered == 2, 3)
        stream.complete()

    asyncio.run(offer_again())
    assert seqs(reader()) == [1, 2, "agent_end"]


@pytest.mark.parametrize(
    ("overflow", "max_queue"), [("drop_oldest", 1000), ("error", 1000), ("block", 10)]
)
def test_a_long_step_wakes_a_thread_reader_at_once_unless_it_may_wait(
    overflow: OverflowPolicy, max_queue: int
) -> None:
    # A step that does not end soon must not make a reader miss events it would have taken:
    # under the policies that drop or refuse, and under "block" from half full on, the
    # reader is woken at once, not when the step ends.
    stream = EventStream(max_queue=max_queue, overflow=overflow)
    reader = in_reader_thread(stream, "pull_many")
    delivered_in_step: list[int] = []

    async def long_step() -> None:
        for i in range(1, 11):
            stream.offer(ev(i))
        time.sleep(0.05)  # the GIL is free: a woken reader takes what is queued
        delivered_in_step.append(stream.stats().delivered)
        stream.complete()

    asyncio.run(long_step())
    assert delivered_in_step[0] >= 5, stream.stats()
    assert seqs(reader()) == [*range(1, 11), "agent_end"]


queue_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 9)),  # 0: a pinned item
        st.tuples(st.just("refuse"), st.just(0)),
        st.tuples(st.just("evict"), st.just(0)),
        st.tuples(st.just("take"), st.integers(1, 5)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=queue_ops)
def test_taking_in_bulk_hands_out_what_taking_one_by_one_does(ops: list[tuple[str, int]]) -> None:
    # Two queues fed alike; one reader takes with `take_ungapped` where it can, the other
    # only with `popleft`: both see the same items with the same gaps, counted alike.
    bulk: GapQueue[int] = GapQueue(pinned=lambda item: item == 0)
    single: GapQueue[int] = GapQueue(pinned=lambda item: item == 0)
    bulk_seen: list[tuple[int, int]] = []
    single_seen: list[tuple[int, int]] = []
    for op, arg in ops:
        if op == "append":
            bulk.append(arg)
            single.append(arg)
        elif op == "refuse":
            bulk.refuse()
            single.refuse()
        elif op == "evict" and bulk.held:
            bulk.evict()
            single.evict()
        elif op == "take":
            taken = bulk.take_ungapped(arg)
            bulk_seen += [(0, item) for item in taken]
            while len(taken) < arg and bulk:
                bulk_seen.append(bulk.popleft())
                taken.append(0)
            for _ in range(arg):
                if single:
                    single_seen.append(single.popleft())
        assert bulk_seen == single_seen
        assert (bulk.held, len(bulk), bulk.delivered, bulk.evicted, bulk.dropped) == (
            single.held,
            len(single),
            single.delivered,
            single.evicted,
            single.dropped,
        )
    assert bulk.pop_tail_gap() == single.pop_tail_gap()


class _CancelsATimerOnCollection:
    """Cyclic garbage whose finalizer cancels a timer, as a forgotten subscription's does
    (its stream's lifetime timer goes with the stream)."""

    def __init__(self, timer: TimerHandle, ran_in: list[str], now: list[str]) -> None:
        self.me = self
        self.timer, self.ran_in, self.now = timer, ran_in, now

    def __del__(self) -> None:
        self.ran_in.append(self.now[0])
        self.timer.cancel()


@pytest.mark.parametrize("step", ["set a timer", "cancel one as the heap is compacted"])
def test_a_collection_inside_the_timers_bookkeeping_may_cancel_a_timer(step: str) -> None:
    # Both steps allocate while they hold the timers' lock; a collection there runs
    # finalizers on the same thread, and one may cancel a timer.
    wheel = _TimerThread()
    probe = FinalizerProbe()

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 5), range(2)):
            timers = [wheel.schedule(60, lambda: None) for _ in range(200)]
            compacting = 0  # cancelled up to the cancel that compacts the heap
            while not (64 < wheel._cancelled + 1 > len(wheel._heap) / 2):
                timers[compacting].cancel()
                compacting += 1
            gc.collect(1)  # the young generations: cheap
            assert compacting < len(timers) - 1
            garbage: list[object] = [
                _CancelsATimerOnCollection(timers[-1], probe.ran_in, probe.now)
            ]
            with probe.collected_inside(garbage, young, promotions):
                if step == "set a timer":
                    wheel.schedule(60, lambda: None).cancel()
                else:
                    timers[compacting].cancel()
            for timer in timers:
                timer.cancel()

    run_steps_on_a_thread(steps, "the timers' bookkeeping")
    assert "inside" in probe.ran_in  # the case this is about happened


class _ForgottenSubscription:
    """Cyclic garbage whose finalizer cancels its stream, as a forgotten `Subscription`'s
    does."""

    def __init__(self, stream: EventStream, ran_in: list[str], now: list[str]) -> None:
        self.me = self
        self.stream, self.ran_in, self.now = stream, ran_in, now

    def __del__(self) -> None:
        self.ran_in.append(self.now[0])
        self.stream.cancel("unsubscribed")


def test_a_stream_ended_as_a_collection_cancels_it_from_a_finalizer_ends_once() -> None:
    # The timer thread ends a stream at its timeout; a collection while it does may run the
    # finalizer of the stream's forgotten subscription, which cancels the same stream.
    probe = FinalizerProbe()
    terminals: list[list[Event]] = []

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 6), range(2)):
            stream = EventStream()
            stream.push(ev(1))
            gc.collect(1)  # the young generations: cheap
            garbage: list[object] = [_ForgottenSubscription(stream, probe.ran_in, probe.now)]
            with probe.collected_inside(garbage, young, promotions):
                stream.cancel("timeout")
            gc.collect(1)  # the young generations: cheap
            terminals.append([e for e in stream if isinstance(e, Canceled)])

    run_steps_on_a_thread(steps, "ending a stream")
    assert "inside" in probe.ran_in  # the case this is about happened
    assert all(len(ended) == 1 for ended in terminals)


def test_a_collection_while_the_counters_are_read_may_end_a_stream_that_dropped_events() -> None:
    # Reading the runtime's counters allocates under their lock; a collection there may run a
    # forgotten subscription's finalizer, which ends its stream, whose drops are then added.
    # (It hung on 3.12+, where a collection may start at any call; 3.11 takes that dict from a
    # free list, and only a fresh allocation starts one.)
    counters = RuntimeCounters()
    probe = FinalizerProbe()

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 6), range(2)):
            stream = EventStream(max_queue=1, overflow="drop_oldest")
            for seq in (1, 2, 3):
                stream.push(ev(seq))
            counters.watch_dropped(stream)
            gc.collect(1)  # the young generations: cheap
            garbage: list[object] = [_ForgottenSubscription(stream, probe.ran_in, probe.now)]
            del stream  # the forgotten subscription's alone, as a real one's is
            with probe.collected_inside(garbage, young, promotions):
                counters.read()
            gc.collect(1)  # the young generations: cheap

    run_steps_on_a_thread(steps, "reading the counters")
    assert "inside" in probe.ran_in  # the case this is about happened
    assert counters.read().dropped_events == 2 * 10  # every stream's drops, each counted once


def test_the_drops_of_a_stream_ended_by_its_subscription_s_collection_are_counted() -> None:
    # A forgotten subscription in a reference cycle ends its stream from its finalizer, when
    # the collector has already cleared every weak reference to the stream.
    counters = RuntimeCounters()
    stream = EventStream(max_queue=1, overflow="drop_oldest")
    for seq in (1, 2, 3):
        stream.push(ev(seq))
    counters.watch_dropped(stream)
    forgotten = _ForgottenSubscription(stream, [], ["outside"])
    del stream, forgotten
    gc.collect()
    assert counters.read().dropped_events == 2
