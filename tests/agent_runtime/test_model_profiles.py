"""A model profile's name wherever a model is accepted (issue 36.3): `start_agent`,
`astart_agent`, `subagents.start`, `Agent.set_model` and `Runtime.override_model` take the
name of one of the runtime's `[llm]` profiles or pools, built as the HTTP API builds it; an
unknown name is a ConfigError naming the known ones."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from agent_runtime import ConfigError, Runtime
from agent_runtime.config import FallbackPoolConfig, LLMConfig, MemoryConfig
from agent_runtime.testing import ScriptedModel

KNOWN = r"\(configured profiles: anthropic, gemini, local, openai, scripted, twice\)"


@pytest.fixture
def runtime(make_runtime: Callable[..., Runtime]) -> Runtime:
    pools = {"twice": FallbackPoolConfig(members=["scripted"])}
    return make_runtime(memory=MemoryConfig(store="memory"), llm=LLMConfig(pools=pools))


def test_start_agent_takes_a_profile_name(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model="scripted")
    assert agent.run("hi", timeout=10).text == "echo: hi"  # the `scripted` profile's model
    assert agent.state().model.provider == "scripted"


def test_start_agent_takes_a_pool_name(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model="twice")
    assert agent.run("hi", timeout=10).text == "echo: hi"


def test_astart_agent_and_subagents_start_take_a_profile_name(runtime: Runtime) -> None:
    async def started() -> str:
        agent = await runtime.astart_agent(("s", "main", 0), model="scripted")
        return (await agent.arun("from asyncio", timeout=10)).text

    assert asyncio.run(started()) == "echo: from asyncio"
    other = runtime.subagents.start(("s", "other", 0), model="scripted")
    assert other.run("hi", timeout=10).text == "echo: hi"


def test_an_unknown_profile_name_names_the_known_ones(runtime: Runtime) -> None:
    message = r"model 'gpt-5' is not a ChatModel nor a configured model profile " + KNOWN
    with pytest.raises(ConfigError, match=message):
        runtime.start_agent(("s", "main", 0), model="gpt-5")
    assert runtime.registry.lookup(("s", "main", 0)) is None


def test_a_profile_that_cannot_be_built_says_why(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        runtime.start_agent(("s", "main", 0), model="openai")


def test_set_model_takes_a_profile_name(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["own"]))
    assert agent.run("first", timeout=10).text == "own"
    agent.set_model("scripted")
    assert agent.run("second", timeout=10).text == "echo: second"
    with pytest.raises(ConfigError, match=KNOWN):
        agent.set_model("nope")
    assert agent.run("third", timeout=10).text == "echo: third"  # the refused name changed nothing


def test_override_model_takes_a_profile_name(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["own", "own again"]))
    with runtime.override_model("main", "scripted"):
        assert agent.run("inside", timeout=10).text == "echo: inside"
    assert agent.run("after", timeout=10).text == "own"
    with pytest.raises(ConfigError, match=KNOWN), runtime.override_model(agent, "nope"):
        pass


def test_no_model_at_all_names_every_way_to_give_one(runtime: Runtime) -> None:
    with pytest.raises(TypeError) as refused:
        runtime.start_agent(("s", "main", 0))
    message = str(refused.value)
    for way in ("a ChatModel", "the name of an [llm] profile", "default_profile"):
        assert way in message
