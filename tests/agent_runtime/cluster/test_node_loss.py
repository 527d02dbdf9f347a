"""A node killed mid-run (`ray.kill`): Ray restarts it, its transient agents come back on a
live node with their history from the shared PostgresStore, the interrupted run's readers get
`Error("node_lost")`, and its temporary agents are gone from the registry."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_runtime import RunFailed
from agent_runtime.config import RuntimeConfig
from agent_runtime.events import AgentStart, Error
from agent_runtime.messages import UserMessage
from agent_runtime.testing import wait_until
from tests.agent_runtime.cluster.conftest import StartCluster
from tests.agent_runtime.cluster.models import echo_model

pytestmark = pytest.mark.cluster


def test_a_killed_node_gives_its_transient_agents_back_with_their_history(
    start_cluster: StartCluster, postgres_dsn: str, ray_session: Any
) -> None:
    config = RuntimeConfig.model_validate({"memory": {"store": "postgres", "dsn": postgres_dsn}})
    cluster = start_cluster(config=config, placement="least_loaded")
    doomed = sorted(cluster.nodes())[0]
    old_incarnation = cluster.nodes()[doomed].incarnation
    kept = cluster.start_agent(
        ("s1", "kept", 0), node=doomed, model=echo_model(), restart="transient"
    )
    waiting = cluster.start_agent(
        ("s2", "waiting", 0), node=doomed, model=echo_model(), restart="transient"
    )
    lost = cluster.start_agent(("s3", "lost", 0), node=doomed, model=echo_model())
    assert kept.run("remember me", timeout=60).text == "echo: remember me"  # committed

    failures: list[BaseException] = []

    def run_slowly() -> None:
        try:
            waiting.run("slow answer", timeout=120)
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run_slowly)
    with kept.subscribe() as sub:
        run_id = kept.prompt("slow answer")
        first = next(iter(sub.until_end(timeout=60)))
        assert isinstance(first, AgentStart) and first.run_id == run_id
        runner.start()
        wait_until(lambda: waiting.state().is_running, timeout=30)

        ray_session.kill(cluster.node_actor(doomed), no_restart=False)

        rest = list(sub.until_end(timeout=60, run_id=run_id))
        assert isinstance(rest[-1], Error) and rest[-1].reason == "node_lost"
        assert rest[-1].run_id == run_id
        runner.join(timeout=60)
        assert len(failures) == 1 and isinstance(failures[0], RunFailed)
        assert failures[0].reason == "node_lost"

        def incarnation() -> str | None:
            found = cluster.registry.lookup_with_metadata(kept.key)
            return None if found is None else found[1]["incarnation"]

        wait_until(
            lambda: incarnation() not in (None, old_incarnation),
            timeout=60,
            what="the transient agent back on a live node",
        )
        history = [m.text for m in kept.state().messages if isinstance(m, UserMessage)]
        assert "remember me" in history  # from the shared store, on its new node
        # The subscription follows the agent to its new node.
        wait_until(lambda: sub.incarnation == incarnation(), timeout=60)
        assert kept.run("again", timeout=60).text == "echo: again"
        assert [type(e).__name__ for e in sub.until_end(timeout=60)][-1] == "AgentEnd"

    wait_until(lambda: cluster.registry.lookup(lost.key) is None, timeout=60)
    wait_until(lambda: cluster.registry.lookup(waiting.key) is not None, timeout=60)
    assert sorted(k.role for k, _ in cluster.registry.list()) == ["kept", "waiting"]
    assert cluster.nodes()[doomed].incarnation != old_incarnation  # Ray restarted it


def test_a_node_gone_for_good_hands_its_transient_agents_to_a_live_node(
    start_cluster: StartCluster, postgres_dsn: str, ray_session: Any
) -> None:
    config = RuntimeConfig.model_validate({"memory": {"store": "postgres", "dsn": postgres_dsn}})
    cluster = start_cluster(config=config, max_restarts=0)
    doomed, survivor = sorted(cluster.nodes())
    kept = cluster.start_agent(
        ("s1", "kept", 0), node=doomed, model=echo_model(), restart="transient"
    )
    assert kept.run("remember me", timeout=60).text == "echo: remember me"

    ray_session.kill(cluster.node_actor(doomed), no_restart=True)

    wait_until(lambda: kept.node == survivor, timeout=60, what="the agent on the live node")
    history = [m.text for m in kept.state().messages if isinstance(m, UserMessage)]
    assert "remember me" in history
    wait_until(lambda: doomed not in cluster.nodes(), timeout=30)
    assert cluster.start_agent(("s9", "new", 0), model=echo_model()).node == survivor
