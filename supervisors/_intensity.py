"""Restart intensity: more than `max_restarts` restarts within `max_seconds` means give up."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

Clock = Callable[[], float]


def check_intensity(max_restarts: object, max_seconds: object) -> None:
    """Raise ValueError naming the field when the intensity settings are unusable."""
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"invalid max_restarts {max_restarts!r} (expected an int >= 0)")
    if (
        isinstance(max_seconds, bool)
        or not isinstance(max_seconds, int | float)
        or not max_seconds > 0
    ):
        raise ValueError(f"invalid max_seconds {max_seconds!r} (expected a number > 0)")


class RestartIntensity:
    """A sliding window of restart times (Erlang's `add_restart`).

    `record()` notes one restart at `clock()` and returns False once more than `max_restarts`
    restarts fall within the last `max_seconds` (inclusive: a restart exactly `max_seconds` ago
    still counts, as in OTP). Not thread-safe: owned by one actor.
    """

    def __init__(self, max_restarts: int, max_seconds: float, clock: Clock = time.monotonic):
        check_intensity(max_restarts, max_seconds)
        self.max_restarts = max_restarts
        self.max_seconds = float(max_seconds)
        self._clock = clock
        self._times: deque[float] = deque()

    def record(self) -> bool:
        """Note a restart now; True if it is still within the allowed intensity."""
        now = self._clock()
        self._times.append(now)
        while self._times and now - self._times[0] > self.max_seconds:
            self._times.popleft()
        return len(self._times) <= self.max_restarts
