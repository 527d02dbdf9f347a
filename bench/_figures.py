"""The figures of `make bench`: each measures agent-runtime and a bare baseline in this process.

Every function returns seconds (or a rate) from one repetition; `__main__` takes medians.
Runs use `MemoryPolicy.none()` and start from an empty history unless a figure says otherwise;
logs are at warning level.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import statistics
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

import pykka
from pykka import messages as pykka_messages

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig, TelemetryConfig
from agent_runtime.events import Canceled, MessageUpdate
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
)
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import tool
from supervisors import AsyncioActor

NONE = MemoryPolicy.none()
# Scripted turns carry their usage: the fake model's own estimate serialises the whole request,
# work a real provider does not do on our side and that would hide the runtime's own cost.
USAGE = Usage(input_tokens=10, output_tokens=20)


def config() -> RuntimeConfig:
    return RuntimeConfig(
        telemetry=TelemetryConfig(log_level="warning"), memory=MemoryConfig(store="memory")
    )


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- baselines ----------------------------------------------------------------------------------


class LoopThread:
    """A bare asyncio loop on its own thread: the baseline's one hop each way."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


async def bare_turn(chunks: int = 20, tool_call: bool = False) -> list[Message]:
    """A turn with no framework: a fake model's chunks joined into an answer (and a tool call)."""

    async def model() -> Any:
        for _ in range(chunks):
            yield "a"

    messages: list[Message] = [UserMessage(content="hi")]
    if tool_call:
        call = ToolCall(id="c", name="lookup", arguments={"key": "k"})
        messages.append(AssistantMessage(content=[call], stop_reason="tool_use"))
        messages.append(UserMessage(content="k".upper()))
    text = "".join([chunk async for chunk in model()])
    messages.append(AssistantMessage(content=[TextContent(text=text)], stop_reason="stop"))
    return messages


def bare_turns(n: int, tool_call: bool = False) -> list[float]:
    host = LoopThread()
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        host.run(bare_turn(tool_call=tool_call))
        samples.append(time.perf_counter() - started)
    host.close()
    return samples


async def slow_call() -> list[Message]:
    """The bursts' model call without a framework: 100 ms, then an answer of no messages."""
    await asyncio.sleep(0.1)
    return []


def bare_burst(n: int) -> float:
    async def go() -> float:
        started = time.perf_counter()
        await asyncio.gather(*(slow_call() for _ in range(n)))
        return time.perf_counter() - started

    return asyncio.run(go())


def bare_actor_start_stop(n: int) -> list[float]:
    class Bare(pykka.ThreadingActor):
        pass

    samples = []
    for _ in range(n):
        started = time.perf_counter()
        Bare.start().stop()
        samples.append(time.perf_counter() - started)
    return samples


class FloorActor(AsyncioActor):
    """The floor of the design, one `supervisors.AsyncioActor` per agent on the loop that
    runs its runs, with no library work: a run starts with a message to the actor (the
    caller's one hop to the loop), which starts it as a task on its own loop (no hop), and
    ends with the answer back to the caller (a hop) and a message to the actor (its end);
    an `ask` of "idle" answers the running run's answer (None when idle), as
    `wait_for_idle` asks the agent's actor for its run's end."""

    use_actor_registry = False  # as agents: pykka's registry is not on their path

    def __init__(self, turn: Callable[[], Any]) -> None:
        super().__init__()
        self.turn = turn
        self.history: list[Any] = []
        self.running: Future[Any] | None = None

    def on_receive(self, message: Any) -> Future[Any] | None:
        kind, payload = message
        if kind == "ended":
            self.history.extend(payload)
            self.running = None
        elif kind == "run":
            self.running = payload
            self.actor_loop.create_task(self._run(payload))
        return self.running

    async def _run(self, answer: Future[Any]) -> None:
        messages = await self.turn()
        answer.set_result(messages)
        self.actor_ref.tell(("ended", messages))


def floor_turns(n: int) -> list[float]:
    """`bare_turn` through a `FloorActor`: the caller waits for the answer."""
    host = LoopThread()
    actor = FloorActor.start(bare_turn, loop=host.loop)
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        answer: Future[Any] = Future()
        actor.tell(("run", answer))
        answer.result(timeout=10)
        samples.append(time.perf_counter() - started)
    actor.stop()
    host.close()
    return samples


def floor_burst(n: int) -> float:
    """`bare_burst` through `n` `FloorActor`s (one run each, all at once): wall time."""

    host = LoopThread()
    actors = [FloorActor.start(slow_call, loop=host.loop) for _ in range(n)]
    gc.collect()
    started = time.perf_counter()
    answers: list[Future[Any]] = []
    for actor in actors:  # as `burst` prompts each agent: an ask, answered once it started
        answers.append(Future())
        actor.ask(("run", answers[-1]), block=False).get(timeout=60)
    for actor in actors:  # as `burst` waits for each agent's `wait_for_idle`
        running: Future[Any] | None = actor.ask(("idle", None), block=False).get(timeout=60)
        if running is not None:
            running.result(timeout=60)
    wall = time.perf_counter() - started
    assert all(answer.done() for answer in answers)
    for actor in actors:
        actor.stop()
    host.close()
    return wall


class IdleFloorActor(AsyncioActor):
    """An idle agent's floor: a bare loop actor that answers an ask (as `state()`)."""

    use_actor_registry = False

    def on_receive(self, message: Any) -> Any:
        return message


def floor_many_idle(n: int) -> float:
    """`many_idle_agents`' start, state and stop through `n` bare `IdleFloorActor`s on a
    loop thread, each started from this thread and waited for (its `on_start`, as
    `start_agent` waits), asked once, then all stopped: seconds in all."""
    host = LoopThread()
    started = time.perf_counter()
    refs = []
    for _ in range(n):
        ref = IdleFloorActor.start(loop=host.loop)
        ref.ask("ready", block=False).get(timeout=10)  # the start's wait: one round trip
        refs.append(ref)
    for ref in refs:
        ref.ask("state", block=False).get(timeout=10)

    async def stop_all() -> None:  # one hop, as a runtime's stop now takes
        for ref in reversed(refs):
            actor = ref._actor_weakref()
            if isinstance(actor, AsyncioActor):
                actor.stop_now()

    host.run(stop_all())
    took = time.perf_counter() - started
    host.close()
    return took


def floor_spawn_stop(n: int) -> list[float]:
    """`spawn_stop` through a bare `IdleFloorActor`: started and waited for, then stopped
    (a round trip each)."""
    host = LoopThread()
    samples = []
    for _ in range(n):
        begun = time.perf_counter()
        ref = IdleFloorActor.start(loop=host.loop)
        ref.ask("ready", block=False).get(timeout=10)
        ref.ask(pykka_messages._ActorStop(), block=False).get(timeout=10)
        samples.append(time.perf_counter() - begun)
    host.close()
    return samples


# -- agent-runtime ------------------------------------------------------------------------------


def text_turns(n: int, history: int = 0, *, from_memory: bool = False) -> list[float]:
    """`agent.run` of one text turn (20 chunks). Without `history` the history is reset after
    each run. With it the agent first has `history` messages, kept, and each run is followed
    by `wait_for_idle` (like the reset, an untimed round trip to the actor, so both figures
    start each run from an actor that has handled the last one): made by its own runs under
    the same memory policy as the empty figure (`MemoryPolicy.none()`: what the history's
    length costs, and nothing else), or `from_memory`, read from session memory at start
    with a policy that reads (each run then also merges the session's changes, a hop to the
    session writer's thread)."""
    with Runtime.start(config()) as rt:
        policy = NONE
        if history and from_memory:
            old = [
                UserMessage(content=f"q{i}") if i % 2 == 0 else _answer(i) for i in range(history)
            ]
            rt.memory.append("bench", old)
            policy = MemoryPolicy(read=True, write=False)
        warm = 0 if from_memory else history // 2  # each run adds a prompt and its answer
        turns = [ScriptedTurn(chunks=["a"] * 20, usage=USAGE) for _ in range(n + warm)]
        model = ScriptedModel(turns, record_requests=False)  # as the peers' fakes: none kept
        agent = rt.start_agent(("bench", "a", 0), model=model, memory=policy)
        for _ in range(warm):
            agent.run("hi", timeout=10)
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            agent.run("hi", timeout=10)
            samples.append(time.perf_counter() - started)
            if history:
                agent.wait_for_idle(timeout=10)
            else:
                agent.reset()
        return samples


def _answer(i: int) -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=f"a{i}")], stop_reason="stop")


def tool_turns(n: int) -> list[float]:
    with Runtime.start(config()) as rt:
        turns: list[ScriptedTurn | str] = []
        for i in range(n):
            call = ToolCall(id=f"c{i}", name="lookup", arguments={"key": "k"})
            turns += [
                ScriptedTurn(tool_calls=[call], usage=USAGE),
                ScriptedTurn(text="done", usage=USAGE),
            ]
        agent = rt.start_agent(
            ("bench", "t", 0),
            model=ScriptedModel(turns, record_requests=False),
            tools=[lookup],
            memory=NONE,
        )
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            agent.run("hi", timeout=10)
            samples.append(time.perf_counter() - started)
            agent.reset()
        return samples


def _config_for(n: int) -> RuntimeConfig:
    """The bench's config with room for `n` agents."""
    supervision = config().supervision.model_copy(update={"max_agents": n + 10})
    return config().model_copy(update={"supervision": supervision})


def _ask_each_state(agents: list[Any]) -> float:
    """Seconds to ask each of `agents` its `state()`, one after the other."""
    started = time.perf_counter()
    for agent in agents:
        agent.state()
    return time.perf_counter() - started


def burst(n: int) -> float:
    """Wall time of `n` agents each running one turn of a 100 ms model, all at once."""
    cfg = _config_for(n)
    with Runtime.start(cfg) as rt:
        agents = [
            rt.start_agent(
                ("bench", "w", i),
                model=ScriptedModel([ScriptedTurn(text="ok", delay=0.1, usage=USAGE)]),
                memory=NONE,
            )
            for i in range(n)
        ]
        gc.collect()
        started = time.perf_counter()
        for agent in agents:
            agent.prompt("x")
        for agent in agents:
            agent.wait_for_idle(timeout=60)
        return time.perf_counter() - started


def stream_rate(deltas: int, subscribers: int = 1) -> float:
    """Deltas per second that each of `subscribers` readers (threads) receives of one run."""
    with Runtime.start(config()) as rt:
        model = ScriptedModel([ScriptedTurn(chunks=["a"] * deltas, usage=USAGE)])
        agent = rt.start_agent(("bench", "s", 0), model=model, memory=NONE)
        subs = [agent.subscribe(max_queue=deltas + 100) for _ in range(subscribers)]
        ends: list[float] = []
        counts: list[int] = []

        def read(sub: Any) -> None:
            got = sum(1 for e in sub.until_end(timeout=60) if isinstance(e, MessageUpdate))
            ends.append(time.perf_counter())
            counts.append(got)

        readers = [threading.Thread(target=read, args=(s,)) for s in subs]
        for r in readers:
            r.start()
        # As for bursts: the garbage the previous figures' runtimes left is collected before,
        # not charged to a 10 ms stream (a full collection after the bursts took ~0.5 s).
        gc.collect()
        started = time.perf_counter()
        agent.prompt("go")
        for r in readers:
            r.join(120)
        assert all(c == deltas for c in counts), counts
        return deltas / (statistics.median(ends) - started)


def stream_rate_in_place(deltas: int) -> float:
    """`stream_rate` of one subscriber read with `async for` on the runtime's own loop
    (`Runtime.astart()`): the reader is a task beside the run, no thread (as the peers'
    readers are)."""

    async def go() -> float:
        async with Runtime.astart(config()) as rt:
            model = ScriptedModel([ScriptedTurn(chunks=["a"] * deltas, usage=USAGE)])
            agent = await rt.astart_agent(("bench", "s", 0), model=model, memory=NONE)
            sub = agent.subscribe(max_queue=deltas + 100)
            gc.collect()  # as in stream_rate
            started = time.perf_counter()
            agent.prompt("go")
            got = 0
            async for event in sub.auntil_end(timeout=60):
                if isinstance(event, MessageUpdate):
                    got += 1
            elapsed = time.perf_counter() - started
            assert got == deltas, got
            return deltas / elapsed

    return asyncio.run(go())


def idle_agent_rss(n: int) -> float:
    """Resident memory per idle agent (bytes), thread stacks included, over `n` agents."""
    with Runtime.start(config()) as rt:
        model = ScriptedModel()
        gc.collect()
        before = _rss()
        agents = [rt.start_agent(("bench", "idle", i), model=model, memory=NONE) for i in range(n)]
        gc.collect()
        after = _rss()
        del agents
        return (after - before) / n


def _rss() -> int:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize()


def spawn_stop(n: int) -> list[float]:
    with Runtime.start(config()) as rt:
        model = ScriptedModel()
        samples = []
        for i in range(n):
            started = time.perf_counter()
            agent = rt.start_agent(("bench", "spawn", i), model=model, memory=NONE)
            agent.stop()
            samples.append(time.perf_counter() - started)
        return samples


def spawn_stop_in_place(n: int) -> list[float]:
    """`spawn_stop` with the async API on the runtime's own loop (`Runtime.astart()`):
    `await astart_agent(...)` then `await agent.astop()`, both in place, no thread."""

    async def go() -> list[float]:
        async with Runtime.astart(config()) as rt:
            model = ScriptedModel()
            samples = []
            for i in range(n):
                started = time.perf_counter()
                agent = await rt.astart_agent(("bench", "spawn", i), model=model, memory=NONE)
                await agent.astop()
                samples.append(time.perf_counter() - started)
            return samples

    return asyncio.run(go())


def abort_latency(n: int) -> list[float]:
    """From `abort()` of a run whose provider stream hangs to its `Canceled` at a reader."""
    with Runtime.start(config()) as rt:
        model = ScriptedModel([ScriptedTurn(chunks=["a", "b"], chunk_delay=60.0)] * n)
        agent = rt.start_agent(("bench", "abort", 0), model=model, memory=NONE)
        samples = []
        for i in range(n):
            sub = agent.subscribe()
            agent.prompt("go")
            wait_until(lambda i=i: model.call_count == i + 1)  # type: ignore[misc]
            wait_until(lambda: agent.state().stream_message is not None)
            started = time.perf_counter()
            agent.abort()
            for event in sub.until_end(timeout=5):
                if isinstance(event, Canceled):
                    samples.append(time.perf_counter() - started)
            sub.close()
            agent.wait_for_idle(timeout=5)
            agent.reset()
        return samples


def repeat(fn: Callable[[], float], times: int = 5) -> float:
    return statistics.median(fn() for _ in range(times))


def many_idle_agents(n: int) -> dict[str, float]:
    """`n` idle agents in one runtime: seconds to start them all, to ask each its `state()`
    and to stop the runtime; resident memory per agent (bytes) and the threads they added."""
    cfg = _config_for(n)
    with Runtime.start(cfg) as rt:
        model = ScriptedModel()
        gc.collect()
        before, threads = _rss(), threading.active_count()
        started = time.perf_counter()
        agents = [rt.start_agent(("bench", "many", i), model=model, memory=NONE) for i in range(n)]
        start = time.perf_counter() - started
        gc.collect()
        rss = (_rss() - before) / n
        added = threading.active_count() - threads
        state = _ask_each_state(agents)
        del agents
        started = time.perf_counter()
        rt.stop(timeout=120)
        stop = time.perf_counter() - started
    return {"start": start, "state": state, "stop": stop, "rss": rss, "threads": added}


def many_idle_agents_in_place(n: int) -> dict[str, float]:
    """`many_idle_agents` with the async API on the runtime's own loop (`Runtime.astart()`):
    each agent started in place by `await astart_agent(...)`, asked its `state()` there,
    then the runtime stopped (`astop`): seconds for each, and the threads the agents added."""
    cfg = _config_for(n)

    async def go() -> dict[str, float]:
        rt = await Runtime.astart(cfg)
        model = ScriptedModel()
        gc.collect()
        threads = threading.active_count()
        started = time.perf_counter()
        agents = [
            await rt.astart_agent(("bench", "many", i), model=model, memory=NONE) for i in range(n)
        ]
        start = time.perf_counter() - started
        added = threading.active_count() - threads
        state = _ask_each_state(agents)
        del agents
        started = time.perf_counter()
        await rt.astop(timeout=120)
        stop = time.perf_counter() - started
        return {"start": start, "state": state, "stop": stop, "threads": added}

    return asyncio.run(go())


def cpu_per_text_turn(n: int) -> float:
    """Process CPU seconds (every thread) per `agent.run` of one text turn (20 chunks)."""
    with Runtime.start(config()) as rt:
        turns = [ScriptedTurn(chunks=["a"] * 20, usage=USAGE) for _ in range(n)]
        agent = rt.start_agent(
            ("bench", "cpu", 0), model=ScriptedModel(turns, record_requests=False), memory=NONE
        )
        agent.run("warm", timeout=10)
        started = time.process_time()
        for _ in range(n - 1):
            agent.run("hi", timeout=10)
        return (time.process_time() - started) / (n - 1)


def cpu_per_delta(deltas: int) -> float:
    """Process CPU seconds per streamed delta to one subscriber (the run's and the reader's)."""
    with Runtime.start(config()) as rt:
        model = ScriptedModel([ScriptedTurn(chunks=["a"] * deltas, usage=USAGE)])
        agent = rt.start_agent(("bench", "cpud", 0), model=model, memory=NONE)
        sub = agent.subscribe(max_queue=deltas + 100)
        gc.collect()
        started = time.process_time()
        agent.prompt("go")
        got = sum(1 for e in sub.until_end(timeout=60) if isinstance(e, MessageUpdate))
        assert got == deltas
        return (time.process_time() - started) / deltas
