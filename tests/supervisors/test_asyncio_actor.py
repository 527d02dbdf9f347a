"""AsyncioActor: a pykka actor handled on an asyncio loop, supervisable like a thread actor."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import threading
import time
from collections.abc import Awaitable, Iterator
from typing import Any

import pykka
import pytest

from agent_runtime.testing import wait_until
from supervisors import (
    AsyncioActor,
    AsyncTaskSupervisor,
    ChildSpec,
    DynamicSupervisor,
    ExitReason,
    LoopFuture,
    Supervisor,
    exit_reason,
    kill,
    monitor,
)
from tests.gc_finalizers import FinalizerProbe, run_steps_on_a_thread


class Worker(AsyncioActor):
    """Records what it handles and on which thread; "boom" raises, "async" returns a coroutine."""

    def __init__(self, log: list[Any] | None = None) -> None:
        super().__init__()
        self.log = log if log is not None else []

    def on_start(self) -> None:
        self.log.append(("started", threading.current_thread().name))

    def on_stop(self) -> None:
        self.log.append(("stopped", threading.current_thread().name))

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom")
        if message == "async":
            return asyncio.sleep(0)
        self.log.append(message)
        return message, threading.current_thread().name


class FailsToStart(AsyncioActor):
    def on_start(self) -> None:
        raise RuntimeError("no start")


class Unlisted(Worker):
    use_actor_registry = False


@pytest.fixture
def aio() -> Iterator[AsyncTaskSupervisor]:
    tasks = AsyncTaskSupervisor.start(name="actor-loop")
    yield tasks
    tasks.stop(2.0)


def on_loop(aio: AsyncTaskSupervisor, coro: Awaitable[Any]) -> Any:
    async def run() -> Any:
        return await coro

    return aio.submit(run()).result(5.0)


def test_handlers_run_in_order_on_the_loop_thread_and_no_thread_is_made(
    aio: AsyncTaskSupervisor,
) -> None:
    threads = threading.active_count()
    log: list[Any] = []
    refs = [Worker.start(log, loop=aio.loop) for _ in range(500)]
    ref = refs[0]
    for i in range(100):
        ref.tell(i)
    assert ref.ask("last") == ("last", "actor-loop")
    assert [m for m in log if isinstance(m, int)] == list(range(100))
    starts = [m for m in log if isinstance(m, tuple) and m[0] == "started"]
    assert starts == [("started", "actor-loop")] * 500
    assert threading.active_count() == threads  # 500 actors, not one thread more
    for r in refs:
        r.stop()
    assert not any(r.is_alive() for r in refs)


def test_ask_blocks_only_a_foreign_thread_and_is_awaited_on_the_loop(
    aio: AsyncTaskSupervisor,
) -> None:
    ref = Worker.start(loop=aio.loop)

    async def ask_on_loop() -> tuple[Any, str]:
        future = ref.ask("hello", block=False)
        assert isinstance(future, LoopFuture)
        with pytest.raises(RuntimeError, match="await future"):
            future.get()  # would block the loop that is to answer it
        answer = await future
        return answer, "ok"

    assert on_loop(aio, ask_on_loop()) == (("hello", "actor-loop"), "ok")
    with pytest.raises(RuntimeError, match="await future"):
        on_loop(aio, _blocking_ask(ref))
    ref.stop()


async def _blocking_ask(ref: pykka.ActorRef[Any]) -> Any:
    return ref.ask("blocking")


def test_a_future_settled_already_can_be_read_on_the_loop(aio: AsyncTaskSupervisor) -> None:
    future: LoopFuture[int] = LoopFuture()
    future.set(7)

    async def read() -> int:
        return future.get()

    assert on_loop(aio, read()) == 7


@pytest.mark.timing
def test_a_foreign_get_times_out(aio: AsyncTaskSupervisor) -> None:
    future: LoopFuture[int] = LoopFuture()
    started = time.monotonic()
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0.05)
    assert time.monotonic() - started < 2.0


def test_start_on_the_loop_runs_on_start_before_returning(aio: AsyncTaskSupervisor) -> None:
    log: list[Any] = []

    async def start() -> bool:
        ref = Worker.start(log)  # the running loop
        started = bool(log)
        await ref.ask("x", block=False)
        ref.stop(block=False)
        return started

    assert on_loop(aio, start()) is True


def test_start_without_a_loop_is_refused() -> None:
    with pytest.raises(RuntimeError, match="needs an event loop"):
        Worker.start()


def test_an_async_handler_is_refused(aio: AsyncTaskSupervisor) -> None:
    ref = Worker.start(loop=aio.loop)
    with pytest.raises(TypeError, match="synchronous"):
        ref.ask("async")
    assert ref.is_alive()  # an ask's error goes to the caller
    ref.tell("async")  # a tell's crashes the actor
    wait_until(lambda: not ref.is_alive(), 5.0)
    reason = exit_reason(ref)
    assert reason is not None and reason.kind == "crash" and "TypeError" in str(reason)


def test_exit_reasons_reach_monitors(aio: AsyncTaskSupervisor) -> None:
    heard: list[ExitReason] = []
    crashed = Worker.start(loop=aio.loop)
    stopped = Worker.start(loop=aio.loop)
    killed = Worker.start(loop=aio.loop)
    for ref in (crashed, stopped, killed):
        monitor(ref, lambda _ref, reason: heard.append(reason))
    crashed.tell("boom")
    stopped.stop()
    kill(killed, "on purpose")
    wait_until(lambda: len(heard) == 3, 5.0)
    assert sorted(r.kind for r in heard) == ["crash", "killed", "normal"]
    reason = exit_reason(crashed)
    assert reason is not None and "ValueError: boom" in str(reason)
    late: list[ExitReason] = []
    monitor(killed, lambda _ref, reason: late.append(reason))  # dead: heard at once
    assert [r.kind for r in late] == ["killed"]


def test_a_failed_on_start_is_a_crash(aio: AsyncTaskSupervisor) -> None:
    ref = FailsToStart.start(loop=aio.loop)
    wait_until(lambda: exit_reason(ref) is not None, 5.0)
    reason = exit_reason(ref)
    assert reason is not None and reason.kind == "crash" and "no start" in str(reason)


def test_messages_left_in_the_inbox_of_a_stopped_actor_fail(aio: AsyncTaskSupervisor) -> None:
    ref = Worker.start(loop=aio.loop)

    async def stop_with_mail() -> list[str]:
        futures = [ref.ask(i, block=False) for i in range(3)]
        actor = ref._actor_weakref()
        assert isinstance(actor, AsyncioActor)
        actor.stop_now()
        outcomes = []
        for future in futures:
            try:
                await future
                outcomes.append("answered")
            except pykka.ActorDeadError:
                outcomes.append("dead")
        return outcomes

    assert on_loop(aio, stop_with_mail()) == ["dead", "dead", "dead"]
    assert exit_reason(ref) == ExitReason("normal")


def test_handle_now_answers_after_earlier_mail(aio: AsyncTaskSupervisor) -> None:
    log: list[Any] = []
    ref = Worker.start(log, loop=aio.loop)

    async def call() -> Any:
        ref.tell("first")
        actor = ref._actor_weakref()
        assert isinstance(actor, AsyncioActor)
        return actor.handle_now("second")

    assert on_loop(aio, call()) == ("second", "actor-loop")
    assert log[-2:] == ["first", "second"]
    actor = ref._actor_weakref()
    assert isinstance(actor, AsyncioActor)
    with pytest.raises(RuntimeError, match="event-loop thread"):
        actor.handle_now("off the loop")
    ref.stop()


def test_a_long_mailbox_does_not_hold_the_loop(aio: AsyncTaskSupervisor) -> None:
    ref = Worker.start(loop=aio.loop)
    ticks: list[int] = []

    async def race() -> int:
        done = False

        async def ticker() -> None:
            while not done:
                ticks.append(len(ticks))
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        for i in range(2_000):
            ref.tell(i)
        answer = await ref.ask("end", block=False)
        done = True
        await task
        return len(ticks) if answer else 0

    assert on_loop(aio, race()) > 10  # the ticker ran between drains of the 2,000 messages
    ref.stop()


def test_a_closed_loop_ends_the_actor() -> None:
    loop = asyncio.new_event_loop()
    ref = Worker.start(loop=loop)
    loop.close()
    heard: list[ExitReason] = []
    monitor(ref, lambda _ref, reason: heard.append(reason))
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("anyone?")
        ref.tell("anyone?")  # the first put finds the loop closed
    assert [r.kind for r in heard] == ["crash"]


def test_unlisted_actors_stay_out_of_the_registry(aio: AsyncTaskSupervisor) -> None:
    ref = Unlisted.start(loop=aio.loop)
    listed = Worker.start(loop=aio.loop)
    urns = {r.actor_urn for r in pykka.ActorRegistry.get_all()}
    assert ref.actor_urn not in urns and listed.actor_urn in urns
    ref.stop()
    listed.stop()


def test_a_supervisor_restarts_a_crashed_asyncio_child(aio: AsyncTaskSupervisor) -> None:
    sup = Supervisor.start(
        [ChildSpec("worker", lambda: Worker.start(loop=aio.loop), restart="permanent")]
    )
    try:
        (first,) = sup.which_children()
        assert first.ref is not None
        first.ref.tell("boom")
        wait_until(lambda: _child_ref(sup) not in (None, first.ref), 5.0)
        ref = _child_ref(sup)
        assert ref is not None and ref.ask("alive?", block=True)[0] == "alive?"
        kill(ref, "again")
        wait_until(lambda: _child_ref(sup) not in (None, ref), 5.0)
    finally:
        sup.stop(timeout=5.0)


def _child_ref(sup: Supervisor) -> pykka.ActorRef[Any] | None:
    (child,) = sup.which_children()
    return child.ref if child.alive else None


def test_restart_intensity_gives_up_on_asyncio_children(aio: AsyncTaskSupervisor) -> None:
    sup = Supervisor.start(
        [ChildSpec("worker", lambda: Worker.start(loop=aio.loop), restart="permanent")],
        max_restarts=2,
        max_seconds=30.0,
    )
    for _ in range(3):
        ref = _wait_child(sup)
        if ref is None:
            break
        ref.tell("boom")
        wait_until(lambda r=ref: not r.is_alive(), 5.0)  # type: ignore[misc]
    wait_until(lambda: not sup.alive, 5.0)
    reason = exit_reason(sup.ref)
    assert reason is not None and "reached_max_restart_intensity" in str(reason)


def _wait_child(sup: Supervisor) -> pykka.ActorRef[Any] | None:
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        if not sup.alive:
            return None
        try:
            ref = _child_ref(sup)
        except Exception:
            return None
        if ref is not None:
            return ref
        time.sleep(0.01)
    return None


def test_a_dynamic_supervisor_starts_and_stops_asyncio_children_on_the_loop(
    aio: AsyncTaskSupervisor,
) -> None:
    dyn = DynamicSupervisor.start(max_children=10)
    log: list[Any] = []
    try:

        async def start_and_stop() -> tuple[bool, bool]:
            # On the loop: the start runs on_start inline, the stop never waits for a message.
            ref = dyn.start_child(ChildSpec("w", lambda: Worker.start(log), restart="temporary"))
            started = ("started", "actor-loop") in log
            stopped = dyn.terminate_child(ref)
            return started and stopped, ref.is_alive()

        assert on_loop(aio, start_and_stop()) == (True, False)
        assert ("stopped", "actor-loop") in log
        ref = dyn.start_child(
            ChildSpec("w", lambda: Worker.start(log, loop=aio.loop), restart="temporary")
        )
        assert dyn.count_children().active == 1
        ref.tell("boom")  # temporary: not restarted, its slot freed
        wait_until(lambda: dyn.count_children().active == 0, 5.0)
    finally:
        dyn.stop(timeout=5.0)


def test_terminate_temporary_stops_a_child_in_place_and_leaves_others_to_terminate_child(
    aio: AsyncTaskSupervisor,
) -> None:
    dyn = DynamicSupervisor.start()
    log: list[Any] = []
    try:
        permanent = ChildSpec("p", lambda: Worker.start(loop=aio.loop), restart="permanent")
        kept = dyn.start_child(permanent)  # started by the supervisor's thread

        async def on_the_loop() -> list[Any]:
            temp = ChildSpec("t", lambda: Worker.start(log), restart="temporary")
            ref = dyn.start_child(temp)
            stopped = dyn.terminate_temporary(ref)
            alive_after = ref.is_alive()  # in place: stopped before the call returned
            again = dyn.terminate_temporary(ref)  # no longer a child
            other = dyn.terminate_temporary(kept)  # not a caller's temporary child
            return [stopped, alive_after, again, other, kept.is_alive()]

        assert on_loop(aio, on_the_loop()) == [True, False, None, None, True]
        assert ("stopped", "actor-loop") in log
        assert dyn.count_children().active == 1
    finally:
        dyn.stop(timeout=5.0)


def test_a_supervisor_on_the_loop_supervises_asyncio_children_without_a_thread(
    aio: AsyncTaskSupervisor,
) -> None:
    threads = threading.active_count()
    log: list[Any] = []
    spec = ChildSpec("worker", lambda: Worker.start(log, loop=aio.loop), restart="transient")
    sup = Supervisor.start([spec], max_restarts=1, max_seconds=30.0, loop=aio.loop)
    assert threading.active_count() == threads
    first = _wait_child(sup)
    assert first is not None
    first.tell("boom")  # transient, abnormal: restarted
    wait_until(lambda: _child_ref(sup) not in (None, first), 5.0)
    second = _child_ref(sup)
    assert second is not None
    second.tell("boom")  # a second restart within 30 s: past max_restarts=1, it gives up
    wait_until(lambda: not sup.alive, 5.0)
    reason = exit_reason(sup.ref)
    assert reason is not None and "reached_max_restart_intensity" in str(reason)


def test_a_supervisor_on_the_loop_is_started_and_stopped_from_the_loop(
    aio: AsyncTaskSupervisor,
) -> None:
    log: list[Any] = []

    async def lifecycle() -> tuple[bool, bool]:
        spec = ChildSpec("worker", lambda: Worker.start(log), restart="permanent")
        sup = Supervisor.start([spec], loop=asyncio.get_running_loop())
        (child,) = sup.which_children()  # a call on its own loop: answered at once
        assert child.ref is not None
        alive = child.ref.is_alive()
        sup.stop()  # never waits for the loop it runs on
        return alive, child.ref.is_alive()

    assert on_loop(aio, lifecycle()) == (True, False)
    assert log[0] == ("started", "actor-loop") and log[-1] == ("stopped", "actor-loop")


class Named(AsyncioActor):
    """Logs its name when it stops, with the thread that stopped it."""

    def __init__(self, name: str, log: list[Any]) -> None:
        super().__init__()
        self.name, self.log = name, log

    def on_stop(self) -> None:
        self.log.append((self.name, threading.current_thread().name))


def test_a_dynamic_supervisors_end_stops_many_asyncio_children_last_started_first(
    aio: AsyncTaskSupervisor,
) -> None:
    dyn = DynamicSupervisor.start()
    log: list[Any] = []
    names = [f"c{i}" for i in range(60)]
    for i, name in enumerate(names):
        restart = "permanent" if i % 7 == 0 else "temporary"  # started by it or by the caller

        def start(name: str = name) -> pykka.ActorRef[Any]:
            return Named.start(name, log, loop=aio.loop)

        dyn.start_child(ChildSpec(name, start, restart=restart))
    dyn.stop(timeout=10.0)
    assert log == [(name, "actor-loop") for name in reversed(names)]


@pytest.mark.timing
def test_asyncio_children_of_a_stuck_loop_are_killed_within_their_shutdown(
    aio: AsyncTaskSupervisor,
) -> None:
    dyn = DynamicSupervisor.start()
    refs = [
        dyn.start_child(
            ChildSpec(f"c{i}", lambda: Worker.start(loop=aio.loop), "temporary", shutdown=0.2)
        )
        for i in range(3)
    ]
    unblocked = threading.Event()
    aio.loop.call_soon_threadsafe(unblocked.wait, 10.0)  # the loop is stuck until set
    try:
        started = time.monotonic()
        dyn.stop(timeout=10.0)
        took = time.monotonic() - started
        assert all(not ref.is_alive() for ref in refs)
        assert [exit_reason(ref).kind for ref in refs] == ["killed"] * 3  # type: ignore[union-attr]
        assert took < 3.0, took  # the batch's 0.2 s, then 0.2 s each: not the stuck loop's 10 s
    finally:
        unblocked.set()


def test_asyncio_children_handle_what_their_inbox_held_before_a_supervisors_end_stops_them(
    aio: AsyncTaskSupervisor,
) -> None:
    dyn = DynamicSupervisor.start()
    logs: list[list[Any]] = [[], [], []]
    refs = [
        dyn.start_child(
            ChildSpec(f"c{i}", lambda log=log: Worker.start(log, loop=aio.loop), "temporary")
        )
        for i, log in enumerate(logs)
    ]
    unblocked = threading.Event()
    aio.loop.call_soon_threadsafe(unblocked.wait, 10.0)  # mail piles up while the loop waits
    for ref in refs:  # more than one drain's budget: some is still queued when the stop comes
        for n in range(150):
            ref.tell(n)
    stopper = threading.Thread(target=dyn.stop, kwargs={"timeout": 10.0})
    stopper.start()

    def stop_queued() -> bool:  # the loop is held: its ready queue only grows meanwhile
        ready = list(aio.loop._ready)  # type: ignore[attr-defined]
        return any(getattr(h._callback, "__name__", "") == "stop_all" for h in ready)

    wait_until(stop_queued, 5.0)  # queued behind the first drains, before the rest of the mail
    unblocked.set()
    stopper.join(10.0)
    for log in logs:  # all its mail, then its stop: a stop message's place in the inbox
        assert log[1:] == [*range(150), ("stopped", "actor-loop")]


class _TouchesOnCollection:
    """Cyclic garbage whose finalizer tells a fresh actor and settles a future someone
    awaits (as a forgotten subscription's finalizer tells its agent)."""

    def __init__(self, ref: pykka.ActorRef[Any], ran_in: list[str], step: list[str]) -> None:
        self.me = self
        self.ref, self.ran_in, self.step = ref, ran_in, step
        self.future: LoopFuture[int] = LoopFuture()
        self.future.add_done_callback(lambda _future: None)

    def __del__(self) -> None:
        self.ran_in.append(self.step[0])
        with contextlib.suppress(pykka.ActorDeadError):
            self.ref.tell("from a finalizer")
        self.future.set(1)


@pytest.mark.parametrize("step", ["tell a fresh actor", "wait on a future", "add a callback"])
def test_a_collection_inside_a_wait_or_a_first_message_may_run_finalizers_that_do_the_same(
    aio: AsyncTaskSupervisor, step: str
) -> None:
    # Each of these makes an object the first time (an inbox's queue, a future's Event or
    # callback list); a collection at that allocation runs finalizers on the same thread.
    probe = FinalizerProbe()

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 4), range(2)):
            touched = Worker.start(loop=aio.loop)
            fresh = Worker.start(loop=aio.loop)
            future: LoopFuture[int] = LoopFuture()
            gc.collect(1)  # the young generations: cheap
            garbage: list[object] = [_TouchesOnCollection(touched, probe.ran_in, probe.now)]
            with probe.collected_inside(garbage, young, promotions):
                if step == "tell a fresh actor":
                    fresh.tell("first")
                elif step == "wait on a future":
                    assert not future.wait(timeout=0.001)
                else:
                    future.add_done_callback(lambda _future: None)
            fresh.stop()
            touched.stop()

    run_steps_on_a_thread(steps, "a step")
    assert "inside" in probe.ran_in  # the case this is about happened


def test_a_thread_waiting_on_actor_stopped_returns_when_the_actor_stops(
    aio: AsyncTaskSupervisor,
) -> None:
    ref = Worker.start(loop=aio.loop)
    assert not ref.actor_stopped.wait(timeout=0.01)  # alive: the wait times out
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(ref.actor_stopped.wait(timeout=10)))
    waiter.start()
    ref.stop()
    waiter.join(10)
    assert waited == [True]
    assert ref.actor_stopped.wait(timeout=0)  # stopped: at once, also later


class _KillsOnCollection:
    """Cyclic garbage whose finalizer kills an actor: its `actor_stopped` is set on whichever
    thread the collection runs on, maybe one waiting on that very flag."""

    def __init__(self, ref: pykka.ActorRef[Any], ran_in: list[str], step: list[str]) -> None:
        self.me = self
        self.ref, self.ran_in, self.step = ref, ran_in, step

    def __del__(self) -> None:
        self.ran_in.append(self.step[0])
        kill(self.ref, "from a finalizer")


def test_a_collection_inside_a_wait_on_actor_stopped_may_run_a_finalizer_that_stops_it(
    aio: AsyncTaskSupervisor,
) -> None:
    probe = FinalizerProbe()
    waits: list[tuple[bool, int]] = []  # each wait's answer, and how many finalizers had run

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 4), range(2)):
            ref = Worker.start(loop=aio.loop)
            gc.collect(1)  # the young generations: cheap
            garbage: list[object] = [_KillsOnCollection(ref, probe.ran_in, probe.now)]
            with probe.collected_inside(garbage, young, promotions):
                stopped = ref.actor_stopped.wait(timeout=0.2)
            waits.append((stopped, len(probe.ran_in)))  # stopped once its finalizer had run
            gc.collect(1)  # the finalizer runs now if it did not yet

    run_steps_on_a_thread(steps, "a wait on actor_stopped")
    assert "inside" in probe.ran_in  # the case this is about happened
    assert all(stopped == (ran == n + 1) for n, (stopped, ran) in enumerate(waits))
