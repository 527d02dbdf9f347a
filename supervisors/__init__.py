"""Generic OTP-style supervision for pykka actors: it knows nothing of agents.

Children subclass `SupervisedActor` (a thread each) or `AsyncioActor` (handled on an asyncio
event loop, no thread) so that every exit, with its reason, reaches their supervisor;
`Supervisor`, `DynamicSupervisor`, `TaskSupervisor` and `AsyncTaskSupervisor` follow
Erlang/OTP's semantics (see DESIGN.md section 3).
"""

from supervisors._actor import (
    ExitReason,
    Monitor,
    SupervisedActor,
    exit_reason,
    kill,
    monitor,
    watch,
)
from supervisors._async_tasks import AsyncTaskSupervisor
from supervisors._asyncio_actor import AsyncioActor, LoopFuture
from supervisors._dynamic import DynamicSupervisor
from supervisors._errors import (
    ChildStartError,
    EventLoopDied,
    MaxChildrenReached,
    SupervisorError,
    SupervisorStopped,
)
from supervisors._introspect import supervisor_of
from supervisors._loop_thread import on_event_loop_thread
from supervisors._spec import ChildCounts, ChildInfo, ChildSpec
from supervisors._supervisor import Supervisor
from supervisors._tasks import TaskSupervisor

__all__ = [
    "AsyncTaskSupervisor",
    "AsyncioActor",
    "ChildCounts",
    "ChildInfo",
    "ChildSpec",
    "ChildStartError",
    "DynamicSupervisor",
    "EventLoopDied",
    "ExitReason",
    "LoopFuture",
    "MaxChildrenReached",
    "Monitor",
    "SupervisedActor",
    "Supervisor",
    "SupervisorError",
    "SupervisorStopped",
    "TaskSupervisor",
    "exit_reason",
    "kill",
    "monitor",
    "on_event_loop_thread",
    "supervisor_of",
    "watch",
]
