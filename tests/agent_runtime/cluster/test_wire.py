"""What crosses between a caller and a node, without a cluster: events as JSON, errors by value,
the missing-Ray error, and (with Ray) the refusal of an option that cannot be pickled."""

from __future__ import annotations

import sys
import threading

import pytest

from agent_runtime import AgentBusy, AgentKey, AlreadyRegistered, RunFailed
from agent_runtime.cluster import ClusterRuntime, ClusterUnavailable
from agent_runtime.cluster._wire import RemoteError, decode_events, encode_events, pack_options
from agent_runtime.events import AgentEnd, AgentStart, Error, Event, EventsDropped
from agent_runtime.messages import AssistantMessage, TextContent
from tests.agent_runtime.cluster.conftest import SKIP

KEY = AgentKey("s1", "writer", 0)


def test_a_batch_of_events_round_trips_through_json_in_order() -> None:
    partial = AssistantMessage(content=[TextContent(text="half")], stop_reason="error")
    events: list[Event] = [
        AgentStart(agent=KEY, run_id="r1", seq=0),
        EventsDropped(agent=KEY, run_id="r1", seq=1, count=3),
        Error(agent=KEY, run_id="r1", seq=2, reason="boom", partial=partial),
        AgentEnd(agent=None, run_id="r2", seq=0),
    ]
    again = decode_events(encode_events(events))
    assert again == events
    assert again[0].agent == KEY and isinstance(again[0].agent, AgentKey)


def test_an_error_raised_on_a_node_keeps_its_class_and_facts() -> None:
    busy = RemoteError.of(AgentBusy(KEY, "run-7")).rebuild()
    assert isinstance(busy, AgentBusy) and busy.run_id == "run-7" and busy.key == KEY
    assert str(busy) == str(AgentBusy(KEY, "run-7"))
    failed = RemoteError.of(RunFailed("provider down")).rebuild()
    assert isinstance(failed, RunFailed) and failed.reason == "provider down"
    held = RemoteError.of(AlreadyRegistered(KEY, threading.Lock())).rebuild()
    assert isinstance(held, AlreadyRegistered) and held.holder is None  # node-local: dropped


def test_without_ray_starting_a_cluster_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ClusterUnavailable, match=r"pip install 'agent-runtime\[cluster\]'"):
        ClusterRuntime.start()


def test_a_model_that_cannot_be_pickled_is_refused_naming_it() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        pytest.skip(SKIP)
    from agent_runtime.testing import ScriptedModel, ScriptedTurn

    with pytest.raises(TypeError, match=r"the model \(ScriptedModel\) cannot be sent"):
        pack_options({"model": ScriptedModel([ScriptedTurn(text="hi")])})
