"""Supervisor: start and stop order, strategies, restart types, shutdown times, bad input."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import pykka
import pytest

from agent_runtime.testing import wait_until
from supervisors import (
    ChildSpec,
    ChildStartError,
    DynamicSupervisor,
    Supervisor,
    SupervisorStopped,
    exit_reason,
    kill,
    supervisor_of,
)
from tests.supervisors.conftest import Gates, Started
from tests.supervisors.helpers import (
    Block,
    Recorder,
    child_ids,
    live_ref,
    make_exit,
    ref_of,
    wait_for_restart,
    worker_spec,
)

EXITS = ["stop", "crash", "kill"]


def abc(recorder: Recorder, **options: Any) -> list[ChildSpec]:
    return [worker_spec(name, recorder, **options) for name in "abc"]


def registered() -> set[str]:
    return {ref.actor_urn for ref in pykka.ActorRegistry.get_all()}


# -- order ------------------------------------------------------------------------------------


def test_children_start_in_list_order(started: Started, recorder: Recorder) -> None:
    started.supervisor(abc(recorder))

    assert recorder.events("start") == [("start", "a"), ("start", "b"), ("start", "c")]


def test_stop_stops_children_in_reverse_order(started: Started, recorder: Recorder) -> None:
    sup = started.supervisor(abc(recorder))
    refs = [live_ref(sup, name) for name in "abc"]

    sup.stop()

    assert recorder.events("stop") == [("stop", "c"), ("stop", "b"), ("stop", "a")]
    assert not sup.alive
    assert not any(ref.is_alive() for ref in refs)


def test_stopping_a_tree_stops_each_subtree_in_reverse_order(
    started: Started, recorder: Recorder
) -> None:
    inner = ChildSpec(
        id="inner",
        start=lambda: (
            Supervisor.start([worker_spec("x", recorder), worker_spec("y", recorder)]).ref
        ),
        type="supervisor",
    )
    sup = started.supervisor([worker_spec("a", recorder), inner, worker_spec("b", recorder)])

    sup.stop()

    assert recorder.events("start") == [("start", n) for n in ("a", "x", "y", "b")]
    assert recorder.events("stop") == [("stop", n) for n in ("b", "y", "x", "a")]


# -- strategies -------------------------------------------------------------------------------


def restarts_after(recorder: Recorder, mark: int, exited: str) -> list[tuple[str, str]]:
    """Starts and stops since `mark`, without the exiting child's own on_stop."""
    return [e for e in recorder.events("start", "stop", since=mark) if e != ("stop", exited)]


@pytest.mark.parametrize("how", EXITS)
def test_one_for_one_restarts_only_the_exited_child(
    started: Started, recorder: Recorder, how: str
) -> None:
    sup = started.supervisor(abc(recorder), strategy="one_for_one")
    a, b, c = (live_ref(sup, name) for name in "abc")
    mark = recorder.mark()

    make_exit(b, how)
    wait_for_restart(sup, "b", b)

    assert restarts_after(recorder, mark, "b") == [("start", "b")]
    assert ref_of(sup, "a") is a and a.is_alive()
    assert ref_of(sup, "c") is c and c.is_alive()


@pytest.mark.parametrize("how", EXITS)
def test_one_for_all_stops_the_others_in_reverse_then_restarts_all_in_order(
    started: Started, recorder: Recorder, how: str
) -> None:
    sup = started.supervisor(abc(recorder), strategy="one_for_all")
    a, b, c = (live_ref(sup, name) for name in "abc")
    mark = recorder.mark()

    make_exit(b, how)
    wait_for_restart(sup, "b", b)

    assert restarts_after(recorder, mark, "b") == [
        ("stop", "c"),
        ("stop", "a"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]
    assert not a.is_alive() and not c.is_alive()
    assert all(info.alive for info in sup.which_children())


@pytest.mark.parametrize("how", EXITS)
def test_rest_for_one_restarts_the_exited_child_and_those_after_it(
    started: Started, recorder: Recorder, how: str
) -> None:
    sup = started.supervisor(abc(recorder), strategy="rest_for_one")
    a, b, c = (live_ref(sup, name) for name in "abc")
    mark = recorder.mark()

    make_exit(b, how)
    wait_for_restart(sup, "b", b)

    assert restarts_after(recorder, mark, "b") == [("stop", "c"), ("start", "b"), ("start", "c")]
    assert ref_of(sup, "a") is a and a.is_alive()
    assert not c.is_alive() and live_ref(sup, "c") is not c


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
def test_temporary_siblings_stopped_by_the_strategy_are_removed_not_restarted(
    started: Started, recorder: Recorder, strategy: str
) -> None:
    specs = [
        worker_spec("a", recorder),
        worker_spec("b", recorder),
        worker_spec("t", recorder, restart="temporary"),
    ]
    sup = started.supervisor(specs, strategy=strategy)
    b = live_ref(sup, "b")

    kill(b)
    wait_for_restart(sup, "b", b)

    assert child_ids(sup) == ["a", "b"]
    assert recorder.count("start", "t") == 1


# -- restart types ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", EXITS)
def test_permanent_child_is_restarted_whatever_its_exit(
    started: Started, recorder: Recorder, how: str
) -> None:
    sup = started.supervisor([worker_spec("a", recorder, restart="permanent")])
    a = live_ref(sup, "a")

    make_exit(a, how)
    wait_for_restart(sup, "a", a)

    assert recorder.count("start", "a") == 2


@pytest.mark.parametrize(("how", "restarted"), [("stop", False), ("crash", True), ("kill", True)])
def test_transient_child_is_restarted_only_after_an_abnormal_exit(
    started: Started, recorder: Recorder, how: str, restarted: bool
) -> None:
    sup = started.supervisor(
        [worker_spec("a", recorder, restart="transient"), worker_spec("b", recorder)]
    )
    a = live_ref(sup, "a")

    make_exit(a, how)
    if restarted:
        wait_for_restart(sup, "a", a)
        assert recorder.count("start", "a") == 2
    else:
        # The exit was handled when the ref is cleared; a restart would have replaced it.
        wait_until(lambda: ref_of(sup, "a") is None)
        info = sup.which_children()[0]
        assert (info.id, info.alive) == ("a", False)
        assert recorder.count("start", "a") == 1


@pytest.mark.parametrize("how", EXITS)
def test_temporary_child_is_never_restarted_and_is_removed(
    started: Started, recorder: Recorder, how: str
) -> None:
    sup = started.supervisor(
        [worker_spec("a", recorder, restart="temporary"), worker_spec("b", recorder)]
    )
    b = live_ref(sup, "b")

    make_exit(live_ref(sup, "a"), how)
    wait_until(lambda: child_ids(sup) == ["b"])

    assert recorder.count("start", "a") == 1
    assert live_ref(sup, "b") is b


@pytest.mark.parametrize("handshake", [True, False], ids=["start-waits", "start-returns-early"])
def test_an_on_start_failure_during_a_restart_counts_as_a_crash(
    started: Started, recorder: Recorder, handshake: bool
) -> None:
    starts = itertools.count()
    spec = worker_spec("a", recorder, handshake=handshake, fail_on_start=lambda: next(starts) >= 1)
    # One crash plus one failed restart is two restarts: more than max_restarts=1.
    sup = started.supervisor([spec, worker_spec("b", recorder)], max_restarts=1, max_seconds=60)
    b = live_ref(sup, "b")

    kill(live_ref(sup, "a"))

    wait_until(lambda: not sup.alive)
    reason = exit_reason(sup.ref)
    assert reason is not None and reason.abnormal
    assert recorder.count("start", "a") == 2
    assert not b.is_alive()


@pytest.mark.parametrize("handshake", [True, False], ids=["start-waits", "start-returns-early"])
def test_a_child_whose_restart_fails_in_on_start_is_restarted_again(
    started: Started, recorder: Recorder, handshake: bool
) -> None:
    starts = itertools.count()
    spec = worker_spec("a", recorder, handshake=handshake, fail_on_start=lambda: next(starts) == 1)
    sup = started.supervisor([spec], max_restarts=5, max_seconds=60)
    a = live_ref(sup, "a")

    kill(a)

    wait_until(lambda: recorder.count("start", "a") == 3)
    wait_until(lambda: (info := sup.which_children()[0]).ref is not None and info.alive)
    assert sup.alive


# -- shutdown ---------------------------------------------------------------------------------


@pytest.mark.timing
def test_a_child_that_does_not_stop_within_its_shutdown_is_killed_and_abandoned(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    shutdown = 0.3
    slow = worker_spec("slow", recorder, shutdown=shutdown, stop_gate=gates.new())
    sup = started.supervisor([worker_spec("a", recorder), slow])
    slow_ref = live_ref(sup, "slow")

    began = time.monotonic()
    sup.stop()
    elapsed = time.monotonic() - began

    assert shutdown <= elapsed < shutdown + 2.0
    assert recorder.events("stop") == [("stop", "slow"), ("stop", "a")]
    assert recorder.count("stopped", "slow") == 0  # still blocked: abandoned, not waited for
    reason = exit_reason(slow_ref)
    assert reason is not None and reason.kind == "killed"


@pytest.mark.timing
def test_brutal_kill_does_not_wait_for_the_child(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    busy = worker_spec("busy", recorder, shutdown="brutal_kill", stop_gate=gates.new())
    sup = started.supervisor([busy])
    busy_ref = live_ref(sup, "busy")
    busy_ref.tell(Block(gates.new()))  # a normal stop would wait behind this handler

    began = time.monotonic()
    sup.stop()
    elapsed = time.monotonic() - began

    assert elapsed < 1.0
    reason = exit_reason(busy_ref)
    assert reason is not None and reason.kind == "killed"
    assert recorder.count("stop", "busy") == 0  # on_stop is not called


def test_infinity_shutdown_waits_until_the_child_has_stopped(
    started: Started, recorder: Recorder, gates: Gates
) -> None:
    gate = gates.new()
    sup = started.supervisor([worker_spec("slow", recorder, shutdown="infinity", stop_gate=gate)])
    slow_ref = live_ref(sup, "slow")

    def open_once_stopping() -> None:
        wait_until(lambda: recorder.count("stop", "slow") == 1)
        gate.set()

    opener = threading.Thread(target=open_once_stopping, daemon=True)
    opener.start()
    sup.stop(timeout=10.0)
    opener.join(timeout=5.0)

    assert recorder.count("stopped", "slow") == 1
    reason = exit_reason(slow_ref)
    assert reason is not None and reason.kind == "normal"


# -- start failures ---------------------------------------------------------------------------


def failing_spec(child_id: str) -> ChildSpec:
    def start() -> pykka.ActorRef[Any]:
        raise OSError("no such device")

    return ChildSpec(id=child_id, start=start)


def test_a_child_that_fails_to_start_fails_start_and_stops_those_before_it_in_reverse(
    started: Started, recorder: Recorder
) -> None:
    before = registered()
    specs = [
        worker_spec("a", recorder),
        worker_spec("b", recorder),
        failing_spec("c"),
        worker_spec("d", recorder),
    ]

    with pytest.raises(ChildStartError, match="'c'") as caught:
        started.supervisor(specs)

    assert caught.value.child_id == "c"
    assert "OSError" in str(caught.value)
    assert recorder.events("start", "stop") == [
        ("start", "a"),
        ("start", "b"),
        ("stop", "b"),
        ("stop", "a"),
    ]
    assert registered() == before  # neither children nor the supervisor are left running


def test_a_start_function_returning_a_plain_pykka_actor_is_a_start_error(
    started: Started,
) -> None:
    plain: list[pykka.ActorRef[Any]] = []

    def start() -> pykka.ActorRef[Any]:
        plain.append(pykka.ThreadingActor.start())
        return plain[0]

    with pytest.raises(ChildStartError, match="SupervisedActor") as caught:
        started.supervisor([ChildSpec(id="plain", start=start)])

    assert caught.value.child_id == "plain"
    wait_until(lambda: not plain[0].is_alive())


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"strategy": "one_for_none"}, "strategy 'one_for_none'"),
        ({"max_restarts": -1}, "max_restarts -1"),
        ({"max_seconds": 0}, "max_seconds 0"),
        ({"max_seconds": -2.5}, r"max_seconds -2\.5"),
    ],
)
def test_bad_supervisor_options_are_value_errors_naming_field_and_value(
    started: Started, recorder: Recorder, options: dict[str, Any], message: str
) -> None:
    before = registered()

    with pytest.raises(ValueError, match=message):
        started.supervisor(abc(recorder), **options)

    assert registered() == before
    assert recorder.events() == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("restart", "sometimes", "restart type 'sometimes'"),
        ("type", "manager", "child type 'manager'"),
        ("shutdown", -1, "shutdown -1"),
        ("shutdown", "never", "shutdown 'never'"),
    ],
)
def test_bad_child_spec_fields_are_value_errors_naming_field_and_value(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ChildSpec.model_validate({"id": "a", "start": lambda: None, field: value})


def test_duplicate_child_ids_are_a_value_error_and_nothing_starts(
    started: Started, recorder: Recorder
) -> None:
    before = registered()
    specs = [worker_spec("a", recorder), worker_spec("b", recorder), worker_spec("a", recorder)]

    with pytest.raises(ValueError, match="duplicate child id 'a'"):
        started.supervisor(specs)

    assert registered() == before
    assert recorder.events() == []


# -- managing children ------------------------------------------------------------------------


def test_start_child_appends_a_running_child_and_rejects_a_duplicate_id(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor([worker_spec("a", recorder)])

    ref = sup.start_child(worker_spec("b", recorder))

    assert ref.is_alive()
    assert child_ids(sup) == ["a", "b"]
    with pytest.raises(ValueError, match="duplicate child id 'b'"):
        sup.start_child(worker_spec("b", recorder))
    assert recorder.count("start", "b") == 1


def test_terminate_child_stops_it_for_good_and_restart_child_starts_it_again(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor(abc(recorder))
    b = live_ref(sup, "b")

    sup.terminate_child("b")

    assert not b.is_alive()
    assert ref_of(sup, "b") is None
    assert recorder.count("start", "b") == 1
    new_b = sup.restart_child("b")
    assert new_b.is_alive() and ref_of(sup, "b") is new_b
    with pytest.raises(RuntimeError, match="running"):
        sup.restart_child("b")


def test_terminating_a_temporary_child_deletes_its_spec(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor([worker_spec("t", recorder, restart="temporary")])

    sup.terminate_child("t")

    assert child_ids(sup) == []


def test_delete_child_forgets_a_terminated_child_and_refuses_a_running_one(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor(abc(recorder))

    with pytest.raises(RuntimeError, match="running"):
        sup.delete_child("a")
    sup.terminate_child("a")
    sup.delete_child("a")

    assert child_ids(sup) == ["b", "c"]
    with pytest.raises(KeyError, match="'a'"):
        sup.delete_child("a")


def test_count_children_counts_specs_running_children_and_types(
    started: Started, recorder: Recorder
) -> None:
    inner = ChildSpec(
        id="inner",
        start=lambda: Supervisor.start([worker_spec("x", recorder)]).ref,
        type="supervisor",
    )
    sup = started.supervisor([worker_spec("a", recorder), worker_spec("b", recorder), inner])
    sup.terminate_child("b")

    counts = sup.count_children()

    assert (counts.specs, counts.active, counts.supervisors, counts.workers) == (3, 2, 1, 2)


def test_calls_to_a_stopped_supervisor_raise_supervisor_stopped(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor(abc(recorder))
    sup.stop()

    with pytest.raises(SupervisorStopped):
        sup.which_children()
    sup.stop()  # stopping again is a no-op


def test_supervisor_of_finds_the_handle_behind_a_supervisor_ref(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor([worker_spec("a", recorder)])
    dyn = started.dynamic()

    found, found_dynamic = supervisor_of(sup.ref), supervisor_of(dyn.ref)

    assert isinstance(found, Supervisor) and found.ref is sup.ref
    assert child_ids(found) == ["a"]
    assert isinstance(found_dynamic, DynamicSupervisor) and found_dynamic.ref is dyn.ref
    assert supervisor_of(live_ref(sup, "a")) is None


# -- start waits for on_start (OTP start_link) ------------------------------------------------


def test_each_child_finishes_on_start_before_the_next_starts(
    started: Started, recorder: Recorder
) -> None:
    specs = [worker_spec(c, recorder, handshake=False) for c in ("a", "b", "c")]
    started.supervisor(specs)
    assert [who for _, who in recorder.events("start")] == ["a", "b", "c"]


def test_an_on_start_failure_at_start_fails_supervisor_start_naming_the_child(
    started: Started, recorder: Recorder
) -> None:
    specs = [
        worker_spec("a", recorder, handshake=False),
        worker_spec("b", recorder, handshake=False, fail_on_start=lambda: True),
    ]
    with pytest.raises(ChildStartError) as info:
        started.supervisor(specs)
    assert info.value.child_id == "b"
    assert "on_start failed" in str(info.value)
    wait_until(lambda: recorder.count("stop", "a") == 1)
