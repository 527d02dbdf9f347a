"""DynamicSupervisor: children started on demand, each restarted alone by its restart type."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from agent_runtime.testing import wait_until
from supervisors import (
    ChildSpec,
    DynamicSupervisor,
    MaxChildrenReached,
    SupervisorStopped,
    exit_reason,
    kill,
)
from tests.supervisors.conftest import Gates, Started
from tests.supervisors.helpers import GATE_TIMEOUT, FakeClock, Raise, Recorder, worker_spec


def test_start_child_runs_the_child_and_lists_it(started: Started, recorder: Recorder) -> None:
    dyn = started.dynamic()

    a = dyn.start_child(worker_spec("a", recorder))
    b = dyn.start_child(worker_spec("b", recorder, restart="temporary"))

    assert a.is_alive() and b.is_alive()
    infos = dyn.which_children()
    assert [(i.id, i.ref, i.restart, i.alive) for i in infos] == [
        ("a", a, "permanent", True),
        ("b", b, "temporary", True),
    ]


def test_child_ids_need_not_be_unique(started: Started, recorder: Recorder) -> None:
    dyn = started.dynamic()

    first = dyn.start_child(worker_spec("agent", recorder))
    second = dyn.start_child(worker_spec("agent", recorder))

    assert first is not second
    assert [i.ref for i in dyn.which_children()] == [first, second]


def test_count_children_counts_specs_running_children_and_types(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic()
    for name in "abc":
        dyn.start_child(worker_spec(name, recorder))

    counts = dyn.count_children()

    assert (counts.specs, counts.active, counts.supervisors, counts.workers) == (3, 3, 0, 3)


def test_terminate_child_stops_and_forgets_the_child(started: Started, recorder: Recorder) -> None:
    dyn = started.dynamic()
    a = dyn.start_child(worker_spec("a", recorder))
    b = dyn.start_child(worker_spec("b", recorder))

    assert dyn.terminate_child(a) is True

    assert not a.is_alive()
    assert recorder.count("stop", "a") == 1
    assert [i.ref for i in dyn.which_children()] == [b]
    assert dyn.terminate_child(a) is False  # no longer a child


def test_max_children_refuses_one_more_child_until_one_is_terminated(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic(max_children=2)
    a = dyn.start_child(worker_spec("a", recorder))
    dyn.start_child(worker_spec("b", recorder))

    with pytest.raises(MaxChildrenReached) as caught:
        dyn.start_child(worker_spec("c", recorder))

    assert caught.value.max_children == 2
    assert recorder.count("start", "c") == 0
    dyn.terminate_child(a)
    assert dyn.start_child(worker_spec("c", recorder)).is_alive()


def test_permanent_child_is_restarted_alone_after_a_crash(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic()
    a = dyn.start_child(worker_spec("a", recorder))
    b = dyn.start_child(worker_spec("b", recorder))

    a.tell(Raise(RuntimeError("boom")))

    def restarted() -> bool:
        refs = [i.ref for i in dyn.which_children()]
        return len(refs) == 2 and refs[0] not in (None, a) and refs[0].is_alive()

    wait_until(restarted)
    assert recorder.count("start", "a") == 2
    assert dyn.which_children()[1].ref is b and b.is_alive()


@pytest.mark.parametrize("how", ["crash", "kill"])
def test_temporary_child_is_not_restarted_and_is_removed(
    started: Started, recorder: Recorder, how: str
) -> None:
    dyn = started.dynamic()
    t = dyn.start_child(worker_spec("t", recorder, restart="temporary"))

    if how == "crash":
        t.tell(Raise(RuntimeError("boom")))
    else:
        kill(t)

    wait_until(lambda: dyn.which_children() == [])
    assert recorder.count("start", "t") == 1


def test_transient_child_that_exits_normally_is_removed_and_frees_its_slot(
    started: Started, recorder: Recorder
) -> None:
    # OTP's DynamicSupervisor deletes every child it will not restart.
    dyn = started.dynamic(max_children=1)
    t = dyn.start_child(worker_spec("t", recorder, restart="transient"))

    t.stop()

    wait_until(lambda: dyn.which_children() == [])
    assert dyn.start_child(worker_spec("u", recorder)).is_alive()
    assert recorder.count("start", "t") == 1


def test_stop_stops_children_in_reverse_start_order(started: Started, recorder: Recorder) -> None:
    dyn = started.dynamic()
    refs = [dyn.start_child(worker_spec(name, recorder)) for name in "abc"]

    dyn.stop()

    assert recorder.events("stop") == [("stop", "c"), ("stop", "b"), ("stop", "a")]
    assert not dyn.alive and not any(ref.is_alive() for ref in refs)


def test_more_than_max_restarts_within_max_seconds_stops_every_child_and_exits_abnormally(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic(max_restarts=1, max_seconds=5, clock=FakeClock())
    bystander = dyn.start_child(worker_spec("bystander", recorder))
    crasher = dyn.start_child(worker_spec("crasher", recorder))

    kill(crasher)
    restarted = dyn.which_children()[1].ref  # the crash was handled before this answer
    assert restarted is not None and restarted is not crasher
    kill(restarted)

    wait_until(lambda: not dyn.alive)
    reason = exit_reason(dyn.ref)
    assert reason is not None and reason.abnormal
    assert not bystander.is_alive()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_children": -1}, "max_children -1"),
        ({"max_restarts": -1}, "max_restarts -1"),
        ({"max_seconds": 0}, "max_seconds 0"),
    ],
)
def test_bad_options_are_value_errors_naming_field_and_value(
    started: Started, options: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        started.dynamic(**options)


# -- temporary children: started and stopped on the caller's thread ---------------------------


def hold(dyn: DynamicSupervisor, gate: threading.Event) -> None:
    """Keep the supervisor's thread in a call until `gate` opens; returns once it is held."""
    arrived = threading.Event()

    def held() -> None:
        arrived.set()
        gate.wait(GATE_TIMEOUT)

    threading.Thread(target=lambda: dyn._call(held, timeout=None), daemon=True).start()
    assert arrived.wait(5)


@pytest.mark.timing
def test_a_temporary_child_starts_and_stops_while_its_supervisor_is_busy(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    dyn = started.dynamic()
    gate = gates.new()
    hold(dyn, gate)
    began = time.monotonic()
    t = dyn.start_child(worker_spec("t", recorder, restart="temporary"))
    assert t.is_alive()
    assert dyn.terminate_child(t) is True
    assert time.monotonic() - began < 5  # the supervisor is held for up to GATE_TIMEOUT
    assert not t.is_alive() and recorder.count("stop", "t") == 1
    gate.set()
    assert dyn.which_children() == []
    assert dyn.terminate_child(t) is False  # no longer a child


def test_max_children_counts_temporary_children_at_once_and_frees_a_crashed_ones_slot(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic(max_children=1)
    a = dyn.start_child(worker_spec("a", recorder, restart="temporary"))
    with pytest.raises(MaxChildrenReached):
        dyn.start_child(worker_spec("b", recorder, restart="temporary"))
    with pytest.raises(MaxChildrenReached):
        dyn.start_child(worker_spec("p", recorder))  # a restartable one counts the same
    kill(a)
    wait_until(lambda: dyn.which_children() == [])
    b = dyn.start_child(worker_spec("b", recorder, restart="temporary"))
    assert b.is_alive() and [i.ref for i in dyn.which_children()] == [b]
    assert dyn.terminate_child(b) is True
    assert dyn.start_child(worker_spec("p", recorder)).is_alive()


def test_a_temporary_childs_crash_frees_its_slot_while_its_supervisor_is_busy(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    # Its own monitor frees the slot: the supervisor's thread never hears of the crash.
    dyn = started.dynamic(max_children=1)
    gate = gates.new()
    hold(dyn, gate)
    t = dyn.start_child(worker_spec("t", recorder, restart="temporary"))
    t.tell(Raise(RuntimeError("boom")))
    wait_until(lambda: not t.is_alive(), what="the child crashed")
    u = dyn.start_child(worker_spec("u", recorder, restart="temporary"))
    assert u.is_alive()
    gate.set()
    assert [i.ref for i in dyn.which_children()] == [u]


def test_temporary_and_restartable_children_are_listed_and_stopped_in_start_order(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic()
    names = ["p1", "t1", "p2", "t2"]
    refs = [
        dyn.start_child(
            worker_spec(n, recorder, restart="temporary" if n[0] == "t" else "permanent")
        )
        for n in names
    ]

    assert [i.id for i in dyn.which_children()] == names
    assert dyn.count_children().active == 4
    dyn.stop()

    assert recorder.events("stop") == [("stop", n) for n in reversed(names)]
    assert not any(ref.is_alive() for ref in refs)


def test_a_supervisor_that_dies_stops_the_temporary_children_its_callers_started(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    dyn = started.dynamic()
    gate = gates.new()
    hold(dyn, gate)
    t = dyn.start_child(worker_spec("t", recorder, restart="temporary"))
    kill(dyn.ref)
    gate.set()
    wait_until(lambda: not t.is_alive(), what="the child stopped with its supervisor")
    assert recorder.count("stop", "t") == 1


def test_a_killed_supervisor_whose_thread_is_busy_refuses_temporary_children_at_once(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    # Its end (which stops its children) comes only when the busy handler returns.
    dyn = started.dynamic()
    gate = gates.new()
    hold(dyn, gate)
    kill(dyn.ref)
    with pytest.raises(SupervisorStopped):
        dyn.start_child(worker_spec("late", recorder, restart="temporary"))
    assert recorder.count("start", "late") == 0
    gate.set()


def held_start(
    recorder: Recorder, gates: Gates, *, handshake: bool
) -> tuple[ChildSpec, threading.Event, threading.Event]:
    """A temporary child "t" whose `on_start` waits for the gate; `starting` is set once it
    waits."""
    gate, starting = gates.new(), threading.Event()

    def slow_start() -> bool:
        starting.set()
        gate.wait(GATE_TIMEOUT)
        return False

    spec = worker_spec(
        "t", recorder, restart="temporary", handshake=handshake, fail_on_start=slow_start
    )
    return spec, gate, starting


def test_a_temporary_child_is_listed_once_its_start_is_over(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    dyn = started.dynamic()
    # No handshake: the start function returns at once, `on_start` is waited for after it.
    spec, gate, starting = held_start(recorder, gates, handshake=False)
    refs: list[Any] = []
    starter = threading.Thread(target=lambda: refs.append(dyn.start_child(spec)))
    starter.start()
    assert starting.wait(5)
    assert dyn.which_children() == [] and dyn.count_children().specs == 0
    gate.set()
    starter.join(10)
    assert [i.ref for i in dyn.which_children()] == refs


@pytest.mark.parametrize("handshake", [True, False])  # on_start inside the start, or after it
def test_a_supervisor_stopping_during_a_temporary_childs_start_waits_for_it_then_stops_it(
    started: Started, recorder: Recorder, gates: Gates, handshake: bool
) -> None:
    dyn = started.dynamic()
    spec, gate, starting = held_start(recorder, gates, handshake=handshake)
    outcome: list[BaseException] = []

    def start() -> None:
        try:
            dyn.start_child(spec)
        except BaseException as exc:
            outcome.append(exc)

    starter = threading.Thread(target=start)
    starter.start()
    assert starting.wait(5)
    stopper = threading.Thread(target=lambda: dyn.stop(timeout=10))
    stopper.start()
    wait_until(lambda: dyn._actor().roster.closed, what="the supervisor is stopping")
    assert stopper.is_alive()  # it waits for the start in flight
    gate.set()
    stopper.join(10)
    starter.join(10)
    assert not stopper.is_alive() and not dyn.alive
    assert len(outcome) == 1 and isinstance(outcome[0], SupervisorStopped), outcome
    assert recorder.count("start", "t") == 1 and recorder.count("stop", "t") == 1
    with pytest.raises(SupervisorStopped):
        dyn.start_child(worker_spec("u", recorder, restart="temporary"))


def terminate_twice_at_once(dyn: DynamicSupervisor, ref: Any) -> list[bool]:
    """What two threads' `terminate_child(ref)` at the same moment return."""
    barrier = threading.Barrier(2)
    results: list[bool] = []

    def terminate() -> None:
        barrier.wait(5)
        results.append(dyn.terminate_child(ref))

    racers = [threading.Thread(target=terminate) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(10)
    return results


def test_concurrent_terminations_of_one_child_free_its_slot_once(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic(max_children=1)
    for round_number in range(20):
        t = dyn.start_child(worker_spec(f"t{round_number}", recorder, restart="temporary"))
        assert sorted(terminate_twice_at_once(dyn, t)) == [False, True]
        assert dyn._actor().roster.count == 0
    dyn.start_child(worker_spec("last", recorder, restart="temporary"))
    with pytest.raises(MaxChildrenReached):
        dyn.start_child(worker_spec("one too many", recorder, restart="temporary"))


def test_terminating_a_child_that_already_crashed_returns_false_and_frees_its_slot(
    started: Started, recorder: Recorder
) -> None:
    dyn = started.dynamic(max_children=1)
    t = dyn.start_child(worker_spec("t", recorder, restart="temporary"))
    kill(t)
    assert dyn.terminate_child(t) is False
    wait_until(lambda: dyn._actor().roster.count == 0, what="the crashed child's slot is free")
    assert dyn.start_child(worker_spec("u", recorder, restart="temporary")).is_alive()
