"""Tool approval inside a run: a call waits for approve / deny, the rest of the run goes on."""

from __future__ import annotations

import asyncio
import datetime
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_runtime import (
    AgentBusy,
    AgentKey,
    ApprovalError,
    ApprovalsPending,
    PendingApproval,
    Runtime,
    ToolApprovalDecided,
    ToolApprovalRequested,
    delegate,
)
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import AgentEnd, MessageEnd, ToolExecutionEnd, TurnEnd
from agent_runtime.guardrails import RegexGuardrail
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import AssistantMessage, ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, tool
from supervisors import kill

KEY = ("s", "main", 0)


def call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def make_tools(ran: list[str]) -> list[Tool]:
    @tool(requires_approval=True)
    def send_mail(to: str) -> str:
        """Send a mail."""
        ran.append(f"send_mail:{to}")
        return f"sent to {to}"

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        ran.append(f"lookup:{q}")
        return f"found {q}"

    return [send_mail, lookup]


def results(messages: list[Any]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


def waiting(agent: Any) -> list[str]:
    return [p.tool_call_id for p in agent.state().pending_approvals]


def restarted(agent: Any) -> None:
    """Crash the agent's actor and wait for its `transient` restart."""
    old_ref = agent.ref
    kill(old_ref)
    wait_until(lambda: agent.alive and agent.ref is not old_ref, timeout=5)


def test_an_approved_call_runs_and_the_run_goes_on(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]), "mailed"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran))
    events = agent.subscribe()
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    state = agent.state()
    assert state.is_running
    pending = state.pending_approvals[0]
    assert (pending.name, pending.args, pending.run_id) == (
        "send_mail",
        {"to": "bob"},
        state.run_id,
    )
    assert PendingApproval.model_validate_json(pending.model_dump_json()) == pending
    assert ran == []
    with pytest.raises(AgentBusy):
        agent.prompt("again")
    agent.approve("c1", by="alice")
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:bob"]
    state = agent.state()
    assert state.pending_approvals == []
    assert results(state.messages)["c1"].text == "sent to bob"
    assert state.messages[-1].text == "mailed"  # type: ignore[attr-defined]
    kinds = [
        e for e in events.until_end(5) if isinstance(e, ToolApprovalRequested | ToolApprovalDecided)
    ]
    assert isinstance(kinds[0], ToolApprovalRequested) and kinds[0].args == {"to": "bob"}
    assert isinstance(kinds[1], ToolApprovalDecided)
    assert (kinds[1].approved, kinds[1].by) == (True, "alice")


def test_a_denied_call_gets_an_error_result_with_the_reason(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="eve")]), "ok"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran))
    agent.prompt("mail eve")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.deny("c1", "eve is not a customer", by="alice")
    agent.wait_for_idle(timeout=5)
    result = results(agent.state().messages)["c1"]
    assert ran == []
    assert result.is_error and "eve is not a customer" in result.text
    assert result.details is not None
    assert (result.details["outcome"], result.details["by"]) == ("denied", "alice")
    assert agent.state().messages[-1].text == "ok"  # type: ignore[attr-defined]


def test_edited_arguments_are_used_and_checked_like_the_model_s(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]), "ok"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran))
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    with pytest.raises(ApprovalError, match="invalid"):
        agent.approve("c1", args={"to": ["not", "a", "str"]})
    assert waiting(agent) == ["c1"]  # still waiting
    with pytest.raises(ApprovalError, match="not JSON values"):
        agent.approve("c1", args={"to": object()})
    assert waiting(agent) == ["c1"]
    agent.approve("c1", args={"to": "carol"})
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:carol"]


def test_edited_arguments_meet_the_tool_call_guardrails_the_model_s_met(
    runtime: Runtime,
) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]),
            "blocked",
            ScriptedTurn(tool_calls=[call("c2", "send_mail", to="bob")]),
            "mailed",
        ]
    )
    guard = RegexGuardrail(keywords=["mallory"], at="tool_call")
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran), guardrails=[guard])
    events = agent.subscribe()
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.approve("c1", args={"to": "mallory"})  # the model's call passed; the edit does not
    agent.wait_for_idle(timeout=5)
    assert ran == []
    (end,) = [e for e in events.until_end(timeout=5) if isinstance(e, ToolExecutionEnd)]
    assert end.is_error and end.result.details["outcome"] == "blocked"
    assert results(agent.state().messages)["c1"].is_error
    agent.prompt("mail bob again")
    wait_until(lambda: waiting(agent) == ["c2"], timeout=5)
    agent.approve("c2", args={"to": "carol"})  # an edit the guardrail lets through runs
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:carol"]


def sent_to(messages: list[Any]) -> list[object]:
    """The `to` of every send_mail call the assistant messages of `messages` hold."""
    return [
        c.arguments.get("to")
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.name == "send_mail"
    ]


def test_the_kept_answer_holds_the_edited_arguments(runtime: Runtime) -> None:
    # The model reads the call that ran, not the one it asked for: history, session memory,
    # the next request, TurnEnd and AgentEnd hold the human's arguments; the answer's
    # MessageEnd (before the decision) showed the model's.
    ran: list[str] = []
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[call("l", "lookup", q="bob"), call("c1", "send_mail", to="bob")]
            ),
            "mailed carol",
            "again",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran))
    events = agent.subscribe()
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.approve("c1", args={"to": "carol"}, by="alice")
    agent.wait_for_idle(timeout=5)
    assert ran == ["lookup:bob", "send_mail:carol"]
    seen = list(events.until_end(5))
    answers = [e.message for e in seen if isinstance(e, MessageEnd)]
    assert sent_to(answers) == ["bob"]
    (turn_end,) = [e for e in seen if isinstance(e, TurnEnd) and e.tool_results]
    assert sent_to([turn_end.message]) == ["carol"]
    (end,) = [e for e in seen if isinstance(e, AgentEnd)]
    assert sent_to(end.new_messages) == ["carol"]
    assert sent_to(model.requests[1].messages) == ["carol"]
    assert sent_to(agent.state().messages) == ["carol"]
    assert sent_to(runtime.memory.history("s").messages) == ["carol"]
    assert not validate_transcript(agent.state().messages)
    # the next run merges the session's memory: the amended answer is the stored one, once
    agent.run("and now?", timeout=5)
    history = agent.state().messages
    assert [m.text for m in history] == [  # type: ignore[attr-defined]
        "mail bob",
        "",
        "found bob",
        "sent to carol",
        "mailed carol",
        "and now?",
        "again",
    ]
    assert sent_to(history) == ["carol"]
    assert history == runtime.memory.history("s").messages


def test_edited_arguments_are_kept_as_the_json_they_are_stored_as(runtime: Runtime) -> None:
    # Stored answers are JSON: edited arguments are taken in their JSON form (a tuple is a
    # list), so the kept answer, the stored one and what the tool got are the same, and the
    # next run's merge of the session finds its own answer in the store (no duplicate).
    got: list[object] = []

    @tool(requires_approval=True)
    def label(tags: list[str]) -> str:
        """Label the thread."""
        got.append(tags)
        return "labelled"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("c1", "label", tags=["x"])]), "done", "again"]
    )
    agent = runtime.start_agent(KEY, model=model, tools=[label])
    agent.prompt("label it")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    for bad in ({"tags": [datetime.date(2026, 12, 24)]}, {"tags": [math.nan]}):
        with pytest.raises(ApprovalError, match="not JSON values"):
            agent.approve("c1", args=bad)
    agent.approve("c1", args={"tags": ("a", "b")})
    agent.wait_for_idle(timeout=5)
    assert got == [["a", "b"]]
    agent.run("and now?", timeout=5)
    history = agent.state().messages
    calls = [c for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert [c.arguments for c in calls] == [{"tags": ["a", "b"]}]
    assert history == runtime.memory.history("s").messages
    assert not validate_transcript(history)


def test_a_parked_call_approved_with_edits_after_a_restart_keeps_them(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]), "done"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran), restart="transient")
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    restarted(agent)
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.approve("c1", args={"to": "dave"})
    agent.continue_run()
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:dave"]
    assert sent_to(agent.state().messages) == ["dave"]
    assert sent_to(runtime.memory.history("s").messages) == ["dave"]
    assert sent_to(model.requests[-1].messages) == ["dave"]


def test_unknown_and_twice_decided_calls_are_clear_errors(runtime: Runtime) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[call("c1", "send_mail", to="a"), call("c2", "send_mail", to="b")]
            ),
            "ok",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=make_tools([]))
    agent.prompt("mail")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)  # sequential: c2 comes after c1
    with pytest.raises(ApprovalError, match=r"'nope'.*\['c1'\]"):
        agent.approve("nope")
    agent.approve("c1")
    with pytest.raises(ApprovalError, match="'c1' was already decided: approved"):
        agent.deny("c1", "too late")
    wait_until(lambda: waiting(agent) == ["c2"], timeout=5)
    agent.deny("c2", "no")
    agent.wait_for_idle(timeout=5)


def test_the_other_calls_run_and_results_keep_call_order(runtime: Runtime) -> None:
    ran: list[str] = []
    gate = threading.Event()

    @tool(requires_approval=True, parallel_safe=True)
    def pay(amount: int) -> str:
        """Pay."""
        ran.append("pay")
        return "paid"

    @tool(parallel_safe=True)
    def quote(item: str) -> str:
        """Quote."""
        ran.append("quote")
        gate.set()
        return "42"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("p", "pay", amount=3), call("q", "quote", item="x")]), "ok"]
    )
    agent = runtime.start_agent(KEY, model=model, tools=[pay, quote])
    events = agent.subscribe()
    agent.prompt("buy")
    wait_until(lambda: waiting(agent) == ["p"], timeout=5)
    assert gate.wait(5)
    wait_until(lambda: ran == ["quote"], timeout=5)
    agent.approve("p")
    agent.wait_for_idle(timeout=5)
    assert ran == ["quote", "pay"]
    messages = agent.state().messages
    order = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert order == ["p", "q"]
    ends = [e.tool_call_id for e in events.until_end(5) if isinstance(e, ToolExecutionEnd)]
    assert ends == ["q", "p"]  # announced as they ended, committed in call order


def test_a_predicate_decides_per_call_sync_and_async(runtime: Runtime) -> None:
    threads: list[str] = []

    def big(ctx: ToolContext, args: dict[str, Any]) -> bool:
        threads.append(threading.current_thread().name)
        return bool(args["amount"] > 100)

    async def never(ctx: ToolContext, args: dict[str, Any]) -> bool:
        return False

    @tool(requires_approval=big)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    @tool(requires_approval=never)
    def note(text: str) -> str:
        """Note."""
        return "noted"

    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    call("small", "pay", amount=5),
                    call("n", "note", text="x"),
                    call("big", "pay", amount=500),
                ]
            ),
            "ok",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=[pay, note])
    agent.prompt("pay")
    wait_until(lambda: waiting(agent) == ["big"], timeout=5)
    done = results(agent.state().messages)
    assert done == {}  # nothing enters the context before every call is decided
    agent.approve("big")
    agent.wait_for_idle(timeout=5)
    done = results(agent.state().messages)
    assert [done[i].text for i in ("small", "n", "big")] == ["paid 5", "noted", "paid 500"]
    assert threads and all(t != "agent-runtime-loop" for t in threads)
    assert threading.main_thread().name not in threads


def test_abort_pairs_the_waiting_call_as_not_started(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")])])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools([]))
    agent.prompt("mail")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.steer("hurry")  # steering works while it waits (delivered after the batch)
    assert agent.abort()
    agent.wait_for_idle(timeout=5)
    result = results(agent.state().messages)["c1"]
    assert result.details is not None and result.details["outcome"] == "not_started"
    assert agent.state().pending_approvals == []
    assert runtime.pending_approvals() == []


def test_approval_timeout_denies(runtime: Runtime) -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]), "ok"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools([]), approval_timeout=0.2)
    events = agent.subscribe()
    agent.prompt("mail")
    agent.wait_for_idle(timeout=5)
    result = results(agent.state().messages)["c1"]
    assert result.details is not None
    assert (result.details["outcome"], result.details["reason"]) == ("denied", "approval_timeout")
    decided = [e for e in events.until_end(5) if isinstance(e, ToolApprovalDecided)]
    assert decided[0].reason == "approval_timeout" and not decided[0].approved
    with pytest.raises(ApprovalError, match="already decided"):
        agent.approve("c1")


def test_runtime_lists_the_approvals_of_every_agent(runtime: Runtime) -> None:
    agents = []
    for index in range(2):
        model = ScriptedModel(
            [ScriptedTurn(tool_calls=[call(f"c{index}", "send_mail", to="x")]), "ok"]
        )
        agent = runtime.start_agent(("s", "w", index), model=model, tools=make_tools([]))
        agent.prompt("go")
        agents.append(agent)
    wait_until(lambda: len(runtime.pending_approvals()) == 2, timeout=5)
    listed = runtime.pending_approvals()
    assert {(tuple(p.agent or ()), p.tool_call_id) for p in listed} == {
        (("s", "w", 0), "c0"),
        (("s", "w", 1), "c1"),
    }
    for index, agent in enumerate(agents):
        agent.approve(f"c{index}")
        agent.wait_for_idle(timeout=5)
    assert runtime.pending_approvals() == []


def test_runtime_lists_a_subagents_waiting_call_and_its_approval_resumes_the_parent(
    runtime: Runtime,
) -> None:
    ran: list[str] = []
    mailer = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="bob")]), "sent"])
    team = delegate(["mailer"], model=mailer, tools=make_tools(ran))
    lead_model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("d1", "delegate", role="mailer", task="mail bob")]), "done"]
    )
    lead = runtime.start_agent(KEY, model=lead_model, tools=[team])
    lead.prompt("go")
    wait_until(lambda: runtime.pending_approvals(), timeout=5)
    (pending,) = runtime.pending_approvals()
    mailer_key = AgentKey("s", "mailer", 0)
    assert (pending.agent, pending.tool_call_id) == (mailer_key, "c1")
    assert lead.state().is_running and lead.state().pending_approvals == []  # the child's call
    subagent = runtime.registry.lookup(mailer_key)
    assert subagent is not None
    subagent.approve("c1", by="alice")
    lead.wait_for_idle(timeout=5)
    assert ran == ["send_mail:bob"]
    assert results(lead.state().messages)["d1"].text == "sent"
    assert runtime.pending_approvals() == []


def test_async_twins(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[call("a", "send_mail", to="x"), call("b", "send_mail", to="y")]
            ),
            "ok",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran))
    agent.prompt("go")

    async def decide() -> None:
        while [p.tool_call_id for p in agent.state().pending_approvals] != ["a"]:
            await asyncio.sleep(0.01)
        await agent.aapprove("a", by="bot")
        while [p.tool_call_id for p in agent.state().pending_approvals] != ["b"]:
            await asyncio.sleep(0.01)
        await agent.adeny("b", "no", by="bot")

    asyncio.run(asyncio.wait_for(decide(), 5))
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:x"]


# -- durable: a restart, or a new process on the same store, finds the calls still waiting ----


def test_a_transient_restart_keeps_the_waiting_calls_and_continue_runs_them(
    runtime: Runtime,
) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[call("l", "lookup", q="bob"), call("c1", "send_mail", to="bob")]
            ),
            "mailed",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran), restart="transient")
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    before = agent.state().pending_approvals
    restarted(agent)
    state = agent.state()
    assert state.pending_approvals == before
    assert runtime.pending_approvals() == before
    assert not state.is_running
    with pytest.raises(ApprovalsPending, match="c1") as busy:
        agent.prompt("something else")
    assert busy.value.tool_call_ids == ["c1"]
    with pytest.raises(ApprovalsPending, match="c1"):
        agent.continue_run()  # undecided: nothing to run yet
    agent.approve("c1", by="alice")
    assert agent.state().pending_approvals == []
    agent.continue_run()
    agent.wait_for_idle(timeout=5)
    messages = agent.state().messages
    assert ran == ["lookup:bob", "send_mail:bob"]  # the lookup that had ended is not run again
    assert [m.text for m in messages] == ["mail bob", "", "found bob", "sent to bob", "mailed"]  # type: ignore[attr-defined]
    assert not validate_transcript(messages)
    # and the session's memory holds the same turn, once
    stored = runtime.memory.history("s").messages
    assert [m.text for m in stored] == ["mail bob", "", "found bob", "sent to bob", "mailed"]  # type: ignore[attr-defined]


def test_a_resumed_turn_whose_next_call_waits_survives_a_second_restart(
    runtime: Runtime,
) -> None:
    # The answer's calls run in order: the lookup ends, c1 waits (restart), c1 is approved
    # and runs in the resumed turn, then c2 waits (restart again). The turn kept then still
    # knows the lookup's result and c1's: neither runs again.
    ran: list[str] = []
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    call("l", "lookup", q="bob"),
                    call("c1", "send_mail", to="bob"),
                    call("c2", "send_mail", to="carol"),
                ]
            ),
            "mailed both",
        ]
    )
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran), restart="transient")

    agent.prompt("mail bob and carol")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    restarted(agent)
    agent.approve("c1", by="alice")
    agent.continue_run()
    wait_until(lambda: waiting(agent) == ["c2"], timeout=5)
    assert ran == ["lookup:bob", "send_mail:bob"]
    restarted(agent)
    assert waiting(agent) == ["c2"]
    agent.approve("c2", args={"to": "dave"})
    agent.continue_run()
    agent.wait_for_idle(timeout=5)
    assert ran == ["lookup:bob", "send_mail:bob", "send_mail:dave"]
    messages = agent.state().messages
    assert [m.text for m in messages] == [  # type: ignore[attr-defined]
        "mail bob and carol",
        "",
        "found bob",
        "sent to bob",
        "sent to dave",
        "mailed both",
    ]
    assert sent_to(messages) == ["bob", "dave"]
    assert not validate_transcript(messages)
    assert messages == runtime.memory.history("s").messages


def test_a_denied_parked_call_gets_its_error_result_after_a_restart(runtime: Runtime) -> None:
    ran: list[str] = []
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("c1", "send_mail", to="x")]), "fine"])
    agent = runtime.start_agent(KEY, model=model, tools=make_tools(ran), restart="transient")
    agent.prompt("mail")
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    restarted(agent)
    wait_until(lambda: waiting(agent) == ["c1"], timeout=5)
    agent.deny("c1", "not today", by="ops")
    with pytest.raises(ApprovalError, match="already decided: denied"):
        agent.approve("c1")
    agent.continue_run()
    agent.wait_for_idle(timeout=5)
    result = results(agent.state().messages)["c1"]
    assert ran == [] and "not today" in result.text
    assert agent.state().messages[-1].text == "fine"  # type: ignore[attr-defined]


CRASHING_PROCESS = """
import os, sys
from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.messages import ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import tool

@tool(requires_approval=True)
def send_mail(to: str) -> str:
    "Send a mail."
    return f"sent to {to}"

runtime = Runtime.start(RuntimeConfig())
turn = ScriptedTurn(tool_calls=[ToolCall(id="c1", name="send_mail", arguments={"to": "bob"})])
agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel([turn]), tools=[send_mail])
agent.prompt("mail bob")
wait_until(lambda: agent.state().pending_approvals, timeout=10)
wait_until(lambda: runtime.memory.kv("agent_runtime.pending_approvals").items(), timeout=10)
print("waiting", flush=True)
os._exit(0)  # a crash: nothing is stopped in order
"""


def test_a_new_process_on_the_same_store_finds_the_waiting_calls(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_PROCESS],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "waiting", done.stderr
    ran: list[str] = []
    with Runtime.start(RuntimeConfig()) as runtime:
        agent = runtime.start_agent(KEY, model=ScriptedModel(["mailed"]), tools=make_tools(ran))
        pending = agent.state().pending_approvals
        assert [(p.tool_call_id, p.name, p.args) for p in pending] == [
            ("c1", "send_mail", {"to": "bob"})
        ]
        assert [p.tool_call_id for p in runtime.pending_approvals()] == ["c1"]
        assert agent.state().messages == []  # the prompt comes back with its turn
        with pytest.raises(AgentBusy, match="c1"):
            agent.prompt("hello")
        agent.approve("c1", by="alice")
        agent.continue_run()
        agent.wait_for_idle(timeout=5)
        messages = agent.state().messages
        assert ran == ["send_mail:bob"]
        assert [m.text for m in messages] == ["mail bob", "", "sent to bob", "mailed"]  # type: ignore[attr-defined]
        assert runtime.memory.kv("agent_runtime.pending_approvals").items() == {}
    with Runtime.start(RuntimeConfig()) as runtime:  # and a third process finds it all done
        agent = runtime.start_agent(KEY, model=ScriptedModel(["again"]), tools=make_tools(ran))
        assert agent.state().pending_approvals == []
        assert [m.text for m in agent.state().messages] == [  # type: ignore[attr-defined]
            "mail bob",
            "",
            "sent to bob",
            "mailed",
        ]
