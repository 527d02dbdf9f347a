"""Tool approval inside a run: a call waits for approve / deny, the rest of the run goes on."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runtime import (
    AgentBusy,
    ApprovalError,
    PendingApproval,
    Runtime,
    ToolApprovalDecided,
    ToolApprovalRequested,
)
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import ToolExecutionEnd
from agent_runtime.messages import ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from agent_runtime.tools import Tool, ToolContext, tool

KEY = ("s", "main", 0)


@pytest.fixture
def runtime() -> Iterator[Runtime]:
    with Runtime.start(RuntimeConfig()) as rt:
        yield rt


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
    agent.approve("c1", args={"to": "carol"})
    agent.wait_for_idle(timeout=5)
    assert ran == ["send_mail:carol"]


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
