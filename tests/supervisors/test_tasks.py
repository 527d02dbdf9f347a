"""TaskSupervisor: a bounded thread pool whose task failures stay in their futures."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import pytest

from agent_runtime.testing import wait_until
from supervisors import TaskSupervisor, kill
from tests.supervisors.conftest import Gates, Started
from tests.supervisors.helpers import GATE_TIMEOUT


class Concurrency:
    """Counts tasks running at once and the peak; tasks block on `gate` until it opens."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate
        self._lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def task(self, value: int) -> int:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            self.gate.wait(timeout=GATE_TIMEOUT)
            return value
        finally:
            with self._lock:
                self.running -= 1


def refuses_tasks(tasks: TaskSupervisor) -> bool:
    try:
        tasks.submit(int)
    except RuntimeError:
        return True
    return False


def test_tasks_run_concurrently_up_to_max_workers_and_never_more(
    started: Started, gates: Gates
) -> None:
    tasks = started.tasks(max_workers=3)
    measure = Concurrency(gates.new())

    futures = [tasks.submit(measure.task, i) for i in range(8)]

    wait_until(lambda: measure.running == 3)
    assert tasks.active() == 8  # three running, five queued behind them
    measure.gate.set()
    assert [f.result(timeout=5.0) for f in futures] == list(range(8))
    assert measure.peak == 3
    wait_until(lambda: tasks.active() == 0)


def test_tasks_on_different_workers_really_run_at_the_same_time(started: Started) -> None:
    tasks = started.tasks(max_workers=3)
    barrier = threading.Barrier(3, timeout=5.0)  # breaks unless all three wait at once

    futures = [tasks.submit(barrier.wait) for _ in range(3)]

    assert sorted(f.result(timeout=10.0) for f in futures) == [0, 1, 2]


@pytest.mark.parametrize("error", [ValueError("bad input"), SystemExit(3)])
def test_a_task_exception_stays_in_its_future_and_other_tasks_are_unaffected(
    started: Started, error: BaseException
) -> None:
    tasks = started.tasks(max_workers=2)

    def fail() -> None:
        raise error

    failed = tasks.submit(fail)
    others = [tasks.submit(pow, 2, n) for n in range(5)]

    assert failed.exception(timeout=5.0) is error
    assert [f.result(timeout=5.0) for f in others] == [1, 2, 4, 8, 16]
    assert tasks.alive
    assert tasks.submit(str.upper, "still works").result(timeout=5.0) == "STILL WORKS"


@pytest.mark.timing
def test_stop_cancels_queued_tasks_and_abandons_running_ones_after_its_timeout(
    started: Started, gates: Gates
) -> None:
    tasks = started.tasks(max_workers=1)
    gate = gates.new()
    running_started = threading.Event()

    def blocking() -> str:
        running_started.set()
        gate.wait(timeout=GATE_TIMEOUT)
        return "finished late"

    running = tasks.submit(blocking)
    queued = tasks.submit(str, "never runs")
    assert running_started.wait(timeout=5.0)

    began = time.monotonic()
    finished = tasks.stop(timeout=0.3)
    elapsed = time.monotonic() - began

    assert finished is False
    assert 0.3 <= elapsed < 0.3 + 2.0
    assert queued.cancelled()
    with pytest.raises(CancelledError):
        queued.result(timeout=0)
    assert not running.done()  # abandoned, not interrupted
    gate.set()
    assert running.result(timeout=5.0) == "finished late"
    assert not tasks.alive


def test_stop_waits_for_running_tasks_that_finish_within_its_timeout(
    started: Started, gates: Gates
) -> None:
    tasks = started.tasks(max_workers=2)
    gate = gates.new()
    measure = Concurrency(gate)
    futures = [tasks.submit(measure.task, n) for n in range(2)]
    wait_until(lambda: measure.running == 2)

    def open_once_stopping() -> None:
        wait_until(lambda: refuses_tasks(tasks))
        gate.set()

    opener = threading.Thread(target=open_once_stopping, daemon=True)
    opener.start()
    finished = tasks.stop(timeout=5.0)
    opener.join(timeout=5.0)

    assert finished is True
    assert all(f.done() for f in futures)
    assert [f.result() for f in futures] == [0, 1]


def test_submit_after_stop_raises(started: Started) -> None:
    tasks = started.tasks()
    tasks.stop()

    with pytest.raises(RuntimeError, match="stopped"):
        tasks.submit(print, "too late")
    assert not tasks.alive


def test_killing_the_owning_actor_stops_the_pool(started: Started) -> None:
    tasks = started.tasks()

    kill(tasks.ref)

    wait_until(lambda: refuses_tasks(tasks))


@pytest.mark.parametrize("max_workers", [0, -2])
def test_max_workers_below_one_is_a_value_error(max_workers: int) -> None:
    with pytest.raises(ValueError, match=f"max_workers {max_workers}"):
        TaskSupervisor.start(max_workers=max_workers)
