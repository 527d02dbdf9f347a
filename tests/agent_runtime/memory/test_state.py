"""Per-session key-value state (`SessionMemory.kv(session)`) on every store: JSON values, shared
by every holder of the session, durable where the store is, thread-safe, and reachable from a
tool as `ctx.session_state`."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from agent_runtime import Runtime
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import ToolExecutionEnd
from agent_runtime.memory import (
    InMemoryStore,
    MemoryStore,
    SessionMemory,
    SessionState,
    SqliteStore,
)
from agent_runtime.messages import TextContent, ToolCall
from agent_runtime.testing import ScriptedModel, ScriptedTurn
from agent_runtime.tools import ToolContext, tool
from tests.agent_runtime.memory.conftest import STORE_KINDS, batch, open_store
from tests.agent_runtime.strategies import json_values


@pytest.fixture(params=STORE_KINDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionMemory]:
    with SessionMemory(open_store(request, request.param, tmp_path)) as opened:
        yield opened


def test_put_get_delete_and_items(memory: SessionMemory) -> None:
    state = memory.kv("s")
    assert state.get("plan") is None
    assert state.get("plan", "none yet") == "none yet"
    state.put("plan", {"step": 1, "todo": ["a", "b"], "done": False, "score": 0.5})
    state.put("count", 3)
    state.put("note", None)
    assert state.get("plan") == {"step": 1, "todo": ["a", "b"], "done": False, "score": 0.5}
    assert state.get("note", "default") is None  # a stored null is not a missing key
    state.put("count", 4)
    assert state.items() == {
        "count": 4,
        "note": None,
        "plan": {"step": 1, "todo": ["a", "b"], "done": False, "score": 0.5},
    }
    assert state.delete("count") is True
    assert state.delete("count") is False
    assert "count" not in state and "plan" in state
    assert list(state.items()) == ["note", "plan"]


def test_each_session_has_its_own_state(memory: SessionMemory) -> None:
    memory.kv("a").put("k", "of a")
    memory.kv("b").put("k", "of b")
    assert memory.kv("a").get("k") == "of a"
    assert memory.kv("b").items() == {"k": "of b"}
    assert memory.kv("c").items() == {}


def test_every_holder_of_a_session_sees_the_same_state(memory: SessionMemory) -> None:
    planner, coder = memory.kv("s"), memory.kv("s")
    planner.put("plan", ["write", "test"])
    assert coder.get("plan") == ["write", "test"]
    coder.delete("plan")
    assert planner.get("plan") is None


def test_values_come_back_as_copies(memory: SessionMemory) -> None:
    state = memory.kv("s")
    value = {"list": [1, 2]}
    state.put("k", value)
    value["list"].append(3)
    got = state.get("k")
    got["list"].append(4)
    assert state.get("k") == {"list": [1, 2]}


def test_the_state_is_independent_of_the_history(memory: SessionMemory) -> None:
    memory.kv("s").put("k", 1)
    memory.append("s", batch("a"))
    memory.compact("s", [], 1)
    memory.delete("s")
    assert memory.kv("s").items() == {"k": 1}
    assert memory.sessions() == []


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({1, 2}, "a set"),
        ((1, 2), "a tuple"),
        (b"raw", "a bytes"),
        (object(), "a object"),
        ({"ok": [1, {"deep": {3}}]}, "at ['ok'][1]['deep']"),
        ({1: "int key"}, "dict key 1"),
        (math.nan, "nan"),
        ([math.inf], "inf"),
    ],
)
def test_a_value_that_is_not_json_raises_type_error_naming_the_key(
    memory: SessionMemory, value: Any, named: str
) -> None:
    state = memory.kv("s")
    state.put("k", "kept")
    with pytest.raises(TypeError, match="'k'") as caught:
        state.put("k", value)
    assert named in str(caught.value)
    assert state.get("k") == "kept"


def test_a_value_that_contains_itself_is_not_json(memory: SessionMemory) -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(TypeError, match=r"'k'.*contains itself"):
        memory.kv("s").put("k", loop)


@pytest.mark.parametrize(("key", "error"), [(5, TypeError), (None, TypeError), ("", ValueError)])
def test_a_key_must_be_a_non_empty_str(memory: SessionMemory, key: Any, error: type) -> None:
    state = memory.kv("s")
    for call in (
        lambda: state.put(key, 1),
        lambda: state.get(key),
        lambda: state.delete(key),
    ):
        with pytest.raises(error, match="key"):
            call()
    with pytest.raises(ValueError, match="session"):
        memory.kv("")


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=json_values)
def test_any_json_value_round_trips(memory: SessionMemory, value: Any) -> None:
    state = memory.kv("s")
    state.put("k", value)
    assert state.get("k") == value
    assert state.items()["k"] == value


def test_concurrent_puts_of_many_threads_all_land(memory: SessionMemory) -> None:
    threads, keys = 6, 20
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        state = memory.kv("s")
        start.wait(timeout=5)
        for k in range(keys):
            state.put(f"{t}:{k}", {"t": t, "k": k})

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    assert memory.kv("s").items() == {
        f"{t}:{k}": {"t": t, "k": k} for t in range(threads) for k in range(keys)
    }


def test_the_state_outlives_the_store_that_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with SessionMemory(SqliteStore(path)) as memory:
        memory.kv("s").put("plan", {"step": 2})
    with SessionMemory(SqliteStore(path)) as memory:
        assert memory.kv("s").get("plan") == {"step": 2}


def test_a_closed_store_refuses_the_state(tmp_path: Path) -> None:
    store: MemoryStore = InMemoryStore()
    state = SessionState(store, "s")
    store.close()
    with pytest.raises(ValueError, match="closed"):
        state.put("k", 1)


def test_runtime_memory_kv_is_the_session_memorys() -> None:
    with Runtime.start(RuntimeConfig()) as runtime:
        runtime.memory.kv("s").put("k", [1])
        assert runtime.memory.kv("s").get("k") == [1]


@tool
def remember(key: str, value: str, *, ctx: ToolContext) -> str:
    """Store a value in the session's state and report what the session holds."""
    ctx.session_state.put(key, value)
    return ",".join(sorted(ctx.session_state.items()))


def test_a_tool_reaches_its_sessions_state_through_its_context() -> None:
    with Runtime.start(RuntimeConfig()) as runtime:
        runtime.memory.kv("s").put("earlier", "set by another agent")
        runtime.memory.kv("other").put("elsewhere", "x")
        call = ToolCall(id="c1", name="remember", arguments={"key": "plan", "value": "ship"})
        model = ScriptedModel([ScriptedTurn(tool_calls=[call]), "done"])
        agent = runtime.start_agent(("s", "worker", 0), model=model, tools=[remember])
        ends = [e for e in agent.stream("go") if isinstance(e, ToolExecutionEnd)]
        assert not ends[0].is_error
        assert [c.text for c in ends[0].result.content if isinstance(c, TextContent)] == [
            "earlier,plan"
        ]
        assert runtime.memory.kv("s").get("plan") == "ship"


def test_a_context_without_an_agent_runtime_says_why_it_has_no_state() -> None:
    with pytest.raises(RuntimeError, match="session_state"):
        _ = ToolContext("c1", "t").session_state
