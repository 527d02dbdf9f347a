"""The A2A endpoints (a2a-sdk 1.x, protocol 1.0 over JSON-RPC), so other agents call ours.

Each running agent is an A2A agent whose base URL is `/v1/a2a/{session}/{role}/{index}`:

- `GET <base>/.well-known/agent-card.json`: its agent card, at the well-known path relative
  to the base URL (where a2a-sdk's `A2ACardResolver` and `ClientFactory.create_from_url`
  look for it): named after the agent key, one skill per tool, streaming on, text in and
  out, bearer authentication, one JSON-RPC interface at the base URL;
- `POST <base>`: the JSON-RPC task endpoint of a2a-sdk's `DefaultRequestHandler`
  (`SendMessage`, `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask`, ...), with
  this module's executor (`agent_runtime.server._a2a_executor`: a task is one run of the
  agent, the A2A context is the agent's session).

Both call `require_session(request, session)` first (401/403), then answer 404 when no agent
runs at the key. The JSON-RPC endpoint applies the gateway's limits and keeps exception text
out of its errors (`agent_runtime.server._a2a_guard`). Tasks are kept in memory per agent
key (`BoundedTaskStore`: the last 1,000 finished tasks of each agent, and every running one);
they do not survive the process.
"""

from __future__ import annotations

import asyncio

from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_CURRENT
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_runtime._errors import AgentStopped
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.runtime import Runtime
from agent_runtime.server._a2a_executor import (
    AgentCallContextBuilder,
    RunExecutor,
    SessionContextBuilder,
    key_from_path,
)
from agent_runtime.server._a2a_guard import check_request, without_internals
from agent_runtime.server._a2a_store import BoundedTaskStore
from agent_runtime.server._limits import limits_of
from agent_runtime.server._principal import require_session

__all__ = ["A2A_BASE", "routes"]

A2A_BASE = "/v1/a2a/{session}/{role}/{index:int}"
"""An agent's A2A base URL (its JSON-RPC endpoint; its card is under it)."""

_TEXT = "text/plain"
_VERSION = "1.0.0"
_BEARER = "bearer"


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The A2A routes of `runtime`'s agents: the card and the JSON-RPC task endpoint."""
    handler = DefaultRequestHandler(
        agent_executor=RunExecutor(runtime),
        task_store=BoundedTaskStore(),
        agent_card=_card(
            "agent-runtime", "an agent of agent-runtime", "http://127.0.0.1/", [_prompt_skill("")]
        ),
        request_context_builder=SessionContextBuilder(),
    )
    (rpc,) = create_jsonrpc_routes(
        handler, rpc_url=A2A_BASE, context_builder=AgentCallContextBuilder()
    )
    endpoints = _Endpoints(runtime, rpc)
    return [
        Route(A2A_BASE, endpoints.rpc, methods=["POST"], name="a2a_rpc"),
        Route(
            A2A_BASE + AGENT_CARD_WELL_KNOWN_PATH,
            endpoints.card,
            methods=["GET"],
            name="a2a_agent_card",
        ),
    ]


class _Endpoints:
    def __init__(self, runtime: Runtime, rpc: BaseRoute) -> None:
        self._runtime = runtime
        assert isinstance(rpc, Route)
        self._dispatch = rpc.endpoint

    def _agent(self, request: Request) -> tuple[AgentKey, Agent | None]:
        key = key_from_path(request.path_params)
        require_session(request, key.session)
        return key, self._runtime.registry.lookup(key)

    async def rpc(self, request: Request) -> Response:
        key, agent = self._agent(request)
        if agent is None:
            return _not_running(key)
        limit = limits_of(request, self._runtime.config.server).max_prompt_chars
        refusal = check_request(await request.body(), limit)
        if refusal is not None:
            return refusal
        response = await self._dispatch(request)
        assert isinstance(response, Response)
        return without_internals(response)

    async def card(self, request: Request) -> Response:
        key, agent = self._agent(request)
        if agent is None:
            return _not_running(key)
        try:
            state = await asyncio.to_thread(agent.state)
        except AgentStopped:
            return _not_running(key)
        base = str(request.url).removesuffix(AGENT_CARD_WELL_KNOWN_PATH)
        skills = [_prompt_skill(key.role)] + [
            AgentSkill(
                id=tool.name,
                name=tool.name,
                description=tool.description or tool.name,
                tags=["tool"],
            )
            for tool in state.tools
        ]
        name = f"{key.session}/{key.role}/{key.index}"
        description = f"the {key.role} agent of session {key.session} (agent-runtime)"
        return JSONResponse(agent_card_to_dict(_card(name, description, base, skills)))


def _card(name: str, description: str, url: str, skills: list[AgentSkill]) -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        version=_VERSION,
        supported_interfaces=[
            AgentInterface(
                url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION_CURRENT
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={
            _BEARER: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
            )
        },
        security_requirements=[SecurityRequirement(schemes={_BEARER: StringList(list=[])})],
        default_input_modes=[_TEXT],
        default_output_modes=[_TEXT],
        skills=skills,
    )


def _prompt_skill(role: str) -> AgentSkill:
    """The skill every agent has: answering a text prompt (its tools are the others)."""
    return AgentSkill(
        id="prompt",
        name="prompt",
        description=f"send {f'the {role}' if role else 'this'} agent a text prompt; it "
        "answers in text, using its tools",
        tags=["chat"],
    )


def _not_running(key: AgentKey) -> Response:
    message = (
        f"no agent {key.session}/{key.role}/{key.index} is running: start it first "
        f"(POST /v1/agents/{key.session}/{key.role}/{key.index})"
    )
    return JSONResponse({"error": {"code": "agent_not_found", "message": message}}, 404)
