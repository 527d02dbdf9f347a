"""The cluster figures of `make bench`: ClusterRuntime on a local Ray instance vs a local Runtime.

Measured here (no peers): a prompt's round trip (`run()` of one text turn) through a node vs
in process, the throughput of many agents' runs at once through the nodes vs in process, and
how many idle agents a node holds (its process's memory per agent and the start rate). The
"nodes" are Ray actor processes of this machine, so a round trip crosses processes, not a
network. `run_cluster` never raises: without Ray, or when the cluster cannot start, every row
says why instead of a figure. Ray starts with 2 CPUs, no dashboard and no usage stats.
"""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from agent_runtime import Runtime
from agent_runtime.llm.types import ChatRequest
from agent_runtime.testing import FunctionModel, ScriptedTurn
from bench._figures import NONE, USAGE, config, percentile

NODES = 2
ROUND_TRIPS = 200
BURST_AGENTS = 200
IDLE_AGENTS = 600  # spread over the nodes (least loaded): IDLE_AGENTS / NODES per node


class NodeModel(FunctionModel):
    """An instant one-turn model that travels to the nodes as its function."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.fn,))


def answer(_request: ChatRequest) -> ScriptedTurn:
    return ScriptedTurn(text="ok", usage=USAGE)


def model() -> NodeModel:
    return NodeModel(answer, record_requests=False)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _round_trips(agent: Any) -> list[float]:
    agent.run("warm up", timeout=60)
    samples = []
    for _ in range(ROUND_TRIPS):
        started = time.perf_counter()
        agent.run("hi", timeout=60)
        samples.append(time.perf_counter() - started)
    return samples


def _burst(agents: list[Any]) -> float:
    """Runs per second of one run on each agent, all at once (16 caller threads)."""
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda a: a.run("go", timeout=120), agents))
    return len(agents) / (time.perf_counter() - started)


def _local() -> dict[str, float]:
    with Runtime.start(config(), configure_logging=False) as runtime:
        one = runtime.start_agent(("bench", "rt", 0), model=model(), memory=NONE)
        trips = _round_trips(one)
        agents = [
            runtime.start_agent(("bench", "burst", i), model=model(), memory=NONE)
            for i in range(BURST_AGENTS)
        ]
        rate = statistics.median(_burst(agents) for _ in range(3))
    return {"p50": percentile(trips, 0.5), "p99": percentile(trips, 0.99), "rate": rate}


def _cluster(ray: Any) -> dict[str, float]:
    from agent_runtime.cluster import ClusterRuntime

    cluster = ClusterRuntime.start(nodes=NODES, config=config(), placement="least_loaded")
    try:
        one = cluster.start_agent(("bench", "rt", 0), model=model(), memory=NONE)
        trips = _round_trips(one)
        agents = [
            cluster.start_agent((f"burst{i}", "burst", 0), model=model(), memory=NONE)
            for i in range(BURST_AGENTS)
        ]
        rate = statistics.median(_burst(agents) for _ in range(3))
        cluster.subagents.stop_all()
        infos = cluster.nodes()
        before = {name: _rss_kib(info.pid) for name, info in infos.items()}
        started = time.perf_counter()
        for i in range(IDLE_AGENTS):
            cluster.start_agent((f"idle{i}", "idle", 0), model=model(), memory=NONE)
        start_rate = IDLE_AGENTS / (time.perf_counter() - started)
        grown = sum(_rss_kib(info.pid) - before[name] for name, info in infos.items())
        node_rss = statistics.mean(before.values()) / 1024
    finally:
        cluster.stop()
    return {
        "p50": percentile(trips, 0.5),
        "p99": percentile(trips, 0.99),
        "rate": rate,
        "start_rate": start_rate,
        "kib_per_agent": grown / IDLE_AGENTS,
        "node_rss_mib": node_rss,
    }


def run_cluster() -> dict[str, Any]:
    """The cluster's figures and the local ones, or {"error": why} (never raises)."""
    try:
        import ray
    except ImportError:
        return {"error": "Ray is not installed (`make test-cluster` installs the cluster extra)"}
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            namespace="agent_runtime_bench",
        )
    except Exception as exc:
        return {"error": f"Ray did not start: {exc}"}
    try:
        local = _local()
        remote = _cluster(ray)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        ray.shutdown()
    return {"local": local, "cluster": remote, "version": ray.__version__}


def cluster_lines(figures: dict[str, Any]) -> list[str]:
    """The cluster table (Markdown), or one row saying why it was not run."""
    lines = [
        "| figure | cluster (Ray) | local Runtime | ratio |",
        "|---|---|---|---|",
    ]
    if "error" in figures:
        return [*lines, f"| cluster figures | not run: {figures['error']} | | |"]
    c, loc = figures["cluster"], figures["local"]

    def row(name: str, ours: float, base: float, unit: str, scale: float = 1e6) -> str:
        return f"| {name} | {ours * scale:,.0f} {unit} | {base * scale:,.0f} {unit} | " + (
            f"{ours / base:.2f}x |"
        )

    per_node = IDLE_AGENTS // NODES
    return [
        *lines,
        row("prompt round trip (run of one text turn), p50", c["p50"], loc["p50"], "us"),
        row("prompt round trip, p99", c["p99"], loc["p99"], "us"),
        row(
            f"throughput, {BURST_AGENTS} agents one run each at once",
            c["rate"],
            loc["rate"],
            "runs/s",
            1,
        ),
        f"| agents per node: {per_node} idle agents on each of {NODES} nodes, RSS per agent "
        f"| {c['kib_per_agent']:,.0f} KiB | | |",
        f"| agents per node: start rate through the cluster | {c['start_rate']:,.0f} agents/s "
        "| | |",
        f"| node process RSS before its agents (Ray actor + Runtime) | "
        f"{c['node_rss_mib']:,.0f} MiB | | |",
    ]


if __name__ == "__main__":
    print("\n".join(cluster_lines(run_cluster())))
