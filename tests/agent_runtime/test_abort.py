"""AbortSignal and AbortTable: flags, reasons, waking without polling, table lifetime."""

from __future__ import annotations

import asyncio
import functools
import gc
import itertools
import threading
import time

import pytest

from agent_runtime.abort import Aborted, AbortSignal, AbortTable
from tests.gc_finalizers import FinalizerProbe, run_steps_on_a_thread


def test_first_abort_reason_wins_until_clear() -> None:
    signal = AbortSignal()
    assert not signal.aborted and signal.reason is None
    assert signal.abort("user_abort") is True
    assert signal.abort("second") is False
    assert signal.aborted and signal.reason == "user_abort"
    signal.clear()
    assert not signal.aborted and signal.reason is None
    signal.abort()
    assert signal.reason == "aborted"


@pytest.mark.timing
def test_wait_wakes_a_blocked_thread_on_abort() -> None:
    signal = AbortSignal()
    woke: list[float] = []

    def waiter() -> None:
        if signal.wait(timeout=10):
            woke.append(time.monotonic())

    thread = threading.Thread(target=waiter)
    thread.start()
    aborted_at = time.monotonic()
    signal.abort("stop")
    thread.join(timeout=5)
    assert woke and woke[0] - aborted_at < 1.0


def test_wait_times_out_when_not_aborted() -> None:
    assert AbortSignal().wait(timeout=0.01) is False


def test_a_cleared_signal_is_waited_on_again_until_the_next_abort() -> None:
    signal = AbortSignal()
    signal.abort("first")
    assert signal.wait(timeout=0) is True  # aborted before anyone waited: at once
    signal.clear()
    assert signal.wait(timeout=0.01) is False
    waiting = threading.Event()
    woke: list[bool] = []

    def waiter() -> None:
        waiting.set()
        woke.append(signal.wait(timeout=10))

    thread = threading.Thread(target=waiter)
    thread.start()
    waiting.wait(5)
    signal.abort("second")
    thread.join(timeout=5)
    assert woke == [True] and signal.reason == "second"


def test_wait_async_wakes_without_blocking_the_loop() -> None:
    signal = AbortSignal()

    async def main() -> tuple[bool, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        tick_task = asyncio.create_task(ticker())
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, lambda: threading.Thread(target=signal.abort).start())
        result = await signal.wait_async(timeout=5)
        tick_task.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result is True
    assert ticks > 5  # the loop kept running while we waited


def test_wait_async_times_out() -> None:
    assert asyncio.run(AbortSignal().wait_async(timeout=0.01)) is False


def test_callbacks_run_once_per_abort_and_can_be_removed() -> None:
    signal = AbortSignal()
    calls: list[object] = []
    remove = signal.on_abort(lambda s: calls.append(s.reason))
    signal.abort("a")
    signal.abort("b")
    assert calls == ["a"]
    signal.clear()
    remove()
    signal.abort("c")
    assert calls == ["a"]


def test_on_abort_of_an_aborted_signal_calls_at_once() -> None:
    signal = AbortSignal()
    signal.abort("done")
    calls: list[object] = []
    signal.on_abort(lambda s: calls.append(s.reason))
    assert calls == ["done"]


def test_a_failing_callback_does_not_stop_the_others() -> None:
    signal = AbortSignal()
    calls: list[str] = []

    def bad(_: AbortSignal) -> None:
        raise RuntimeError("boom")

    signal.on_abort(bad)
    signal.on_abort(lambda _: calls.append("ok"))
    signal.abort()
    assert calls == ["ok"]


def test_raise_if_aborted_carries_the_reason() -> None:
    signal = AbortSignal()
    signal.raise_if_aborted()
    signal.abort("why")
    with pytest.raises(Aborted) as info:
        signal.raise_if_aborted()
    assert info.value.reason == "why"


def test_table_tracks_live_signals_and_forgets_dropped_ones() -> None:
    table = AbortTable()
    kept = table.new()
    dropped = table.new()
    assert table.count() == 2
    assert table.get(kept.id) is kept
    del dropped
    gc.collect()
    assert table.count() == 1
    table.release(kept)
    assert table.count() == 0
    assert table.get(kept.id) is None


def test_table_stays_exact_while_threads_make_release_and_drop_signals() -> None:
    table = AbortTable()
    kept: list[list[AbortSignal]] = [[] for _ in range(8)]

    def churn(mine: list[AbortSignal]) -> None:
        for i in range(2000):
            signal = table.new()
            if i % 3 == 0:
                table.release(signal)
            elif i % 3 == 1:
                mine.append(signal)
            # else: dropped here, and leaves the table by itself

    threads = [threading.Thread(target=churn, args=(mine,)) for mine in kept]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    gc.collect()
    live = [signal for mine in kept for signal in mine]
    assert table.count() == len(live) == 8 * 667
    assert all(table.get(signal.id) is signal for signal in live)
    assert table.abort_all("shutdown") == len(live)


def test_abort_all_aborts_every_live_signal_once() -> None:
    table = AbortTable()
    signals = [table.new() for _ in range(5)]
    signals[0].abort("earlier")
    assert table.abort_all("shutdown") == 4
    assert all(s.aborted for s in signals)
    assert signals[0].reason == "earlier"
    assert signals[1].reason == "shutdown"


def test_concurrent_aborts_wake_every_waiter_exactly_once() -> None:
    signal = AbortSignal()
    calls: list[int] = []
    lock = threading.Lock()

    def record(_: AbortSignal) -> None:
        with lock:
            calls.append(1)

    signal.on_abort(record)
    threads = [threading.Thread(target=signal.abort, args=(f"r{i}",)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=5)
    assert len(calls) == 1
    assert signal.reason in {f"r{i}" for i in range(10)}


def _record_reason(calls: list[object], signal: AbortSignal) -> None:
    calls.append(signal.reason)


class _AbortsOnCollection:
    """Cyclic garbage whose finalizer aborts a signal, as a forgotten run stream's does (the
    stream ends, and its end aborts the run)."""

    def __init__(self, signal: AbortSignal, ran_in: list[str], now: list[str]) -> None:
        self.me = self
        self.signal, self.ran_in, self.now = signal, ran_in, now

    def __del__(self) -> None:
        self.ran_in.append(self.now[0])
        self.signal.abort("stream_closed")


@pytest.mark.parametrize("step", ["abort", "wait"])
def test_a_collection_inside_an_abort_or_a_first_wait_may_abort_the_same_signal(
    step: str,
) -> None:
    # Both allocate while they hold the signal's lock (the callbacks' list, the Event); a
    # collection there runs finalizers on that thread, and one may abort this signal.
    probe = FinalizerProbe()
    heard: list[list[object]] = []

    def steps() -> None:
        for young, promotions in itertools.product(range(1, 6), range(2)):
            signal = AbortSignal()
            calls: list[object] = []
            signal.on_abort(functools.partial(_record_reason, calls))
            heard.append(calls)
            gc.collect(1)  # the young generations: cheap
            garbage: list[object] = [_AbortsOnCollection(signal, probe.ran_in, probe.now)]
            with probe.collected_inside(garbage, young, promotions):
                if step == "abort":
                    signal.abort("user_abort")
                else:
                    signal.wait(0.001)
            gc.collect(1)  # the young generations: cheap
            assert signal.wait(0) and calls == [signal.reason]

    run_steps_on_a_thread(steps, "an abort or a wait")
    assert "inside" in probe.ran_in  # the case this is about happened
    assert all(len(calls) == 1 for calls in heard)  # each signal's callback heard one abort
