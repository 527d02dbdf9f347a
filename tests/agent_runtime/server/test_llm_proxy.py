"""The LLM proxy over real HTTP on 127.0.0.1: `POST /v1/llm/stream` (server) and
`agent_runtime.llm.proxy` (client), an agent whose model is the proxy, errors that keep their
class, abort that reaches the server's model call, and bad input refused with a clear 4xx."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

pytest.importorskip("starlette", reason="needs the server extra: pip install -e '.[server]'")
pytest.importorskip("uvicorn", reason="needs the server extra: pip install -e '.[server]'")

from agent_runtime import RetryPolicy, Runtime, tool
from agent_runtime.abort import Aborted, AbortSignal
from agent_runtime.config import LLMConfig, MemoryConfig, ModelProfile, RuntimeConfig
from agent_runtime.events import ProviderRetry
from agent_runtime.llm import (
    AuthenticationError,
    BaseChatModel,
    CapabilityNotSupportedError,
    ChatModel,
    ChatRequest,
    ContextLengthExceededError,
    InvalidRequestError,
    LLMError,
    ModelInfo,
    ModelNotFoundError,
    NetworkError,
    PermissionDeniedError,
    ProviderError,
    QuotaExceededError,
    RateLimitError,
    StreamChunk,
    StructuredOutputError,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    TruncatedResponseError,
    UsageDelta,
    is_retryable,
    proxy,
    register_profile_kind,
)
from agent_runtime.llm._proxy import encode_chunk
from agent_runtime.llm.types import FinishDelta
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import ToolCall, ToolResultMessage, Usage, UserMessage
from agent_runtime.server._llm_proxy import routes
from agent_runtime.testing import ScriptedModel, ScriptedTurn, wait_until
from tests.agent_runtime.server._protocol_app import ADMIN, app_of, served, served_sharing_loop

# The server-side models of the tests, by profile model name: the `proxy-test` profile kind
# builds from here, as a real profile would build an HTTP adapter.
SERVER_MODELS: dict[str, ChatModel] = {}
register_profile_kind("proxy-test", lambda name, profile, config: SERVER_MODELS[profile.model])


def config_serving(**models: ChatModel) -> RuntimeConfig:
    SERVER_MODELS.update({f"{name}-{id(model)}": model for name, model in models.items()})
    profiles = {
        name: ModelProfile(provider="proxy-test", model=f"{name}-{id(model)}")
        for name, model in models.items()
    }
    profiles["unusable"] = ModelProfile(provider="openai", api_key_env="PROXY_TEST_UNSET_KEY")
    return RuntimeConfig(memory=MemoryConfig(store="memory"), llm=LLMConfig(profiles=profiles))


class Served:
    """A runtime serving `models` as profiles through the proxy route on 127.0.0.1."""

    def __init__(self, **models: ChatModel) -> None:
        self.runtime = Runtime.start(config_serving(**models))
        self._served = served(app_of(routes(self.runtime)))
        self.url = self._served.__enter__()

    def close(self) -> None:
        self._served.__exit__(None, None, None)
        self.runtime.stop()

    def model(self, profile: str, token: str | None = ADMIN) -> ChatModel:
        return proxy(self.url, auth_token=token, profile=profile)


@pytest.fixture
def serving() -> Iterator[list[Served]]:
    opened: list[Served] = []
    yield opened
    for gateway in opened:
        gateway.close()


def open_gateway(opened: list[Served], **models: ChatModel) -> Served:
    gateway = Served(**models)
    opened.append(gateway)
    return gateway


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def ask(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=[UserMessage(content=text)])


# --- an agent over the proxy ------------------------------------------------------------------


def test_an_agent_whose_model_is_the_proxy_runs_a_tool_turn(serving: list[Served]) -> None:
    upstream = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
            ScriptedTurn(chunks=["the sum ", "is ", "5"]),
        ]
    )
    gateway = open_gateway(serving, remote=upstream)
    agent = gateway.runtime.start_agent(
        ("s", "client", 0), model=gateway.model("remote"), tools=[add], memory=MemoryPolicy.none()
    )
    result = agent.run("what is 2 + 3?", timeout=30)
    assert result.text == "the sum is 5"
    assert result.stop_reason == "stop"
    # the server's model saw the tool's result, computed on the client side
    second = upstream.requests[1]
    results = [m for m in second.messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["c1"]
    assert "5" in results[0].text
    assert [spec.name for spec in second.tools] == ["add"]


def test_a_rate_limit_on_the_server_is_retried_by_the_clients_agent(
    serving: list[Served],
) -> None:
    upstream = ScriptedModel(
        [ScriptedTurn(error=RateLimitError("slow down", retry_after=0.01)), ScriptedTurn("ok")]
    )
    gateway = open_gateway(serving, remote=upstream)
    agent = gateway.runtime.start_agent(
        ("s", "client", 0),
        model=gateway.model("remote"),
        memory=MemoryPolicy.none(),
        retry=RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05),
    )
    events = list(agent.stream("hello"))
    assert events[-1].type == "agent_end"
    retries = [e for e in events if isinstance(e, ProviderRetry)]
    assert len(retries) == 1
    assert "slow down" in retries[0].error
    assert upstream.call_count == 2


# --- deltas only, rebuilt on the client -------------------------------------------------------


def raw_events(url: str, body: dict[str, object]) -> list[tuple[str, str]]:
    """The (event name, data) pairs of the proxy's answer to `body`."""
    pairs: list[tuple[str, str]] = []
    name = ""
    with httpx.stream(
        "POST",
        f"{url}/v1/llm/stream",
        json=body,
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                pairs.append((name, line.removeprefix("data: ")))
                name = ""
    return pairs


def test_the_stream_carries_each_delta_once_never_the_growing_message(
    serving: list[Served],
) -> None:
    pieces = [f"piece{i} " for i in range(40)]
    gateway = open_gateway(serving, remote=ScriptedModel([ScriptedTurn(chunks=pieces)]))
    request = ask().model_dump(mode="json")
    pairs = raw_events(gateway.url, {"profile": "remote", "request": request})
    assert pairs[-1] == ("done", "{}")
    texts = [json.loads(data)["text"] for name, data in pairs if '"type":"text"' in data]
    assert texts == pieces  # one event per delta, each carrying only its own text
    sent = sum(len(data) for _, data in pairs)
    assert sent < 2 * len("".join(pieces)) + 200 * len(pairs) // 4  # linear, not quadratic
    assert all("piece0 piece1" not in data for _, data in pairs)


def test_the_client_rebuilds_text_thinking_tool_calls_and_usage(serving: list[Served]) -> None:
    turn = ScriptedTurn(
        chunks=["Hel", "lo"],
        thinking="hmm",
        thinking_signature="sig",
        tool_calls=[ToolCall(id="t1", name="add", arguments={"a": 1, "b": 2})],
        usage=Usage(input_tokens=11, output_tokens=7),
    )
    gateway = open_gateway(serving, remote=ScriptedModel([turn, turn]))
    model = gateway.model("remote")
    direct = asyncio.run(ScriptedModel([turn]).generate(ask()))
    through = model.generate_sync(ask(), timeout=30)
    assert through.message.content == direct.message.content
    assert through.usage == direct.usage
    assert through.stop_reason == "tool_use"
    assert through.message.model == "remote"
    assert through.message.provider == "proxy"


@pytest.mark.parametrize(
    "chunk",
    [
        TextDelta(text='a "quoted" ünïcode\n'),
        TextDelta(text=""),
        ThinkingDelta(text="why"),
        ThinkingDelta(signature="sig", redacted=True),
        ThinkingDelta(),
        ToolCallDelta(index=0, id="x", name="f", arguments='{"k":'),
        ToolCallDelta(arguments="1}"),
        UsageDelta(usage=Usage(input_tokens=3, output_tokens=4, cached_input_tokens=1)),
        FinishDelta(reason="length", raw_reason="max_tokens"),
    ],
)
def test_every_chunk_type_round_trips_through_the_wire_encoding(chunk: StreamChunk) -> None:
    from agent_runtime.llm._proxy import _decode_chunk

    encoded = encode_chunk(chunk)
    assert json.loads(encoded)["type"] == chunk.type
    assert _decode_chunk(encoded) == chunk


# --- errors keep their class ------------------------------------------------------------------


class CustomRateLimit(RateLimitError):
    """A provider's own subclass: crosses as the RateLimitError it is."""


ERRORS: list[LLMError] = [
    LLMError("generic", code="weird"),
    AuthenticationError("upstream key revoked"),
    PermissionDeniedError("no access to the model"),
    RateLimitError("slow down", retry_after=7.5, request_id="req-1"),
    QuotaExceededError("out of credit"),
    InvalidRequestError("bad tool schema"),
    ContextLengthExceededError("prompt too long"),
    ModelNotFoundError("no such model upstream"),
    ProviderError("overloaded", status=529),
    NetworkError("reset by peer"),
    CapabilityNotSupportedError("no vision"),
    StructuredOutputError("did not validate", errors=[{"x": 1}], raw="secret answer"),
    TruncatedResponseError("cut off"),
]


def test_every_llm_error_class_keeps_its_class_and_facts_across_the_proxy(
    serving: list[Served],
) -> None:
    turns = [ScriptedTurn(chunks=["partial "], error=e) for e in [*ERRORS, CustomRateLimit("x")]]
    gateway = open_gateway(serving, remote=ScriptedModel(turns))
    model = gateway.model("remote")
    for sent in ERRORS:
        with pytest.raises(LLMError) as caught:
            model.generate_sync(ask(), timeout=30)
        got = caught.value
        assert type(got) is type(sent)
        assert (got.message, got.code, got.status) == (sent.message, sent.code, sent.status)
        assert (got.retryable, got.retry_after) == (sent.retryable, sent.retry_after)
        assert is_retryable(got) == is_retryable(sent)
    with pytest.raises(RateLimitError) as subclass:
        model.generate_sync(ask(), timeout=30)
    assert type(subclass.value) is RateLimitError
    assert is_retryable(subclass.value)


def test_the_rate_limit_keeps_retry_after_and_request_id(serving: list[Served]) -> None:
    error = RateLimitError("slow down", retry_after=7.5, request_id="req-1", provider="openai")
    gateway = open_gateway(serving, remote=ScriptedModel([ScriptedTurn(error=error)]))
    with pytest.raises(RateLimitError) as caught:
        gateway.model("remote").generate_sync(ask(), timeout=30)
    assert caught.value.retry_after == 7.5
    assert caught.value.request_id == "req-1"
    assert caught.value.provider == "openai"
    assert caught.value.retryable


class CrashingModel(BaseChatModel):
    """A server-side model with a bug: raises what is no LLMError, naming internals."""

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="test", model="crashing")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        yield TextDelta(text="so far ")
        raise KeyError("/srv/secret/internal/path")


def test_an_unknown_server_error_becomes_a_generic_error_without_its_detail(
    serving: list[Served],
) -> None:
    gateway = open_gateway(serving, remote=CrashingModel())
    with pytest.raises(LLMError) as caught:
        gateway.model("remote").generate_sync(ask(), timeout=30)
    assert type(caught.value) is LLMError
    assert caught.value.code == "proxy_internal_error"
    assert not caught.value.retryable
    assert "internal error" in caught.value.message
    assert "secret" not in str(caught.value)
    assert caught.value.body is None


# --- abort ------------------------------------------------------------------------------------


class HangingModel(BaseChatModel):
    """Streams one chunk, then hangs; records that its call was cancelled."""

    def __init__(self) -> None:
        self.first_sent = threading.Event()
        self.cancelled = threading.Event()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(provider="test", model="hanging")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        try:
            yield TextDelta(text="thinking")
            self.first_sent.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield TextDelta(text="never")  # pragma: no cover


def test_abort_closes_the_proxied_stream_and_cancels_the_servers_call(
    serving: list[Served],
) -> None:
    upstream = HangingModel()
    gateway = open_gateway(serving, remote=upstream)
    model = gateway.model("remote")
    signal = AbortSignal()

    async def consume() -> list[StreamChunk]:
        got: list[StreamChunk] = []
        async for chunk in model.stream(ask(), signal=signal):
            got.append(chunk)
            signal.abort("user_abort")
        return got

    with pytest.raises(Aborted):
        asyncio.run(asyncio.wait_for(consume(), timeout=30))
    wait_until(upstream.cancelled.is_set, timeout=10, what="the server cancelled its model call")


def test_abort_before_the_first_byte_cancels_the_servers_call(serving: list[Served]) -> None:
    class Silent(HangingModel):
        async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
            try:
                self.first_sent.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            yield TextDelta(text="never")  # pragma: no cover

    upstream = Silent()
    gateway = open_gateway(serving, remote=upstream)
    model = gateway.model("remote")

    async def consume() -> None:
        task = asyncio.ensure_future(model.generate(ask()))
        while not upstream.first_sent.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(consume(), timeout=30))
    wait_until(upstream.cancelled.is_set, timeout=10, what="the server cancelled its model call")


# --- bad input, authentication ----------------------------------------------------------------


def post(url: str, content: bytes, token: str | None = ADMIN) -> httpx.Response:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(f"{url}/v1/llm/stream", content=content, headers=headers, timeout=30)


def test_an_unknown_profile_is_a_404_naming_it(serving: list[Served]) -> None:
    gateway = open_gateway(serving, remote=ScriptedModel([]))
    body = json.dumps({"profile": "nope", "request": ask().model_dump(mode="json")})
    response = post(gateway.url, body.encode())
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "ModelNotFoundError"
    assert "unknown model profile 'nope'" in error["message"]
    assert "remote" in error["message"]  # what it serves instead
    with pytest.raises(ModelNotFoundError, match="unknown model profile 'nope'"):
        gateway.model("nope").generate_sync(ask(), timeout=30)


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        (b"{not json", 400, "not JSON"),
        (b'{"request": {"messages": []}}', 422, "profile: Field required"),
        (
            b'{"profile": "remote", "request": {"messages": [{"role": "robot"}]}}',
            422,
            "request.messages.0",
        ),
        (b'{"profile": "remote", "request": {}, "stream": true}', 422, "stream: Extra inputs"),
        (b'{"profile": "remote", "request": {"temperature": -1}}', 422, "request.temperature"),
        (b"[]", 422, "body"),
    ],
)
def test_a_malformed_request_is_a_4xx_naming_the_problem(
    serving: list[Served], body: bytes, status: int, named: str
) -> None:
    upstream = ScriptedModel([])
    gateway = open_gateway(serving, remote=upstream)
    response = post(gateway.url, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == "InvalidRequestError"
    assert named in error["message"]
    assert upstream.call_count == 0


def test_a_profile_that_cannot_be_built_is_a_503_without_the_servers_detail(
    serving: list[Served],
) -> None:
    gateway = open_gateway(serving, remote=ScriptedModel([]))
    body = json.dumps({"profile": "unusable", "request": ask().model_dump(mode="json")})
    response = post(gateway.url, body.encode())
    assert response.status_code == 503
    assert "PROXY_TEST_UNSET_KEY" not in response.text
    assert "cannot be used on this server" in response.json()["error"]["message"]


def test_without_a_principal_the_proxy_answers_401(serving: list[Served]) -> None:
    upstream = ScriptedModel(["never"])
    gateway = open_gateway(serving, remote=upstream)
    body = json.dumps({"profile": "remote", "request": ask().model_dump(mode="json")})
    assert post(gateway.url, body.encode(), token=None).status_code == 401
    with pytest.raises(AuthenticationError):
        gateway.model("remote", token="wrong").generate_sync(ask(), timeout=30)
    assert upstream.call_count == 0


def test_the_proxy_is_a_chat_model_named_after_its_profile() -> None:
    model = proxy("http://127.0.0.1:1/", auth_token="t", profile="remote")
    assert isinstance(model, ChatModel)
    assert (model.info.provider, model.info.model) == ("proxy", "remote")
    with pytest.raises(ValueError, match="profile"):
        proxy("http://127.0.0.1:1", auth_token="t", profile="")


def test_every_error_class_of_the_llm_layer_is_one_the_proxy_carries() -> None:
    import inspect

    from agent_runtime.llm import errors
    from agent_runtime.llm._proxy import _ERROR_CLASSES

    defined = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, LLMError) and cls.__module__ == errors.__name__
    }
    assert defined == set(_ERROR_CLASSES.values())
    assert {type(e) for e in ERRORS} == defined


def test_the_proxy_serves_from_a_runtime_that_shares_the_servers_loop() -> None:
    upstream = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
            ScriptedTurn(chunks=["the sum ", "is 5"]),
        ]
    )
    with (
        served_sharing_loop(config_serving(remote=upstream), routes) as (root, _),
        Runtime.start(RuntimeConfig(memory=MemoryConfig(store="memory"))) as client_side,
    ):
        model = proxy(root, auth_token=ADMIN, profile="remote")
        agent = client_side.start_agent(("s", "c", 0), model=model, tools=[add])
        assert agent.run("2 + 3?", timeout=30).text == "the sum is 5"


def test_an_upstream_error_crosses_without_the_servers_urls_or_credentials(
    serving: list[Served],
) -> None:
    leaky = NetworkError(
        "ConnectError talking to openai at http://10.0.0.5:8000/v1?key=abc123: refused; "
        "Authorization: Bearer sk-proj-abcdefghijklmnop123456"
    )
    gateway = open_gateway(serving, remote=ScriptedModel([ScriptedTurn(error=leaky)]))
    with pytest.raises(NetworkError) as caught:
        gateway.model("remote").generate_sync(ask(), timeout=30)
    message = caught.value.message
    assert "ConnectError talking to openai at <url>" in message
    assert "10.0.0.5" not in message and "abc123" not in message
    assert "sk-proj" not in message
    assert caught.value.retryable
