"""The placement rule alone (no Ray): least loaded, session affinity, bad input."""

from __future__ import annotations

import pytest

from agent_runtime.cluster import NodeLoad, place
from agent_runtime.cluster._placement import check_placement


def test_least_loaded_weighs_running_runs_then_agents_then_name() -> None:
    loads = {"b": NodeLoad(agents=1, running=0), "a": NodeLoad(agents=5, running=2)}
    assert place("least_loaded", "s", loads) == "b"
    loads = {"b": NodeLoad(agents=3, running=1), "a": NodeLoad(agents=2, running=1)}
    assert place("least_loaded", "s", loads) == "a"
    assert place("least_loaded", "s", {"b": NodeLoad(), "a": NodeLoad()}) == "a"


def test_session_affinity_follows_the_session_to_a_live_node() -> None:
    loads = {"a": NodeLoad(agents=0), "b": NodeLoad(agents=9, running=9)}
    assert place("session_affinity", "s", loads, ["b"]) == "b"
    assert place("session_affinity", "s", loads, ["gone", "b"]) == "b"
    assert place("session_affinity", "s", loads, ["gone"]) == "a"
    assert place("least_loaded", "s", loads, ["b"]) == "a"


def test_no_live_node_and_unknown_policies_are_refused() -> None:
    with pytest.raises(LookupError, match="no live cluster node"):
        place("least_loaded", "s", {})
    with pytest.raises(ValueError, match=r"unknown placement 'nearest'.*least_loaded"):
        check_placement("nearest")
