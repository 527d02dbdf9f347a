"""The workflow of the lease tests: `s1` -> `s2` -> `s3` -> `s4`, each appending its name to the
state and `start|end STEP ATTEMPT PID` to `steps.log` (synced). `s2` waits while the file
`hold` exists, so that the test can kill or stop a process in the middle of it."""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from agent_runtime.workflows import StepContext, Workflow, step

STEPS = ("s1", "s2", "s3", "s4")


class RelayState(BaseModel):
    done: list[str] = []


def record(line: str) -> None:
    with open("steps.log", "a", encoding="utf-8") as file:
        file.write(f"{line} {os.getpid()}\n")
        file.flush()
        os.fsync(file.fileno())


class Relay(Workflow[RelayState]):
    async def _run(self, ctx: StepContext, name: str) -> None:
        record(f"start {name} {ctx.attempt}")
        while name == "s2" and os.path.exists("hold"):
            await asyncio.sleep(0.05)
        self.state = RelayState(done=[*self.state.done, name])
        record(f"end {name} {ctx.attempt}")
        index = STEPS.index(name)
        if index + 1 < len(STEPS):
            ctx.transition_to(STEPS[index + 1])
        else:
            ctx.end()

    @step()
    async def s1(self, ctx: StepContext) -> None:
        await self._run(ctx, "s1")

    @step()
    async def s2(self, ctx: StepContext) -> None:
        await self._run(ctx, "s2")

    @step()
    async def s3(self, ctx: StepContext) -> None:
        await self._run(ctx, "s3")

    @step()
    async def s4(self, ctx: StepContext) -> None:
        await self._run(ctx, "s4")
