"""The A2A task store stays bounded: the oldest finished tasks of an agent are forgotten,
running ones never, and one agent's tasks never push out another's."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("a2a", reason="needs a2a-sdk: pip install --group dev")

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus

from agent_runtime._key import AgentKey
from agent_runtime.server._a2a_executor import _KEY
from agent_runtime.server._a2a_store import BoundedTaskStore


def context(index: int) -> ServerCallContext:
    return ServerCallContext(state={_KEY: AgentKey("s", "a", index)})


def task(task_id: str, state: int) -> Task:
    return Task(id=task_id, context_id="s", status=TaskStatus(state=state))


def test_the_oldest_finished_tasks_are_forgotten_and_running_ones_kept() -> None:
    async def main() -> None:
        store = BoundedTaskStore(max_finished=3)
        first, other = context(0), context(1)
        await store.save(task("running", TaskState.TASK_STATE_WORKING), first)
        await store.save(task("elsewhere", TaskState.TASK_STATE_COMPLETED), other)
        for n in range(5):
            await store.save(task(f"done-{n}", TaskState.TASK_STATE_COMPLETED), first)
        kept = [t for n in range(5) if (t := await store.get(f"done-{n}", first)) is not None]
        assert [t.id for t in kept] == ["done-2", "done-3", "done-4"]
        assert await store.get("running", first) is not None  # never forgotten while it runs
        assert await store.get("elsewhere", other) is not None  # another agent's
        # a running task that finishes counts as the newest finished one
        await store.save(task("running", TaskState.TASK_STATE_FAILED), first)
        assert await store.get("done-2", first) is None
        assert await store.get("running", first) is not None

    asyncio.run(main())


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_finished must be >= 1"):
        BoundedTaskStore(max_finished=0)
