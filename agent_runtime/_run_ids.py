"""Run ids: 16 random hex digits, read from the OS's random source in blocks."""

from __future__ import annotations

import collections
import os

_BLOCK = 256  # ids per read
_pool: collections.deque[str] = collections.deque()
os.register_at_fork(after_in_child=_pool.clear)  # a forked process never reuses its parent's


def new_run_id() -> str:
    """A fresh run id: 16 hex digits, 64 bits from `os.urandom`; thread-safe.

    The ids are read 256 at a time: `os.urandom` releases the GIL, and a thread that takes
    it back from a busy event loop waits up to the switch interval (5 ms). With one read per
    id, every `prompt()` or `astream()` made on a server's loop during a burst of runs gave
    the loop away once."""
    try:
        return _pool.popleft()
    except IndexError:
        digits = os.urandom(8 * _BLOCK).hex()
        ids = [digits[i : i + 16] for i in range(0, len(digits), 16)]
        first = ids.pop()
        _pool.extend(ids)  # (two threads refilling at once both add ids of their own)
        return first
