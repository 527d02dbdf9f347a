"""pydantic-ai's turn, tool run, burst and streaming figures, printed as one JSON object.

Run with `bench/.venv-peers/bin/python bench/peers/pydantic_ai_bench.py`. The model is
pydantic-ai's own test double, `FunctionModel`, driven by async functions (a sync one would be
sent to a worker thread by `FunctionModel` itself). Each canned response carries its usage, so
`FunctionModel` skips estimating tokens from the messages: the figures are the agent's, not the
double's. The tool is a plain `def`, which pydantic-ai runs in a worker thread (as the OpenAI
Agents SDK does). Streaming goes through `agent.run_stream(...)` and
`stream_text(delta=True, debounce_by=None)`: the default debounce (0.1 s) would merge deltas.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import _measure as m
from pydantic_ai import Agent, AgentRunResult
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

USAGE = RequestUsage(input_tokens=1, output_tokens=1)


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)], usage=USAGE)


async def answer_hello(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return text("hello")


async def call_tool_then_answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return text("done")
    call = ToolCallPart(tool_name="echo", args={"text": "hi"}, tool_call_id="call-1")
    return ModelResponse(parts=[call], usage=USAGE)


async def main(plan: m.Plan) -> dict[str, object]:
    started = time.perf_counter()

    async def answer_after_delay(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(plan.model_delay_s)
        return text("hello")

    async def stream_deltas(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for _ in range(plan.deltas):
            yield "tok "

    instant = Agent(FunctionModel(answer_hello))
    slow_model = FunctionModel(answer_after_delay)
    fleet = [Agent(slow_model) for _ in range(max(plan.bursts))]  # one agent per burst run
    tooled = Agent(FunctionModel(call_tool_then_answer))
    streaming = Agent(FunctionModel(stream_function=stream_deltas))
    tool_calls = 0

    @tooled.tool_plain
    def echo(text: str) -> str:
        """Return `text` unchanged."""
        nonlocal tool_calls
        tool_calls += 1
        return text

    async def text_turn() -> AgentRunResult[str]:
        return await instant.run("hi")

    async def tool_turn() -> AgentRunResult[str]:
        return await tooled.run("hi")

    def slow_turn(agent: Agent[None, str]) -> m.Run:
        return lambda: agent.run("hi")

    burst_runs = [slow_turn(agent) for agent in fleet]

    async def stream_once() -> int:
        received = 0
        async with streaming.run_stream("hi") as result:
            async for _ in result.stream_text(delta=True, debounce_by=None):
                received += 1
        return received

    if (await text_turn()).output != "hello" or (await tool_turn()).output != "done":
        raise RuntimeError("a fake model's canned answer did not come back")
    if tool_calls != 1:
        raise RuntimeError(f"the tool ran {tool_calls} times in one tool turn (expected 1)")
    return await m.figures(
        "pydantic-ai",
        plan,
        started,
        text_turn,
        tool_turn,
        burst_runs,
        stream_once,
        ("pydantic-ai-slim", "pydantic", "pydantic-core"),
    )


if __name__ == "__main__":
    m.quiet_logs()
    m.forbid_network()
    m.emit(asyncio.run(main(m.plan_from_argv())))
