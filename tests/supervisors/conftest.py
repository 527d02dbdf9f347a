"""Fixtures: a shared event recorder, gates that always open, and supervisors that always stop."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from supervisors import (
    AsyncTaskSupervisor,
    ChildSpec,
    DynamicSupervisor,
    SupervisedActor,
    Supervisor,
    TaskSupervisor,
    kill,
)
from tests.supervisors.helpers import Recorder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


# Teardown never waits longer than this for one supervisor to stop.
STOP_TIMEOUT = 10.0


class Gates:
    """threading.Events for blocking workers; every one is set when the test ends."""

    def __init__(self) -> None:
        self._gates: list[threading.Event] = []

    def new(self) -> threading.Event:
        gate = threading.Event()
        self._gates.append(gate)
        return gate

    def open_all(self) -> None:
        for gate in self._gates:
            gate.set()


@pytest.fixture
def gates() -> Iterator[Gates]:
    g = Gates()
    yield g
    g.open_all()


class Started:
    """Starts supervisors for a test and remembers them so that teardown stops every one."""

    def __init__(self) -> None:
        self._stoppers: list[Any] = []

    def supervisor(self, children: list[ChildSpec], **options: Any) -> Supervisor:
        sup = Supervisor.start(children, **options)
        self._stoppers.append(lambda: sup.stop(timeout=STOP_TIMEOUT))
        return sup

    def dynamic(self, **options: Any) -> DynamicSupervisor:
        dyn = DynamicSupervisor.start(**options)
        self._stoppers.append(lambda: dyn.stop(timeout=STOP_TIMEOUT))
        return dyn

    def tasks(self, **options: Any) -> TaskSupervisor:
        tasks = TaskSupervisor.start(**options)
        self._stoppers.append(lambda: tasks.stop(timeout=1.0))
        return tasks

    def aio(self, **options: Any) -> AsyncTaskSupervisor:
        aio = AsyncTaskSupervisor.start(**options)
        self._stoppers.append(lambda: aio.stop(timeout=1.0))
        return aio

    def stop_all(self) -> None:
        for stop in reversed(self._stoppers):
            with contextlib.suppress(Exception):
                stop()


@pytest.fixture
def started(gates: Gates) -> Iterator[Started]:
    """Stops, at the end of the test, every supervisor it started and any actor left over."""
    before = {ref.actor_urn for ref in pykka.ActorRegistry.get_all()}
    s = Started()
    yield s
    gates.open_all()  # release blocked workers first so that stopping does not wait on them
    s.stop_all()
    for ref in pykka.ActorRegistry.get_all():
        if ref.actor_urn in before:
            continue
        if issubclass(ref.actor_class, SupervisedActor):
            kill(ref, "test teardown")
        else:
            ref.stop(block=False)
