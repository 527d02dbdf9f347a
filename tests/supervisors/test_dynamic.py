"""DynamicSupervisor: children started on demand, each restarted alone by its restart type."""

from __future__ import annotations

import pytest

from agent_runtime.testing import wait_until
from supervisors import MaxChildrenReached, exit_reason, kill
from tests.supervisors.conftest import Started
from tests.supervisors.helpers import FakeClock, Raise, Recorder, worker_spec


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
