"""Blocking agent API called on the runtime's event-loop thread raises at once, naming the async
twin, instead of freezing every agent."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime import Agent, Runtime, _loop_guard
from agent_runtime._loop_guard import BlockingCallWarning
from agent_runtime.config import RuntimeConfig
from agent_runtime.event_stream import Subscription
from agent_runtime.messages import TextContent, ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool


class Opened:
    """Subscriptions a blocking call opened, closed when the test ends (so that a call which
    does block, as before the fix, is released and the runtime can stop)."""

    def __init__(self) -> None:
        self.subs: list[Subscription] = []

    def subscribe(self, agent: Agent) -> Subscription:
        sub = agent.subscribe()
        self.subs.append(sub)
        return sub


@pytest.fixture
def opened() -> Iterator[Opened]:
    o = Opened()
    yield o
    for sub in o.subs:
        sub.close()


Blocking = Callable[[Agent, Opened], Any]

BLOCKING: dict[str, tuple[Blocking, str]] = {
    "run": (lambda a, o: a.run("hi", timeout=3), "`await agent.arun(...)`"),
    "stream": (lambda a, o: list(a.stream("hi")), "`async for event in agent.astream(...)`"),
    "wait_for_idle": (lambda a, o: a.wait_for_idle(timeout=3), "`await agent.await_idle(...)`"),
    "reset": (lambda a, o: a.reset(), "`await agent.areset()`"),
    "iterate_subscription": (
        lambda a, o: next(iter(o.subscribe(a))),
        "`async for event in sub`",
    ),
    "until_end": (
        lambda a, o: list(o.subscribe(a).until_end(timeout=3)),
        "`async for event in sub.auntil_end(...)`",
    ),
}


def tool_answer(runtime: Runtime, block: Callable[[], Any]) -> str:
    """Run an agent whose `async def` tool calls `block()`; the tool's result text."""

    @tool
    async def blocker() -> str:
        """Calls blocking agent API from the event loop."""
        try:
            block()
        except RuntimeError as exc:
            return f"refused: {exc}"
        return "it did not refuse"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="blocker", arguments={})]), "done"]
    )
    agent = runtime.start_agent(("s", "caller", 0), model=model, tools=[blocker])
    result = agent.run("go", timeout=20)
    (answer,) = [m for m in result.new_messages if isinstance(m, ToolResultMessage)]
    return "".join(b.text for b in answer.content if isinstance(b, TextContent))


@pytest.mark.parametrize("name", list(BLOCKING))
def test_blocking_calls_from_an_async_tool_raise_naming_the_async_twin(
    runtime: Runtime, opened: Opened, name: str
) -> None:
    block, twin = BLOCKING[name]
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["x"] * 3))
    text = tool_answer(runtime, lambda: block(other, opened))
    assert text.startswith("refused: ")
    assert "would block the runtime's event loop" in text and twin in text


def test_an_agent_of_another_runtime_is_not_waited_on_from_this_runtimes_loop(
    runtime: Runtime,
) -> None:
    with Runtime.start(RuntimeConfig()) as elsewhere:
        remote = elsewhere.start_agent(("s", "remote", 0), model=ScriptedModel(["far"]))
        text = tool_answer(runtime, lambda: remote.run("hi", timeout=3))
    assert text.startswith("refused: ") and "`await agent.arun(...)`" in text


def test_a_sync_tool_may_block_and_an_applications_loop_is_told_the_async_twin(
    runtime: Runtime,
) -> None:
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["one", "two"]))

    @tool
    def waits() -> str:
        """Runs another agent from a tool thread."""
        return other.run("hi", timeout=10).text

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ToolCall(id="c1", name="waits", arguments={})]), "done"]
    )
    agent = runtime.start_agent(("s", "caller", 0), model=model, tools=[waits])
    result = agent.run("go", timeout=20)
    assert [m.text for m in result.new_messages if isinstance(m, ToolResultMessage)] == ["one"]

    async def app() -> str:
        with pytest.raises(RuntimeError, match=r"asyncio event loop running on this thread.*arun"):
            other.run("again", timeout=10)  # would hold every other task of the app's loop
        with pytest.raises(RuntimeError, match="await_idle"):
            other.wait_for_idle(1)
        with pytest.raises(RuntimeError, match="areset"):
            other.reset()
        with pytest.raises(RuntimeError, match="astream"):
            next(iter(other.stream("x")))
        sub = other.subscribe()
        with pytest.raises(RuntimeError, match="async for"):
            next(iter(sub))
        sub.close()
        return (await other.arun("again", timeout=10)).text

    assert asyncio.run(app()) == "two"


def test_stop_on_an_applications_loop_warns_once_and_stops(runtime: Runtime) -> None:
    agents = [runtime.start_agent(("s", "w", i), model=ScriptedModel()) for i in range(2)]

    _loop_guard._warned.discard("Agent.stop()")  # warned by an earlier test of this process?

    async def app() -> None:
        with pytest.warns(BlockingCallWarning, match="astop"):
            agents[0].stop()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            agents[1].stop()  # once per call: no second warning

    asyncio.run(app())
    assert not any(a.alive for a in agents)
