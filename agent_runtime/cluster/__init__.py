"""agent_runtime.cluster: runtimes spread over a Ray cluster (the `cluster` extra).

`ClusterRuntime.start(address)` starts node actors, each hosting one local `Runtime` with
many agents, and a cluster registry (a named Ray actor) with the local registry's uniqueness
guarantee cluster-wide. Importing this package needs no Ray; starting a cluster does
(`pip install 'agent-runtime[cluster]'`, else `ClusterUnavailable`).
"""

from agent_runtime.cluster._errors import NodeLost
from agent_runtime.cluster._facades import ClusterRegistry, ClusterSubagents
from agent_runtime.cluster._handle import ClusterAgent
from agent_runtime.cluster._node import NodeInfo
from agent_runtime.cluster._placement import NodeLoad, Placement, place
from agent_runtime.cluster._ray import ClusterUnavailable
from agent_runtime.cluster._runtime import ClusterRuntime
from agent_runtime.cluster._subscription import NODE_LOST, ClusterSubscription

__all__ = [
    "NODE_LOST",
    "ClusterAgent",
    "ClusterRegistry",
    "ClusterRuntime",
    "ClusterSubagents",
    "ClusterSubscription",
    "ClusterUnavailable",
    "NodeInfo",
    "NodeLoad",
    "NodeLost",
    "Placement",
    "place",
]
