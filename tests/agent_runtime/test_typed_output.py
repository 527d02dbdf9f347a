"""Typed output on runs (issue 16): `output_type`, `output_retries` and `on_failure` on
`start_agent` and on `run`/`arun`; the structured, tool and JSON modes, over ScriptedModel and
over real HTTP against the mock provider server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

import agent_runtime
from agent_runtime import OutputValidationError, RunFailed, Runtime
from agent_runtime._errors import InvalidOutput
from agent_runtime.llm import InvalidRequestError, StructuredOutputError, openai_compatible
from agent_runtime.loop import RetryPolicy
from agent_runtime.loop._output import OutputSpec
from agent_runtime.messages import ToolCall, ToolResultMessage, UserMessage
from agent_runtime.testing import MockProviderServer, ScriptedModel, ScriptedTurn
from agent_runtime.tools import tool

OSLO = '{"name": "Oslo", "population": 700000}'
NO_POPULATION = '{"name": "Oslo"}'


class City(BaseModel):
    name: str
    population: int


@tool
def lookup(name: str) -> str:
    """Look a city up."""
    return f"{name}: 700000 people"


def _agent(runtime: Runtime, model: Any, **options: Any) -> agent_runtime.Agent:
    return runtime.start_agent(("s", "main", 0), model=model, **options)


# -- accepted answers -----------------------------------------------------------------------------


def test_a_json_text_answer_is_validated_into_output(runtime: Runtime) -> None:
    model = ScriptedModel([OSLO, "plain"])
    agent = _agent(runtime, model)
    result = agent.run("Which city?", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    assert result.text == OSLO
    # The model has the structured capability: the provider's schema mode is asked for.
    assert model.requests[0].response_schema == City.model_json_schema()
    untyped = agent.run("and now?", timeout=10)
    assert untyped.output == "plain"  # no output_type: the text
    assert model.requests[1].response_schema is None


def test_the_agents_default_output_type_applies_to_every_run_and_a_run_may_override_it(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([OSLO, "[1, 2, 3]", "```json\n" + OSLO + "\n```"])
    agent = _agent(runtime, model, output_type=City)
    assert agent.run("one", timeout=10).output == City(name="Oslo", population=700000)
    assert agent.run("two", timeout=10, output_type=list[int]).output == [1, 2, 3]
    assert agent.run("three", timeout=10).output == City(name="Oslo", population=700000)


def test_arun_takes_the_output_options(runtime: Runtime) -> None:
    model = ScriptedModel([NO_POPULATION, OSLO])
    agent = _agent(runtime, model)

    async def go() -> Any:
        return await agent.arun("Which city?", timeout=10, output_type=City, output_retries=1)

    assert asyncio.run(go()).output == City(name="Oslo", population=700000)


# -- retries and failure --------------------------------------------------------------------------


def test_an_invalid_answer_is_told_what_failed_and_asked_again(runtime: Runtime) -> None:
    model = ScriptedModel([NO_POPULATION, OSLO])
    agent = _agent(runtime, model)
    result = agent.run("Which city?", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    feedback = model.requests[1].messages[-1]
    assert isinstance(feedback, UserMessage)
    assert "City" in feedback.text and "population" in feedback.text
    assert "Field required" in feedback.text
    # The whole exchange is the run's: the feedback stays in the history the model saw.
    assert [type(m).__name__ for m in result.new_messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]


def test_after_the_retries_the_run_raises_output_validation_error_with_raw_and_errors(
    runtime: Runtime,
) -> None:
    model = ScriptedModel(["not json at all", NO_POPULATION, OSLO])
    agent = _agent(runtime, model, output_type=City)
    with pytest.raises(OutputValidationError) as caught:
        agent.run("Which city?", timeout=10)
    error = caught.value
    assert isinstance(error, RunFailed) and isinstance(error, InvalidOutput)
    assert error.raw == NO_POPULATION
    assert [e["loc"] for e in error.errors] == [("population",)]
    assert error.reason.startswith("output_invalid:") and "City" in error.reason
    assert model.call_count == 2  # one answer and output_retries=1 more
    assert agent.state().error is not None


def test_output_retries_bounds_the_attempts(runtime: Runtime) -> None:
    model = ScriptedModel(["no", "no", "no", OSLO])
    agent = _agent(runtime, model, output_type=City, output_retries=0)
    with pytest.raises(OutputValidationError):
        agent.run("one", timeout=10)
    assert model.call_count == 1
    assert agent.run("two", timeout=10, output_retries=2).output == City(
        name="Oslo", population=700000
    )
    assert model.call_count == 4


def test_on_failure_maps_the_failure_to_a_fallback_output(runtime: Runtime) -> None:
    seen: list[Exception] = []

    def fallback(error: Exception) -> City:
        seen.append(error)
        return City(name="unknown", population=0)

    model = ScriptedModel(["no", "no"])
    agent = _agent(runtime, model, output_type=City, on_failure=fallback)
    result = agent.run("Which city?", timeout=10)
    assert result.output == City(name="unknown", population=0)
    assert result.stop_reason == "error"
    assert isinstance(seen[0], OutputValidationError) and seen[0].raw == "no"


def test_on_failure_also_takes_a_provider_failure(runtime: Runtime) -> None:
    failing = ScriptedModel([ScriptedTurn(error=InvalidRequestError("bad request"))])
    agent = _agent(runtime, failing, retry=RetryPolicy(max_retries=0))
    result = agent.run("x", timeout=10, output_type=City, on_failure=lambda e: type(e).__name__)
    assert result.output == "RunFailed"


def test_a_final_answer_that_is_no_output_fails_even_at_the_tool_turn_limit(
    runtime: Runtime,
) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[ToolCall(id="c1", name="lookup")])])
    agent = _agent(runtime, model, tools=[lookup], max_tool_turns=1)
    with pytest.raises(OutputValidationError) as caught:
        agent.run("x", timeout=10, output_type=City)
    assert "I stopped after 1 rounds" in caught.value.raw


# -- the modes ------------------------------------------------------------------------------------


def test_a_model_with_tools_but_no_structured_mode_is_made_to_call_final_result(
    runtime: Runtime,
) -> None:
    bad = ScriptedTurn(tool_calls=[ToolCall(id="o1", name="final_result", arguments={"x": 1})])
    good = ScriptedTurn(
        tool_calls=[
            ToolCall(id="o2", name="final_result", arguments={"name": "Oslo", "population": 700000})
        ]
    )
    model = ScriptedModel([bad, good], capabilities=["tools", "streaming"])
    agent = _agent(runtime, model, tools=[lookup])
    result = agent.run("Which city?", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    first, second = model.requests
    assert first.response_schema is None
    assert [t.name for t in first.tools] == ["lookup", "final_result"]
    assert first.tools[1].parameters == City.model_json_schema()
    assert first.tool_choice == "required"  # its own tools stay callable
    told = second.messages[-1]
    assert isinstance(told, ToolResultMessage) and told.is_error
    assert "population" in told.text
    # Every call got its result: the history stays valid for the next run.
    assert isinstance(result.new_messages[-1], ToolResultMessage)
    assert not result.new_messages[-1].is_error


def test_the_tool_mode_still_accepts_a_json_text_answer(runtime: Runtime) -> None:
    model = ScriptedModel([OSLO], capabilities=["tools", "streaming"])
    agent = _agent(runtime, model)
    result = agent.run("Which city?", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    assert model.requests[0].tool_choice == "final_result"  # no tools of its own


def test_a_non_object_type_is_wrapped_for_the_tool_mode(runtime: Runtime) -> None:
    call = ToolCall(id="o1", name="final_result", arguments={"response": [1, 2]})
    model = ScriptedModel([ScriptedTurn(tool_calls=[call])], capabilities=["tools", "streaming"])
    result = _agent(runtime, model).run("x", timeout=10, output_type=list[int])
    assert result.output == [1, 2]
    assert model.requests[0].tools[0].parameters["required"] == ["response"]


def test_a_model_with_neither_is_asked_for_json_in_the_system_prompt(runtime: Runtime) -> None:
    model = ScriptedModel([OSLO], capabilities=["streaming"])
    agent = _agent(runtime, model, system_prompt="You know cities.")
    assert agent.run("x", timeout=10, output_type=City).output.population == 700000
    request = model.requests[0]
    assert request.response_schema is None and not request.tools
    assert request.system is not None and request.system.startswith("You know cities.")
    assert json.dumps(City.model_json_schema()) in request.system


# -- over HTTP ------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[MockProviderServer]:
    with MockProviderServer() as srv:
        yield srv


def _http_model(server: MockProviderServer, **options: Any) -> Any:
    return openai_compatible(server.base_url("openai"), "m", **options)


def test_http_strict_mode_sends_the_json_schema_and_retries_an_invalid_answer(
    runtime: Runtime, server: MockProviderServer
) -> None:
    server.enqueue(NO_POPULATION, OSLO)
    agent = _agent(runtime, _http_model(server))
    result = agent.run("Which city?", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    first, second = (r.json for r in server.requests)
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"] == City.model_json_schema()
    assert "population" in second["messages"][-1]["content"]


def test_http_json_mode_of_a_provider_without_schemas(
    runtime: Runtime, server: MockProviderServer
) -> None:
    server.enqueue(OSLO)
    model = _http_model(server, structured_output_mode="json_object")
    result = _agent(runtime, model).run("x", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    body = server.requests[0].json
    assert body["response_format"] == {"type": "json_object"}


def test_http_tool_mode_forces_one_final_result_call(
    runtime: Runtime, server: MockProviderServer
) -> None:
    arguments = {"name": "Oslo", "population": 700000}
    server.enqueue(
        ScriptedTurn(tool_calls=[ToolCall(id="o1", name="final_result", arguments=arguments)])
    )
    model = _http_model(server, capabilities=["tools", "streaming"])
    result = _agent(runtime, model).run("x", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    body = server.requests[0].json
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "final_result"}}


def test_http_prompt_mode_without_tools_or_schemas(
    runtime: Runtime, server: MockProviderServer
) -> None:
    server.enqueue("```json\n" + OSLO + "\n```")
    model = _http_model(server, capabilities=["streaming"])
    result = _agent(runtime, model).run("x", timeout=10, output_type=City)
    assert result.output == City(name="Oslo", population=700000)
    body = server.requests[0].json
    assert "response_format" not in body and "tools" not in body
    assert "JSON schema" in body["messages"][0]["content"]


# -- bad input and the error tree -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"output_type": object()}, TypeError, "output_type must be a type pydantic"),
        ({"output_type": City, "output_retries": -1}, ValueError, "output_retries"),
        ({"output_type": City, "output_retries": "2"}, ValueError, "output_retries"),
        ({"output_retries": 2}, ValueError, "output_retries needs an output_type"),
        ({"on_failure": 5}, TypeError, "on_failure must be a callable"),
    ],
)
def test_bad_output_options_of_a_run_are_rejected_by_name(
    runtime: Runtime, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    model = ScriptedModel([OSLO])
    agent = _agent(runtime, model)
    with pytest.raises(error, match=named):
        agent.run("x", timeout=10, **options)
    assert model.call_count == 0  # refused before any run started


@pytest.mark.parametrize(
    ("options", "error", "named"),
    [
        ({"output_type": object()}, TypeError, "output_type must be a type pydantic"),
        ({"output_type": City, "output_retries": -1}, ValueError, "output_retries"),
        ({"output_retries": True}, ValueError, "output_retries"),
        ({"on_failure": "x"}, TypeError, "on_failure must be a callable"),
    ],
)
def test_bad_output_options_of_an_agent_are_rejected_by_name(
    runtime: Runtime, options: dict[str, Any], error: type[Exception], named: str
) -> None:
    with pytest.raises(error, match=named):
        _agent(runtime, ScriptedModel(), **options)


def test_output_validation_error_and_structured_output_error_share_their_base() -> None:
    assert agent_runtime.OutputValidationError is OutputValidationError
    assert "OutputValidationError" in agent_runtime.__all__
    llm_error = StructuredOutputError("bad", errors=[{"loc": ("x",)}], raw="{}")
    run_error = OutputValidationError("output_invalid: bad", raw="{}", errors=[])
    for error in (llm_error, run_error):
        assert isinstance(error, InvalidOutput)
        assert error.raw == "{}"
    assert issubclass(OutputValidationError, RunFailed)


# -- issue 36.3: the output of an untyped run, the typed options -----------------------------------


def test_without_output_type_the_output_is_the_answers_text(runtime: Runtime) -> None:
    agent = _agent(runtime, ScriptedModel(["Six words.", "again"]))
    assert agent.run("How many?", timeout=10).output == "Six words."

    async def arun() -> object:
        return (await agent.arun("And now?", timeout=10)).output

    assert asyncio.run(arun()) == "again"


def test_a_result_built_by_hand_has_its_text_as_output() -> None:
    result = agent_runtime.RunResult(
        run_id="r", new_messages=[], text="hello", usage=agent_runtime.Usage(), stop_reason="stop"
    )
    assert result.output == "hello"
    assert agent_runtime.RunResult.model_validate_json(result.model_dump_json()) == result


def test_the_typed_options_are_the_agent_options() -> None:
    typed = set(agent_runtime.AgentOptionsDict.__annotations__)
    # output_type and on_failure are parameters of their own, typed with the agent's output.
    assert typed | {"output_type", "on_failure"} == set(agent_runtime.AgentOptions.model_fields)


def refs_in(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for value in node.values() for r in refs_in(value)]
    if isinstance(node, list):
        return [r for value in node for r in refs_in(value)]
    return []


def resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part]  # a KeyError: the reference points at nothing
    return node


@pytest.mark.parametrize("output_type", [list[City], City | None, tuple[City, int]])
def test_a_wrapped_types_schema_keeps_its_references_resolvable(output_type: Any) -> None:
    # Structured modes and the final_result tool take an object schema: a type that is not
    # one is wrapped, and the definitions its references point at must stay at the root.
    spec = OutputSpec.of(output_type, 1)
    assert spec.wrapped
    refs = refs_in(spec.object_schema)
    assert refs
    for ref in refs:
        assert resolve(spec.object_schema, ref)["title"] == "City"
