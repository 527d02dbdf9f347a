"""Agent runs streamed as Server-Sent Events from a Starlette app under uvicorn.

    python examples/starlette_sse.py --port 8000
    curl -N -X POST localhost:8000/runs -d '{"session": "s1", "prompt": "hello"}'

What it shows:
- one `Runtime` per process, started and stopped in the app's lifespan with `Runtime.astart`
  (the start and the stop run on a worker thread; the server's loop goes on), with
  `freeze_gc=True`: what the process set up is left out of every later full collection;
- `agent.astream(prompt, abort_on_close=True)` called in the handler: the run starts there, so
  a busy agent is answered with 409 before any response header is sent, and a client that goes
  away aborts its run (its tool calls still get their results, as for any abort);
- on SIGINT/SIGTERM every open stream first gets its run's `Canceled(reason="runtime_stopping")`
  as a last event, then the server stops (uvicorn waits for open responses, which now end);
- `/healthz` answers from the server's loop however many streams are open; `/lag` reports the
  loop's worst and 95th-percentile lag (`?reset=1` starts a new measurement).

The model is offline by default: a scripted model that, in every run, calls an async tool,
then streams `chunks` words `delay` seconds apart (query parameters of the `/runs` request
that starts the session's agent). Set
`AGENT_RUNTIME_EXAMPLE_PROFILE` to a profile name of your `config/runtime.toml` to talk to a
real model instead. `/control` streams the same number of events, made on the server's own
loop without the library: the baseline for the loop's lag.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent_runtime import AgentBusy, AgentKey, Runtime, ToolContext, tool
from agent_runtime.config import MemoryConfig, RuntimeConfig, SupervisionConfig, TelemetryConfig
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Event,
    MessageDelta,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from agent_runtime.llm import ChatModel, ChatRequest, from_config
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)
from agent_runtime.testing import FunctionModel, ScriptedTurn


@tool
async def lookup(ctx: ToolContext, topic: str) -> str:
    """Look a topic up (an async tool: it runs on the runtime's loop, which `Runtime.astart`
    shares with this server by default, so it must not block)."""
    await asyncio.sleep(0.01)
    return f"notes on {topic}"


def model_for(chunks: int, delay: float) -> ChatModel:
    """The session's model, made with its agent: the configured profile's, or an offline one
    that answers every run of the session alike (the tool call, then `chunks` words)."""
    profile = os.environ.get("AGENT_RUNTIME_EXAMPLE_PROFILE")
    if profile:
        return from_config(profile)
    call = ToolCall(id="lookup-1", name="lookup", arguments={"topic": "the question"})
    ask = ScriptedTurn(tool_calls=[call])
    words = ScriptedTurn(chunks=[f"word{i} " for i in range(chunks)], chunk_delay=delay)

    async def answer(request: ChatRequest) -> ScriptedTurn:
        return words if isinstance(request.messages[-1], ToolResultMessage) else ask

    return FunctionModel(answer, model="scripted", record_requests=False)


def sse(event: Event) -> str:
    return f"event: {event.type}\ndata: {event.model_dump_json()}\n\n"


class LagMonitor:
    """The server loop's lag: how late each 10 ms sleep wakes up (worst and 95th percentile
    since the last reset)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(0.01)
            self.samples.append(time.perf_counter() - started - 0.01)

    def report(self) -> dict[str, float]:
        ordered = sorted(self.samples) or [0.0]
        return {"worst_lag": ordered[-1], "p95_lag": ordered[int(0.95 * (len(ordered) - 1))]}

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


lag = LagMonitor()
state: dict[str, Runtime] = {}


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    config = RuntimeConfig(
        memory=MemoryConfig(store="memory"),
        supervision=SupervisionConfig(max_agents=None),
        telemetry=TelemetryConfig(log_level="warning"),
    )
    # freeze_gc: the modules and this set-up are never walked by a full garbage collection
    # again, so one in a burst of agent starts costs ~30 ms, not ~90 (Runtime.start says more)
    async with Runtime.astart(config, freeze_gc=True) as runtime:
        state["runtime"] = runtime
        lag.start()
        try:
            yield
        finally:
            lag.stop()


async def runs(request: Request) -> Response:
    body = json.loads(await request.body() or b"{}")
    session = str(body.get("session", "default"))
    prompt = str(body.get("prompt", "hello"))
    chunks = int(request.query_params.get("chunks", "20"))
    delay = float(request.query_params.get("delay", "0.01"))
    runtime = state["runtime"]
    key = (session, "assistant", 0)
    agent = runtime.registry.lookup(key)
    if agent is None:
        agent = await runtime.astart_agent(
            key, model=model_for(chunks, delay), tools=[lookup], memory=MemoryPolicy.none()
        )
    try:
        events = agent.astream(prompt, abort_on_close=True)
    except AgentBusy as busy:
        return JSONResponse({"error": str(busy)}, status_code=409)

    async def body_stream() -> AsyncIterator[str]:
        async with events:  # a client that goes away closes it: its run is aborted
            async for event in events:
                yield sse(event)

    return StreamingResponse(body_stream(), media_type="text/event-stream")


async def control(request: Request) -> Response:
    """The same events as a run of `/runs` (the tool turn, then `chunks` words), made on this
    loop without the library, with the same pauses: the baseline for the loop's lag."""
    chunks = int(request.query_params.get("chunks", "20"))
    delay = float(request.query_params.get("delay", "0.01"))

    async def body_stream() -> AsyncIterator[str]:
        for event in control_events(chunks):
            if event is None:
                await asyncio.sleep(delay)
            else:
                yield sse(event)

    return StreamingResponse(body_stream(), media_type="text/event-stream")


def control_events(chunks: int) -> Iterator[Event | None]:
    """A run's events as the runtime makes them for `model_for(chunks, ...)` and `lookup`,
    made by hand; None where the run would wait (the tool's sleep, each word's delay)."""
    seq = itertools.count(1)

    def made(kind: type[Event], **fields: Any) -> Event:
        return kind(
            agent=AgentKey("control", "assistant", 0), run_id="control", seq=next(seq), **fields
        )

    prompt = UserMessage(content="hi")
    call = ToolCall(id="lookup-1", name="lookup", arguments={"topic": "the question"})
    asked = AssistantMessage(content=[call], stop_reason="tool_use")
    result = ToolResult.text("notes on the question")
    answered = ToolResultMessage(tool_call_id=call.id, tool_name=call.name, content=result.content)
    yield made(AgentStart)
    yield made(TurnStart)
    yield made(MessageStart, message=prompt)
    yield made(MessageEnd, message=prompt)
    yield made(MessageStart, message=AssistantMessage())
    delta = MessageDelta(kind="tool_call", content_index=0, delta=call.model_dump_json())
    yield made(MessageUpdate, message=asked, delta=delta)
    yield made(MessageEnd, message=asked)
    yield made(ToolExecutionStart, tool_call_id=call.id, name=call.name, args=call.arguments)
    yield None
    yield made(ToolExecutionEnd, tool_call_id=call.id, name=call.name, result=result)
    yield made(MessageStart, message=answered)
    yield made(MessageEnd, message=answered)
    yield made(TurnEnd, message=asked, tool_results=[answered])
    yield made(TurnStart)
    yield made(MessageStart, message=AssistantMessage())
    text = ""
    for i in range(chunks):
        yield None
        piece = f"word{i} "
        text += piece
        message = AssistantMessage(content=[TextContent(text=text)])
        delta = MessageDelta(kind="text", content_index=0, delta=piece)
        yield made(MessageUpdate, message=message, delta=delta)
    final = AssistantMessage(content=[TextContent(text=text)])
    yield made(MessageEnd, message=final)
    yield made(TurnEnd, message=final)
    yield made(AgentEnd, new_messages=[prompt, asked, answered, final])


async def healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def loop_lag(request: Request) -> Response:
    report = lag.report()
    if request.query_params.get("reset"):
        lag.samples = []
    return JSONResponse(report)


app = Starlette(
    routes=[
        Route("/runs", runs, methods=["POST"]),
        Route("/control", control, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/lag", loop_lag),
    ],
    lifespan=lifespan,
)


class Server(uvicorn.Server):
    """uvicorn, ending every open stream with its run's terminal before it waits for them."""

    def handle_exit(self, sig: int, frame: Any) -> None:
        runtime = state.get("runtime")
        if runtime is not None and not self.should_exit:
            loop = asyncio.get_event_loop()
            loop.call_soon_threadsafe(lambda: loop.create_task(runtime.astop()))
        super().handle_exit(sig, frame)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    server = Server(config)
    signal.signal(signal.SIGTERM, server.handle_exit)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the SIGINT it handled
        server.run()


if __name__ == "__main__":
    main()
