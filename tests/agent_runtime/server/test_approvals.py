"""Tool approval over the gateway: the decision endpoint (behind the cross-site rule), the
events on SSE, AG-UI's CUSTOM events and A2A's `input-required` state."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")

from agent_runtime import AgentKey, ToolApprovalDecided, ToolApprovalRequested, tool
from agent_runtime.messages import ToolCall, ToolResultMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until

from .harness import ADMIN, Gateway, SseReader, auth, gateway


@tool(requires_approval=True)
def send_mail(to: str) -> str:
    """Send a mail."""
    return f"sent to {to}"


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with gateway() as served:
        yield served


def start(gw: Gateway, role: str) -> Any:
    turn = ScriptedTurn(tool_calls=[ToolCall(id="c1", name="send_mail", arguments={"to": "bob"})])
    model = ScriptedModel([turn, "mailed"])
    # A session of its own: in a shared one, the ids of another agent's calls are taken.
    return gw.runtime.start_agent((role, "main", 0), model=model, tools=[send_mail])


def waiting(agent: Any) -> list[str]:
    return [p.tool_call_id for p in agent.state().pending_approvals]


def test_a_waiting_call_is_approved_over_http_and_the_stream_shows_it(gw: Gateway) -> None:
    agent = start(gw, "mailer")
    path = "/v1/agents/mailer/main/0"
    reader = SseReader()
    decided: dict[str, Any] = {}
    with (
        gw.client() as client,
        gw.client() as other,
        client.stream("GET", path + "/events") as response,
    ):
        assert other.post(path + "/prompt", json={"text": "mail bob"}).status_code == 202
        for frame in reader.feed(response.iter_lines()):
            if frame.event == "tool_approval_requested":
                assert (frame.data["tool_call_id"], frame.data["args"]) == ("c1", {"to": "bob"})
                decided.update(decide(other, path))
            if frame.event == "agent_end":
                break
    events = [f.event for f in reader.frames]
    assert events.index("tool_approval_requested") < events.index("tool_approval_decided")
    (frame,) = [f for f in reader.frames if f.event == "tool_approval_decided"]
    assert frame.data["approved"] is True and frame.data["by"] == decided["by"]
    agent.wait_for_idle(timeout=10)
    results = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert results[0].text == "sent to bob"


def decide(client: httpx.Client, path: str) -> dict[str, Any]:
    """The refusals, then the approval, of the waiting call c1."""
    state = client.get(path).json()
    assert [p["tool_call_id"] for p in state["pending_approvals"]] == ["c1"]
    unknown = client.post(path + "/approvals/nope", json={"decision": "approve"})
    assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]
    assert "c1" in unknown.json()["error"]
    bad = client.post(path + "/approvals/c1", json={"decision": "approve", "args": {"to": []}})
    assert bad.status_code == 422, bad.text
    typo = client.post(path + "/approvals/c1", json={"decision": "yes"})
    assert typo.status_code == 422
    ok = client.post(path + "/approvals/c1", json={"decision": "approve"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["approved"] is True and ok.json()["by"] == "admin"  # the token's principal
    again = client.post(path + "/approvals/c1", json={"decision": "deny", "reason": "no"})
    assert again.status_code == 409 and "already decided" in again.json()["error"]
    body: dict[str, Any] = ok.json()
    return body


def test_a_deny_over_http_carries_the_reason_and_who(gw: Gateway) -> None:
    agent = start(gw, "denied")
    path = "/v1/agents/denied/main/0"
    with gw.client() as client:
        client.post(path + "/prompt", json={"text": "mail bob"})
        wait_until(lambda: waiting(agent) == ["c1"], timeout=10)
        reply = client.post(
            path + "/approvals/c1", json={"decision": "deny", "reason": "spam", "by": "ops"}
        )
        assert reply.json() == {"tool_call_id": "c1", "approved": False, "by": "ops"}
    agent.wait_for_idle(timeout=10)
    results = [m for m in agent.state().messages if isinstance(m, ToolResultMessage)]
    assert results[0].is_error and "spam" in results[0].text


def test_a_cross_site_page_cannot_decide(gw: Gateway) -> None:
    agent = start(gw, "guarded")
    path = "/v1/agents/guarded/main/0"
    with gw.client() as client:
        client.post(path + "/prompt", json={"text": "mail bob"})
        wait_until(lambda: waiting(agent) == ["c1"], timeout=10)
        forged = client.post(
            path + "/approvals/c1",
            json={"decision": "approve"},
            headers={"Origin": "http://evil.example"},
        )
        assert forged.status_code == 403
        assert waiting(agent) == ["c1"]
        agent.deny("c1", "cleanup")
    agent.wait_for_idle(timeout=10)


def test_agui_maps_the_approval_events_to_custom_events() -> None:
    pytest.importorskip("ag_ui", reason="needs the server extra")
    from agent_runtime.server._agui_mapping import AguiRun

    key = AgentKey("s1", "main", 0)
    run = AguiRun(key, "t", "r")
    (requested,) = run.feed(
        ToolApprovalRequested(agent=key, tool_call_id="c1", name="send_mail", args={"to": "b"})
    )
    (decided,) = run.feed(
        ToolApprovalDecided(agent=key, tool_call_id="c1", name="send_mail", approved=True, by="a")
    )
    assert requested.name == "agent_runtime.tool_approval_requested"  # type: ignore[attr-defined]
    assert requested.value["args"] == {"to": "b"}  # type: ignore[attr-defined]
    assert decided.name == "agent_runtime.tool_approval_decided"  # type: ignore[attr-defined]
    assert decided.value["by"] == "a"  # type: ignore[attr-defined]


def test_an_a2a_task_is_input_required_while_a_call_waits(gw: Gateway) -> None:
    pytest.importorskip("a2a", reason="needs a2a-sdk")
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

    agent = start(gw, "a2a")
    base = f"{gw.url}/v1/a2a/a2a/main/0"
    states: list[Any] = []

    async def stream() -> None:
        async with httpx.AsyncClient(headers=auth(ADMIN), timeout=30) as http:
            config = ClientConfig(httpx_client=http, streaming=True)
            client = await ClientFactory(config).create_from_url(base)
            message = Message(role=Role.ROLE_USER, parts=[Part(text="mail")], message_id="m-1")
            async for response in client.send_message(SendMessageRequest(message=message)):
                if response.HasField("status_update"):
                    states.append(response.status_update.status.state)
                    if states[-1] == TaskState.TASK_STATE_INPUT_REQUIRED:
                        metadata = response.status_update.metadata
                        assert metadata["tool_call_id"] == "c1"
                        await asyncio.to_thread(agent.approve, "c1", by="peer")

    asyncio.run(asyncio.wait_for(stream(), 60))
    assert TaskState.TASK_STATE_INPUT_REQUIRED in states
    after = states[states.index(TaskState.TASK_STATE_INPUT_REQUIRED) + 1 :]
    assert after[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED


def test_a_turn_parked_over_a_restart_is_decided_and_continued_over_http(gw: Gateway) -> None:
    from supervisors import kill

    turn = ScriptedTurn(tool_calls=[ToolCall(id="c1", name="send_mail", arguments={"to": "bob"})])
    agent = gw.runtime.start_agent(
        ("parked", "main", 0),
        model=ScriptedModel([turn, "mailed"]),
        tools=[send_mail],
        restart="transient",
    )
    path = "/v1/agents/parked/main/0"
    agent.prompt("mail bob")
    wait_until(lambda: waiting(agent) == ["c1"])
    crashed = agent.ref
    kill(crashed, "test crash")  # back idle, its turn parked in session memory
    wait_until(lambda: agent.ref is not crashed and agent.alive)
    with gw.client() as client:
        refused = client.post(path + "/prompt", json={"text": "hello?"})
        assert refused.status_code == 409
        message = refused.json()["error"]
        assert "waiting for approvals: decide c1" in message and f"POST {path}/continue" in message
        assert client.post(path + "/approvals/c1", json={"decision": "approve"}).status_code == 200
        started = client.post(path + "/continue")
        assert started.status_code == 202, started.text
        assert started.json()["run_id"]
    agent.wait_for_idle(timeout=10)
    texts = [m.text for m in agent.state().messages]  # type: ignore[union-attr]
    assert texts[-2:] == ["sent to bob", "mailed"]
