"""The JSON API: agents started with a model profile and registry tools by name, prompted,
steered, followed up, aborted, run to the end, inspected and stopped, by key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime.testing import wait_until
from agent_runtime.tools import tool

from .harness import Gateway, gateway


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with gateway() as served:
        served.runtime.tools.register(add)
        yield served


def test_an_agent_starts_with_a_profile_and_registry_tools_named_in_the_options(
    gw: Gateway,
) -> None:
    with gw.client() as client:
        reply = client.post(
            "/v1/agents/s1/main/0",
            json={"model": "quick", "tools": ["add"], "system_prompt": "be brief"},
        )
        assert reply.status_code == 201, reply.text
        assert reply.json()["agent"] == {"session": "s1", "role": "main", "index": 0}
        assert reply.json()["tools"] == ["add"]
        state = client.get("/v1/agents/s1/main/0").json()
    assert state["system_prompt"] == "be brief"
    assert [t["name"] for t in state["tools"]] == ["add"]
    assert state["model"]["provider"] == "function"


def test_an_unknown_tool_or_profile_is_a_422_naming_it(gw: Gateway) -> None:
    with gw.client() as client:
        tool_reply = client.post("/v1/agents/s1/bad/0", json={"model": "quick", "tools": ["nope"]})
        profile_reply = client.post("/v1/agents/s1/bad/0", json={"model": "nope"})
        typo = client.post("/v1/agents/s1/bad/0", json={"modle": "quick"})
    assert tool_reply.status_code == 422
    assert "unknown tool 'nope'" in tool_reply.json()["error"]
    assert "add" in tool_reply.json()["error"]  # the registered ones are listed
    assert profile_reply.status_code == 422 and "nope" in profile_reply.json()["error"]
    assert typo.status_code == 422 and typo.json()["details"][0]["loc"] == ["modle"]
    assert gw.runtime.registry.lookup(("s1", "bad", 0)) is None


def test_a_second_start_under_a_live_key_is_a_409(gw: Gateway) -> None:
    gw.start("s1/dup/0", model="quick")
    with gw.client() as client:
        reply = client.post("/v1/agents/s1/dup/0", json={"model": "quick"})
    assert reply.status_code == 409 and "already running" in reply.json()["error"]


def test_run_waits_for_the_end_and_answers_the_final_text(gw: Gateway) -> None:
    gw.start("s1/runner/0", model="quick")
    with gw.client() as client:
        reply = client.post("/v1/agents/s1/runner/0/run", json={"text": "go"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["outcome"], body["text"]) == ("completed", "done")
    assert [m["role"] for m in body["new_messages"]] == ["user", "assistant"]


def test_prompt_steer_follow_up_and_abort_reach_the_running_agent(gw: Gateway) -> None:
    gw.start("s1/worker/0")
    key = ("s1", "worker", 0)
    with gw.client() as client:
        started = client.post("/v1/agents/s1/worker/0/prompt", json={"text": "count"})
        assert started.status_code == 202 and started.json()["run_id"]
        busy = client.post("/v1/agents/s1/worker/0/prompt", json={"text": "again"})
        assert busy.status_code == 409 and "running" in busy.json()["error"]
        follow = client.post("/v1/agents/s1/worker/0/follow_up", json={"text": "later"})
        assert follow.json() == {"queued": "follow_up"}
        wait_until(lambda: gw.runtime.tree().agent(key).follow_up_queue == 1, timeout=10)
        aborted = client.post("/v1/agents/s1/worker/0/abort", json={"reason": "enough"})
        assert aborted.json() == {"aborted": True}
        wait_until(lambda: gw.runtime.tree().agent(key).status == "idle", timeout=10)
        again = client.post("/v1/agents/s1/worker/0/abort")
        assert again.json() == {"aborted": False}
        state = client.get("/v1/agents/s1/worker/0").json()
    assert state["is_running"] is False
    assert [m["content"] for m in state["follow_up_queue"]] == ["later"]  # survives the abort


def test_steering_is_queued_for_the_running_run(gw: Gateway) -> None:
    gw.start("s1/steered/0")
    key = ("s1", "steered", 0)
    with gw.client() as client:
        client.post("/v1/agents/s1/steered/0/prompt", json={"text": "count"})
        # A steer that lands before the run's first model call goes into that call: wait for
        # the answer to stream, so this one waits in the queue.
        wait_until(lambda: gw.runtime.tree().agent(key).activity == "streaming", timeout=10)
        reply = client.post(
            "/v1/agents/s1/steered/0/steer", json={"text": "stop counting", "system_prompt": "x"}
        )
        assert reply.status_code == 202 and reply.json() == {"queued": "steer"}
        wait_until(lambda: gw.runtime.tree().agent(key).steering_queue == 1, timeout=10)
        client.post("/v1/agents/s1/steered/0/abort")
        state = client.get("/v1/agents/s1/steered/0").json()
    assert [m["content"] for m in state["steering_queue"]] == ["stop counting"]


def test_delete_stops_the_agent_and_a_stopped_agent_is_404(gw: Gateway) -> None:
    gw.start("s1/gone/0", model="quick")
    with gw.client() as client:
        assert client.delete("/v1/agents/s1/gone/0").json() == {"stopped": True}
        assert client.get("/v1/agents/s1/gone/0").status_code == 404
        assert client.delete("/v1/agents/s1/gone/0").status_code == 404
        reply = client.post("/v1/agents/s1/gone/0/prompt", json={"text": "x"})
    assert reply.status_code == 404 and "(s1, gone, 0)" in reply.json()["error"]


def test_tree_lists_the_agents_with_status_and_queue_depths(gw: Gateway) -> None:
    gw.start("s1/listed/0", model="quick")
    with gw.client() as client:
        tree = client.get("/v1/tree").json()
    listed = [a for a in tree["agents"] if a["key"] == ["s1", "listed", 0]]
    assert listed and {"status", "steering_queue", "follow_up_queue"} <= set(listed[0])
    assert tree["root"]["kind"] == "supervisor"


def test_a_body_that_is_not_json_is_a_400_and_an_error_never_carries_a_traceback(
    gw: Gateway,
) -> None:
    gw.start("s1/json/0", model="quick")
    with gw.client() as client:
        reply = client.post(
            "/v1/agents/s1/json/0/prompt",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        unknown = client.get("/v1/nowhere")
    assert reply.status_code == 400
    assert reply.json() == {"error": "the request body is not valid JSON"}
    assert unknown.status_code == 404 and set(unknown.json()) == {"error"}
    for body in (reply.text, unknown.text):
        assert "Traceback" not in body and ".py" not in body
