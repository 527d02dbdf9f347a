"""ClusterRuntime on a local Ray instance: placement, lookups across nodes, the key race,
events forwarded in order and bounded, errors with their facts."""

from __future__ import annotations

import gc
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agent_runtime import AgentBusy, AlreadyRegistered, StreamOverflow, tool
from agent_runtime.cluster import ClusterAgent, ClusterRuntime, NodeInfo
from agent_runtime.events import (
    AgentEnd,
    AgentStart,
    Canceled,
    EventsDropped,
    MessageUpdate,
    is_terminal,
)
from agent_runtime.testing import wait_until
from tests.agent_runtime.cluster.conftest import StartCluster
from tests.agent_runtime.cluster.models import echo_model, shout

pytestmark = pytest.mark.cluster


def test_least_loaded_spreads_agents_over_the_nodes(start_cluster: StartCluster) -> None:
    cluster = start_cluster(placement="least_loaded")
    agents = [cluster.start_agent((f"s{i}", "worker", 0), model=echo_model()) for i in range(4)]
    per_node: dict[str | None, int] = {}
    for agent in agents:
        per_node[agent.node] = per_node.get(agent.node, 0) + 1
    assert sorted(per_node.values()) == [2, 2]
    assert set(per_node) == set(cluster.nodes())


def test_session_affinity_keeps_a_session_on_one_node(start_cluster: StartCluster) -> None:
    cluster = start_cluster()  # session_affinity is the default
    first = [cluster.start_agent(("s1", "worker", i), model=echo_model()) for i in range(3)]
    other = cluster.start_agent(("s2", "worker", 0), model=echo_model())
    assert len({agent.node for agent in first}) == 1
    assert other.node != first[0].node  # a new session goes to the least-loaded node


def test_lookups_see_the_agents_of_every_node(start_cluster: StartCluster) -> None:
    cluster = start_cluster(placement="least_loaded")
    a = cluster.start_agent(("s1", "research", 0), model=echo_model())
    b = cluster.start_agent(("s1", "writer", 0), model=echo_model())
    c = cluster.start_agent(("s2", "research", 0), model=echo_model())
    assert len({a.node, b.node, c.node}) == 2
    found = cluster.registry.lookup(("s1", "writer", 0))
    assert found == b and found is not None and found.node == b.node
    assert found.run("hi", timeout=30).text == "echo: hi"  # a handle from a lookup works
    assert cluster.registry.lookup(("s9", "writer", 0)) is None
    assert [key for key, _ in cluster.registry.list()] == [a.key, b.key, c.key]
    assert [(r, i) for r, i, _ in cluster.registry.list_by_session("s1")] == [
        ("research", 0),
        ("writer", 0),
    ]
    assert [s for s, _, _ in cluster.registry.list_by_role("research")] == ["s1", "s2"]
    with_meta = cluster.registry.lookup_with_metadata(c.key)
    assert with_meta is not None and with_meta[1]["node"] == c.node
    assert cluster.registry.next_index("s1", "research") == 1
    assert cluster.subagents.count() == 3
    assert cluster.subagents.stop(b) is True
    assert cluster.registry.lookup(b.key) is None and not b.alive
    assert cluster.subagents.stop(b.key) is False
    assert cluster.subagents.stop_all() == 2
    assert cluster.subagents.list() == []


def test_a_key_race_has_exactly_one_winner_cluster_wide(start_cluster: StartCluster) -> None:
    cluster = start_cluster()
    nodes = sorted(cluster.nodes())
    barrier = threading.Barrier(8)

    def start(i: int) -> ClusterAgent | AlreadyRegistered:
        barrier.wait(timeout=30)
        try:  # each racer asks its own node, so the nodes' local registries cannot decide
            return cluster.start_agent(("race", "r", 0), node=nodes[i % 2], model=echo_model())
        except AlreadyRegistered as exc:
            return exc

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(start, range(8)))
    winners = [o for o in outcomes if isinstance(o, ClusterAgent)]
    assert len(winners) == 1
    assert sum(isinstance(o, AlreadyRegistered) for o in outcomes) == 7
    assert cluster.registry.count() == 1
    assert sum(info.agents for info in _fresh_infos(cluster).values()) == 1
    with pytest.raises(AlreadyRegistered) as taken:
        cluster.start_agent(("race", "r", 0), model=echo_model())
    assert taken.value.holder == winners[0]


def _fresh_infos(cluster: ClusterRuntime) -> dict[str, NodeInfo]:
    """Every node's info asked now (not the watcher's last round)."""
    import ray

    actors = {name: cluster.node_actor(name) for name in cluster.nodes()}
    infos = ray.get([actor.info.remote() for actor in actors.values()], timeout=30)
    return dict(zip(actors, infos, strict=True))


def test_events_are_forwarded_in_order(start_cluster: StartCluster) -> None:
    cluster = start_cluster()
    agent = cluster.start_agent(("s1", "streamer", 0), model=echo_model())
    with agent.subscribe() as sub:
        run_id = agent.prompt("many chunks")
        events = list(sub.until_end(timeout=60, run_id=run_id))
    assert isinstance(events[0], AgentStart) and isinstance(events[-1], AgentEnd)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    deltas = [e.delta.delta for e in events if isinstance(e, MessageUpdate) and e.delta]
    assert deltas == [f"{i};" for i in range(50)]
    streamed = list(agent.stream("again"))
    assert is_terminal(streamed[-1]) and streamed[-1].run_id != run_id
    assert {e.run_id for e in streamed} == {streamed[-1].run_id}  # nothing of an earlier run


def test_a_slow_reader_gets_the_overflow_policy_of_its_subscription(
    start_cluster: StartCluster,
) -> None:
    cluster = start_cluster()
    agent = cluster.start_agent(("s1", "streamer", 0), model=echo_model())
    with agent.subscribe(max_queue=4, overflow="drop_oldest") as sub:
        agent.run("many chunks", timeout=60)  # the whole run ends before anything is read
        events = list(sub.until_end(timeout=60))
    assert isinstance(events[-1], AgentEnd)  # a terminal is never dropped
    assert sum(e.count for e in events if isinstance(e, EventsDropped)) > 0
    with agent.subscribe(max_queue=4, overflow="error") as failing:
        agent.run("many chunks", timeout=60)
        with pytest.raises(StreamOverflow):
            list(failing)


def test_errors_come_back_with_their_facts(start_cluster: StartCluster) -> None:
    cluster = start_cluster()
    agent = cluster.start_agent(("s1", "busy", 0), model=echo_model())
    with agent.subscribe() as sub:
        run_id = agent.prompt("slow answer")
        with pytest.raises(AgentBusy) as busy:
            agent.prompt("another")
        assert busy.value.run_id == run_id
        assert agent.state().is_running
        agent.steer("turn left")
        assert len(agent.state().steering_queue) == 1
        agent.follow_up("later")
        assert len(agent.state().follow_up_queue) == 1
        assert agent.abort() is True
        end = list(sub.until_end(timeout=60, run_id=run_id))[-1]
    assert isinstance(end, Canceled) and end.reason == "user_abort"
    agent.wait_for_idle(timeout=30)
    with pytest.raises(ValueError, match="max_queue"):
        agent.subscribe(max_queue=0)


def test_a_tool_that_cannot_be_pickled_is_refused_by_name(start_cluster: StartCluster) -> None:
    cluster = start_cluster()
    lock = threading.Lock()

    @tool
    def locked_lookup(query: str) -> str:
        """Look `query` up under a lock."""
        with lock:
            return query

    with pytest.raises(TypeError, match="tool 'locked_lookup' cannot be sent to a cluster node"):
        cluster.start_agent(("s1", "tools", 0), model=echo_model(), tools=[shout, locked_lookup])
    assert cluster.registry.lookup(("s1", "tools", 0)) is None
    agent = cluster.start_agent(("s1", "tools", 0), model=echo_model(), tools=[shout])
    assert [t.name for t in agent.state().tools] == ["shout"]
    wait_until(lambda: agent.alive, timeout=10)


def _race_from_another_process(name: str, node: str) -> str:
    """In a Ray worker process: join the cluster `name` and race for the key."""
    from agent_runtime.config import RuntimeConfig

    config = RuntimeConfig.model_validate({"memory": {"store": "memory"}})
    joined = ClusterRuntime.start(name=name, config=config)
    try:
        joined.start_agent(("race", "r", 0), node=node, model=echo_model())
        return "won"
    except AlreadyRegistered:
        return "lost"
    finally:
        joined.disconnect()


def test_a_key_race_between_processes_has_exactly_one_winner(
    start_cluster: StartCluster, ray_session: Any
) -> None:
    cluster = start_cluster()
    nodes = sorted(cluster.nodes())
    race = ray_session.remote(num_cpus=0)(_race_from_another_process)
    refs = [race.remote(cluster.name, nodes[i % 2]) for i in range(4)]
    outcomes = sorted(ray_session.get(refs, timeout=100))
    assert outcomes == ["lost", "lost", "lost", "won"]
    assert [key for key, _ in cluster.registry.list()] == [("race", "r", 0)]
    assert sum(info.agents for info in _fresh_infos(cluster).values()) == 1


def test_a_dropped_subscription_stops_holding_the_agent(start_cluster: StartCluster) -> None:
    cluster = start_cluster()
    agent = cluster.start_agent(("s1", "streamer", 0), model=echo_model())
    sub = agent.subscribe(max_queue=1, overflow="block", block_timeout=90)
    assert not sub.closed
    del sub
    gc.collect()
    # A live reader that never reads would hold this run for 90 s at its first full buffer.
    assert agent.run("many chunks", timeout=60).text.startswith("0;1;")
