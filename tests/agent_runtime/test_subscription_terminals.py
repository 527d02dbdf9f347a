"""A subscription never loses the terminal of a run, whatever its overflow policy (DESIGN.md 6).

The subscriptions are built directly and fed with `deliver`, the function the agent hands each
event to, so these tests do not depend on the agent.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_runtime._key import AgentKey
from agent_runtime.event_stream import OverflowPolicy, StreamOverflow, Subscription
from agent_runtime.event_stream._gap_queue import GapQueue
from agent_runtime.event_stream._subscription import deliver
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    Event,
    EventsDropped,
    Terminal,
    TurnStart,
    is_terminal,
)

KEY = AgentKey("s1", "worker", 0)
CHILD = AgentKey("s1", "helper", 0)

# -- helpers ---------------------------------------------------------------------------------


def ev(run_id: str, seq: int, agent: AgentKey = KEY) -> TurnStart:
    return TurnStart(agent=agent, run_id=run_id, seq=seq)


def end(run_id: str, seq: int, kind: type[Terminal] = AgentEnd, agent: AgentKey = KEY) -> Event:
    fields: dict[str, Any] = {"agent": agent, "run_id": run_id, "seq": seq}
    if kind is Error:
        fields["reason"] = "boom"
    elif kind is Canceled:
        fields["reason"] = "user_abort"
    return kind(**fields)


def run_events(run_id: str, n: int, kind: type[Terminal] = AgentEnd) -> list[Event]:
    """`n` events of run `run_id`, then its terminal."""
    return [ev(run_id, i) for i in range(1, n + 1)] + [end(run_id, n + 1, kind)]


def feed(sub: Subscription, events: Sequence[Event], *, timeout: float = 5.0) -> list[bool]:
    """Hand every event to `sub` as the agent does; fails if a delivery hangs."""
    ref = weakref.ref(sub)

    async def go() -> list[bool]:
        return [await asyncio.wait_for(deliver(ref, e), timeout) for e in events]

    return asyncio.run(go())


def subscription(overflow: OverflowPolicy, max_queue: int = 2, **kw: Any) -> Subscription:
    return Subscription(KEY, max_queue=max_queue, overflow=overflow, **kw)


@pytest.fixture
def subs() -> Iterator[list[Subscription]]:
    """Subscriptions made by a test, closed after it."""
    made: list[Subscription] = []
    yield made
    for sub in made:
        sub.close()


def read_run(sub: Subscription, run_id: str) -> list[Event]:
    """What `until_end(run_id=...)` yields; a lost terminal shows as a TimeoutError."""
    return list(sub.until_end(timeout=2.0, run_id=run_id))


def gaps(events: Sequence[Event]) -> int:
    return sum(e.count for e in events if isinstance(e, EventsDropped))


# -- drop policies ---------------------------------------------------------------------------


@pytest.mark.parametrize("overflow", ["drop_newest", "drop_oldest"])
@pytest.mark.parametrize("kind", [AgentEnd, Error, Canceled])
def test_a_run_terminal_survives_a_full_buffer_and_the_next_runs_events(
    overflow: OverflowPolicy, kind: type[Terminal], subs: list[Subscription]
) -> None:
    sub = subscription(overflow)
    subs.append(sub)
    feed(sub, run_events("r1", 10, kind) + [ev("r2", i) for i in range(1, 6)])

    seen = read_run(sub, "r1")

    assert isinstance(seen[-1], kind)
    assert seen[-1].run_id == "r1"
    assert gaps(seen) > 0  # the gap before the terminal is still marked


@pytest.mark.parametrize("overflow", ["drop_newest", "drop_oldest"])
def test_every_run_terminal_survives_a_reader_that_reads_only_at_the_end(
    overflow: OverflowPolicy, subs: list[Subscription]
) -> None:
    sub = subscription(overflow)
    subs.append(sub)
    runs = [f"r{i}" for i in range(5)]
    feed(sub, [e for r in runs for e in run_events(r, 20)])

    for r in runs:
        seen = read_run(sub, r)
        assert isinstance(seen[-1], AgentEnd)
        assert seen[-1].run_id == r


def test_drop_newest_keeps_the_oldest_events_and_marks_the_gap_before_the_terminal(
    subs: list[Subscription],
) -> None:
    sub = subscription("drop_newest")
    subs.append(sub)
    feed(sub, run_events("r1", 10))

    seen = read_run(sub, "r1")

    assert [e.seq for e in seen if not isinstance(e, EventsDropped)] == [1, 2, 11]
    assert isinstance(seen[2], EventsDropped)
    assert seen[2].count == 8


@pytest.mark.parametrize("overflow", ["drop_newest", "drop_oldest"])
def test_a_gap_marker_carries_the_identity_of_the_event_it_comes_before(
    overflow: OverflowPolicy, subs: list[Subscription]
) -> None:
    sub = subscription(overflow)
    subs.append(sub)
    child = [ev("c1", i, CHILD) for i in range(1, 11)] + [end("c1", 11, agent=CHILD)]
    feed(sub, child)

    seen = read_run(sub, "c1")

    markers = [(i, e) for i, e in enumerate(seen) if isinstance(e, EventsDropped)]
    assert markers
    for i, marker in markers:
        after = seen[i + 1]
        assert (marker.agent, marker.run_id, marker.seq) == (CHILD, "c1", after.seq)


def test_drop_oldest_evicts_the_events_around_a_kept_terminal(subs: list[Subscription]) -> None:
    sub = subscription("drop_oldest")
    subs.append(sub)
    feed(sub, run_events("r1", 4) + run_events("r2", 4))

    first, second = read_run(sub, "r1"), read_run(sub, "r2")

    # r1's four events were all evicted (r2's pushed the last ones out); its terminal stays.
    assert [e.type for e in first] == ["events_dropped", "agent_end"]
    assert gaps(first) == 4
    # r2 keeps its newest two events, after a marker for the other two, then its terminal.
    assert [(e.type, e.seq) for e in second] == [
        ("events_dropped", 3),
        ("turn_start", 3),
        ("turn_start", 4),
        ("agent_end", 5),
    ]
    assert gaps(second) == 2


def test_a_subagent_terminal_is_kept_too(subs: list[Subscription]) -> None:
    sub = subscription("drop_newest")
    subs.append(sub)
    child = [ev("c1", i, CHILD) for i in range(1, 6)] + [end("c1", 6, agent=CHILD)]
    feed(sub, [ev("r1", 1), *child, ev("r1", 2), end("r1", 3)])

    seen = read_run(sub, "r1")

    ends = [(e.agent, e.run_id) for e in seen if is_terminal(e)]
    assert ends == [(CHILD, "c1"), (KEY, "r1")]


def test_push_async_of_a_terminal_into_a_full_subscription_keeps_it(
    subs: list[Subscription],
) -> None:
    # The path of a run whose driver is cancelled while the runtime stops.
    sub = subscription("drop_newest")
    subs.append(sub)
    feed(sub, [ev("r1", i) for i in range(1, 6)])

    assert sub.stream.push_async(end("r1", 6, Canceled))
    assert isinstance(read_run(sub, "r1")[-1], Canceled)


# -- block and error -------------------------------------------------------------------------


def test_block_accepts_a_terminal_on_a_full_buffer_without_waiting(
    subs: list[Subscription],
) -> None:
    sub = subscription("block", block_timeout=30.0)
    subs.append(sub)
    feed(sub, [ev("r1", 1), ev("r1", 2)])  # the buffer is full

    assert feed(sub, [end("r1", 3)], timeout=2.0) == [True]  # did not wait 30 s
    assert not sub.closed
    assert [e.seq for e in read_run(sub, "r1")] == [1, 2, 3]


def test_block_still_waits_for_space_for_ordinary_events(subs: list[Subscription]) -> None:
    sub = subscription("block", max_queue=1, block_timeout=0.05)
    subs.append(sub)

    assert feed(sub, [ev("r1", 1), end("r1", 2), ev("r2", 1)]) == [True, True, False]
    assert sub.closed  # the reader did not keep up with r2's events
    with pytest.raises(StreamOverflow):
        list(sub)


def test_a_block_subscription_closed_for_overflow_ends_until_end_with_stream_overflow(
    subs: list[Subscription],
) -> None:
    sub = subscription("block", max_queue=1, block_timeout=0.05)
    subs.append(sub)
    feed(sub, run_events("r1", 3))  # the second event times out: closed before the terminal

    with pytest.raises(StreamOverflow):
        read_run(sub, "r1")


def test_error_policy_accepts_a_terminal_on_a_full_buffer(subs: list[Subscription]) -> None:
    sub = subscription("error")
    subs.append(sub)

    assert feed(sub, [ev("r1", 1), ev("r1", 2), end("r1", 3)]) == [True, True, True]
    assert not sub.closed
    assert [e.seq for e in read_run(sub, "r1")] == [1, 2, 3]


# -- invariants ------------------------------------------------------------------------------

terminal_kinds = st.sampled_from([AgentEnd, Error, Canceled])


@settings(max_examples=60, deadline=None)
@given(
    overflow=st.sampled_from(["drop_newest", "drop_oldest"]),
    max_queue=st.integers(1, 4),
    runs=st.lists(st.tuples(st.integers(0, 8), terminal_kinds), min_size=1, max_size=6),
    read_after=st.sets(st.integers(0, 5)),
)
def test_every_terminal_arrives_in_order_and_every_gap_is_counted(
    overflow: OverflowPolicy,
    max_queue: int,
    runs: list[tuple[int, type[Terminal]]],
    read_after: set[int],
) -> None:
    sub = subscription(overflow, max_queue=max_queue)
    offered: list[Event] = []
    seen: list[Event] = []
    unread: list[str] = []
    try:
        for i, (n, kind) in enumerate(runs):
            events = run_events(f"r{i}", n, kind)
            offered += events
            feed(sub, events)
            unread.append(f"r{i}")
            if i in read_after:  # the reader catches up now and then
                for r in unread:
                    seen += read_run(sub, r)
                unread = []
        for r in unread:
            seen += read_run(sub, r)
    finally:
        sub.close()

    data = [e for e in seen if not isinstance(e, EventsDropped)]
    assert [e for e in data if is_terminal(e)] == [e for e in offered if is_terminal(e)]
    positions = [offered.index(e) for e in data]
    assert positions == sorted(positions)  # a FIFO subsequence of what was offered
    stats = sub.stream.stats()
    assert gaps(seen) == stats.dropped == len(offered) - len(data)


# -- the queue underneath --------------------------------------------------------------------


def test_eviction_skips_pinned_items_and_hands_the_gap_on() -> None:
    q: GapQueue[str] = GapQueue(pinned=lambda item: item.startswith("T"))
    for item in ["a", "T1", "b", "c"]:
        q.append(item)

    q.evict()  # "a": its gap goes to the pinned "T1"
    q.evict()  # "b": skips "T1", its gap goes to "c"

    assert q.held == 1
    assert [q.popleft() for _ in range(len(q))] == [(1, "T1"), (1, "c")]


def test_a_queue_of_pinned_items_only_has_nothing_to_evict() -> None:
    q: GapQueue[str] = GapQueue(pinned=lambda item: True)
    q.append("T1")

    with pytest.raises(IndexError):
        q.evict()
    assert (len(q), q.held, q.evicted) == (1, 0, 0)
