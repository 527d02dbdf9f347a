"""A durable workflow that pauses for a human approval, answered with `resume_with`, also
after the process that started it has ended.

    python examples/workflow_approval.py

What it shows:
- a step that waits for a person: `decision = await ctx.pause("...")` commits the workflow
  as `paused` and returns what `runtime.workflows.resume_with(id, value)` is given;
- the answer steers the workflow: "revise: ..." sends it back to the writer agent with the
  feedback, "ok" goes on to publish;
- a pause survives the end of the process: a first process (this script run again with
  `--first-process`) starts the workflow, has the draft revised once, and exits while the
  workflow waits for approval; this process, a new runtime on the same SQLite file (in a
  temporary directory, removed at the end), finds it still `paused` (`resume()` leaves
  paused workflows alone) and approves it;
- after a restart the paused step runs again from its start and its `ctx.pause` returns the
  stored answer at once, so the code of a step before a pause must be idempotent; the steps
  look at `ctx.attempt` (above 1: an earlier attempt may have run) and say so.

Offline: the writer is a `FunctionModel` that drafts from its prompt.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _offline import wait_until_not_running
from pydantic import BaseModel

from agent_runtime import AgentKey, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import ChatRequest
from agent_runtime.messages import UserMessage
from agent_runtime.testing import FunctionModel
from agent_runtime.workflows import StepContext, Workflow, WorkflowInfo, step

WORKFLOW_ID = "post-42"


class PostState(BaseModel):
    topic: str
    feedback: str | None = None
    draft: str | None = None
    versions: int = 0
    published: str | None = None


def write(request: ChatRequest) -> str:
    """The writer's model: a longer draft at first, a short one when told to shorten it."""
    last = request.messages[-1]
    prompt = last.text if isinstance(last, UserMessage) else ""
    if "shorter" in prompt:
        return "We ship on 12 May."
    return "After months of work and many careful reviews, we are happy to ship on 12 May."


class Post(Workflow[PostState]):
    """draft -> approve -> (draft again with the feedback | publish)."""

    def agent_options(self, key: AgentKey) -> dict[str, Any]:
        return {"model": FunctionModel(write, model="writer")}

    @step(timeout=60.0)
    async def draft(self, ctx: StepContext) -> None:
        if ctx.attempt > 1:  # an earlier attempt was interrupted: a new draft replaces it
            print(f"  draft: attempt {ctx.attempt}")
        prompt = f"Write a post about {self.state.topic}."
        if self.state.feedback:
            prompt += f" Feedback on the last draft: {self.state.feedback}"
        answer = await ctx.agent("writer").arun(prompt)
        versions = self.state.versions + 1
        self.state = self.state.model_copy(update={"draft": answer.text, "versions": versions})
        ctx.transition_to("approve")

    @step()  # no timeout: a person may take days
    async def approve(self, ctx: StepContext) -> None:
        if ctx.attempt > 1:  # a re-run (after a restart): the pause below replays its answer
            print(f"  approve: attempt {ctx.attempt}, the stored answer is replayed")
        decision = await ctx.pause(f"approve draft {self.state.versions}?")
        if decision == "ok":
            ctx.transition_to("publish")
        elif isinstance(decision, str) and decision.startswith("revise:"):
            feedback = decision.removeprefix("revise:").strip()
            self.state = self.state.model_copy(update={"feedback": feedback})
            ctx.transition_to("draft")
        else:
            raise ValueError(f"unknown decision {decision!r} (expected 'ok' or 'revise: ...')")

    @step()
    async def publish(self, ctx: StepContext) -> None:
        self.state = self.state.model_copy(update={"published": self.state.draft})
        ctx.end()


def state_of(info: WorkflowInfo) -> PostState:
    assert isinstance(info.state, PostState)
    return info.state


def first_process(db: str) -> None:
    """Start the workflow, ask for one revision, and end while it waits for approval."""
    memory = MemoryConfig(store="sqlite", path=db)
    with Runtime.start(config=RuntimeConfig(memory=memory)) as runtime:
        runtime.workflows.start(Post, PostState(topic="the launch"), id=WORKFLOW_ID)
        info = wait_until_not_running(runtime, WORKFLOW_ID)
        print(f"[process 1] {info.status}: {info.pause_reason} {state_of(info).draft!r}")
        runtime.workflows.resume_with(WORKFLOW_ID, "revise: shorter, please")
        info = wait_until_not_running(runtime, WORKFLOW_ID)
        print(f"[process 1] {info.status}: {info.pause_reason} {state_of(info).draft!r}")
        print("[process 1] exits while the workflow waits")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first-process", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_process:
        first_process(args.first_process)
        return

    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "workflows.sqlite3")
        # The first process: this script again, a process of its own that ends.
        subprocess.run([sys.executable, __file__, "--first-process", db], check=True)

        # This process: a new runtime on the same file, as after a restart.
        memory = MemoryConfig(store="sqlite", path=db)
        with Runtime.start(config=RuntimeConfig(memory=memory)) as runtime:
            resumed = runtime.workflows.resume()  # continues running ones; paused ones wait
            info = runtime.workflows.get(WORKFLOW_ID)
            print(f"[process 2] after the restart: {info.status} ({info.pause_reason})")
            print(f"[process 2] resume() continued {len(resumed)} workflows")
            runtime.workflows.resume_with(WORKFLOW_ID, "ok")
            info = wait_until_not_running(runtime, WORKFLOW_ID)
            print(f"[process 2] {info.status}: published {state_of(info).published!r}")
            print("steps:", " ".join(f"{run.step}:{run.outcome}" for run in info.steps))


if __name__ == "__main__":
    main()
