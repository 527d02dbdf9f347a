"""Workflows the tests run, at module level so that a resume in another runtime (or process)
finds them again by name. Steps record what they do in `Log`, shared by the test."""

from __future__ import annotations

import asyncio
from typing import ClassVar

from pydantic import BaseModel

from agent_runtime._key import AgentKey
from agent_runtime.testing import FunctionModel, ScriptedModel
from agent_runtime.workflows import StepContext, Workflow, max_retries, step


class Counter(BaseModel):
    n: int = 0
    notes: list[str] = []


class Log:
    """What steps did, for assertions (class-level: one test at a time uses it)."""

    events: ClassVar[list[str]] = []
    gate: ClassVar[asyncio.Event | None] = None

    @classmethod
    def reset(cls) -> None:
        cls.events = []
        cls.gate = None


def _note(state: Counter, note: str) -> Counter:
    return state.model_copy(update={"n": state.n + 1, "notes": [*state.notes, note]})


class Sequence(Workflow[Counter]):
    """a -> b -> end."""

    @step()
    async def a(self, ctx: StepContext) -> None:
        Log.events.append(f"a:{ctx.attempt}")
        self.state = _note(self.state, "a")
        ctx.transition_to("b")

    @step()
    async def b(self, ctx: StepContext) -> None:
        Log.events.append(f"b:{ctx.attempt}")
        self.state = _note(self.state, "b")
        ctx.end()


class SlowThenFast(Workflow[Counter]):
    """`slow` hangs on its first attempt (past its timeout), then succeeds."""

    @step(timeout=0.5, recovery=max_retries(1))
    async def slow(self, ctx: StepContext) -> None:
        Log.events.append(f"slow:{ctx.attempt}")
        if ctx.attempt == 1:
            self.state = _note(self.state, "never committed")
            await asyncio.Event().wait()
        self.state = _note(self.state, "slow")
        ctx.end()


class AlwaysFails(Workflow[Counter]):
    """`flaky` always raises; after 2 retries it fails over to `error`."""

    @step(recovery=max_retries(2).failover_to("error"))
    async def flaky(self, ctx: StepContext) -> None:
        Log.events.append(f"flaky:{ctx.attempt}")
        self.state = _note(self.state, "flaky")
        raise RuntimeError(f"boom {ctx.attempt}")

    @step()
    async def error(self, ctx: StepContext) -> None:
        Log.events.append(f"error:{ctx.attempt}")
        self.state = _note(self.state, "error")
        ctx.end()


class NoRecovery(Workflow[Counter]):
    @step()
    async def only(self, ctx: StepContext) -> None:
        Log.events.append(f"only:{ctx.attempt}")
        raise ValueError("bad thing")


class DefaultRecovery(Workflow[Counter]):
    default_recovery = max_retries(1).failover_to("fallback")

    @step()
    async def work(self, ctx: StepContext) -> None:
        Log.events.append(f"work:{ctx.attempt}")
        raise RuntimeError("no")

    @step()
    async def fallback(self, ctx: StepContext) -> None:
        Log.events.append(f"fallback:{ctx.attempt}")
        ctx.end()


class BadTransition(Workflow[Counter]):
    @step(recovery=max_retries(3))
    async def go(self, ctx: StepContext) -> None:
        Log.events.append(f"go:{ctx.attempt}")
        ctx.transition_to("nowhere")


class Undecided(Workflow[Counter]):
    @step()
    async def go(self, ctx: StepContext) -> None:
        pass


class WrongState(Workflow[Counter]):
    @step()
    async def go(self, ctx: StepContext) -> None:
        self.state = {"n": 1}  # type: ignore[assignment]
        ctx.end()


class Approval(Workflow[Counter]):
    """prepare -> approve (pauses) -> done, or back to prepare on "no"."""

    @step()
    async def prepare(self, ctx: StepContext) -> None:
        Log.events.append(f"prepare:{ctx.attempt}")
        self.state = _note(self.state, "prepare")
        ctx.transition_to("approve")

    @step(timeout=1.0)
    async def approve(self, ctx: StepContext) -> None:
        Log.events.append(f"approve:{ctx.attempt}")
        decision = await ctx.pause("needs approval")
        Log.events.append(f"decision:{decision}")
        self.state = _note(self.state, f"decision:{decision}")
        if decision == "ok":
            ctx.end()
        else:
            ctx.transition_to("prepare")


class Blocked(Workflow[Counter]):
    """`prepare` starts the agent `helper` (whose model hangs until canceled); `call` runs
    it, with no timeout (`TimedCall` has one); `wait` blocks for ever."""

    def agent_options(self, key: AgentKey) -> dict[str, object]:
        async def hang(request: object) -> str:
            Log.events.append("model called")
            try:
                await asyncio.Event().wait()
            finally:
                Log.events.append("model call canceled")
            return "never"

        return {"model": FunctionModel(hang)}

    @step()
    async def prepare(self, ctx: StepContext) -> None:
        await ctx.agent("helper").get()  # started here, so `call`'s time is the run's
        ctx.transition_to("call")

    @step()
    async def call(self, ctx: StepContext) -> None:
        Log.events.append(f"call:{ctx.attempt}")
        await ctx.agent("helper").arun("hello")
        ctx.end()

    @step()
    async def wait(self, ctx: StepContext) -> None:
        Log.events.append(f"wait:{ctx.attempt}")
        await asyncio.Event().wait()
        ctx.end()


class TimedCall(Blocked):
    @step(timeout=0.5)
    async def call(self, ctx: StepContext) -> None:
        await Blocked.call(self, ctx)


class Delegating(Workflow[Counter]):
    """`ask` starts an agent with options and asks it; `again` asks it by its full key."""

    @step()
    async def ask(self, ctx: StepContext) -> None:
        agent = await ctx.start_agent("writer", model=ScriptedModel(["first answer", "second"]))
        result = await agent.arun("write")
        self.state = self.state.model_copy(update={"notes": [result.text]})
        ctx.transition_to("again")

    @step()
    async def again(self, ctx: StepContext) -> None:
        result = await ctx.agent((ctx.session, "writer", 0)).arun("again")
        self.state = self.state.model_copy(update={"notes": [*self.state.notes, result.text]})
        ctx.end()


class Loose(BaseModel):
    n: int = 0
    anything: object = None
    score: float = 0.0


class NotJsonState(Workflow[Loose]):
    """`put` leaves a state that is not JSON: an object, then NaN, then infinity in a list."""

    @step(recovery=max_retries(2))
    async def put(self, ctx: StepContext) -> None:
        Log.events.append(f"put:{ctx.attempt}")
        bad: dict[int, dict[str, object]] = {
            1: {"anything": object()},
            2: {"score": float("nan")},
            3: {"anything": {"xs": [1.0, float("inf")]}},
        }
        self.state = self.state.model_copy(update=bad[ctx.attempt])
        ctx.end()


class SlowAbort(Workflow[Counter]):
    """`call` runs the agent `helper`, whose first model call hangs and, once aborted, takes
    0.3 s to wind down; the step times out after 0.5 s and is retried once."""

    calls: ClassVar[int] = 0

    def agent_options(self, key: AgentKey) -> dict[str, object]:
        async def answer(request: object) -> str:
            SlowAbort.calls += 1
            if SlowAbort.calls == 1:
                try:
                    await asyncio.Event().wait()
                finally:
                    await asyncio.sleep(0.3)  # a slow end of the aborted run
            return "ok"

        return {"model": FunctionModel(answer)}

    @step(timeout=0.5, recovery=max_retries(1))
    async def call(self, ctx: StepContext) -> None:
        Log.events.append(f"call:{ctx.attempt}")
        result = await ctx.agent("helper").arun("hello")
        self.state = self.state.model_copy(update={"notes": [result.text]})
        ctx.end()
