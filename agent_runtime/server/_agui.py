"""The AG-UI endpoint: `POST /v1/agui/{session}/{role}/{index}` with a `RunAgentInput`,
answered by AG-UI events over SSE (ag-ui-protocol's types and its `EventEncoder`).

How AG-UI's ids map to ours:
- the path names the agent (`AgentKey(session, role, index)`), as the JSON API does; it must
  be running (started by the application or `POST /v1/agents/...`), else 404; the route
  calls `require_session(request, session)` first (401/403);
- the agent's session holds the conversation: the agent keeps its history server-side, so
  only the trailing user messages of `messages` (those after the last message of any other
  role) are the run's prompt; the client's copy of the earlier history is not sent again;
- `threadId` and `runId` are the client's names for the conversation and the run: every
  run-scoped event carries them back unchanged (our own run id stays internal). A client
  keeps one thread per agent URL;
- `state` (a JSON object) is the session's shared key-value state (`memory.kv(session)`): its
  keys are written before the run starts, and put back as they were when the run does not
  start (a busy agent: 409);
  STATE_SNAPSHOT reports that state at the start, after each turn that changed it, and
  before the run's end, each as of its point in the event order (the run is read through a
  `GatedRun`, which holds the agent while the state is read);
- `tools` (frontend tools) and `context` are not used: the agent's own tools run here.

Closing the response (an AG-UI client's `abortRun`) aborts the run at once (reason
`stream_closed`). The event mapping is in `agent_runtime.server._agui_mapping`. Refusals are
JSON `{"error": {"code", "message"}}`: 422 for an input that is not a `RunAgentInput` or has
no trailing user message, 413 when the trailing user messages together are longer than
`server.max_prompt_chars`, 404 when no agent runs at the key, 409 when it is busy.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput, TextPart
from ag_ui.core import UserMessage as AguiUserMessage
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_runtime._errors import AgentBusy, AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.config import ServerConfig
from agent_runtime.events import TurnEnd, is_terminal
from agent_runtime.memory import SessionState
from agent_runtime.messages import UserMessage
from agent_runtime.runtime import Runtime
from agent_runtime.server._agui_mapping import AguiRun
from agent_runtime.server._limits import limits_of, too_long
from agent_runtime.server._principal import require_session
from agent_runtime.server._proxy_stream import DisconnectingStream
from agent_runtime.server._run_gate import GatedRun

__all__ = ["AGUI_PATH", "routes"]

AGUI_PATH = "/v1/agui/{session}/{role}/{index:int}"
"""The route's path: the agent's key, as in the JSON API."""

_MAX_PROBLEMS = 5


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The AG-UI route, `POST /v1/agui/{session}/{role}/{index}`, over `runtime`'s agents."""
    return [Route(AGUI_PATH, _AguiEndpoint(runtime).handle, methods=["POST"], name="agui_run")]


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> Response:
        body = {"error": {"code": self.code, "message": self.message}}
        return JSONResponse(body, status_code=self.status)


class _AguiEndpoint:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    async def handle(self, request: Request) -> Response:
        params = request.path_params
        key = AgentKey(str(params["session"]), str(params["role"]), int(params["index"]))
        require_session(request, key.session)
        try:
            run_input = _run_input(await request.body())
            prompts = _prompts(run_input)
            _check_length(prompts, limits_of(request, self._runtime.config.server))
            agent = self._runtime.registry.lookup(key)
            if agent is None:
                raise _Refused(404, "agent_not_found", _not_running(key))
            state = self._runtime.memory.kv(key.session)
            before: dict[str, Any] = {}
            if run_input.state is not None:
                before = await asyncio.to_thread(_write_state, state, run_input.state)
            # Read before the run starts: its first tool may change the state at once.
            initial = await asyncio.to_thread(state.items)
            try:
                events = await GatedRun.start(agent, prompts)
            except (AgentBusy, AgentStopped) as refused:
                # The run that was to read the state never starts: put it back as it was.
                await asyncio.to_thread(_restore_state, state, before)
                if isinstance(refused, AgentBusy):
                    raise _Refused(409, "agent_busy", f"agent {_named(key)} is running") from None
                raise _Refused(404, "agent_not_found", _not_running(key)) from None
        except _Refused as refused:
            return refused.response()
        encoder = EventEncoder(accept=request.headers.get("accept", ""))
        mapping = AguiRun(key, run_input.thread_id, run_input.run_id)
        return DisconnectingStream(_answer(events, mapping, encoder, state, initial))


async def _answer(
    events: GatedRun,
    mapping: AguiRun,
    encoder: EventEncoder,
    state: SessionState,
    initial: dict[str, Any],
) -> AsyncIterator[str]:
    async with events:  # closed early (the client went away): the run is aborted
        for out in mapping.started(initial):
            yield encoder.encode(out)
        async for event in events:
            # The state is read while the run is held at this event (`GatedRun`): as of
            # this point of the event order, never as a later turn's tool left it.
            if is_terminal(event):  # the state as the run leaves it, before the end
                for out in mapping.state(await asyncio.to_thread(state.items)):
                    yield encoder.encode(out)
            for out in mapping.feed(event):
                yield encoder.encode(out)
            if isinstance(event, TurnEnd) and event.agent in (None, mapping.key):
                for out in mapping.state(await asyncio.to_thread(state.items)):
                    yield encoder.encode(out)


def _run_input(raw: bytes) -> RunAgentInput:
    try:
        return RunAgentInput.model_validate_json(raw)
    except ValidationError as exc:
        problems = exc.errors(include_url=False, include_input=False)
        named = [
            f"{'.'.join(str(part) for part in p['loc']) or 'body'}: {p['msg']}"
            for p in problems[:_MAX_PROBLEMS]
        ]
        more = len(problems) - len(named)
        listed = "; ".join(named) + (f"; and {more} more" if more > 0 else "")
        raise _Refused(422, "invalid_run_input", f"not an AG-UI RunAgentInput: {listed}") from None


def _prompts(run_input: RunAgentInput) -> list[UserMessage]:
    """The trailing user messages of the input, as ours (text parts only)."""
    trailing: list[AguiUserMessage] = []
    for message in reversed(run_input.messages):
        if not isinstance(message, AguiUserMessage):
            break
        trailing.append(message)
    if not trailing:
        last = run_input.messages[-1].role if run_input.messages else None
        raise _Refused(
            422,
            "no_user_message",
            "RunAgentInput.messages must end with a user message (the agent keeps the earlier "
            f"history itself); it {'is empty' if last is None else f'ends with a {last} message'}",
        )
    return [UserMessage(content=_text_of(m)) for m in reversed(trailing)]


def _check_length(prompts: list[UserMessage], settings: ServerConfig) -> None:
    """413 when the run's new user messages together are longer than `max_prompt_chars`
    (the earlier history a client resends is bounded by `max_body_bytes` only)."""
    limit = settings.max_prompt_chars
    if sum(len(prompt.text) for prompt in prompts) > limit:
        raise _Refused(413, "prompt_too_long", too_long(limit))


def _text_of(message: AguiUserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    texts: list[str] = []
    for part in message.content:
        if not isinstance(part, TextPart):
            raise _Refused(
                422,
                "unsupported_content",
                f"user message {message.id!r} has a {part.type!r} part: only text parts are "
                "supported",
            )
        texts.append(part.text)
    return "".join(texts)


_ABSENT = object()


def _write_state(state: SessionState, value: Any) -> dict[str, Any]:
    """Write `value`'s entries into `state`; returns what each key held before (`_ABSENT`
    for a key that had no value), for `_restore_state`."""
    if not isinstance(value, dict):
        raise _Refused(
            422,
            "invalid_state",
            f"RunAgentInput.state must be a JSON object (the session's key-value state), "
            f"not {type(value).__name__}",
        )
    if "" in value:
        raise _Refused(422, "invalid_state", "RunAgentInput.state has an empty key")
    for name, item in value.items():  # all checked before any is written
        try:
            json.dumps(item, allow_nan=False)
        except (TypeError, ValueError) as exc:  # NaN or Infinity: JSON has neither
            raise _Refused(
                422, "invalid_state", f"RunAgentInput.state[{name!r}] is not JSON: {exc}"
            ) from None
    before = {name: state.get(name, _ABSENT) for name in value}
    written: dict[str, Any] = {}
    try:
        for name, item in value.items():
            state.put(name, item)
            written[name] = before[name]
    except BaseException:
        _restore_state(state, written)  # the run does not start: nothing of it stays
        raise
    return before


def _restore_state(state: SessionState, before: dict[str, Any]) -> None:
    for name, item in before.items():
        if item is _ABSENT:
            state.delete(name)
        else:
            state.put(name, item)


def _named(key: AgentKey) -> str:
    return f"{key.session}/{key.role}/{key.index}"


def _not_running(key: AgentKey) -> str:
    return (
        f"no agent {_named(key)} is running: start it first "
        f"(POST /v1/agents/{key.session}/{key.role}/{key.index})"
    )
