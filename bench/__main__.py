"""`make bench`: throughput of the runtime's hot paths against plain-Python baselines.

Each line prints our time per operation, the baseline's, and the ratio, all measured in this
run on this machine, so the ratio is comparable across machines and the absolute numbers are
not asserted anywhere.
"""

from __future__ import annotations

import asyncio
import queue
import statistics
import threading
import time
from collections.abc import Callable

from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.event_stream import EventStream
from agent_runtime.events import TurnStart
from agent_runtime.llm import ChatRequest
from agent_runtime.loop import AgentContext, LoopConfig, run
from agent_runtime.messages import UserMessage
from agent_runtime.runtime import Runtime
from agent_runtime.telemetry import configure_logging
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from supervisors import ChildSpec, SupervisedActor, Supervisor, kill

N = 20_000


def best_of(fn: Callable[[], float], runs: int = 5) -> float:
    return min(fn() for _ in range(runs))


def stream_roundtrip() -> float:
    event = TurnStart()
    stream = EventStream(max_queue=N + 1)
    started = time.perf_counter()
    for _ in range(N):
        stream.push(event)
    stream.complete([])
    for _ in stream:
        pass
    return (time.perf_counter() - started) / N


def queue_roundtrip() -> float:
    event = TurnStart()
    q: queue.Queue[object] = queue.Queue(maxsize=N + 1)
    started = time.perf_counter()
    for _ in range(N):
        q.put(event)
    while not q.empty():
        q.get()
    return (time.perf_counter() - started) / N


def stream_threaded() -> float:
    event = TurnStart()
    stream = EventStream(max_queue=256, overflow="block")

    def produce() -> None:
        for _ in range(N):
            stream.push(event)
        stream.complete([])

    started = time.perf_counter()
    thread = threading.Thread(target=produce)
    thread.start()
    for _ in stream:
        pass
    thread.join()
    return (time.perf_counter() - started) / N


def queue_threaded() -> float:
    event = TurnStart()
    q: queue.Queue[object] = queue.Queue(maxsize=256)
    done = object()

    def produce() -> None:
        for _ in range(N):
            q.put(event)
        q.put(done)

    started = time.perf_counter()
    thread = threading.Thread(target=produce)
    thread.start()
    while q.get() is not done:
        pass
    thread.join()
    return (time.perf_counter() - started) / N


class _Worker(SupervisedActor):
    pass


def restart_latency() -> float:
    sup = Supervisor.start([ChildSpec(id="w", start=_Worker.start)], max_restarts=10_000)
    samples = []
    for _ in range(200):
        ref = sup.which_children()[0].ref
        assert ref is not None
        started = time.perf_counter()
        kill(ref)
        while True:
            info = sup.which_children()[0]
            if info.ref is not None and info.ref is not ref and info.alive:
                break
        samples.append(time.perf_counter() - started)
    sup.stop()
    return statistics.median(samples)


def actor_start_stop() -> float:
    started = time.perf_counter()
    for _ in range(200):
        _Worker.start().stop()
    return (time.perf_counter() - started) / 200


def thread_start_join() -> float:
    started = time.perf_counter()
    for _ in range(200):
        thread = threading.Thread(target=lambda: None)
        thread.start()
        thread.join()
    return (time.perf_counter() - started) / 200


def scripted_generate() -> float:
    turns = [ScriptedTurn(chunks=["a"] * 20) for _ in range(500)]
    model = ScriptedModel(turns)
    request = ChatRequest(messages=[UserMessage(content="hi")])

    async def go() -> float:
        started = time.perf_counter()
        for _ in range(500):
            await model.generate(request)
        return (time.perf_counter() - started) / 500

    return asyncio.run(go())


def bare_async_iteration() -> float:
    async def chunks() -> object:
        for _ in range(20):
            yield "a"

    async def go() -> float:
        started = time.perf_counter()
        for _ in range(500):
            async for _ in chunks():  # type: ignore[attr-defined]
                pass
        return (time.perf_counter() - started) / 500

    return asyncio.run(go())


def agent_run() -> float:
    with Runtime.start(RuntimeConfig(telemetry=TelemetryConfig(log_level="warning"))) as rt:
        turns = [ScriptedTurn(chunks=["a"] * 20) for _ in range(300)]
        agent = rt.start_agent(("bench", "a", 0), model=ScriptedModel(turns))
        started = time.perf_counter()
        for _ in range(300):
            agent.run("hi", timeout=10)
            agent.reset()
        return (time.perf_counter() - started) / 300


def bare_loop_run() -> float:
    turns = [ScriptedTurn(chunks=["a"] * 20) for _ in range(300)]
    model = ScriptedModel(turns)

    async def go() -> float:
        started = time.perf_counter()
        for _ in range(300):
            config = LoopConfig(model)
            async for _ in run([UserMessage(content="hi")], AgentContext(), config):
                pass
        return (time.perf_counter() - started) / 300

    return asyncio.run(go())


def many_agents() -> float:
    with Runtime.start(RuntimeConfig(telemetry=TelemetryConfig(log_level="warning"))) as rt:
        agents = [
            rt.start_agent(("bench", "w", i), model=ScriptedModel(["a", "b", "c"]))
            for i in range(200)
        ]
        started = time.perf_counter()
        for agent in agents:
            agent.prompt("x")
        for agent in agents:
            agent.wait_for_idle(timeout=30)
        return (time.perf_counter() - started) / 200


def row(name: str, ours: float, base: float, base_name: str) -> None:
    left = f"{name:<34} {ours * 1e6:10.2f} us"
    right = f"vs {base_name:<26} {base * 1e6:10.2f} us"
    print(f"{left}  {right}  x{ours / base:7.2f}")


def main() -> None:
    configure_logging(TelemetryConfig(log_level="warning"))
    print(f"agent-runtime benchmarks (N={N}); ratio = ours / baseline, same run, same machine")
    row(
        "EventStream push+iterate",
        best_of(stream_roundtrip),
        best_of(queue_roundtrip),
        "queue.Queue put+get",
    )
    row(
        "EventStream 2 threads, block",
        best_of(stream_threaded, 3),
        best_of(queue_threaded, 3),
        "queue.Queue 2 threads",
    )
    row(
        "SupervisedActor start+stop",
        best_of(actor_start_stop, 3),
        best_of(thread_start_join, 3),
        "Thread start+join",
    )
    row(
        "supervisor kill->restarted",
        best_of(restart_latency, 1),
        best_of(thread_start_join, 3),
        "Thread start+join",
    )
    row(
        "agent.run (1 turn, 20 chunks)",
        best_of(agent_run, 1),
        best_of(bare_loop_run, 3),
        "loop.run on asyncio.run",
    )
    row(
        "200 agents at once, per agent",
        best_of(many_agents, 1),
        best_of(bare_loop_run, 3),
        "loop.run on asyncio.run",
    )
    row(
        "ScriptedModel.generate (20 chunks)",
        best_of(scripted_generate, 3),
        best_of(bare_async_iteration, 3),
        "bare async gen (20 items)",
    )


if __name__ == "__main__":
    main()
