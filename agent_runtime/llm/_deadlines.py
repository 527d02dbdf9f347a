"""The two deadlines of one model call, enforced on the task that reads the answer.

- `request_timeout`: the whole call, from sending the request to the end of the answer;
- `idle_timeout`: the longest wait for the next data event of a streamed answer. SSE comments
  and keep-alive events (Anthropic's `ping`) are not data: a server that sends only those is
  cut off like a silent one (httpx's own read timeout, `llm.timeout`, is reset by every byte).

Either ends the call with a retryable `NetworkError` whose `code` (`request_timeout` or
`idle_timeout`) and message name the one that fired. Only time spent waiting on the server
counts as idle: a consumer that is slow between events is not the server's silence.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, Literal

from agent_runtime.llm.errors import NetworkError

Deadline = Literal["request_timeout", "idle_timeout"]


def timeout_error(which: Deadline, provider: str, seconds: float) -> NetworkError:
    """The retryable error of a call cut off by `which` after `seconds`."""
    if which == "request_timeout":
        message = (
            f"the {provider} call took longer than its request_timeout of {seconds:g}s "
            "(llm.request_timeout) and was cut off"
        )
    else:
        message = (
            f"{provider} sent no data event for {seconds:g}s (llm.idle_timeout; SSE comments "
            "and keep-alive pings do not count) and the stream was cut off"
        )
    return NetworkError(message, provider=provider, code=which)


class StreamDeadlines:
    """Both deadlines of one streamed call, checked by one timer that moves only when it fires.

    The reader calls `waiting()` before each wait for an event and `done_waiting()` after it;
    the clock of the call starts at the first `waiting()`. When a deadline passes during a
    wait, the waiting task is cancelled and `expired(task)` turns that cancellation back into
    the timeout error; a request deadline that passed between waits is raised by the next
    `waiting()`. A streamed event costs a clock read, not a timer: the timer fires at most
    once per idle period and moves itself on. `stop()` ends it. One reader at a time.
    """

    __slots__ = (
        "_base",
        "_fired",
        "_handle",
        "_idle",
        "_loop",
        "_provider",
        "_request",
        "_request_at",
        "_task",
        "_waiting_since",
    )

    def __init__(
        self, provider: str, request_timeout: float | None, idle_timeout: float | None
    ) -> None:
        self._provider = provider
        self._request = math.inf if request_timeout is None else request_timeout
        self._idle = math.inf if idle_timeout is None else idle_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._request_at = math.inf
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None
        self._base = 0
        self._waiting_since = 0.0
        self._fired: Deadline | None = None

    def waiting(self) -> asyncio.Task[Any]:
        """Mark the current task as waiting for data from now on; return it.

        Raises:
            NetworkError: the request deadline has already passed.
        """
        task = asyncio.current_task()
        assert task is not None, "a stream is read by a task"
        loop = self._loop
        if loop is None:
            loop = self._loop = task.get_loop()
            now = loop.time()
            self._request_at = now + self._request
            self._at(min(self._request_at, now + self._idle))
        else:
            now = loop.time()
            if now >= self._request_at:
                raise timeout_error("request_timeout", self._provider, self._request)
        self._waiting_since = now
        self._base = task.cancelling()
        self._task = task
        return task

    def done_waiting(self) -> None:
        """The wait is over (an event came, or the read failed)."""
        self._task = None

    def expired(self, task: asyncio.Task[Any]) -> NetworkError | None:
        """After `task`'s wait was interrupted: the timeout error when a deadline did it (its
        cancellation taken back), else None (someone else cancelled: let it propagate)."""
        which, self._fired = self._fired, None
        if which is None or task.uncancel() > self._base:
            return None
        seconds = self._request if which == "request_timeout" else self._idle
        return timeout_error(which, self._provider, seconds)

    def stop(self) -> None:
        """Stop the timer; nothing fires any more."""
        self._task = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _at(self, when: float) -> None:
        if when != math.inf:
            assert self._loop is not None
            self._handle = self._loop.call_at(when, self._check)

    def _check(self) -> None:
        self._handle = None
        assert self._loop is not None
        now = self._loop.time()
        task = self._task
        if task is None:  # the reader is busy with an event: nothing to interrupt now
            if now < self._request_at:  # past it, the next waiting() raises
                self._at(min(self._request_at, now + self._idle))
            return
        idle_at = self._waiting_since + self._idle
        if now >= self._request_at or now >= idle_at:
            self._fired = "request_timeout" if now >= self._request_at else "idle_timeout"
            task.cancel()
            return
        self._at(min(self._request_at, idle_at))
