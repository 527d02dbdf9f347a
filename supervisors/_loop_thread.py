"""EventLoopThread: one asyncio event loop on a daemon thread, ended by `stop` and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from supervisors._describe import describe
from supervisors._intensity import Clock, RestartIntensity
from supervisors._log import get_logger
from supervisors._loop_tasks import LoopTasks, running_loop_adopted

log = get_logger(__name__)

# How often the loop resumes after an exception escaped it (or a stop nobody asked for) before
# its thread gives up: a callback that raises again each time it runs must not spin for ever.
MAX_RESUMES = 10
RESUME_SECONDS = 5.0

_here = threading.local()


def on_event_loop_thread() -> bool:
    """True when the calling thread is the event-loop thread of an `AsyncTaskSupervisor`
    (any of them, a loop it adopted included): a call that blocks here stops every task of
    that loop."""
    if getattr(_here, "loop_thread", None) is not None:
        return True
    return running_loop_adopted()


class EventLoopThread(LoopTasks):
    """An asyncio event loop running on a daemon thread until `stop`.

    Guarantees:
    - Only `stop()` ends the loop. asyncio lets a `SystemExit` or `KeyboardInterrupt` raised
      by a task or a callback out of `run_forever`; such an escape, and a `loop.stop()` that
      `stop()` did not ask for, are logged and the loop resumes with its tasks as they were.
    - Past `max_resumes` resumes within `resume_seconds` the thread gives up. Whenever the
      thread ends without `stop()`, it takes no new task (`submit` raises RuntimeError),
      `on_death(reason)` is called once, from the dying thread, and the future of every
      task still on the loop fails with `EventLoopDied`: nobody waits on it for ever.
    """

    def __init__(
        self,
        name: str,
        *,
        max_resumes: int = MAX_RESUMES,
        resume_seconds: float = RESUME_SECONDS,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(name, asyncio.new_event_loop())
        self.loop.set_exception_handler(self._on_loop_error)
        self._resumes = RestartIntensity(max_resumes, resume_seconds, clock)  # the thread's
        self._clock = clock
        self._last_resume = -float("inf")  # the thread's
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        _here.loop_thread = self
        asyncio.set_event_loop(self.loop)
        why: str | None = "the loop thread failed"
        try:
            why = self._serve()
        except BaseException as exc:  # a failure of this module's own code
            why = f"the loop thread failed: {describe(exc)}"
        finally:
            if why is None:
                self._shut_down()
            else:
                self._die(why)

    def _serve(self) -> str | None:
        """Run the loop until `stop()` asks it to end (None), or until it gives up (why)."""
        while True:
            escaped: BaseException | None = None
            try:
                self.loop.run_forever()
            except BaseException as exc:
                escaped = exc
            with self._lock:
                if self._closed:
                    return None
            what = describe(escaped) if escaped is not None else "loop.stop() was called"
            if self.loop.is_closed():
                return f"the loop was closed ({what})"
            if not self._resumes.record():
                limits = self._resumes
                return (
                    f"{what} (it escaped the loop more than {limits.max_restarts} times "
                    f"within {limits.max_seconds:g}s)"
                )
            # The traceback once per burst: formatting one can take longer than a resume.
            now = self._clock()
            quiet = now - self._last_resume <= self._resumes.max_seconds
            self._last_resume = now
            log.error(
                "tasks.loop.resumed",
                loop=self.name,
                error=what,
                exc_info=None if quiet else escaped,
            )

    def _shut_down(self) -> None:
        """After `stop()`: finish the async generators and close the loop."""
        closing = self.loop.shutdown_asyncgens()
        try:
            self.loop.run_until_complete(closing)
        except BaseException as exc:  # something escaped the loop once more: stop anyway
            closing.close()
            log.warning("tasks.loop.shutdown_failed", loop=self.name, error=describe(exc))
        finally:
            with contextlib.suppress(Exception):
                self.loop.close()

    def _die(self, why: str) -> None:
        with contextlib.suppress(Exception):
            self.loop.close()
        super()._die(why)

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if self._death is not None:
            return  # its tasks being collected: the death was logged, their futures failed
        exc = context.get("exception")
        log.error("tasks.loop.error", loop=self.name, message=context.get("message"), exc_info=exc)

    # -- stopping -------------------------------------------------------------------------------

    def stop(self, timeout: float | None) -> bool:
        """Cancel every task, wait up to `timeout` for them to end, stop the loop and thread.

        Returns True if everything ended in time; a task that ignores cancellation past the
        timeout is abandoned with its (daemon) thread.
        """
        if not self._refuse_new():
            return not self._thread.is_alive()
        if self.loop.is_closed():
            return True
        finished = True
        try:
            cancelled = asyncio.run_coroutine_threadsafe(self._cancel_all(timeout), self.loop)
        except RuntimeError:
            pass  # the loop was closed meanwhile
        else:
            finished = self._wait(cancelled, timeout)
        # Also when the loop is between two runs (resuming): it stops at its next iteration.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("tasks.loop.abandoned", loop=self.name)
            return False
        return finished and not self._unfinished()

    def _loop_gone(self) -> bool:
        return not self._thread.is_alive()
