"""Restart intensity: giving up, the inclusive window, escalation, and a model-based property."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pykka
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agent_runtime.testing import wait_until
from supervisors import ChildSpec, Supervisor, SupervisorStopped, exit_reason, kill, monitor
from tests.supervisors.conftest import Started
from tests.supervisors.helpers import (
    FakeClock,
    Recorder,
    Worker,
    child_ids,
    live_ref,
    wait_for_restart,
    worker_spec,
)


def assert_gave_up(sup: Supervisor) -> None:
    wait_until(lambda: not sup.alive, what="supervisor gave up")
    reason = exit_reason(sup.ref)
    assert reason is not None and reason.abnormal
    assert "reached_max_restart_intensity" in reason.detail


def test_more_than_max_restarts_within_max_seconds_stops_all_children_and_exits_abnormally(
    started: Started, recorder: Recorder
) -> None:
    clock = FakeClock()
    specs = [worker_spec(name, recorder) for name in "abc"]
    sup = started.supervisor(specs, max_restarts=2, max_seconds=5, clock=clock)
    for _ in range(2):
        b = live_ref(sup, "b")
        kill(b)
        wait_for_restart(sup, "b", b)
        clock.advance(1)
    a, b, c = (live_ref(sup, name) for name in "abc")
    mark = recorder.mark()

    kill(b)

    assert_gave_up(sup)
    assert recorder.events("start", "stop", since=mark) == [("stop", "c"), ("stop", "a")]
    assert not a.is_alive() and not c.is_alive()


def test_a_supervisor_that_gives_up_reports_its_exit_only_once_its_children_are_gone(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor([worker_spec(n, recorder) for n in "abc"], max_restarts=0)
    a, b, c = (live_ref(sup, name) for name in "abc")
    seen_alive: list[list[bool]] = []
    monitor(sup.ref, lambda _ref, _reason: seen_alive.append([a.is_alive(), c.is_alive()]))

    kill(b)

    assert_gave_up(sup)
    wait_until(lambda: len(seen_alive) == 1)
    assert seen_alive == [[False, False]]


def test_max_restarts_zero_gives_up_at_the_first_crash(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor([worker_spec("a", recorder)], max_restarts=0)

    kill(live_ref(sup, "a"))

    assert_gave_up(sup)
    assert recorder.count("start", "a") == 1


def test_restarts_further_apart_than_max_seconds_never_add_up(
    started: Started, recorder: Recorder
) -> None:
    clock = FakeClock()
    sup = started.supervisor(
        [worker_spec("a", recorder)], max_restarts=1, max_seconds=5, clock=clock
    )

    for _ in range(6):
        a = live_ref(sup, "a")
        kill(a)
        wait_for_restart(sup, "a", a)
        clock.advance(5.5)

    assert sup.alive
    assert recorder.count("start", "a") == 7


@pytest.mark.parametrize(("elapsed", "gives_up"), [(5.0, True), (5.5, False)])
def test_a_restart_exactly_max_seconds_ago_still_counts(
    started: Started, recorder: Recorder, elapsed: float, gives_up: bool
) -> None:
    clock = FakeClock()
    sup = started.supervisor(
        [worker_spec("a", recorder)], max_restarts=1, max_seconds=5, clock=clock
    )
    a = live_ref(sup, "a")
    kill(a)
    wait_for_restart(sup, "a", a)
    clock.advance(elapsed)

    a = live_ref(sup, "a")
    kill(a)

    if gives_up:
        assert_gave_up(sup)
    else:
        wait_for_restart(sup, "a", a)
        assert sup.alive


def test_a_transient_child_stopping_normally_does_not_count_as_a_restart(
    started: Started, recorder: Recorder
) -> None:
    sup = started.supervisor(
        [worker_spec("t", recorder, restart="transient"), worker_spec("p", recorder)],
        max_restarts=0,
    )

    live_ref(sup, "t").stop()
    wait_until(lambda: sup.which_children()[0].ref is None)

    assert sup.alive
    assert live_ref(sup, "p").is_alive()


# -- escalation -------------------------------------------------------------------------------


def supervisor_spec(
    child_id: str, children: list[ChildSpec], handles: list[Supervisor], **options: Any
) -> ChildSpec:
    """A ChildSpec for a nested Supervisor; each started handle is appended to `handles`."""

    def start() -> pykka.ActorRef[Any]:
        handle = Supervisor.start(children, **options)
        handles.append(handle)
        return handle.ref

    return ChildSpec(id=child_id, start=start, type="supervisor")


def test_a_child_supervisor_that_gives_up_is_restarted_by_its_parent_as_a_crash(
    started: Started, recorder: Recorder
) -> None:
    inners: list[Supervisor] = []
    inner = supervisor_spec("inner", [worker_spec("w", recorder)], inners, max_restarts=0)
    top = started.supervisor([inner, worker_spec("t", recorder)], max_restarts=3)
    t = live_ref(top, "t")

    kill(live_ref(inners[0], "w"))

    wait_for_restart(top, "inner", inners[0].ref)
    reason = exit_reason(inners[0].ref)
    assert reason is not None and reason.kind == "crash"
    assert recorder.count("start", "w") == 2
    assert live_ref(inners[1], "w").is_alive()
    assert live_ref(top, "t") is t  # one_for_one: the sibling was left alone


def test_giving_up_escalates_through_two_levels_and_the_whole_tree_goes_down(
    started: Started, recorder: Recorder
) -> None:
    leaves: list[Supervisor] = []
    mids: list[Supervisor] = []
    leaf = supervisor_spec("leaf", [worker_spec("w", recorder)], leaves, max_restarts=0)
    mid = supervisor_spec("mid", [worker_spec("m", recorder), leaf], mids, max_restarts=0)
    top = started.supervisor([worker_spec("t", recorder), mid], max_restarts=0)
    workers = [live_ref(top, "t"), live_ref(mids[0], "m"), live_ref(leaves[0], "w")]

    kill(workers[2])

    assert_gave_up(top)
    for sup in (mids[0], leaves[0]):
        assert not sup.alive
        reason = exit_reason(sup.ref)
        assert reason is not None and reason.abnormal
    assert not any(ref.is_alive() for ref in workers)
    assert (len(leaves), len(mids)) == (1, 1)  # nothing was restarted on the way up
    assert recorder.events("stop") == [("stop", "m"), ("stop", "t")]


# -- property: the supervisor behaves as a model of OTP ---------------------------------------

STRATEGIES = ["one_for_one", "one_for_all", "rest_for_one"]
RESTARTS = ["permanent", "transient", "temporary"]


@dataclass
class Scenario:
    strategy: str
    restarts: list[str]
    max_restarts: int
    max_seconds: int
    crashes: list[tuple[int, int]]  # (child index, seconds to advance the clock first)

    @property
    def ids(self) -> list[str]:
        return [f"c{i}" for i in range(len(self.restarts))]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    n = draw(st.integers(min_value=3, max_value=4))
    return Scenario(
        strategy=draw(st.sampled_from(STRATEGIES)),
        restarts=draw(st.lists(st.sampled_from(RESTARTS), min_size=n, max_size=n)),
        max_restarts=draw(st.integers(min_value=0, max_value=4)),
        max_seconds=draw(st.integers(min_value=1, max_value=4)),
        crashes=draw(
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 3)), min_size=1, max_size=12)
        ),
    )


@dataclass
class OtpModel:
    """What OTP's supervisor does when children crash (abnormal exits only)."""

    scenario: Scenario
    present: list[str] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)
    restart_times: list[float] = field(default_factory=list)
    gave_up: bool = False

    def __post_init__(self) -> None:
        self.present = list(self.scenario.ids)
        self.starts = dict.fromkeys(self.present, 1)

    def restart_type(self, child: str) -> str:
        return self.scenario.restarts[self.scenario.ids.index(child)]

    def crash(self, child: str, now: float) -> None:
        if self.restart_type(child) == "temporary":  # never restarted, never counted
            self.present.remove(child)
            return
        window = self.scenario.max_seconds
        self.restart_times = [t for t in [*self.restart_times, now] if t >= now - window]
        if len(self.restart_times) > self.scenario.max_restarts:
            self.gave_up = True
            return
        if self.scenario.strategy == "one_for_one":
            group = [child]
        elif self.scenario.strategy == "one_for_all":
            group = list(self.present)
        else:
            group = self.present[self.present.index(child) :]
        for other in group:
            if other != child and self.restart_type(other) == "temporary":
                self.present.remove(other)
            else:
                self.starts[other] += 1


class StartCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.starts: dict[str, int] = {}
        self.refs: list[pykka.ActorRef[Any]] = []

    def spec(self, child_id: str, restart: str, recorder: Recorder) -> ChildSpec:
        def start() -> pykka.ActorRef[Any]:
            ref = Worker.start(child_id, recorder)
            with self._lock:
                self.starts[child_id] = self.starts.get(child_id, 0) + 1
                self.refs.append(ref)
            return ref

        return ChildSpec.model_validate({"id": child_id, "start": start, "restart": restart})


@settings(max_examples=40, deadline=None)
@given(scenario=scenarios())
def test_crashes_restart_and_give_up_exactly_as_otp_would(scenario: Scenario) -> None:
    counter = StartCounter()
    recorder = Recorder()
    specs = [
        counter.spec(child_id, restart, recorder)
        for child_id, restart in zip(scenario.ids, scenario.restarts, strict=True)
    ]
    clock = FakeClock()
    sup = Supervisor.start(
        specs,
        strategy=scenario.strategy,  # type: ignore[arg-type]
        max_restarts=scenario.max_restarts,
        max_seconds=scenario.max_seconds,
        clock=clock,
    )
    model = OtpModel(scenario)
    try:
        for index, advance in scenario.crashes:
            clock.advance(advance)
            child = scenario.ids[index]
            if child not in model.present:
                continue  # a temporary child that is gone: nothing to crash
            ref = live_ref(sup, child)

            kill(ref)  # the supervisor is told before kill returns
            model.crash(child, clock.now)

            if model.gave_up:
                assert_gave_up(sup)
                with pytest.raises(SupervisorStopped):
                    sup.which_children()
                assert not any(r.is_alive() for r in counter.refs)
                break
            infos = sup.which_children()  # answered after the crash was handled
            assert [info.id for info in infos] == model.present
            assert all(info.alive for info in infos)
            assert counter.starts == model.starts
        else:
            assert sup.alive
            assert child_ids(sup) == model.present
    finally:
        sup.stop(timeout=10.0)
    event("gave up" if model.gave_up else "kept going")
