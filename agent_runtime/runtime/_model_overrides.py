"""ModelOverrides: the models `Runtime.override_model` puts in place of agents' own, for tests.

An override names an agent (by its key) or a role (every agent of that role, also ones started
later) and holds a model. The agents consult the table at the start of each run
(`AgentHost.model_for_run`), so nothing is written into an agent and nothing needs undoing in
it: leaving the block removes the entry, and the agent's own model (as set by `start_agent`
or `set_model`, also inside the block) is the one its next run uses.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.llm.base import ChatModel


@dataclass(frozen=True, eq=False)  # each entry is its own, even for the same target and model
class _Override:
    key: AgentKey | None  # one agent, or
    role: str | None  # every agent of a role
    model: ChatModel

    def matches(self, key: AgentKey) -> bool:
        return key == self.key if self.key is not None else key.role == self.role


class ModelOverrides:
    """The runtime's active model overrides, innermost last.

    Thread-safe: entries are added and removed under this object's lock (never held while
    calling anything else) as a new tuple each time, and `model_for_run` reads the current
    tuple without the lock. The innermost active override that matches wins, so nested
    blocks restore in order, and blocks that end out of order (on several threads) still
    leave exactly the ones not ended. With no override active, a lookup is one tuple check.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: tuple[_Override, ...] = ()

    @contextlib.contextmanager
    def override(self, agent_or_role: Agent | str, model: ChatModel) -> Iterator[None]:
        """Inside the block, the agent (or every agent of the role) starts its runs with `model`.

        Raises:
            TypeError: `agent_or_role` is neither an Agent nor a str, or `model` is not a
                ChatModel (each named).
            ValueError: an empty role.
        """
        entry = _entry(agent_or_role, model)
        with self._lock:
            self._active = (*self._active, entry)
        try:
            yield
        finally:
            with self._lock:
                self._active = tuple(e for e in self._active if e is not entry)

    def model_for_run(self, key: AgentKey, model: ChatModel) -> ChatModel:
        """The model a run of the agent under `key` starts with: the innermost active override
        of it or its role, else `model` (its own)."""
        active = self._active
        for entry in reversed(active):
            if entry.matches(key):
                return entry.model
        return model


def _entry(agent_or_role: Agent | str, model: ChatModel) -> _Override:
    if isinstance(model, type) or not isinstance(model, ChatModel):
        what = f"the class {model.__name__}" if isinstance(model, type) else type(model).__name__
        raise TypeError(f"override_model needs a ChatModel instance, not {what}")
    if isinstance(agent_or_role, Agent):
        return _Override(agent_or_role.key, None, model)
    if isinstance(agent_or_role, str):
        if not agent_or_role:
            raise ValueError("override_model needs an Agent or a role name, not an empty role")
        return _Override(None, agent_or_role, model)
    raise TypeError(
        f"override_model needs an Agent or a role name (str), not {type(agent_or_role).__name__}"
    )
