"""The OpenAPI 3.1 document of the gateway's own routes (`GET /openapi.json`).

Made from the pydantic models the routes validate and answer with (`_schemas`, `AgentState`,
`RuntimeTree`), so the document and the code cannot drift apart; every status a route can
answer is listed (tests/agent_runtime/server/test_openapi_fuzz.py holds the API to it).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from agent_runtime.agent import AgentState
from agent_runtime.runtime._introspection import RuntimeTree
from agent_runtime.server._schemas import (
    AbortBody,
    Aborted,
    ApprovalBody,
    Decided,
    ErrorBody,
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

REF = "#/components/schemas/{model}"
_REQUESTS: tuple[type[BaseModel], ...] = (
    StartOptions,
    PromptBody,
    RunBody,
    QueueBody,
    AbortBody,
    ApprovalBody,
)
_REPLIES: tuple[type[BaseModel], ...] = (
    Started,
    RunStarted,
    Queued,
    Aborted,
    Decided,
    Stopped,
    RunOutcome,
    ErrorBody,
    AgentState,
    RuntimeTree,
)
_ERRORS = {
    400: "the body is not JSON",
    401: "no valid token",
    403: "the token may not use this session",
    404: "no such agent (or route)",
    409: "the agent is busy, its key is taken, or the tool call was decided already",
    413: "the body or a prompt is larger than the server accepts",
    422: "the body or the key does not validate",
    503: "the runtime runs as many agents as it may",
    504: "the run did not end within its timeout",
}


def _schemas() -> dict[str, Any]:
    pairs = [(m, "validation") for m in _REQUESTS] + [(m, "serialization") for m in _REPLIES]
    _, top = models_json_schema(pairs, ref_template=REF)  # type: ignore[arg-type]
    defs: dict[str, Any] = top.get("$defs", {})
    return defs


def _ref(model: type[BaseModel]) -> dict[str, Any]:
    return {"$ref": REF.format(model=model.__name__)}


def _json(description: str, model: type[BaseModel]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): _json(_ERRORS[s], ErrorBody) for s in (401, *statuses)}


def _operation(
    summary: str,
    ok_status: int,
    reply: dict[str, Any],
    errors: tuple[int, ...],
    body: type[BaseModel] | None = None,
    body_required: bool = True,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {str(ok_status): reply, **_errors(*errors)},
    }
    if body is not None:
        operation["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": _ref(body)}},
        }
    return operation


_KEY_PARAMETERS = [
    {"name": "session", "in": "path", "required": True, "schema": {"type": "string"}},
    {"name": "role", "in": "path", "required": True, "schema": {"type": "string"}},
    {
        "name": "index",
        "in": "path",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    },
]
_STREAM = {
    "description": "Server-Sent Events: `id`, `event` (the event's type) and `data` (its "
    "JSON) per event; `events_dropped` reports events that fell out of the replay buffer",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}
_RESUME = [
    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
    {"name": "last_event_id", "in": "query", "required": False, "schema": {"type": "string"}},
]
_AGENT_ERRORS = (400, 403, 404, 413, 422)


def _start_options(
    schema: dict[str, Any], profiles: list[str], tools: list[str], default: bool
) -> None:
    """Name the server's profiles and tools in StartOptions, so a client (and the fuzzer)
    knows which names this server accepts."""
    properties = schema["properties"]
    model: dict[str, Any] = {"enum": [*profiles, None] if default else profiles}
    properties["model"] = {**model, "default": None}
    if not default:
        schema["required"] = ["model"]
    items = (
        {"type": "array", "items": {"enum": tools}} if tools else {"type": "array", "maxItems": 0}
    )
    properties["tools"] = {**items, "default": []}


def openapi_document(runtime: Any = None) -> dict[str, Any]:
    """The document (a fresh dict each call); with `runtime`, the start options list its
    model profiles and pools and the tools of its registry by name."""
    agent = "/v1/agents/{session}/{role}/{index}"
    body_errors = (*_AGENT_ERRORS, 409)
    paths: dict[str, Any] = {
        "/v1/tree": {
            "get": _operation(
                "The supervision tree and every visible agent's status",
                200,
                _json("the tree", RuntimeTree),
                (),
            )
        },
        agent: {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Start an agent under this key (a model profile and tools by name)",
                201,
                _json("started", Started),
                (*body_errors, 503),
                StartOptions,
            ),
            "get": _operation(
                "The agent's state", 200, _json("its state", AgentState), _AGENT_ERRORS
            ),
            "delete": _operation(
                "Stop the agent (its run is aborted)",
                200,
                _json("stopped", Stopped),
                _AGENT_ERRORS,
            ),
        },
        agent + "/prompt": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Start a run", 202, _json("its run id", RunStarted), body_errors, PromptBody
            ),
        },
        agent + "/continue": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Start a run from the history without new input: a turn whose tool calls "
                "were decided on approval, or a prompt kept over a crash",
                202,
                _json("its run id", RunStarted),
                (403, 404, 409),
            ),
        },
        agent + "/steer": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Steer the running run", 202, _json("queued", Queued), body_errors, QueueBody
            ),
        },
        agent + "/follow_up": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Queue a follow-up", 202, _json("queued", Queued), body_errors, QueueBody
            ),
        },
        agent + "/abort": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Abort the running run",
                200,
                _json("whether a run was aborted", Aborted),
                body_errors,
                AbortBody,
                body_required=False,
            ),
        },
        agent + "/run": {
            "parameters": _KEY_PARAMETERS,
            "post": _operation(
                "Start a run and wait for its end",
                200,
                _json("how it ended", RunOutcome),
                (*body_errors, 504),
                RunBody,
            ),
        },
        agent + "/approvals/{tool_call_id}": {
            "parameters": [
                *_KEY_PARAMETERS,
                {
                    "name": "tool_call_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                },
            ],
            "post": _operation(
                "Approve or deny a tool call waiting for approval",
                200,
                _json("the decision", Decided),
                body_errors,
                ApprovalBody,
            ),
        },
        agent + "/events": {
            "parameters": _KEY_PARAMETERS + _RESUME,
            "get": _operation("The agent's events (SSE)", 200, _STREAM, _AGENT_ERRORS),
        },
        "/v1/sessions/{session}/events": {
            "parameters": [_KEY_PARAMETERS[0], *_RESUME],
            "get": _operation("The session's events (SSE)", 200, _STREAM, (403, 404)),
        },
    }
    schemas = _schemas()
    if runtime is not None:
        llm = runtime.config.llm
        _start_options(
            schemas["StartOptions"],
            sorted([*llm.profiles, *llm.pools]),
            sorted(runtime.tools.names()),
            llm.default_profile is not None,
        )
    return {
        "openapi": "3.1.0",
        "info": {"title": "agent-runtime gateway", "version": "1"},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
