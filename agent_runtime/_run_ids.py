"""Run ids: 16 random hex digits, read from the OS's random source in blocks."""

from __future__ import annotations

import collections
import os

_BLOCK = 256  # ids per read
_pool: collections.deque[str] = collections.deque()
if hasattr(os, "register_at_fork"):  # (not on Windows, which has no fork)
    os.register_at_fork(after_in_child=_pool.clear)  # a forked child never reuses its parent's


def new_run_id() -> str:
    """A fresh run id: 16 hex digits, 64 bits from `os.urandom`; thread-safe.

    The ids are read 256 at a time: `os.urandom` releases the GIL, and the thread that
    called it then waits to take it back from whichever thread got it. With one read per id,
    every `prompt()` or `astream()` made on a server's loop during a burst of starts handed
    the loop's GIL to the actor threads and waited for them."""
    try:
        return _pool.popleft()
    except IndexError:
        digits = os.urandom(8 * _BLOCK).hex()
        ids = [digits[i : i + 16] for i in range(0, len(digits), 16)]
        first = ids.pop()
        _pool.extend(ids)  # (two threads refilling at once both add ids of their own)
        return first
