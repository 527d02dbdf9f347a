"""The workflow of the SIGKILL test: `first` -> `blocking` -> `last`. Each step appends
`start STEP ATTEMPT` and `end STEP ATTEMPT` to `steps.log` (synced), so the test sees every
execution; `blocking` hangs on its first attempt, until the process is killed."""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from agent_runtime.workflows import StepContext, Workflow, step

SIDE_FILE = "steps.log"


class JourneyState(BaseModel):
    done: list[str] = []


def record(line: str) -> None:
    with open(SIDE_FILE, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


class Journey(Workflow[JourneyState]):
    @step()
    async def first(self, ctx: StepContext) -> None:
        record(f"start first {ctx.attempt}")
        self.state = JourneyState(done=[*self.state.done, "first"])
        record(f"end first {ctx.attempt}")
        ctx.transition_to("blocking")

    @step()
    async def blocking(self, ctx: StepContext) -> None:
        record(f"start blocking {ctx.attempt}")
        if ctx.attempt == 1:
            await asyncio.Event().wait()  # killed here
        self.state = JourneyState(done=[*self.state.done, "blocking"])
        record(f"end blocking {ctx.attempt}")
        ctx.transition_to("last")

    @step()
    async def last(self, ctx: StepContext) -> None:
        record(f"start last {ctx.attempt}")
        self.state = JourneyState(done=[*self.state.done, "last"])
        record(f"end last {ctx.attempt}")
        ctx.end()
