"""The OpenAI Agents SDK's turn, tool run, burst and streaming figures, as one JSON object.

Run with `bench/.venv-peers/bin/python bench/peers/openai_agents_bench.py`. The model is
`CannedModel`, a `Model` subclass answering from canned output items built with the SDK's own
`agents.testing` helpers; tracing is off (`set_tracing_disabled(True)`) and no client or
provider is ever created, so nothing leaves the machine.

The streamed answer's delta events are built once per model, not per run: building them is the
provider client's work (it parses them off the wire), so the rate measured is the runner's alone,
from the model's stream to the caller's `Runner.run_streamed(...).stream_events()`. Built afresh
for every delta they would cost the rate about a third.

The tool is a plain `def`, which the SDK runs with `asyncio.to_thread`. A burst gives each run its
own `Agent`, as ours gives each its own actor: runs sharing one `Agent` are quadratic in 0.24,
since every run's tool-configuration check (`agents/run_internal/agent_tool_configuration.py`)
scans all the runs active on that agent, and 2500 of them take ~20 s instead of ~4 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import _measure as m
from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RawResponsesStreamEvent,
    Runner,
    RunResult,
    Tool,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.items import TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.testing import assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponsePromptParam,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

Reply = Callable[[str | list[TResponseInputItem]], list[TResponseOutputItem]]


def say(content: str) -> Reply:
    output = [assistant_message(content)]
    return lambda _input: output


def call_tool_then_answer(items: str | list[TResponseInputItem]) -> list[TResponseOutputItem]:
    answered = isinstance(items, list) and items[-1].get("type") == "function_call_output"
    if answered:
        return [assistant_message("done")]
    return [function_call("echo", {"text": "hi"}, call_id="call-1")]


class CannedModel(Model):
    """Answers every call with `reply(input)`, after `delay_s` of `asyncio.sleep` if any.

    Streamed, it yields `deltas` text deltas of "tok " then `response.completed` carrying the
    whole text, which is all the runner needs to build the final response.
    """

    def __init__(self, reply: Reply, *, delay_s: float = 0.0, deltas: int = 0) -> None:
        self.reply = reply
        self.delay_s = delay_s
        self.deltas = deltas
        self.delta_events = [
            ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="scripted-message",
                output_index=0,
                content_index=0,
                delta="tok ",
                logprobs=[],
                sequence_number=index,
            )
            for index in range(deltas)
        ]

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        usage = Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)
        return ModelResponse(output=self.reply(input), usage=usage, response_id=None)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        for event in self.delta_events:
            yield event
        usage = ResponseUsage(
            input_tokens=1,
            output_tokens=self.deltas,
            total_tokens=1 + self.deltas,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )
        response = Response(
            id="canned-response",
            created_at=0,
            model="canned",
            object="response",
            output=[assistant_message("tok " * self.deltas)],
            tool_choice="none",
            tools=[],
            top_p=None,
            parallel_tool_calls=False,
            status="completed",
            usage=usage,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=self.deltas
        )


async def main(plan: m.Plan) -> dict[str, object]:
    started = time.perf_counter()
    tool_calls = 0

    @function_tool
    def echo(text: str) -> str:
        """Return `text` unchanged."""
        nonlocal tool_calls
        tool_calls += 1
        return text

    instant = Agent(name="instant", model=CannedModel(say("hello")))
    slow_model = CannedModel(say("hello"), delay_s=plan.model_delay_s)
    fleet = [Agent(name=f"slow-{i}", model=slow_model) for i in range(max(plan.bursts))]
    tooled = Agent(name="tooled", model=CannedModel(call_tool_then_answer), tools=[echo])
    streaming = Agent(name="streaming", model=CannedModel(say("unused"), deltas=plan.deltas))

    async def text_turn() -> RunResult:
        return await Runner.run(instant, "hi")

    async def tool_turn() -> RunResult:
        return await Runner.run(tooled, "hi")

    def slow_turn(agent: Agent[None]) -> m.Run:
        return lambda: Runner.run(agent, "hi")

    burst_runs = [slow_turn(agent) for agent in fleet]

    async def stream_once() -> int:
        received = 0
        result = Runner.run_streamed(streaming, "hi")
        async for event in result.stream_events():
            if isinstance(event, RawResponsesStreamEvent) and isinstance(
                event.data, ResponseTextDeltaEvent
            ):
                received += 1
        if result.final_output != "tok " * plan.deltas:
            raise RuntimeError(f"streamed run ended with {result.final_output!r}")
        return received

    if (await text_turn()).final_output != "hello" or (await tool_turn()).final_output != "done":
        raise RuntimeError("a fake model's canned answer did not come back")
    if tool_calls != 1:
        raise RuntimeError(f"the tool ran {tool_calls} times in one tool turn (expected 1)")
    return await m.figures(
        "openai-agents",
        plan,
        started,
        text_turn,
        tool_turn,
        burst_runs,
        stream_once,
        ("openai-agents", "openai", "pydantic", "pydantic-core"),
    )


if __name__ == "__main__":
    m.quiet_logs()
    m.forbid_network()
    set_tracing_disabled(True)
    m.emit(asyncio.run(main(m.plan_from_argv())))
