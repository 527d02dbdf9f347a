"""The debug-mode watchdog: in asyncio's debug mode, an actor handler or a task step holding the
loop for more than STEP_BUDGET of CPU is logged, named; outside debug mode nothing is timed."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from supervisors import AsyncioActor, AsyncTaskSupervisor
from supervisors._step_watch import STEP_BUDGET

WATCHDOG = "supervisors._step_watch"


def burn(seconds: float) -> None:
    """Hold the CPU (not merely the clock) for `seconds`."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Burner(AsyncioActor):
    def on_receive(self, message: object) -> object:
        if message == "slow":
            burn(STEP_BUDGET * 5)
        return message


def slow_steps(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == WATCHDOG]


@pytest.fixture
def loop_tasks() -> Iterator[AsyncTaskSupervisor]:
    tasks = AsyncTaskSupervisor.start(name="watched")
    try:
        yield tasks
    finally:
        tasks.stop()


def set_debug(tasks: AsyncTaskSupervisor, debug: bool) -> None:
    async def on_the_loop() -> None:
        asyncio.get_running_loop().set_debug(debug)

    tasks.submit(on_the_loop()).result(5)


def run_actor(tasks: AsyncTaskSupervisor, debug: bool, message: str) -> None:
    set_debug(tasks, debug)
    ref = tasks.submit(_start(Burner, tasks.loop)).result(5)
    try:
        assert ref.ask(message, timeout=5) == message
    finally:
        ref.stop(timeout=5)


async def _start(cls: type[Burner], loop: asyncio.AbstractEventLoop) -> object:
    return cls.start(loop=loop)


def test_a_slow_handler_in_debug_mode_is_logged_naming_its_actor_and_message(
    loop_tasks: AsyncTaskSupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=WATCHDOG):
        run_actor(loop_tasks, True, "slow")
    (line,) = slow_steps(caplog)
    assert line.startswith("loop.step.slow") and "step='Burner:str'" in line
    cpu_ms = float(line.split("cpu_ms=")[1].split()[0])
    assert cpu_ms >= STEP_BUDGET * 1000 * 4


def test_a_fast_handler_in_debug_mode_is_not_logged(
    loop_tasks: AsyncTaskSupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=WATCHDOG):
        run_actor(loop_tasks, True, "fast")
    assert slow_steps(caplog) == []


def test_outside_debug_mode_nothing_is_timed(
    loop_tasks: AsyncTaskSupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger=WATCHDOG):
        run_actor(loop_tasks, False, "slow")
    assert slow_steps(caplog) == []


async def slow_then_fast_task() -> str:
    await asyncio.sleep(0)
    burn(STEP_BUDGET * 5)  # this step is slow
    await asyncio.sleep(0)
    return "done"  # this one is not


def test_a_slow_step_of_a_task_in_debug_mode_is_logged_once_naming_its_coroutine(
    loop_tasks: AsyncTaskSupervisor, caplog: pytest.LogCaptureFixture
) -> None:
    set_debug(loop_tasks, True)
    with caplog.at_level(logging.WARNING, logger=WATCHDOG):
        assert loop_tasks.submit(slow_then_fast_task()).result(5) == "done"
    (line,) = slow_steps(caplog)
    assert "step='slow_then_fast_task'" in line
