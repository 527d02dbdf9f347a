"""A predefined sequence of agents as a durable workflow: a weather agent, then an activity
agent that plans with the weather's answer.

    python examples/workflow_sequence.py "a day out in Madrid" --db /tmp/trip.sqlite3

What it shows:
- `class Trip(Workflow[TripState])` with a `@step` per agent: each step calls its agent with
  `ctx.agent(role)` (started at first use in the workflow's session, with the options of
  `Trip.agent_options`), stores the answer in the state and names the next step;
- every step has a timeout and a recovery (`max_retries(2).failover_to("error")`): a model
  that keeps failing leads to the `error` step, which ends the trip without a suggestion;
- the state, the step and its attempt are committed to the session store (SQLite at `--db`)
  before and after each step: stop the process at any point and run it again with
  `--resume` to finish the unfinished trips (the interrupted step runs again).

The models are offline by default (`FunctionModel`s answering from the prompt). Set
`AGENT_RUNTIME_EXAMPLE_PROFILE` to a profile name of your `config/runtime.toml` to use a real
model for both agents instead. Prints the finished workflow as JSON.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from _offline import wait_until_not_running
from pydantic import BaseModel

from agent_runtime import AgentKey, Runtime, load_config
from agent_runtime.llm import from_config
from agent_runtime.llm.base import ChatModel
from agent_runtime.llm.types import ChatRequest
from agent_runtime.messages import UserMessage
from agent_runtime.testing import FunctionModel
from agent_runtime.workflows import StepContext, Workflow, max_retries, step

PROFILE = os.environ.get("AGENT_RUNTIME_EXAMPLE_PROFILE")


class TripState(BaseModel):
    query: str
    weather: str | None = None
    activity: str | None = None


def _prompt(request: ChatRequest) -> str:
    last = request.messages[-1]
    return last.text if isinstance(last, UserMessage) else ""


def _forecast(request: ChatRequest) -> str:
    return "Sunny, 24 C, a light breeze in the afternoon."


def _suggest(request: ChatRequest) -> str:
    prompt = _prompt(request)
    if "Sunny" in prompt:
        return "Walk the Retiro park in the morning, then a terrace lunch in La Latina."
    return "Visit the Prado museum and have churros at San Gines."


OFFLINE = {"weather": _forecast, "activity": _suggest}
PROMPTS = {
    "weather": "You report the weather for a place and day in one sentence.",
    "activity": "You suggest one activity that suits the weather you are given.",
}


class Trip(Workflow[TripState]):
    """weather -> activity -> end; `error` when an agent keeps failing."""

    def agent_options(self, key: AgentKey) -> dict[str, Any]:
        model: ChatModel = (
            from_config(PROFILE) if PROFILE else FunctionModel(OFFLINE[key.role], model=key.role)
        )
        return {"model": model, "system_prompt": PROMPTS[key.role]}

    @step(timeout=60.0, recovery=max_retries(2).failover_to("error"))
    async def weather(self, ctx: StepContext) -> None:
        answer = await ctx.agent("weather").arun(
            f"What will the weather be for: {self.state.query}?"
        )
        self.state = self.state.model_copy(update={"weather": answer.text})
        ctx.transition_to("activity")

    @step(timeout=60.0, recovery=max_retries(2).failover_to("error"))
    async def activity(self, ctx: StepContext) -> None:
        prompt = f"Plan: {self.state.query}. Weather: {self.state.weather}. One suggestion?"
        answer = await ctx.agent("activity").arun(prompt)
        self.state = self.state.model_copy(update={"activity": answer.text})
        ctx.end()

    @step()
    async def error(self, ctx: StepContext) -> None:
        self.state = self.state.model_copy(update={"activity": "no suggestion (an agent failed)"})
        ctx.end()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("query", nargs="?", default="a day out in Madrid")
    parser.add_argument("--db", default=".agent_runtime/workflows-example.sqlite3")
    parser.add_argument("--resume", action="store_true", help="finish unfinished trips only")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    config = load_config()
    config = config.model_copy(
        update={"memory": config.memory.model_copy(update={"path": args.db})}
    )
    with Runtime.start(config) as runtime:
        ids = runtime.workflows.resume() if args.resume else []
        if not args.resume:
            ids.append(runtime.workflows.start(Trip, TripState(query=args.query)))
        for workflow_id in ids:
            info = wait_until_not_running(runtime, workflow_id, args.timeout)
            print(info.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
