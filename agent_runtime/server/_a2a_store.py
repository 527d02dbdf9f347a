"""BoundedTaskStore: the A2A tasks of each agent in memory, the oldest finished ones forgotten."""

from __future__ import annotations

import threading
from collections import OrderedDict

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState

from agent_runtime.server._a2a_executor import task_owner

MAX_FINISHED_TASKS = 1_000
"""Finished tasks kept per agent: a gateway that answers A2A calls for months stays bounded."""

_FINISHED = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


class BoundedTaskStore(TaskStore):
    """a2a-sdk's `InMemoryTaskStore`, keeping at most `max_finished` finished tasks (completed,
    failed, canceled, rejected) per agent: saving one more forgets the agent's oldest finished
    task (a `GetTask` of it then finds none). A task still running is never forgotten.
    """

    def __init__(self, max_finished: int = MAX_FINISHED_TASKS) -> None:
        if max_finished < 1:
            raise ValueError(f"max_finished must be >= 1, not {max_finished!r}")
        self._store = InMemoryTaskStore(owner_resolver=task_owner)
        self._max = max_finished
        self._lock = threading.Lock()
        # per owner: its finished tasks' ids, oldest first
        self._finished: dict[str, OrderedDict[str, None]] = {}

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._store.save(task, context)
        owner = task_owner(context)
        with self._lock:
            finished = self._finished.setdefault(owner, OrderedDict())
            if task.status.state in _FINISHED:
                finished[task.id] = None
                finished.move_to_end(task.id)
            else:
                finished.pop(task.id, None)
            forgotten = [finished.popitem(last=False)[0] for _ in range(len(finished) - self._max)]
        for task_id in forgotten:
            await self._store.delete(task_id, context)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self._store.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self._store.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._store.delete(task_id, context)
        with self._lock:
            finished = self._finished.get(task_owner(context))
            if finished is not None:
                finished.pop(task_id, None)
