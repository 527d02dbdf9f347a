"""refuse_on_loop: a blocking call made on an event-loop thread fails at once (or warns).

Every run of a runtime, and all its LLM I/O, share one event-loop thread: a call that waits
there (for a run, an idle agent, the next event of a subscription) waits for work that only
that thread can do, so it freezes every agent of the runtime, for ever without a timeout.
On an application's own running loop (an async request handler) the same call holds every
other task of that loop (other requests, health checks) until it returns.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from typing import Literal

from supervisors import on_event_loop_thread

_warned: set[str] = set()
_warned_lock = threading.Lock()


class BlockingCallWarning(UserWarning):
    """A blocking call was made on a thread whose asyncio event loop is running."""


def refuse_on_loop(
    what: str, instead: str, *, on_host_loop: Literal["raise", "warn"] = "raise"
) -> None:
    """Raise RuntimeError if the caller is on an event-loop thread of a runtime (an `async def`
    tool, or a callback on that loop), or on a thread whose own asyncio loop is running (an
    application's async code); the message names the async twin to use instead.

    Any runtime's loop counts (an agent of another runtime waited on from this one's loop
    freezes this one). On an application's loop, `on_host_loop="warn"` (for a call that is
    short and legitimate there, such as a stop at shutdown) warns once per call instead
    (`BlockingCallWarning`).
    """
    if on_event_loop_thread():
        raise RuntimeError(
            f"{what} would block the runtime's event loop: it was called on that loop's thread "
            "(from an async def tool or a callback on the loop, or from the application's own "
            "async code when the runtime shares its loop, as `Runtime.astart()` does by "
            f"default), where waiting freezes every agent of the runtime; use {instead} instead"
        )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop runs on this thread: blocking is fine
    message = (
        f"{what} would block the asyncio event loop running on this thread (and every other "
        f"task on it, e.g. other requests) until it returns; use {instead} instead"
    )
    if on_host_loop == "raise":
        raise RuntimeError(message)
    with _warned_lock:
        if what in _warned:
            return
        _warned.add(what)
    warnings.warn(message, BlockingCallWarning, stacklevel=3)
