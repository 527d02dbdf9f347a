"""What type checkers see of the public API (issue 36.3): read by mypy and basedpyright in
`test_typecheck.py`, never run. `assert_type` states a type both must infer; a line that
must fail carries the one ignore comment of each checker for that error (mypy's
`warn_unused_ignores` and basedpyright's `reportUnnecessaryTypeIgnoreComment` fail the
check when the error goes away)."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic import BaseModel

from agent_runtime import (
    Agent,
    AgentOptionsDict,
    MemoryPolicy,
    RetryPolicy,
    RunResult,
    Runtime,
    RuntimeConfig,
    tool,
)
from agent_runtime.cluster import ClusterRuntime
from agent_runtime.config import (
    AgentConfig,
    EventStreamConfig,
    LLMConfig,
    MemoryConfig,
    ModelProfile,
    RetryConfig,
    SubscriptionConfig,
    SupervisionConfig,
    TelemetryConfig,
)
from agent_runtime.llm import ChatRequest
from agent_runtime.loop import LoopConfig
from agent_runtime.messages import AssistantMessage, TextContent, ToolCall, Usage, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.workflows import StepContext


class Book(BaseModel):
    title: str
    pages: int


def no_book(error: Exception) -> Book:
    return Book(title="none", pages=0)


@tool
def count(text: str) -> int:
    """Count words."""
    return len(text.split())


def configs_construct_with_keywords_only() -> None:
    # Fields with defaults are optional arguments (no pydantic plugin needed).
    RuntimeConfig(memory=MemoryConfig(store="memory"))
    MemoryConfig(store="sqlite", path="memory.sqlite3", last_n=10)
    AgentConfig(max_tool_turns=5, tool_timeout=None)
    SupervisionConfig(max_restarts=1)
    EventStreamConfig(max_queue=10)
    SubscriptionConfig(max_queue=10, overflow="drop_oldest")
    RetryConfig(max_retries=0)
    TelemetryConfig(log_content=True)
    LLMConfig(default_profile="local", profiles={"x": ModelProfile(provider="openai")})
    RetryPolicy(max_retries=0)
    MemoryPolicy(last_n=4)
    LoopConfig(model=ScriptedModel(["hi"]), max_tool_turns=3)
    ScriptedTurn(text="hi", delay=0.1)
    ChatRequest(messages=[UserMessage(content="hi")])
    AssistantMessage(content=[TextContent(text="hi")], usage=Usage(input_tokens=1))
    ToolCall(id="c1", name="count", arguments={"text": "a b"})


def agents_are_typed_by_their_output(runtime: Runtime) -> None:
    model = ScriptedModel(["hi"])
    plain = runtime.start_agent(("s", "plain", 0), model=model, tools=[count])
    assert_type(plain, Agent[str])
    assert_type(plain.run("hi"), RunResult[str])
    assert_type(plain.run("hi").output, str)

    books = runtime.start_agent(("s", "books", 0), model=model, output_type=Book)
    assert_type(books, Agent[Book])
    assert_type(books.run("a book").output, Book)
    fallback = runtime.start_agent(("s", "f", 0), output_type=Book, on_failure=no_book)
    assert_type(fallback, Agent[Book])

    # A run's own output_type types that run's result.
    assert_type(plain.run("a book", output_type=Book), RunResult[Book])
    assert_type(books.run("n", output_type=int).output, int)
    assert_type(plain.run("ns", output_type=list[int]).output, list[int])
    assert_type(plain.run("a book", output_type=Book, on_failure=no_book).output, Book)
    assert_type(plain.run("hi", on_failure=lambda error: "sorry").output, str)

    found = runtime.registry.lookup(("s", "books", 0))
    if isinstance(found, Agent):
        assert_type(found.run("hi").output, Any)  # an agent found by key: any output
    spawned = runtime.subagents.start(("s", "sub", 0), model=model, output_type=Book)
    assert_type(spawned, Agent[Book])
    assert_type(runtime.subagents.start(("s", "sub", 1), model=model), Agent[str])


async def async_twins_are_typed_too(runtime: Runtime) -> None:
    books = await runtime.astart_agent(("s", "books", 0), model="local", output_type=Book)
    assert_type(books, Agent[Book])
    assert_type(await books.arun("a book"), RunResult[Book])
    plain = await runtime.astart_agent(("s", "plain", 0), model="local")
    assert_type((await plain.arun("hi")).output, str)
    assert_type((await plain.arun("hi", output_type=Book)).output, Book)


def options_are_checked(runtime: Runtime, options: AgentOptionsDict) -> None:
    runtime.start_agent(
        ("s", "all", 0),
        model="local",
        system_prompt="Be brief.",
        tools=[count],
        steering_mode="all",
        follow_up_mode="one_at_a_time",
        max_tool_concurrency=2,
        max_tool_turns=5,
        tool_timeout=3.0,
        retry=RetryPolicy(max_retries=0),
        memory=MemoryPolicy.none(),
        restart="transient",
        thinking_level="low",
        tool_registry=True,
        abort_grace=0.5,
        tool_choice="auto",
        temperature=0.2,
        max_output_tokens=100,
        guardrails=[],
        output_retries=2,
    )
    runtime.start_agent(("s", "dict", 0), **options)
    key = ("s", "a", 0)
    start = runtime.start_agent
    start(key, modle="local")  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue]
    start(key, max_tool_turns="3")  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]
    start(key, steering_mode="x")  # type: ignore[call-overload]  # pyright: ignore[reportCallIssue, reportArgumentType]


def cluster_options_are_checked_as_a_runtime_s(cluster: ClusterRuntime) -> None:
    cluster.start_agent(("s", "c", 0), model="local", node="n1", restart="transient")
    cluster.start_agent(("s", "c", 1), model="local", output_type=Book, on_failure=no_book)
    cluster.subagents.start(("s", "c", 2), model="local", tools=[count])
    start = cluster.start_agent
    start(("s", "c", 3), modle="local")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    start(("s", "c", 4), max_tool_turns="3")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


def on_failure_returns_the_output_type(runtime: Runtime, plain: Agent[str]) -> None:
    def text(error: Exception) -> str:
        return "text"

    # An agent's output type is fixed: a fallback of another type is an error in both.
    plain.run("hi", on_failure=lambda error: 0)  # type: ignore[arg-type, return-value]  # pyright: ignore[reportCallIssue, reportArgumentType]
    plain.run("hi", on_failure=text)
    # At the start, mypy refuses a fallback of another type than output_type; pyright widens
    # the agent's output to both (Agent[Book | str]), so each use of `.output` is checked.
    start = runtime.start_agent
    widened = start(("s", "f", 0), output_type=Book, on_failure=text)  # type: ignore[arg-type]
    assert_type(widened, Agent[Book | str])  # type: ignore[assert-type]


def setters_are_typed(agent: Agent[str]) -> None:
    agent.set_model("local")  # a profile name is a model
    agent.set_model(ScriptedModel(["hi"]))
    agent.set_tools([count])
    agent.set_steering_mode("all")
    agent.set_model(3)  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    agent.set_follow_up_mode("some")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]


async def a_workflow_steps_agent_options_are_checked(ctx: StepContext) -> None:
    ctx.agent("writer", max_tool_turns=3, memory=MemoryPolicy.none())
    await ctx.start_agent(("s", "editor", 0), temperature=0.2)
    ctx.agent("writer", modle="local")  # type: ignore[call-arg]  # pyright: ignore[reportCallIssue]
    await ctx.start_agent("editor", max_tool_turns="3")  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
