"""`Runtime.astart_agent` on the runtime's own loop starts the agent there: no thread, no hop."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from agent_runtime import AlreadyRegistered, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.memory import MemoryPolicy
from agent_runtime.testing import ScriptedModel
from supervisors import kill

MEMORY = RuntimeConfig(memory=MemoryConfig(store="memory"))


async def eventually(condition: object, what: str, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def test_a_burst_of_starts_on_the_runtimes_loop_adds_no_thread() -> None:
    async def main() -> tuple[int, int, list[str]]:
        async with Runtime.astart(MEMORY) as rt:
            model = ScriptedModel()
            await rt.astart_agent(("warm", "a", 0), model=model)
            threads = threading.active_count()
            agents = await asyncio.gather(
                *(rt.astart_agent(("s", "a", i), model=model) for i in range(200))
            )
            added = threading.active_count() - threads
            names = [t.name for t in threading.enumerate() if "starter" in t.name]
            assert [a.key.index for a in agents] == list(range(200))
            assert not any(a.state().is_running for a in agents)
            return added, rt.subagents.count(), names

    added, count, starters = asyncio.run(main())
    assert added == 0 and starters == []
    assert count == 201


def test_an_agent_started_in_place_reads_its_sessions_history(tmp_path: Path) -> None:
    config = RuntimeConfig(memory=MemoryConfig(store="sqlite", path=str(tmp_path / "m.db")))

    async def main() -> tuple[list[str], str]:
        async with Runtime.astart(config) as rt:
            first = await rt.astart_agent(("s", "a", 0), model=ScriptedModel(["one"]))
            assert (await first.arun("hello", timeout=10)).text == "one"
            assert rt.stop_agent(first)  # on the loop: stopped in place
            await eventually(lambda: rt.registry.lookup(("s", "a", 0)) is None, "the stop")
            again = await rt.astart_agent(("s", "a", 0), model=ScriptedModel(["two"]))
            texts = [m.text for m in again.state().messages]  # type: ignore[attr-defined]
            return texts, (await again.arun("more", timeout=10)).text

    texts, answer = asyncio.run(main())
    assert texts == ["hello", "one"]
    assert answer == "two"


def test_a_transient_agent_started_in_place_restarts_with_its_history() -> None:
    async def main() -> tuple[list[str], str]:
        async with Runtime.astart(MEMORY) as rt:
            agent = await rt.astart_agent(
                ("s", "t", 0), model=ScriptedModel(["one", "two"]), restart="transient"
            )
            await agent.arun("first", timeout=10)
            old = agent.ref
            kill(old)
            await eventually(lambda: agent.ref is not old and agent.alive, "the restart")
            await eventually(lambda: agent.state().messages, "the history read back")
            texts = [m.text for m in agent.state().messages]  # type: ignore[attr-defined]
            return texts, (await agent.arun("second", timeout=10)).text

    texts, answer = asyncio.run(main())
    assert texts == ["first", "one"]
    assert answer == "two"


def test_bad_starts_in_place_fail_as_start_agent_does() -> None:
    async def main() -> None:
        async with Runtime.astart(MEMORY) as rt:
            held = await rt.astart_agent(("s", "a", 0), model=ScriptedModel())
            with pytest.raises(AlreadyRegistered) as caught:
                await rt.astart_agent(("s", "a", 0), model=ScriptedModel())
            assert caught.value.holder is held
            with pytest.raises(TypeError, match="'temprature'"):
                await rt.astart_agent(  # type: ignore[call-overload]
                    ("s", "a", 1), model=ScriptedModel(), temprature=0.5
                )
            with pytest.raises(ValueError, match="agent key"):
                await rt.astart_agent(("s", "a", -1), model=ScriptedModel())
            assert rt.subagents.count() == 1  # nothing half-started is left behind
            await rt.astart_agent(("s", "a", 1), model=ScriptedModel(), memory=MemoryPolicy.none())
            assert rt.subagents.count() == 2

    asyncio.run(main())


def test_a_start_from_another_loop_still_works_off_that_loop() -> None:
    with Runtime.start(MEMORY) as rt:  # the runtime's loop runs on a thread of its own

        async def main() -> str:
            agent = await rt.astart_agent(("s", "o", 0), model=ScriptedModel(["hi"]))
            return (await agent.arun("go", timeout=10)).text

        assert asyncio.run(main()) == "hi"
