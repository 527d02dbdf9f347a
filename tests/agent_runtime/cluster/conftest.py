"""A local Ray instance for the cluster tests (started once, shut down at the end, also on
failure), and a small cluster of node actors per test. Nothing leaves the machine: usage stats
are off and no dashboard is started. 2 CPUs, few node actors: the machine is shared."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_runtime.cluster import ClusterRuntime
from agent_runtime.config import RuntimeConfig
from tests.agent_runtime.memory.conftest import postgres, postgres_dsn  # noqa: F401 (fixtures)

SKIP = (
    "Ray is not installed: run `make test-cluster` (it installs the `cluster` extra), or "
    "`pip install 'agent-runtime[cluster]'`, to run the cluster tests"
)
_names = itertools.count()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[Any]:
    """`ray.init(num_cpus=2, include_dashboard=False)` once; `ray.shutdown()` at the end."""
    try:
        import ray
    except ImportError:
        pytest.skip(SKIP)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        namespace="agent_runtime_tests",
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


StartCluster = Callable[..., ClusterRuntime]


@pytest.fixture
def start_cluster(ray_session: Any) -> Iterator[StartCluster]:
    """Start a ClusterRuntime (2 nodes, memory in process, unless told otherwise); every one
    started is stopped after the test, also when it failed."""
    started: list[ClusterRuntime] = []

    def start(**kwargs: Any) -> ClusterRuntime:
        kwargs.setdefault("nodes", 2)
        kwargs.setdefault("config", RuntimeConfig.model_validate({"memory": {"store": "memory"}}))
        kwargs.setdefault("name", f"test-{os.getpid()}-{next(_names)}")
        cluster = ClusterRuntime.start(**kwargs)
        started.append(cluster)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()
