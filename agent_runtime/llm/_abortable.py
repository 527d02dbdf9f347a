"""Racing provider I/O against an AbortSignal, so an abort closes the HTTP response at once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable
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
    source: AsyncIterator[T], signal: AbortSignal | None
) -> AsyncIterator[T]:
    """Yield from `source`; on abort cancel the pending read (closing its HTTP response) and
    raise `Aborted(reason)`. Closing this generator closes `source`.

    No task of its own: an abort cancels the task that iterates, while it waits for the next
    item (its `anext` on `source`), and the cancellation is turned into `Aborted`. An abort
    that lands while the consumer works on an item is seen before the next read.
    """
    if signal is None:
        try:
            async for item in source:
                yield item
        finally:
            await aclose_quietly(source)
        return
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    state = _ReadState()

    def interrupt() -> None:
        if state.reading and not state.interrupted:
            state.interrupted = True
            task.cancel()

    def on_abort(_: AbortSignal) -> None:  # on whichever thread aborts
        loop.call_soon_threadsafe(interrupt)

    remove = signal.on_abort(on_abort)
    try:
        while True:
            signal.raise_if_aborted()
            state.reading = True
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if state.interrupted and task.uncancel() == 0:
                    raise Aborted(signal.reason) from None
                raise
            finally:
                state.reading = False
            yield item
    finally:
        remove()
        await aclose_quietly(source)


class _ReadState:
    """Whether the iterating task waits on a read, and whether an abort cancelled that wait."""

    __slots__ = ("interrupted", "reading")

    def __init__(self) -> None:
        self.reading = False
        self.interrupted = False


async def aclose_quietly(source: AsyncIterator[object]) -> None:
    """Close `source` (e.g. its HTTP response) if it can be closed; idempotent, never raises
    (a failure to close is not the caller's failure)."""
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()
