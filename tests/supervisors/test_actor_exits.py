"""How actors exit: exit reasons, monitors, kill, and BaseException isolation."""

from __future__ import annotations

import gc
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from agent_runtime.testing import wait_until
from supervisors import ExitReason, Monitor, SupervisedActor, exit_reason, kill, monitor, watch
from tests.gc_finalizers import FinalizerProbe, run_steps_on_a_thread
from tests.supervisors.conftest import Started
from tests.supervisors.helpers import (
    Raise,
    Recorder,
    Worker,
    live_ref,
    wait_for_restart,
    worker_spec,
)


class Calls:
    """A monitor callback that records every call and the thread it ran in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reasons: list[ExitReason] = []
        self.threads: list[int] = []

    def __call__(self, ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
        with self._lock:
            self.reasons.append(reason)
            self.threads.append(threading.get_ident())

    def count(self) -> int:
        with self._lock:
            return len(self.reasons)


def start_worker(recorder: Recorder, keep: list[Worker], **options: Any) -> pykka.ActorRef[Any]:
    return Worker.start("w", recorder, keep=keep, **options)


def wait_for_thread_end(recorder: Recorder) -> None:
    """`on_exit` runs after the monitors were told, as the actor's thread ends."""
    wait_until(lambda: recorder.count("exit", "w") == 1)


ExitPath = tuple[str, Callable[[pykka.ActorRef[Any]], object]]

EXIT_PATHS: dict[str, ExitPath] = {
    "stop": ("normal", lambda ref: ref.stop(block=True, timeout=5.0)),
    "exception in tell": ("crash", lambda ref: ref.tell(Raise(RuntimeError("boom")))),
    "SystemExit in tell": ("crash", lambda ref: ref.tell(Raise(SystemExit(2)))),
    "kill": ("killed", kill),
}


@pytest.mark.parametrize("path", list(EXIT_PATHS))
def test_monitor_is_called_exactly_once_with_the_kind_of_exit(
    started: Started, recorder: Recorder, path: str
) -> None:
    kind, make_exit = EXIT_PATHS[path]
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    calls = Calls()
    monitor(ref, calls)

    make_exit(ref)
    wait_for_thread_end(recorder)
    kill(ref)  # neither a late kill nor a second stop adds a call
    ref.stop(block=False)

    assert [r.kind for r in calls.reasons] == [kind]
    assert calls.reasons[0].abnormal is (kind != "normal")
    assert exit_reason(ref) == calls.reasons[0]


def test_an_on_start_failure_is_a_crash(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    calls = Calls()

    ref = start_worker(recorder, keep, fail_on_start=lambda: True)
    monitor(ref, calls)  # before or after the failure: called once either way
    wait_for_thread_end(recorder)

    assert [r.kind for r in calls.reasons] == ["crash"]
    assert isinstance(calls.reasons[0].exception, RuntimeError)
    assert "failed in on_start" in calls.reasons[0].detail


def test_monitor_of_an_already_dead_actor_is_called_at_once_in_the_callers_thread(
    started: Started, recorder: Recorder
) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    ref.tell(Raise(ValueError("bad")))
    wait_for_thread_end(recorder)
    calls = Calls()

    monitor(ref, calls)

    assert calls.threads == [threading.get_ident()]
    assert [r.kind for r in calls.reasons] == ["crash"]
    assert isinstance(calls.reasons[0].exception, ValueError)


def test_the_exit_reason_outlives_the_collected_actor(started: Started, recorder: Recorder) -> None:
    ref = Worker.start("w", recorder)
    ref.stop(block=True, timeout=5.0)
    wait_for_thread_end(recorder)

    def collected() -> bool:
        gc.collect()
        return ref._actor_weakref() is None

    wait_until(collected)
    calls = Calls()
    monitor(ref, calls)

    assert exit_reason(ref) == ExitReason("normal")
    assert [r.kind for r in calls.reasons] == ["normal"]


def test_a_cancelled_monitor_is_not_called(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    cancelled, kept = Calls(), Calls()
    monitor(ref, cancelled).cancel()
    monitor(ref, kept)

    kill(ref)

    assert kept.count() == 1
    assert cancelled.count() == 0


class Watcher(Monitor):
    """A monitor that is its own callback (`watch`): records what `exited` was told."""

    def __init__(self) -> None:
        super().__init__(None)
        self.calls = Calls()

    def exited(self, ref: pykka.ActorRef[Any], reason: ExitReason) -> None:
        self.calls(ref, reason)


@pytest.mark.parametrize("path", list(EXIT_PATHS))
def test_a_watching_monitor_subclass_hears_each_kind_of_exit_once(
    started: Started, recorder: Recorder, path: str
) -> None:
    kind, make_exit = EXIT_PATHS[path]
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    watcher = watch(ref, Watcher())

    make_exit(ref)
    wait_for_thread_end(recorder)
    kill(ref)
    ref.stop(block=False)

    assert [r.kind for r in watcher.calls.reasons] == [kind]


def test_a_watcher_of_a_dead_actor_hears_at_once_and_a_cancelled_one_never(
    started: Started, recorder: Recorder
) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    cancelled = watch(ref, Watcher())
    cancelled.cancel()
    kill(ref)

    late = watch(ref, Watcher())

    assert cancelled.calls.count() == 0
    assert late.calls.threads == [threading.get_ident()]
    assert [r.kind for r in late.calls.reasons] == ["killed"]


def test_a_subscription_watches_one_actor_at_a_time(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    first, second = start_worker(recorder, keep), Worker.start("v", recorder)
    watcher = watch(first, Watcher())

    with pytest.raises(ValueError, match="watches an actor already"):
        watch(second, watcher)
    kill(first)
    watch(second, watcher)  # heard of: free to watch another
    kill(second)

    assert [r.kind for r in watcher.calls.reasons] == ["killed", "killed"]


class _CancelsOnCollection:
    """Cyclic garbage whose finalizer cancels its monitor of another actor (as a forgotten
    stream's watchdog would)."""

    def __init__(self, other: pykka.ActorRef[Any]) -> None:
        self.me = self
        self.watch = monitor(other, lambda _ref, _reason: None)

    def __del__(self) -> None:
        self.watch.cancel()


@pytest.mark.parametrize("of_whom", ["another actor", "the exiting actor"])
def test_a_collection_during_an_exit_may_cancel_a_monitor(
    started: Started, recorder: Recorder, of_whom: str
) -> None:
    # A collection can start inside an actor's exit bookkeeping (an allocation there) and run
    # finalizers that cancel monitors: of another actor (with one lock for every actor, that
    # deadlocked), or of the very actor whose bookkeeping it interrupted.
    other = Worker.start("other", recorder)
    probe = FinalizerProbe()

    def exits() -> None:
        for young, middle, promotions in itertools.product(range(1, 5), range(1, 4), range(2)):
            exiting = Worker.start("w", recorder)
            monitor(exiting, lambda _ref, _reason: None)
            monitor(exiting, lambda _ref, _reason: None)
            gc.collect(1)  # the young generations: cheap
            watched = other if of_whom == "another actor" else exiting
            garbage: list[object] = [_CancelsOnCollection(watched)]
            with probe.collected_inside(garbage, young, promotions, middle):
                kill(exiting)

    run_steps_on_a_thread(exits, "an exit")
    kill(other)


def test_exit_reason_is_none_while_the_actor_runs(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)

    assert exit_reason(ref) is None
    ref.stop(block=True, timeout=5.0)
    wait_until(lambda: exit_reason(ref) is not None)


def test_kill_ends_the_actor_at_once_without_on_stop(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    calls = Calls()
    monitor(ref, calls)

    kill(ref, "test says so")

    assert not ref.is_alive()
    assert calls.threads == [threading.get_ident()]  # told before kill returned
    assert calls.reasons == [ExitReason("killed", "test says so")]
    wait_for_thread_end(recorder)
    assert recorder.count("stop", "w") == 0


def test_killing_a_stopped_actor_changes_nothing(started: Started, recorder: Recorder) -> None:
    keep: list[Worker] = []
    ref = start_worker(recorder, keep)
    ref.stop(block=True, timeout=5.0)
    wait_for_thread_end(recorder)

    kill(ref)

    assert exit_reason(ref) == ExitReason("normal")


def test_monitor_and_kill_refuse_a_plain_pykka_actor() -> None:
    ref = pykka.ThreadingActor.start()
    try:
        with pytest.raises(TypeError, match="SupervisedActor"):
            monitor(ref, Calls())
        with pytest.raises(TypeError, match="SupervisedActor"):
            kill(ref)
    finally:
        ref.stop()


def test_a_system_exit_in_a_handler_crashes_that_actor_only(
    started: Started, recorder: Recorder
) -> None:
    one = started.supervisor([worker_spec("a1", recorder), worker_spec("a2", recorder)])
    other = started.supervisor([worker_spec("b1", recorder), worker_spec("b2", recorder)])
    a1, a2 = live_ref(one, "a1"), live_ref(one, "a2")
    bystanders = [live_ref(other, "b1"), live_ref(other, "b2")]

    a1.tell(Raise(SystemExit("handler asked the process to exit")))
    wait_for_restart(one, "a1", a1)

    reason = exit_reason(a1)
    assert reason is not None and reason.kind == "crash"
    assert isinstance(reason.exception, SystemExit)
    assert live_ref(one, "a2") is a2  # one_for_one: the sibling is untouched
    assert other.alive and one.alive
    assert [live_ref(other, n) for n in ("b1", "b2")] == bystanders
    assert all(ref.is_alive() for ref in bystanders)
    assert recorder.events("stop") == []  # pykka's default would have stopped every actor


class _Token:
    """Something a message carries, that the test can watch being freed."""


class _Holder(SupervisedActor):
    def on_receive(self, message: Any) -> Any:
        if isinstance(message, dict) and "fail" in message:
            raise ValueError("the handler failed")
        return _Token()  # the reply, too, is the caller's alone once it was handed over


def test_an_idle_actor_keeps_nothing_of_the_messages_it_handled() -> None:
    # An idle actor must not keep its last message (and its reply) alive while it waits for
    # the next: an idle agent would keep its last run's subscription, events and facts.
    ref = _Holder.start()
    try:
        told, asked, failed = _Token(), _Token(), _Token()
        seen = [weakref.ref(told), weakref.ref(asked), weakref.ref(failed)]
        ref.tell({"token": told})
        reply = weakref.ref(ref.ask({"token": asked}, timeout=5))
        with pytest.raises(ValueError, match="the handler failed"):
            ref.ask({"token": failed, "fail": True}, timeout=5)
        del told, asked, failed

        def freed() -> bool:  # a reply is handed over just before its handling call returns
            gc.collect()
            return [w() for w in [*seen, reply]] == [None] * 4

        wait_until(freed, timeout=5, what="what the actor's messages carried was freed")
        assert ref.is_alive()
    finally:
        ref.stop()
