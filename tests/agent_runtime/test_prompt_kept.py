"""A prompt accepted is a prompt kept (issue 34.4): a crash during its run, then a `transient`
restart or a new process on the same store, finds it at the end of the agent's history, and
the run that goes on from there stores it once, in its place, with its turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from agent_runtime import Agent, Runtime
from agent_runtime.llm import ChatRequest
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import Message, ToolCall, UserMessage
from agent_runtime.testing import FunctionModel, ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, tool
from supervisors import kill

KEY = ("s", "main", 0)


def texts(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in messages]  # type: ignore[union-attr]


def crash_during_the_first_model_call(
    runtime: Runtime, model: ScriptedModel, tools: list[Tool] | None = None
) -> Agent:
    """A transient agent prompted with "question", killed while its model call hangs, and back."""
    agent = runtime.start_agent(KEY, model=model, restart="transient", tools=tools or [])
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


def test_a_turn_parked_for_approval_after_a_restart_keeps_the_prompt_it_carries(
    make_runtime: Callable[..., Runtime],
) -> None:
    @tool(requires_approval=True)
    def send_mail(to: str) -> str:
        """Send a mail."""
        return f"sent to {to}"

    runtime = make_runtime()
    mail = ToolCall(id="c1", name="send_mail", arguments={"to": "bob"})
    model = ScriptedModel(
        [ScriptedTurn(text="never", delay=60), ScriptedTurn(tool_calls=[mail]), "mailed"]
    )
    agent = crash_during_the_first_model_call(runtime, model, [send_mail])
    agent.continue_run()  # the kept "question" is carried into the turn that parks
    wait_until(lambda: [p.tool_call_id for p in agent.state().pending_approvals] == ["c1"])
    crashed = agent.ref
    kill(crashed, "second crash")
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    agent.approve("c1")
    agent.continue_run()
    agent.wait_for_idle(timeout=10)
    expected = [("user", "question"), ("assistant", ""), ("tool_result", "sent to bob")]
    expected.append(("assistant", "mailed"))
    assert texts(runtime.memory.history("s").messages) == expected
    runtime.stop()
    fresh = make_runtime().start_agent(KEY, model=ScriptedModel([]), tools=[send_mail])
    assert texts(fresh.state().messages) == expected


def test_another_agents_equal_message_is_not_taken_for_the_kept_prompt(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    other = runtime.start_agent(("s", "other", 0), model=ScriptedModel(["hi", "theirs"]))
    other.run("hello", timeout=10)  # the session is not empty when the agent restarts
    same = UserMessage(content="question")  # an orchestrator sends one message to two agents
    model = ScriptedModel([ScriptedTurn(text="never", delay=60), ScriptedTurn(text="answer")])
    agent = runtime.start_agent(KEY, model=model, restart="transient")
    agent.prompt(same)
    wait_until(lambda: model.call_count == 1)
    crashed = agent.ref
    kill(crashed, "test crash")
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    other.run(same, timeout=10)
    agent.continue_run()
    agent.wait_for_idle(timeout=10)
    assert texts(agent.state().messages) == [
        ("user", "hello"),
        ("assistant", "hi"),
        ("user", "question"),
        ("assistant", "theirs"),
        ("user", "question"),
        ("assistant", "answer"),
    ]


def test_a_prompt_aborted_as_soon_as_it_was_accepted_is_kept_once(
    make_runtime: Callable[..., Runtime],
) -> None:
    # The abort lands while the run still does its storage work (the prompt kept in the
    # store), before its loop began: the run still commits the prompt, as a run aborted
    # during its model call does, and forgets the kept copy (no second one after a restart).
    answering = threading.Event()

    async def answer(request: ChatRequest) -> str:
        while not answering.is_set():  # hangs until the abort, unless the test says answer
            await asyncio.sleep(0.01)
        return "answer"

    runtime = make_runtime()
    agent = runtime.start_agent(KEY, model=FunctionModel(answer), restart="transient")
    prompts = [f"question {i}" for i in range(5)]
    for text in prompts:
        agent.prompt(text)
        assert agent.abort("changed my mind")
        agent.wait_for_idle(timeout=10)
    asked = [("user", text) for text in prompts]
    assert texts(agent.state().messages) == asked
    assert texts(runtime.memory.history("s").messages) == asked
    crashed = agent.ref
    kill(crashed, "test crash")
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    assert texts(agent.state().messages) == asked  # the kept copies were forgotten
    answering.set()
    agent.continue_run()  # the history ends with a prompt: the run goes on from it
    agent.wait_for_idle(timeout=10)
    assert texts(runtime.memory.history("s").messages) == [*asked, ("assistant", "answer")]


def test_an_agent_that_writes_and_does_not_read_keeps_its_prompt_over_a_crash(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel([ScriptedTurn(text="never", delay=60), ScriptedTurn(text="answer")])
    agent = runtime.start_agent(
        KEY, model=model, restart="transient", memory=MemoryPolicy.write_only()
    )
    agent.prompt("question")
    wait_until(lambda: model.call_count == 1)
    crashed = agent.ref
    kill(crashed, "test crash")
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    assert texts(agent.state().messages) == [("user", "question")]
    agent.continue_run()
    agent.wait_for_idle(timeout=10)
    assert texts(runtime.memory.history("s").messages) == [
        ("user", "question"),
        ("assistant", "answer"),
    ]


def test_a_reset_forgets_the_kept_prompt_of_a_crashed_run_for_good(
    make_runtime: Callable[..., Runtime],
) -> None:
    runtime = make_runtime()
    model = ScriptedModel([ScriptedTurn(text="never", delay=60)])
    agent = crash_during_the_first_model_call(runtime, model)
    assert texts(agent.state().messages) == [("user", "question")]
    agent.reset()
    assert agent.state().messages == []
    runtime.stop()
    fresh = make_runtime().start_agent(KEY, model=ScriptedModel([]))
    assert fresh.state().messages == []  # not back from the store
