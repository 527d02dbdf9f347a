"""`POST /v1/llm/stream`: the LLM proxy, a `ChatRequest` run on a server-side model profile.

The client is `agent_runtime.llm.proxy(url, auth_token=..., profile=...)`; the wire is
described in `agent_runtime.llm._proxy`. Guarantees:

- an authenticated principal (`principal_of`) runs only the profiles its token's scope
  names (`Principal.allows_profile`: by default every profile for a token of every session,
  none for a token scoped to sessions); another is refused 403 `PermissionDeniedError`
  before the profile is looked up (a token learns nothing of profiles it may not use); the
  profile is one of the runtime config's `[llm.profiles]` or `[llm.pools]`, its model built
  on first use and kept (one pooled HTTP client per profile);
- the answer streams the model's deltas only, one SSE event per chunk, then `event: done`,
  or `event: error` with the error's envelope (its class and facts, never the provider's raw
  body; its message without credentials or URLs, which name the server's upstream; an
  exception that is no `LLMError` is logged here and crosses without its detail);
- a client that disconnects cancels the model call at once, also while it waits for its
  first byte;
- bad input is refused before any model call, with an error envelope naming the problem:
  400 (body not JSON), 422 (not a `ProxyCall`), 403 (a profile outside the token's scope),
  404 (unknown profile), 503 (the profile
  cannot be built here, e.g. its API key variable is unset: the detail stays in the log).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent_runtime._errors import ConfigError
from agent_runtime.llm._port import ChatModel
from agent_runtime.llm._proxy import PROXY_PATH, ProxyCall, encode_chunk, error_envelope
from agent_runtime.llm.errors import (
    InvalidRequestError,
    LLMError,
    ModelNotFoundError,
    PermissionDeniedError,
    ProviderError,
)
from agent_runtime.llm.factory import from_config
from agent_runtime.llm.types import ChatRequest
from agent_runtime.runtime import Runtime
from agent_runtime.server._principal import principal_of
from agent_runtime.server._proxy_redact import public_text
from agent_runtime.server._proxy_stream import DisconnectingStream
from supervisors._log import get_logger

__all__ = ["routes"]

log = get_logger(__name__)

_DONE = "event: done\ndata: {}\n\n"
_MAX_PROBLEMS = 5


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The proxy's route, `POST /v1/llm/stream`, over the profiles of `runtime.config`."""
    return [Route(PROXY_PATH, _ProxyEndpoint(runtime).handle, methods=["POST"], name="llm_proxy")]


class _ProxyEndpoint:
    """The route's handler, holding the models built so far (by profile name)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._models: dict[str, ChatModel] = {}

    async def handle(self, request: Request) -> Response:
        principal = principal_of(request)
        raw = await request.body()
        try:
            call = ProxyCall.model_validate_json(raw)
        except ValidationError as exc:
            return _refused(_malformed(exc))
        if not principal.allows_profile(call.profile):
            log.info("llm_proxy.call.refused", principal=principal.name, profile=call.profile)
            return _refused(
                PermissionDeniedError(
                    f"this token may not use model profile {call.profile!r} through the LLM "
                    f"proxy (its scope: server.tokens.{principal.name}.profiles)",
                    code="profile_not_allowed",
                )
            )
        try:
            model = self._model(call.profile)
        except LLMError as error:
            return _refused(error)
        log.debug("llm_proxy.call.started", principal=principal.name, profile=call.profile)
        return DisconnectingStream(_answer(model, call.request, call.profile))

    def _model(self, profile: str) -> ChatModel:
        model = self._models.get(profile)
        if model is not None:
            return model
        llm = self._runtime.config.llm
        if profile not in llm.profiles and profile not in llm.pools:
            served = ", ".join(sorted([*llm.profiles, *llm.pools])) or "none"
            raise ModelNotFoundError(
                f"unknown model profile {profile!r} (the proxy serves: {served})",
                code="unknown_profile",
            )
        try:
            model = from_config(profile, config=self._runtime.config)
        except ConfigError as exc:
            log.warning("llm_proxy.profile.unavailable", profile=profile, reason=str(exc))
            raise ProviderError(
                f"model profile {profile!r} cannot be used on this server (its configuration "
                "is incomplete; the server's log says why)",
                code="profile_unavailable",
                retryable=False,
                status=503,
            ) from None
        self._models[profile] = model
        return model


async def _answer(model: ChatModel, request: ChatRequest, profile: str) -> AsyncIterator[str]:
    try:
        async for chunk in model.stream(request):
            yield f"data: {encode_chunk(chunk)}\n\n"
    except LLMError as error:
        log.info("llm_proxy.call.failed", profile=profile, error=type(error).__name__)
        yield _error_event(error)
        return
    except Exception as exc:
        log.exception("llm_proxy.call.crashed", profile=profile)
        yield _error_event(exc)
        return
    yield _DONE


def _error_event(error: BaseException) -> str:
    envelope = error_envelope(error)
    envelope["error"]["message"] = public_text(envelope["error"]["message"])
    data = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"))
    return f"event: error\ndata: {data}\n\n"


def _malformed(exc: ValidationError) -> InvalidRequestError:
    problems = exc.errors(include_url=False, include_input=False)
    if any(p["type"] == "json_invalid" for p in problems):
        return InvalidRequestError(
            f"the LLM proxy request body is not JSON: {problems[0]['msg']}",
            code="invalid_json",
        )
    named = [
        f"{'.'.join(str(part) for part in p['loc']) or 'body'}: {p['msg']}"
        for p in problems[:_MAX_PROBLEMS]
    ]
    more = len(problems) - len(named)
    listed = "; ".join(named) + (f"; and {more} more" if more > 0 else "")
    return InvalidRequestError(
        f"malformed LLM proxy request (expected {{'profile': str, 'request': ChatRequest}}): "
        f"{listed}",
        code="invalid_proxy_request",
        status=422,
    )


def _refused(error: LLMError) -> Response:
    status = error.status if error.status is not None and error.status >= 400 else 500
    return JSONResponse(error_envelope(error), status_code=status)
