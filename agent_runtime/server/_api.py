"""The JSON API under /v1: start, prompt, steer, follow up, abort, run, inspect and stop agents
by key, the supervision tree, and the SSE streams of an agent and of a session.

Every route that touches a session calls `require_session` first (403 for a token scoped to
other sessions), before it looks anything up: a scoped token learns nothing of another
session, not even whether an agent exists there. Blocking calls into the runtime (an actor's
answer) run on worker threads, never on the server's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_runtime._errors import (
    AgentBusy,
    AgentStopped,
    AlreadyRegistered,
    ApprovalError,
    ApprovalsPending,
    CannotContinue,
    ConfigError,
)
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.config import ServerConfig
from agent_runtime.events import AgentEnd, Canceled, Error, is_terminal
from agent_runtime.llm import ChatModel, from_config
from agent_runtime.messages import AssistantMessage, Usage
from agent_runtime.runtime._introspection import RuntimeTree, TreeNode
from agent_runtime.server._errors import ApiError
from agent_runtime.server._hub import EventHub
from agent_runtime.server._limits import too_long
from agent_runtime.server._principal import Principal, principal_of, require_session
from agent_runtime.server._schemas import (
    AbortBody,
    Aborted,
    AgentRef,
    ApprovalBody,
    Decided,
    PromptBody,
    QueueBody,
    Queued,
    RunBody,
    RunOutcome,
    RunStarted,
    Started,
    StartOptions,
    Stopped,
)
from agent_runtime.server._sse import sse_response
from supervisors import MaxChildrenReached
from supervisors._log import get_logger

B = TypeVar("B", bound=BaseModel)
log = get_logger(__name__)
AGENT = "/v1/agents/{session}/{role}/{index:int}"


def ok(model: BaseModel, status: int = 200) -> JSONResponse:
    """`model` as the JSON body of a response."""
    return JSONResponse(model.model_dump(mode="json"), status_code=status)


async def read_body(request: Request, model: type[B]) -> B:
    """The request's JSON body as `model` (an empty body: the model's defaults).

    Raises:
        ApiError: 400 for a body that is not JSON, 422 for one that does not validate.
    """
    raw = await request.body()
    try:
        data: Any = json.loads(raw) if raw.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not valid JSON") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ApiError.invalid(exc) from None


class AgentApi:
    """The routes of the JSON API over one runtime (see the module docstring)."""

    def __init__(self, runtime: Any, settings: ServerConfig, hub: EventHub) -> None:
        self.runtime = runtime
        self.settings = settings
        self.hub = hub

    def routes(self) -> list[BaseRoute]:
        """The API's routes, in the order the OpenAPI document lists them."""
        return [
            Route("/v1/tree", self.tree, methods=["GET"]),
            Route(AGENT, self.agent, methods=["GET", "POST", "DELETE"]),
            Route(AGENT + "/prompt", self.prompt, methods=["POST"]),
            Route(AGENT + "/continue", self.continue_run, methods=["POST"]),
            Route(AGENT + "/steer", self.steer, methods=["POST"]),
            Route(AGENT + "/follow_up", self.follow_up, methods=["POST"]),
            Route(AGENT + "/abort", self.abort, methods=["POST"]),
            Route(AGENT + "/run", self.run, methods=["POST"]),
            Route(AGENT + "/approvals/{tool_call_id}", self.decide, methods=["POST"]),
            Route(AGENT + "/events", self.agent_events, methods=["GET"]),
            Route("/v1/sessions/{session}/events", self.session_events, methods=["GET"]),
        ]

    # -- helpers ----------------------------------------------------------------------------

    def _key(self, request: Request) -> AgentKey:
        params = request.path_params
        require_session(request, params["session"])
        try:
            return AgentKey.of((params["session"], params["role"], params["index"]))
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None

    def _agent(self, request: Request) -> Agent:
        key = self._key(request)
        agent: Agent | None = self.runtime.registry.lookup(key)
        if agent is None or not agent.alive:
            raise ApiError(404, f"no agent {_name(key)} is running")
        return agent

    def _check_text(self, *texts: str | None) -> None:
        limit = self.settings.max_prompt_chars
        for text in texts:
            if text is not None and len(text) > limit:
                raise ApiError(413, too_long(limit))

    async def _call(self, agent: Agent, fn: Callable[[], Any]) -> Any:
        try:
            return await asyncio.to_thread(fn)
        except AgentStopped:
            raise ApiError(404, f"no agent {_name(agent.key)} is running") from None
        except ApprovalsPending as exc:  # idle, but a turn of it waits: say what to do
            key = agent.key
            route = f"/v1/agents/{key.session}/{key.role}/{key.index}"
            waiting = ", ".join(exc.tool_call_ids)
            first = (
                f"decide {waiting} (POST {route}/approvals/{{tool_call_id}}), then "
                if waiting
                else ""
            )
            raise ApiError(
                409,
                f"agent {_name(agent.key)} has a turn waiting for approvals: {first}"
                f"POST {route}/continue runs the decided calls",
            ) from None
        except AgentBusy:
            raise ApiError(
                409, f"agent {_name(agent.key)} is running: steer it, follow up, or wait"
            ) from None
        except CannotContinue as exc:
            raise ApiError(409, str(exc)) from None

    # -- routes -----------------------------------------------------------------------------

    async def tree(self, request: Request) -> Response:
        """The supervision tree and the agents' status, only of the sessions the token may
        see."""
        principal = principal_of(request)
        snapshot: RuntimeTree = self.runtime.tree()
        return JSONResponse(_visible(snapshot, principal).model_dump(mode="json"))

    async def agent(self, request: Request) -> Response:
        """One route for the three methods of an agent's URL, so a 405 lists all three."""
        if request.method == "POST":
            return await self.start(request)
        if request.method == "DELETE":
            return await self.stop(request)
        return await self.state(request)

    async def start(self, request: Request) -> Response:
        key = self._key(request)
        options = await read_body(request, StartOptions)
        self._check_text(options.system_prompt)
        tools = []
        for name in options.tools:
            found = self.runtime.tools.get(name)
            if found is None:
                known = ", ".join(self.runtime.tools.names()) or "none"
                raise ApiError(422, f"unknown tool {name!r} (registered tools: {known})")
            tools.append(found)
        model = self._model(options.model)
        extra = options.model_dump(exclude={"model", "tools"}, exclude_none=True)
        try:
            agent: Agent = await self.runtime.astart_agent(key, model=model, tools=tools, **extra)
        except AlreadyRegistered:
            raise ApiError(409, f"an agent {_name(key)} is already running") from None
        except MaxChildrenReached:
            raise ApiError(503, "the runtime runs as many agents as it may (max_agents)") from None
        except (TypeError, ValueError) as exc:  # an option's value the agent refuses (named)
            raise ApiError(422, str(exc)) from None
        await self.hub.watch(agent)
        info = model.info
        started = Started(
            agent=_ref(key), model=f"{info.provider}:{info.model}", tools=[t.name for t in tools]
        )
        return ok(started, 201)

    def _model(self, name: str | None) -> ChatModel:
        llm = self.runtime.config.llm
        name = name or llm.default_profile
        if name is None or (name not in llm.profiles and name not in llm.pools):
            known = ", ".join(sorted([*llm.profiles, *llm.pools]))
            what = (
                "no model profile given and none is the default"
                if name is None
                else (f"unknown model profile {name!r}")
            )
            raise ApiError(422, f"{what} (configured profiles: {known})")
        try:
            return from_config(name, config=self.runtime.config)
        except ConfigError as exc:  # a server-side problem: a missing API key, a plugin
            log.warning("gateway.profile.unusable", profile=name, error=str(exc))
            raise ApiError(
                503,
                f"model profile {name!r} is not usable on this server now (its configuration "
                "is incomplete; the server's log says why)",
            ) from None

    async def state(self, request: Request) -> Response:
        agent = self._agent(request)
        state = await self._call(agent, agent.state)
        return JSONResponse(state.model_dump(mode="json"))

    async def stop(self, request: Request) -> Response:
        key = self._key(request)
        stopped = await asyncio.to_thread(self.runtime.subagents.stop, key)
        if not stopped:
            raise ApiError(404, f"no agent {_name(key)} is running")
        return ok(Stopped(stopped=True))

    async def prompt(self, request: Request) -> Response:
        agent = self._agent(request)
        body = await read_body(request, PromptBody)
        self._check_text(body.text)
        await self.hub.watch(agent)
        run_id = await self._call(agent, lambda: agent.prompt(body.text))
        return ok(RunStarted(run_id=run_id), 202)

    async def continue_run(self, request: Request) -> Response:
        """`Agent.continue_run()`: a run from the history as it is (no body)."""
        agent = self._agent(request)
        await self.hub.watch(agent)
        run_id = await self._call(agent, agent.continue_run)
        return ok(RunStarted(run_id=run_id), 202)

    async def steer(self, request: Request) -> Response:
        return await self._queue(request, "steer")

    async def follow_up(self, request: Request) -> Response:
        return await self._queue(request, "follow_up")

    async def _queue(self, request: Request, what: Literal["steer", "follow_up"]) -> Response:
        agent = self._agent(request)
        body = await read_body(request, QueueBody)
        self._check_text(body.text, body.system_prompt)
        method = agent.steer if what == "steer" else agent.follow_up
        await self._call(agent, lambda: method(body.text, system_prompt=body.system_prompt))
        return ok(Queued(queued=what), 202)

    async def abort(self, request: Request) -> Response:
        agent = self._agent(request)
        body = await read_body(request, AbortBody)
        aborted = await self._call(agent, lambda: agent.abort(body.reason))
        return ok(Aborted(aborted=aborted))

    async def decide(self, request: Request) -> Response:
        """Approve or deny a tool call waiting for approval (404: no such call waits; 409:
        it was decided already; 422: the new arguments do not validate)."""
        agent = self._agent(request)
        call_id = request.path_params["tool_call_id"]
        body = await read_body(request, ApprovalBody)
        by = body.by or principal_of(request).name
        if body.decision == "approve":
            decide = functools.partial(agent.approve, call_id, args=body.args, by=by)
        else:
            self._check_text(body.reason)
            decide = functools.partial(agent.deny, call_id, body.reason, by=by)
        try:
            await self._call(agent, decide)
        except ApprovalError as exc:
            status = {"decided": 409, "invalid_args": 422}.get(exc.kind, 404)
            raise ApiError(status, str(exc)) from None
        return ok(Decided(tool_call_id=call_id, approved=body.decision == "approve", by=by))

    async def run(self, request: Request) -> Response:
        agent = self._agent(request)
        body = await read_body(request, RunBody)
        self._check_text(body.text)
        await self.hub.watch(agent)
        sub = await self._call(agent, lambda: agent.subscribe(64, "drop_oldest"))
        try:
            run_id = await self._call(agent, lambda: agent.prompt(body.text))
            terminal = None
            try:
                async for event in sub.auntil_end(body.timeout, run_id=run_id):
                    terminal = event
            except TimeoutError:
                raise ApiError(
                    504,
                    f"run {run_id} did not end within {body.timeout:g}s; it goes on (stream "
                    "the agent's events or abort it)",
                ) from None
        finally:
            sub.close()
        return ok(_outcome(run_id, terminal))

    async def agent_events(self, request: Request) -> Response:
        key = self._key(request)
        buffer = self.hub.agent_buffer(key)
        agent: Agent | None = self.runtime.registry.lookup(key)
        if agent is not None and agent.alive:
            with contextlib.suppress(AgentStopped):  # stopped meanwhile: its stream, if any
                buffer = await self.hub.watch(agent)
        if buffer is None:
            raise ApiError(404, f"no agent {_name(key)} is running")
        return sse_response(request, buffer, key, self.settings.sse_keepalive)

    async def session_events(self, request: Request) -> Response:
        session = request.path_params["session"]
        require_session(request, session)
        for _, _, agent in self.runtime.registry.list_by_session(session):
            try:
                await self.hub.watch(agent)
            except AgentStopped:
                continue
        buffer = self.hub.session_buffer(session)
        return sse_response(request, buffer, None, self.settings.sse_keepalive)


def _name(key: AgentKey) -> str:
    return f"({key.session}, {key.role}, {key.index})"


def _ref(key: AgentKey) -> AgentRef:
    return AgentRef(session=key.session, role=key.role, index=key.index)


def _outcome(run_id: str, terminal: object) -> RunOutcome:
    if isinstance(terminal, AgentEnd):
        replies = [m for m in terminal.new_messages if isinstance(m, AssistantMessage)]
        usage = Usage()
        for reply in replies:
            usage = usage + reply.usage
        return RunOutcome(
            run_id=run_id,
            outcome="completed",
            text=replies[-1].text if replies else "",
            usage=usage,
            new_messages=list(terminal.new_messages),
        )
    if isinstance(terminal, Error):
        return RunOutcome(run_id=run_id, outcome="failed", reason=terminal.reason)
    if isinstance(terminal, Canceled):
        return RunOutcome(run_id=run_id, outcome="canceled", reason=terminal.reason)
    assert terminal is None or not is_terminal(terminal)
    return RunOutcome(run_id=run_id, outcome="canceled", reason="agent_stopped")


def _visible(tree: RuntimeTree, principal: Principal) -> RuntimeTree:
    """`tree` without the agents of sessions `principal` may not use."""
    if principal.sessions is None:
        return tree

    def prune(node: TreeNode) -> TreeNode:
        children = [
            prune(child)
            for child in node.children
            if child.agent is None or principal.allows(child.agent.session)
        ]
        return node.model_copy(update={"children": children})

    agents = [a for a in tree.agents if principal.allows(a.key.session)]
    return tree.model_copy(update={"root": prune(tree.root), "agents": agents})
