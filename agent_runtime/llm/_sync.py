"""The sync bridge: a process-wide event loop thread that runs the async LLM calls of scripts."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="agent-runtime-sync-bridge", daemon=True
            ).start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the bridge loop and wait for it, up to `timeout` seconds.

    Raises:
        RuntimeError: called from a thread that is running an event loop (await instead).
        TimeoutError: `timeout` passed; the coroutine was cancelled.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise RuntimeError(
            "a *_sync method was called from a running event loop; await the async method instead"
        )
    future = asyncio.run_coroutine_threadsafe(coro, _bridge_loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"the model call did not finish within {timeout}s") from None
