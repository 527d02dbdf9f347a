"""Racing provider I/O against an AbortSignal, so an abort closes the HTTP response at once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from agent_runtime._wakeup import resolve
from agent_runtime.abort import Aborted, AbortSignal

T = TypeVar("T")


class _AbortWatch:
    """An asyncio future that resolves when the signal aborts (woken, not polled)."""

    def __init__(self, signal: AbortSignal) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = loop.create_future()

        def wake(_: AbortSignal) -> None:
            loop.call_soon_threadsafe(resolve, self.future)

        self._remove = signal.on_abort(wake)

    def close(self) -> None:
        self._remove()
        self.future.cancel()


def _pair(a: asyncio.Future[Any], b: asyncio.Future[Any]) -> list[asyncio.Future[Any]]:
    return [a, b]


async def _cancel(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def await_abortable(awaitable: Awaitable[T], signal: AbortSignal | None) -> T:
    """Await `awaitable`; on abort cancel it and raise `Aborted(reason)`."""
    if signal is None:
        return await awaitable
    if signal.aborted:
        if inspect.iscoroutine(awaitable):
            awaitable.close()  # never started: close it so it is not reported as unawaited
        raise Aborted(signal.reason)
    watch = _AbortWatch(signal)
    task = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait(_pair(task, watch.future), return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            await _cancel(task)
            raise Aborted(signal.reason)
        return task.result()
    except asyncio.CancelledError:
        await _cancel(task)
        raise
    finally:
        watch.close()


async def iterate_abortable(
    source: AsyncIterator[T] | Callable[[], AsyncIterator[T]], signal: AbortSignal | None
) -> AsyncIterator[T]:
    """Yield from `source`; on abort cancel the pending read (closing its HTTP response) and
    raise `Aborted(reason)`. Closing this generator closes `source`. A callable `source` is
    called at the first `anext` for the iterator (its errors are raised there).

    No task of its own: an abort cancels the task that iterates while it waits for the next
    item (its `anext` on `source`), and the cancellation is turned into `Aborted` (also when
    the source swallows it or turns it into its own error). An abort that lands while the
    consumer works on an item closes `source` at once and is raised at the next read.
    """
    if not isinstance(source, AsyncIterator):
        source = source()
    if signal is None:
        try:
            async for item in source:
                yield item
        finally:
            await aclose_quietly(source)
        return
    loop = asyncio.get_running_loop()
    state = _ReadState()

    def interrupt() -> None:
        if state.interrupted:
            return
        state.interrupted = True
        if state.task is not None:  # waiting on a read: cancel that wait
            state.task.cancel()
        else:  # the consumer is busy with an item: close the response now, not at its next read
            state.closing = loop.create_task(aclose_quietly(source))

    def on_abort(_: AbortSignal) -> None:  # on whichever thread aborts
        loop.call_soon_threadsafe(interrupt)

    remove = signal.on_abort(on_abort)
    try:
        while True:
            signal.raise_if_aborted()
            task = asyncio.current_task()  # the task reading now (a caller may change tasks)
            assert task is not None
            base = task.cancelling()
            state.task = task
            try:
                item = await anext(source)
            except StopAsyncIteration:
                if state.interrupted:  # the source swallowed the abort's cancellation
                    task.uncancel()
                    raise Aborted(signal.reason) from None
                return
            except asyncio.CancelledError:
                if state.interrupted and task.uncancel() <= base:
                    raise Aborted(signal.reason) from None
                raise
            except BaseException:
                if state.interrupted:  # the source turned the cancellation into its own error
                    task.uncancel()
                    raise Aborted(signal.reason) from None
                raise
            finally:
                state.task = None
            if state.interrupted:  # the source swallowed the abort's cancellation and went on
                task.uncancel()
                raise Aborted(signal.reason)
            yield item
    finally:
        remove()
        if state.closing is not None:
            await asyncio.wait([state.closing])
        else:
            await aclose_quietly(source)


class _ReadState:
    """The task waiting on a read (None between reads), and whether an abort came."""

    __slots__ = ("closing", "interrupted", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.interrupted = False
        self.closing: asyncio.Task[None] | None = None  # closing the source after an abort


async def aclose_quietly(source: AsyncIterator[object]) -> None:
    """Close `source` (e.g. its HTTP response) if it can be closed; idempotent, never raises
    (a failure to close is not the caller's failure)."""
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()
