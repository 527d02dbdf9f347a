"""refuse_on_loop: a blocking call made on a runtime's event-loop thread fails at once.

Every run of a runtime, and all its LLM I/O, share one event-loop thread: a call that waits
there (for a run, an idle agent, the next event of a subscription) waits for work that only
that thread can do, so it freezes every agent of the runtime, for ever without a timeout.
"""

from __future__ import annotations

from supervisors import on_event_loop_thread


def refuse_on_loop(what: str, instead: str) -> None:
    """Raise RuntimeError if the caller is on an event-loop thread of a runtime (an `async def`
    tool, or a callback on that loop); the message names the async twin to use instead.

    Any runtime's loop counts (an agent of another runtime waited on from this one's loop
    freezes this one); an application's own event loop does not.
    """
    if on_event_loop_thread():
        raise RuntimeError(
            f"{what} would block the runtime's event loop: it was called on that loop's thread "
            "(from an async def tool or a callback on the loop), where waiting freezes every "
            f"agent of the runtime; use {instead} instead"
        )
