"""`runtime.override_model(agent_or_role, model)`: a test puts a model in place of agents'
own for the length of a block (issue 16, "Test doubles users expect")."""

from __future__ import annotations

import threading

import pytest

from agent_runtime import Runtime
from agent_runtime.agent import Agent
from agent_runtime.llm import ChatRequest
from agent_runtime.testing import FunctionModel, ScriptedModel


def _says(word: str) -> FunctionModel:
    """A model that always answers `word`."""

    def reply(request: ChatRequest) -> str:
        return word

    return FunctionModel(reply, model=word)


def _answer(agent: Agent) -> str:
    return agent.run("hi", timeout=10).text


def test_an_agent_uses_the_override_inside_the_block_and_its_own_model_after(
    runtime: Runtime,
) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=_says("own"))
    with runtime.override_model(agent, _says("fake")):
        assert _answer(agent) == "fake"
        assert _answer(agent) == "fake"
    assert _answer(agent) == "own"


def test_an_override_of_one_agent_leaves_others_of_its_role_alone(runtime: Runtime) -> None:
    first = runtime.start_agent(("s", "main", 0), model=_says("own"))
    second = runtime.start_agent(("s", "main", 1), model=_says("own"))
    with runtime.override_model(first, _says("fake")):
        assert (_answer(first), _answer(second)) == ("fake", "own")


def test_a_role_override_covers_every_agent_of_the_role_also_ones_started_inside(
    runtime: Runtime,
) -> None:
    before = runtime.start_agent(("s1", "writer", 0), model=_says("own"))
    other_role = runtime.start_agent(("s1", "critic", 0), model=_says("own"))
    with runtime.override_model("writer", _says("fake")):
        inside = runtime.start_agent(("s2", "writer", 0), model=_says("own"))
        assert [_answer(a) for a in (before, inside, other_role)] == ["fake", "fake", "own"]
    assert [_answer(a) for a in (before, inside)] == ["own", "own"]


def test_the_own_model_is_back_after_an_exception_in_the_block(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=_says("own"))
    with pytest.raises(RuntimeError, match="boom"), runtime.override_model(agent, _says("fake")):
        assert _answer(agent) == "fake"
        raise RuntimeError("boom")
    assert _answer(agent) == "own"


def test_nested_overrides_restore_in_order(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=_says("own"))
    with runtime.override_model("main", _says("outer")):
        assert _answer(agent) == "outer"
        with runtime.override_model(agent, _says("inner")):
            assert _answer(agent) == "inner"
            with runtime.override_model("main", _says("innermost")):
                assert _answer(agent) == "innermost"
            assert _answer(agent) == "inner"
        assert _answer(agent) == "outer"
    assert _answer(agent) == "own"


def test_a_set_model_inside_the_block_is_the_model_after_it(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=_says("own"))
    with runtime.override_model(agent, _says("fake")):
        agent.set_model(_says("changed"))
        assert _answer(agent) == "fake"
    assert _answer(agent) == "changed"


def test_the_overriding_model_sees_the_agent_s_requests(runtime: Runtime) -> None:
    own = ScriptedModel()
    fake = ScriptedModel(["faked"])
    agent = runtime.start_agent(("s", "main", 0), model=own, system_prompt="be brief")
    with runtime.override_model(agent, fake):
        assert _answer(agent) == "faked"
    assert own.call_count == 0
    assert [r.system for r in fake.requests] == ["be brief"]


def test_overrides_on_several_threads_each_end_on_their_own(runtime: Runtime) -> None:
    agents = [runtime.start_agent(("s", f"role{n}", 0), model=_says("own")) for n in range(4)]
    seen: dict[int, str] = {}
    ready = threading.Barrier(len(agents), timeout=10)

    def use(n: int) -> None:
        with runtime.override_model(f"role{n}", _says(f"fake{n}")):
            ready.wait()  # every override is active at once
            seen[n] = _answer(agents[n])
            ready.wait()  # and stays so until every agent answered

    threads = [threading.Thread(target=use, args=(n,)) for n in range(len(agents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert seen == {n: f"fake{n}" for n in range(len(agents))}
    assert [_answer(a) for a in agents] == ["own"] * len(agents)


@pytest.mark.parametrize(
    ("target", "model", "error", "message"),
    [
        (3, None, TypeError, "needs an Agent or a role name \\(str\\), not int"),
        ("", None, ValueError, "not an empty role"),
        ("main", "gpt-4o", TypeError, "needs a ChatModel instance, not str"),
        ("main", ScriptedModel, TypeError, "not the class ScriptedModel"),
    ],
)
def test_bad_arguments_are_named(
    runtime: Runtime, target: object, model: object, error: type[Exception], message: str
) -> None:
    chosen = _says("x") if model is None else model
    with pytest.raises(error, match=message), runtime.override_model(target, chosen):  # type: ignore[arg-type]
        pass
