"""Ray, imported only when a cluster is used: a clear error naming the fix when it is absent."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agent_runtime._errors import AgentRuntimeError

INSTALL = "pip install 'agent-runtime[cluster]'"


class ClusterUnavailable(AgentRuntimeError, ImportError):
    """Ray is not importable here; the message says how to install it."""


def import_ray() -> ModuleType:
    """The `ray` module.

    Raises:
        ClusterUnavailable: Ray is not installed (the message names the extra).
    """
    try:
        import ray
    except ImportError as exc:
        raise ClusterUnavailable(
            f"agent_runtime.cluster needs Ray, which is not installed: {INSTALL} "
            "(`make test-cluster` installs it into the project's venv)"
        ) from exc
    module: ModuleType = ray  # typed Any (pyproject: Ray is optional)
    return module


def node_failure(exc: BaseException) -> bool:
    """True if `exc` says the node actor died or is restarting (its agents are lost)."""
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError)


def get(refs: Any, timeout: float | None) -> Any:
    """`ray.get` with a deadline; TimeoutError (the builtin) when it passes."""
    ray = import_ray()
    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError as exc:
        raise TimeoutError(f"no answer from the cluster within {timeout}s") from exc
