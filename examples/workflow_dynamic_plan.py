"""A dynamic plan as a durable workflow: a selector agent picks the agents a request needs, a
planner puts them in order, the workflow runs the plan one agent per step, and a summarizer
answers from what they said.

    python examples/workflow_dynamic_plan.py "dinner and how to get around in Lisbon"

What it shows:
- typed answers (`arun(..., output_type=Selection)`) checked by the step: a selector that
  names an agent that does not exist, or a plan that drops one, fails the attempt, and the
  step's recovery (`max_retries(2)`) asks again from the state committed before it;
- a plan run as a loop of one step (`run_plan` transitions to itself until the plan is done):
  each agent's answer is committed before the next agent runs, so after a crash `--resume`
  goes on with the next agent instead of starting over;
- every agent runs in the workflow's session (its id), so they share one history.

Offline by default (`FunctionModel`s that answer from their prompts); set
`AGENT_RUNTIME_EXAMPLE_PROFILE` to a profile of your `config/runtime.toml` for a real model.
Prints the finished workflow as JSON.
"""

from __future__ import annotations

import argparse
import json
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

SPECIALISTS = {
    "weather": "reports the weather",
    "transport": "explains how to get around",
    "activity": "suggests things to do",
    "restaurant": "recommends where to eat",
}
ORDER = ["weather", "transport", "activity", "restaurant"]  # what the offline planner follows


class Selection(BaseModel):
    agents: list[str]


class Plan(BaseModel):
    order: list[str]


class PlanState(BaseModel):
    request: str
    selected: list[str] = []
    plan: list[str] = []
    results: dict[str, str] = {}
    answer: str | None = None


# -- offline models: each answers from its prompt -------------------------------------------


def _prompt(request: ChatRequest) -> str:
    last = request.messages[-1]
    return last.text if isinstance(last, UserMessage) else ""


def _select(request: ChatRequest) -> str:
    text = _prompt(request).split("Request:", 1)[-1].lower()
    words = {
        "weather": ("weather", "day", "out"),
        "transport": ("get around", "metro", "travel"),
        "activity": ("do", "see", "day", "out"),
        "restaurant": ("dinner", "eat", "lunch", "food"),
    }
    chosen = [name for name in ORDER if any(w in text for w in words[name])]
    return json.dumps({"agents": sorted(chosen) or ["activity"]})


def _plan(request: ChatRequest) -> str:
    names = _prompt(request).split("Agents:", 1)[-1]
    return json.dumps({"order": [n for n in ORDER if n in names]})


def _specialist(role: str) -> Any:
    answers = {
        "weather": "Mild and dry, 19 C.",
        "transport": "Take tram 28 and the metro; a 24-hour pass is best.",
        "activity": "Walk up to the Castelo de Sao Jorge at sunset.",
        "restaurant": "Dinner at a tasca in Alfama: grilled sardines.",
    }
    return lambda request: answers[role]


def _summarize(request: ChatRequest) -> str:
    lines = [line for line in _prompt(request).splitlines() if line.startswith("- ")]
    return "Your plan: " + " ".join(line.split(": ", 1)[-1] for line in lines)


OFFLINE = {
    "selector": _select,
    "planner": _plan,
    "summarizer": _summarize,
    **{name: _specialist(name) for name in SPECIALISTS},
}


class TripPlanner(Workflow[PlanState]):
    """select -> plan -> run_plan (once per planned agent) -> summarize."""

    default_recovery = max_retries(2)

    def agent_options(self, key: AgentKey) -> dict[str, Any]:
        model: ChatModel = (
            from_config(PROFILE) if PROFILE else FunctionModel(OFFLINE[key.role], model=key.role)
        )
        return {"model": model, "system_prompt": f"You are the {key.role} of a trip planner."}

    @step(timeout=60.0)
    async def select(self, ctx: StepContext) -> None:
        menu = "\n".join(f"- {name}: {what}" for name, what in SPECIALISTS.items())
        prompt = (
            f"Pick the agents this request needs.\nAgents:\n{menu}\nRequest: {self.state.request}"
        )
        result = await ctx.agent("selector").arun(prompt, output_type=Selection)
        unknown = [name for name in result.output.agents if name not in SPECIALISTS]
        if unknown or not result.output.agents:
            raise ValueError(f"the selector picked unknown agents {unknown} (or none)")
        self.state = self.state.model_copy(update={"selected": result.output.agents})
        ctx.transition_to("plan")

    @step(timeout=60.0)
    async def plan(self, ctx: StepContext) -> None:
        prompt = (
            "Order these agents so that each can use what the earlier ones said.\n"
            f"Request: {self.state.request}\nAgents: {', '.join(self.state.selected)}"
        )
        result = await ctx.agent("planner").arun(prompt, output_type=Plan)
        if sorted(result.output.order) != sorted(self.state.selected):
            raise ValueError(f"the plan {result.output.order} is not {self.state.selected}")
        self.state = self.state.model_copy(update={"plan": result.output.order})
        ctx.transition_to("run_plan")

    @step(timeout=60.0)
    async def run_plan(self, ctx: StepContext) -> None:
        pending = [name for name in self.state.plan if name not in self.state.results]
        name = pending[0]
        known = "".join(f"\n{agent} said: {said}" for agent, said in self.state.results.items())
        answer = await ctx.agent(name).arun(f"Request: {self.state.request}{known}")
        results = {**self.state.results, name: answer.text}
        self.state = self.state.model_copy(update={"results": results})
        ctx.transition_to("run_plan" if len(pending) > 1 else "summarize")

    @step(timeout=60.0)
    async def summarize(self, ctx: StepContext) -> None:
        said = "\n".join(f"- {name}: {text}" for name, text in self.state.results.items())
        prompt = (
            f"Answer the request from what the agents said.\nRequest: {self.state.request}\n{said}"
        )
        answer = await ctx.agent("summarizer").arun(prompt)
        self.state = self.state.model_copy(update={"answer": answer.text})
        ctx.end()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("request", nargs="?", default="dinner and how to get around in Lisbon")
    parser.add_argument("--db", default=".agent_runtime/workflows-example.sqlite3")
    parser.add_argument("--resume", action="store_true", help="finish unfinished plans only")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    config = load_config()
    config = config.model_copy(
        update={"memory": config.memory.model_copy(update={"path": args.db})}
    )
    with Runtime.start(config) as runtime:
        ids = runtime.workflows.resume() if args.resume else []
        if not args.resume:
            ids.append(runtime.workflows.start(TripPlanner, PlanState(request=args.request)))
        for workflow_id in ids:
            print(wait_until_not_running(runtime, workflow_id, args.timeout).model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
