"""A prompt accepted is a prompt kept (issue 34.4): a crash during its run, then a `transient`
restart or a new process on the same store, finds it at the end of the agent's history, and
the run that goes on from there stores it once, in its place, with its turn."""

from __future__ import annotations

from collections.abc import Callable

from agent_runtime import Agent, Runtime
from agent_runtime.messages import Message
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from supervisors import kill

KEY = ("s", "main", 0)


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]  # type: ignore[union-attr]


def crash_during_the_first_model_call(runtime: Runtime, model: ScriptedModel) -> Agent:
    """A transient agent prompted with "question", killed while its model call hangs, and back."""
    agent = runtime.start_agent(KEY, model=model, restart="transient")
    agent.prompt("question")
    wait_until(lambda: model.call_count == 1)
    crashed = agent.ref
    kill(crashed, "test crash")
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    return agent


def test_continue_run_after_a_restart_stores_the_kept_prompt_before_its_answer(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel([ScriptedTurn(text="never", delay=60), ScriptedTurn(text="answer")])
    agent = crash_during_the_first_model_call(runtime, model)
    assert texts(agent.state().messages) == [("user", "question")]
    agent.continue_run()
    agent.wait_for_idle(timeout=10)
    expected = [("user", "question"), ("assistant", "answer")]
    assert texts(agent.state().messages) == expected
    assert texts(runtime.memory.history("s").messages) == expected
    runtime.stop()
    again = make_runtime()  # a new process on the same store: once each, in order
    fresh = again.start_agent(KEY, model=ScriptedModel([]))
    assert texts(fresh.state().messages) == expected


def test_a_new_prompt_after_a_restart_is_stored_after_the_kept_one(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel([ScriptedTurn(text="never", delay=60), ScriptedTurn(text="answer")])
    agent = crash_during_the_first_model_call(runtime, model)
    assert agent.run("and another", timeout=10).text == "answer"
    expected = [("user", "question"), ("user", "and another"), ("assistant", "answer")]
    assert texts(runtime.memory.history("s").messages) == expected
    runtime.stop()
    fresh = make_runtime().start_agent(KEY, model=ScriptedModel([]))
    assert texts(fresh.state().messages) == expected


def test_both_prompts_are_kept_when_the_run_after_a_restart_crashes_too(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel(
        [ScriptedTurn(text="never", delay=60), ScriptedTurn(text="never", delay=60)]
    )
    agent = crash_during_the_first_model_call(runtime, model)
    agent.prompt("and another")
    wait_until(lambda: model.call_count == 2)
    runtime.stop(timeout=5)
    fresh = make_runtime().start_agent(KEY, model=ScriptedModel(["answer"]))
    assert texts(fresh.state().messages) == [("user", "question"), ("user", "and another")]
    fresh.continue_run()
    fresh.wait_for_idle(timeout=10)
    assert texts(fresh.state().messages)[-1] == ("assistant", "answer")


def test_the_sessions_other_agents_see_the_kept_prompt_only_with_its_turn(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel([ScriptedTurn(text="never", delay=60), ScriptedTurn(text="answer")])
    agent = crash_during_the_first_model_call(runtime, model)
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["one", "two"]))
    other.run("hello", timeout=10)
    assert ("user", "question") not in texts(other.state().messages)
    agent.continue_run()
    agent.wait_for_idle(timeout=10)
    # the restarted agent merged the other's turn, and its kept prompt stayed last before it ran
    assert texts(agent.state().messages)[-2:] == [("user", "question"), ("assistant", "answer")]
    other.run("again", timeout=10)
    seen = texts(other.state().messages)
    assert seen.count(("user", "question")) == 1
    assert seen.index(("user", "question")) + 1 == seen.index(("assistant", "answer"))
