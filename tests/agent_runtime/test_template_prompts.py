"""An agent's `system_prompt=Template(...)`: rendered from `runtime.templates` at the start of
each run, so an update applies without a restart; a missing template or parameter fails the
run's start with an error naming it, and the agent goes on."""

from __future__ import annotations

import pytest

from agent_runtime import (
    Runtime,
    Template,
    TemplateError,
    TemplateNotFound,
    TemplateParameterMissing,
)
from agent_runtime.testing import ScriptedModel


def test_an_update_applies_from_the_next_run_without_a_restart(runtime: Runtime) -> None:
    runtime.templates.init("activity-agent", "Suggest things to do in {city}.")
    model = ScriptedModel(["one", "two"])
    agent = runtime.start_agent(
        ("s", "main", 0), model=model, system_prompt=Template("activity-agent", city="Oslo")
    )
    agent.run("ideas?", timeout=30)
    runtime.templates.update("activity-agent", "Suggest outdoor things to do in {city}.")
    agent.run("more?", timeout=30)
    assert [r.system for r in model.requests] == [
        "Suggest things to do in Oslo.",
        "Suggest outdoor things to do in Oslo.",
    ]


def test_a_missing_template_fails_the_start_naming_it(runtime: Runtime) -> None:
    model = ScriptedModel(["answer"])
    agent = runtime.start_agent(("s", "main", 0), model=model, system_prompt=Template("nope"))
    with pytest.raises(TemplateNotFound, match="'nope'"):
        agent.run("hi", timeout=30)
    assert model.call_count == 0
    runtime.templates.update("nope", "Now it exists.")
    assert agent.run("hi", timeout=30).text == "answer"  # the agent was not harmed
    assert model.requests[0].system == "Now it exists."


def test_a_missing_parameter_fails_the_start_naming_it(runtime: Runtime) -> None:
    runtime.templates.update("greeter", "Greet {name} in {language}.")
    agent = runtime.start_agent(
        ("s", "main", 0), model=ScriptedModel(["x"]), system_prompt=Template("greeter", name="Ada")
    )
    with pytest.raises(TemplateParameterMissing, match=r"'greeter'.*'language'"):
        agent.run("hi", timeout=30)
    assert agent.state().messages == []  # nothing of the failed start was kept


def test_set_system_prompt_takes_a_template(runtime: Runtime) -> None:
    runtime.templates.update("greeter", "Greet {name}.")
    model = ScriptedModel(["x", "y"])
    agent = runtime.start_agent(("s", "main", 0), model=model, system_prompt="plain")
    agent.set_system_prompt(Template("greeter", name="Ada"))
    agent.run("hi", timeout=30)
    assert model.requests[0].system == "Greet Ada."
    assert agent.state().system_prompt == "Greet Ada."
    agent.set_system_prompt("plain again")
    agent.run("hi", timeout=30)
    assert model.requests[1].system == "plain again"


def test_a_prompt_of_another_type_is_refused(runtime: Runtime) -> None:
    refused = r"system_prompt must be a str, not int \(or an agent_runtime.Template\)"
    with pytest.raises(TypeError, match=refused):
        runtime.start_agent(("s", "main", 0), model=ScriptedModel([]), system_prompt=3)


def test_a_run_whose_template_fails_keeps_its_queued_follow_up(runtime: Runtime) -> None:
    runtime.templates.update("greeter", "v1")
    model = ScriptedModel(["first", "second", "third"])
    agent = runtime.start_agent(("s", "main", 0), model=model, system_prompt=Template("greeter"))
    agent.run("hi", timeout=30)
    runtime.templates.delete("greeter")
    agent.follow_up("later")
    with pytest.raises(TemplateNotFound, match="'greeter'"):
        agent.run("fails", timeout=30)
    state = agent.state()
    assert "'greeter'" in (state.error or "") and len(state.follow_up_queue) == 1
    runtime.templates.update("greeter", "v2")
    agent.run("now", timeout=30)
    texts = [m.text for r in model.requests for m in r.messages if m.role == "user"]
    assert "later" in texts and agent.state().follow_up_queue == []
    assert model.call_count == 3


def test_template_errors_are_agent_runtime_errors() -> None:
    assert issubclass(TemplateNotFound, TemplateError)
    assert str(TemplateParameterMissing("t", "p")).startswith("prompt template 't'")
