"""Running the loop on a runtime's event loop, into a bounded EventStream."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import AsyncIterator
from typing import Any

from agent_runtime._errors import StreamClosed, StreamOverflow
from agent_runtime._run_ids import new_run_id
from agent_runtime.abort import AbortSignal
from agent_runtime.config import EventStreamConfig, RuntimeConfig
from agent_runtime.event_stream import EventStream
from agent_runtime.event_stream._until_abort import push_until_abort
from agent_runtime.events import AgentEnd, Canceled, Error, Event, Terminal
from agent_runtime.loop._run import check_continuable, continue_run, run
from agent_runtime.loop.types import AgentContext, LoopConfig, LoopHost
from agent_runtime.messages import Message
from supervisors._log import get_logger

log = get_logger(__name__)


def _prepare(config: LoopConfig, runtime: LoopHost, into: EventStream | None) -> LoopConfig:
    updates: dict[str, Any] = {}
    if not config.run_id:  # fixed here, so the stream and the run's events share it
        updates["run_id"] = into.run_id if into is not None and into.run_id else new_run_id()
    if config.runtime is None:
        updates["runtime"] = runtime
    if config.run_sync is None:
        updates["run_sync"] = runtime.run_sync
    return config.model_copy(update=updates) if updates else config


def _new_stream(config: LoopConfig, runtime: LoopHost, owner: Any) -> EventStream:
    defaults = _stream_defaults(runtime)
    max_queue, overflow = config.stream_max_queue, config.stream_overflow
    return EventStream(
        max_queue=defaults.max_queue if max_queue is None else max_queue,
        overflow=defaults.overflow if overflow is None else overflow,
        owner=owner,
        run_id=config.run_id,
        agent=config.agent,
    )


def _stream_defaults(runtime: LoopHost) -> EventStreamConfig:
    """`[event_stream]` of the host's config (a Runtime has one), else the built-in defaults."""
    config = getattr(runtime, "config", None)
    return config.event_stream if isinstance(config, RuntimeConfig) else EventStreamConfig()


def _abort_run(signal: AbortSignal, terminal: Terminal) -> None:
    """The run's stream ended before the run did: nobody reads the run any more, stop it
    (with the reason a push into the ended stream gives; the stream's terminal says why)."""
    signal.abort("stream_closed")


async def pump(events: AsyncIterator[Event], stream: EventStream, signal: AbortSignal) -> None:
    """Move a run's events into `stream`, ending it with the run's terminal.

    Backpressure: with a `block` stream the run waits for the reader, until the run is
    aborted (the event it waited with is dropped then, counted and marked). If the stream ends
    first (`cancel()`, its timeout, its owner's exit, or a reader), the run's signal is
    aborted at once, from the thread that ended the stream, so a run inside a tool or a
    hung provider call stops then (not at its next push), and the run is closed; if it
    overflows (`error` policy, or a `block` push timing out), the run is aborted and
    the stream ends with `Error("stream_overflow: ...")`. A crash of the loop ends the
    stream with `Error("loop_crashed: ...")`. The stream always ends.
    """
    stop_watching = stream.on_end(functools.partial(_abort_run, signal))
    try:
        async for event in events:
            # The run ends itself with its terminal: its signal stays as it is.
            if isinstance(event, AgentEnd):
                stop_watching()
                stream.complete(event.new_messages)
            elif isinstance(event, Error):
                stop_watching()
                stream.error(event.reason, event.partial)
            elif isinstance(event, Canceled):
                stop_watching()
                stream.cancel(event.reason)
            else:  # waits for a `block` stream's reader, until the run is aborted
                await push_until_abort(stream, event, None, signal)
    except StreamClosed:
        signal.abort("stream_closed")
        log.info("loop.stream.closed_early")
    except StreamOverflow as exc:
        signal.abort("stream_overflow")
        log.warning("loop.stream.overflowed", max_queue=stream.max_queue)
        stream.error(f"stream_overflow: {exc}")
    except asyncio.CancelledError:
        signal.abort("task_cancelled")
        stream.cancel("task_cancelled")
        raise
    except Exception as exc:  # a bug in the loop or in a callback of the config
        log.exception("loop.crashed")
        stream.error(f"loop_crashed: {type(exc).__name__}: {exc}")
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        if stream.error("loop_crashed: the run ended without a terminal event"):
            log.error("loop.stream.no_terminal")


def _start(
    runtime: LoopHost, events: AsyncIterator[Event], stream: EventStream, signal: AbortSignal
) -> None:
    """Submit the pump to the runtime's event loop; a task that never runs (canceled before
    it started, e.g. by a stopping runtime) still ends the stream."""
    future = runtime.submit(pump(events, stream, signal))

    def ended(done: concurrent.futures.Future[None]) -> None:
        if done.cancelled():
            signal.abort("task_cancelled")
            stream.cancel("task_cancelled")
        elif (exc := done.exception()) is not None:
            stream.error(f"loop_crashed: {type(exc).__name__}: {exc}")

    future.add_done_callback(ended)


def stream(
    prompts: list[Message],
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None = None,
    *,
    runtime: LoopHost,
    event_stream: EventStream | None = None,
    owner: Any = None,
) -> EventStream:
    """Start `run(...)` as a task on the runtime's `loop_tasks` event loop; return its stream.

    Synchronous tools run in the runtime's `tool_tasks` pool. `signal` defaults to a new
    signal of the runtime's abort table; aborting it cancels the run (DESIGN.md 7), and so
    does ending the stream first (`cancel()`, its timeout, its owner's exit). The returned
    stream is bounded by `config.stream_max_queue` and `config.stream_overflow`, or where
    those are None by the runtime's `[event_stream]` config; it and the run's events carry
    `config.run_id`, or a fresh id when that is empty.
    """
    config = _prepare(config, runtime, event_stream)
    signal = signal if signal is not None else runtime.new_signal()
    out = event_stream if event_stream is not None else _new_stream(config, runtime, owner)
    _start(runtime, run(prompts, context, config, signal), out, signal)
    return out


def stream_continue(
    context: AgentContext,
    config: LoopConfig,
    signal: AbortSignal | None = None,
    *,
    runtime: LoopHost,
    event_stream: EventStream | None = None,
    owner: Any = None,
) -> EventStream:
    """`continue_run` on the runtime's event loop, like `stream`.

    Raises:
        ValueError: the context cannot be continued (no messages, or the last is assistant).
    """
    check_continuable(context)
    config = _prepare(config, runtime, event_stream)
    signal = signal if signal is not None else runtime.new_signal()
    out = event_stream if event_stream is not None else _new_stream(config, runtime, owner)
    _start(runtime, continue_run(context, config, signal), out, signal)
    return out
