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
    raise `Aborted(reason)`. Closing this generator closes `source`."""
    if signal is None:
        try:
            async for item in source:
                yield item
        finally:
            await aclose_quietly(source)
        return
    signal.raise_if_aborted()
    # One reader task per stream (not one per chunk): it moves items through a one-slot
    # queue, so the stream is read no further ahead than the consumer. An abort cancels the
    # reader, whose pending read (and HTTP response) closes at once.
    loop = asyncio.get_running_loop()
    slot: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=1)
    reader = loop.create_task(_read_into(source, slot))

    def on_abort(_: AbortSignal) -> None:
        loop.call_soon_threadsafe(_abort_reader, reader, slot)

    remove = signal.on_abort(on_abort)
    try:
        while True:
            kind, value = await slot.get()
            if kind == "item":
                yield value
            elif kind == "end":
                return
            elif kind == "error":
                raise value
            else:
                raise Aborted(signal.reason)
    finally:
        remove()
        if not reader.done() and not reader.cancelling():
            reader.cancel()
        # Wait for the reader's own cleanup (closing the response) without cancelling it twice;
        # asyncio.wait neither raises the reader's outcome nor hides our own cancellation.
        await asyncio.wait([reader])
        await aclose_quietly(source)


async def _read_into(source: AsyncIterator[Any], slot: asyncio.Queue[tuple[str, Any]]) -> None:
    try:
        async for item in source:
            await slot.put(("item", item))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # handed to the consumer, raised there
        await slot.put(("error", exc))
        return
    await slot.put(("end", None))


def _abort_reader(reader: asyncio.Task[None], slot: asyncio.Queue[tuple[str, Any]]) -> None:
    reader.cancel()
    while not slot.empty():  # an item read before the abort is dropped: the abort wins
        slot.get_nowait()
    slot.put_nowait(("aborted", None))


async def aclose_quietly(source: AsyncIterator[object]) -> None:
    """Close `source` (e.g. its HTTP response) if it can be closed; idempotent, never raises
    (a failure to close is not the caller's failure)."""
    aclose = getattr(source, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()
