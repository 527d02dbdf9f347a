"""How an A2A task runs on one of our agents: a2a-sdk's `AgentExecutor`, request-context and
call-context hooks, and the owner scope of the task store.

- The agent is the one the request's path names (`AgentKey` in the call context's state,
  put there by `AgentCallContextBuilder` from the path parameters).
- The A2A context is the agent's session: a message without `contextId` gets the session as
  its context; one naming another context is refused (`InvalidParamsError`), since the
  agent's memory is its session and nothing else.
- A task is one run of the agent: its text parts are the prompt; it is submitted, then
  working, then completed with the final answer as an artifact and as the status message,
  or failed (the run's error), or canceled (the run was canceled, or the task was). A busy
  agent rejects the task. Cancelling the task aborts the run (reason `stream_closed`).
- The answer streams while it is generated: each text delta of the agent's assistant
  message is an artifact update of the artifact `answer` (`append`: true, one part per
  delta; a later assistant message of the run, after a tool turn, starts it anew with
  `append`: false). At the end the artifact is replaced by the run's final answer, in one
  part, with `lastChunk`: true, so the task holds exactly the final answer however it was
  streamed.
- A tool call that waits for approval puts the task in `input-required` (the status
  message says which call and where to decide: `POST .../approvals/{tool_call_id}` of the
  gateway; the status metadata holds `tool_call_id`, `name`, `args`); once it is decided
  the task is `working` again.
- Tasks are stored per agent key (`task_owner`): a task id of one agent is not found
  through another agent's endpoint, and so not through a token scoped to another session.
"""

from __future__ import annotations

from typing import Any

from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.tasks import TaskUpdater
from a2a.types import InvalidParamsError, SendMessageRequest, Task, TaskState
from starlette.requests import Request

from agent_runtime._errors import AgentBusy, AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.events import (
    AgentEnd,
    Canceled,
    Error,
    MessageStart,
    MessageUpdate,
    ToolApprovalDecided,
    ToolApprovalRequested,
)
from agent_runtime.runtime import Runtime
from agent_runtime.server._proxy_answer import final_text
from agent_runtime.server._proxy_redact import public_text

__all__ = [
    "AgentCallContextBuilder",
    "RunExecutor",
    "SessionContextBuilder",
    "agent_key_of",
    "key_from_path",
    "task_owner",
]

_KEY = "agent_runtime.agent_key"


def key_from_path(path_params: dict[str, Any]) -> AgentKey:
    """The agent key of a request's path parameters `session`, `role`, `index`."""
    return AgentKey(
        str(path_params["session"]), str(path_params["role"]), int(path_params["index"])
    )


def agent_key_of(context: ServerCallContext) -> AgentKey:
    """The agent key the call is addressed to."""
    key = context.state[_KEY]
    assert isinstance(key, AgentKey)
    return key


def task_owner(context: ServerCallContext) -> str:
    """The task store's owner scope of a call: its agent key."""
    key = agent_key_of(context)
    return f"{key.session}/{key.role}/{key.index}"


class AgentCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the agent key of the request's path."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_KEY] = key_from_path(request.path_params)
        return context


class SessionContextBuilder(SimpleRequestContextBuilder):
    """Gives every task the agent's session as its context; refuses another context and a
    message without text."""

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        session = agent_key_of(context).session
        if params is not None:
            asked = context_id or params.message.context_id or None
            if asked is not None and asked != session:
                raise InvalidParamsError(
                    message=f"contextId {asked!r} is not this agent's context: an agent's "
                    f"context is its session {session!r} (leave contextId out, or send it)"
                )
            context_id = session
            if not any(part.HasField("text") and part.text for part in params.message.parts):
                raise InvalidParamsError(
                    message="the message has no text part: this agent takes text prompts only"
                )
        return await super().build(context, params, task_id, context_id, task)


class RunExecutor(AgentExecutor):
    """Runs each A2A task as one run of the addressed agent of `runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            submitted = new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, [], history)
            await event_queue.enqueue_event(submitted)
        updater = TaskUpdater(event_queue, task_id, context_id)
        key = agent_key_of(context.call_context)
        agent = self._runtime.registry.lookup(key)
        named = f"{key.session}/{key.role}/{key.index}"
        if agent is None:
            await updater.failed(_said(updater, f"no agent {named} is running"))
            return
        try:
            events = agent.astream(context.get_user_input(), abort_on_close=True)
        except AgentBusy:
            await updater.reject(_said(updater, f"agent {named} is running another task"))
            return
        except AgentStopped:
            await updater.failed(_said(updater, f"agent {named} was stopped"))
            return
        await updater.start_work()
        answer = f"{task_id}-answer"
        fresh = True  # the next delta starts the artifact anew (a new assistant message)
        async with events:  # closed early (the task was canceled): the run is aborted
            async for event in events:
                if event.agent is not None and event.agent != key:
                    continue  # a delegate's event
                if isinstance(event, MessageUpdate):
                    delta = event.delta
                    if delta.kind == "text" and delta.delta:
                        await updater.add_artifact(
                            [new_text_part(delta.delta)],
                            artifact_id=answer,
                            name="answer",
                            append=not fresh,
                            last_chunk=False,
                        )
                        fresh = False
                elif isinstance(event, MessageStart):
                    fresh = fresh or event.message.role == "assistant"
                elif isinstance(event, ToolApprovalRequested):
                    text = (
                        f"tool call {event.tool_call_id} ({event.name}) waits for approval: "
                        f"POST /v1/agents/{named}/approvals/{event.tool_call_id} with "
                        '{"decision": "approve"} or {"decision": "deny", "reason": ...}'
                    )
                    await updater.update_status(
                        TaskState.TASK_STATE_INPUT_REQUIRED,
                        _said(updater, text),
                        metadata={
                            "tool_call_id": event.tool_call_id,
                            "name": event.name,
                            "args": event.args,
                        },
                    )
                elif isinstance(event, ToolApprovalDecided):
                    await updater.start_work()
                elif isinstance(event, AgentEnd):
                    text = final_text(event)
                    await updater.add_artifact(
                        [new_text_part(text)],
                        artifact_id=answer,
                        name="answer",
                        append=False,
                        last_chunk=True,
                    )
                    await updater.complete(_said(updater, text))
                elif isinstance(event, Error):
                    reason = public_text(event.reason)
                    await updater.failed(_said(updater, f"the run failed: {reason}"))
                elif isinstance(event, Canceled):
                    await updater.cancel(_said(updater, f"the run was canceled: {event.reason}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the task canceled; the SDK then cancels `execute`, whose closing of the
        run's events aborts the run."""
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        await updater.cancel(_said(updater, "the task was canceled"))


def _said(updater: TaskUpdater, text: str) -> Any:
    return updater.new_agent_message([new_text_part(text)])
