"""The adapters' HTTP transport, for each wire over real HTTP on 127.0.0.1: the call deadlines
(`request_timeout`, `idle_timeout`), connection reuse, and text that is not valid UTF-8."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import socket
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent_runtime.config import RuntimeConfig
from agent_runtime.events import Error, Event, ProviderRetry
from agent_runtime.llm import (
    ChatRequest,
    ChatResponseBuilder,
    FinishDelta,
    LLMError,
    NetworkError,
    RetryingModel,
    TextDelta,
    ToolSpec,
    openai_compatible,
)
from agent_runtime.llm.base import BaseChatModel
from agent_runtime.llm.factory import from_config
from agent_runtime.llm.middleware.fallback import fails_over
from agent_runtime.loop import AgentContext, LoopConfig, RetryPolicy
from agent_runtime.loop import run as loop_run
from agent_runtime.messages import UserMessage
from agent_runtime.testing import MockProviderServer, MockResponse, ScriptedTurn
from agent_runtime.testing._wire import WIRE_FORMATS
from tests.agent_runtime.llm.helpers import HI, adapter, run

WIRES = ["openai", "anthropic", "gemini"]
COMMENT = b": keep-alive\n\n"
FOREVER = 400  # events of a server that outlasts every deadline of these tests (20 s at 50 ms)


def keepalives_only() -> MockResponse:
    """An answer that sends nothing but SSE comments, every 50 ms, for 20 s."""
    return MockResponse(raw=[COMMENT] * FOREVER, chunk_delay=0.05)


def data_forever() -> MockResponse:
    """An answer whose text deltas keep coming, every 50 ms, for 20 s."""
    return MockResponse(turn=ScriptedTurn(chunks=["a"] * FOREVER, chunk_delay=0.05))


async def stream_until_it_fails(
    model: BaseChatModel, server: MockProviderServer, received: list[Any]
) -> NetworkError:
    """Read `model.stream(HI)` until it raises; return the error once the server has seen
    the connection closed (by the failure itself, not by the client's teardown)."""
    with pytest.raises(NetworkError) as caught:
        async for chunk in model.stream(HI):
            received.append(chunk)
    await server.disconnected(timeout=5)
    return caught.value


# -- deadlines -------------------------------------------------------------------------------------


# The deadlines of these tests also run while the request is sent and its headers come: they are
# 1-1.5 s, not a few tenths, so that on a loaded machine the (in-process) server has answered
# before they fire, and they cut the stream, not the connection's set-up (at 0.3 s, under two
# CPU hogs, about one call in five timed out before the server had read the request). A
# keep-alive every 50 ms still comes 20 times in one idle_timeout.


@pytest.mark.timing
@pytest.mark.parametrize("wire", WIRES)
def test_keepalive_comments_do_not_hold_a_stream_past_the_idle_timeout(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(keepalives_only())
    model = adapter(wire, server, idle_timeout=1.0)
    error = run(model, lambda: stream_until_it_fails(model, server, []))
    assert error.code == "idle_timeout" and error.retryable
    assert "idle_timeout" in error.message and "1s" in error.message
    assert error.provider == model.info.provider and error.request_id == "req_mock"


@pytest.mark.timing
def test_anthropic_pings_do_not_hold_a_stream_past_the_idle_timeout(
    server: MockProviderServer,
) -> None:
    server.enqueue(MockResponse(events=[("ping", {"type": "ping"})] * FOREVER, chunk_delay=0.05))
    model = adapter("anthropic", server, idle_timeout=1.0)
    assert run(model, lambda: stream_until_it_fails(model, server, [])).code == "idle_timeout"


@pytest.mark.timing
@pytest.mark.parametrize("wire", WIRES)
def test_a_stream_whose_data_never_ends_is_cut_at_the_request_timeout(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(data_forever())
    model = adapter(wire, server, request_timeout=1.5, idle_timeout=30.0)
    received: list[Any] = []
    error = run(model, lambda: stream_until_it_fails(model, server, received))
    assert error.code == "request_timeout" and error.retryable
    assert "request_timeout" in error.message and "1.5s" in error.message
    assert any(isinstance(chunk, TextDelta) for chunk in received)  # data flowed: not idle


@pytest.mark.parametrize("wire", WIRES)
def test_a_whole_answer_that_never_comes_is_cut_at_the_request_timeout(
    server: MockProviderServer, wire: str
) -> None:
    server.enqueue(MockResponse(turn=ScriptedTurn(text="late"), delay=20.0))
    model = adapter(wire, server, request_timeout=0.3)  # httpx's read timeout stays at 60 s
    with pytest.raises(NetworkError) as caught:
        run(model, lambda: model.generate(HI))
    assert caught.value.code == "request_timeout" and caught.value.retryable


def test_the_config_keys_set_the_deadlines_of_profile_models(server: MockProviderServer) -> None:
    config = RuntimeConfig.model_validate(
        {
            "llm": {
                "idle_timeout": 0.3,
                "request_timeout": 0.6,
                "profiles": {
                    "here": {"provider": "openai_compatible", "base_url": server.base_url("openai")}
                },
            }
        }
    )
    assert (RuntimeConfig().llm.request_timeout, RuntimeConfig().llm.idle_timeout) == (600, 120)
    server.enqueue(keepalives_only(), data_forever())
    model = from_config("here", config=config)
    assert isinstance(model, BaseChatModel)
    assert run(model, lambda: stream_until_it_fails(model, server, [])).code == "idle_timeout"
    server.disconnects.clear()
    assert run(model, lambda: stream_until_it_fails(model, server, [])).code == "request_timeout"


def test_a_run_on_a_server_that_only_sends_keepalives_retries_then_ends(
    server: MockProviderServer,
) -> None:
    server.enqueue(keepalives_only(), keepalives_only())
    model = adapter("openai", server, idle_timeout=0.2)
    config = LoopConfig(model=model, retry=RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0))

    async def events() -> list[Event]:
        prompt = [UserMessage(content="hi")]
        return [e async for e in loop_run(prompt, AgentContext(system_prompt=""), config)]

    seen = run(model, events)
    assert sum(isinstance(e, ProviderRetry) for e in seen) == 1
    end = seen[-1]
    assert isinstance(end, Error) and end.reason.startswith("idle_timeout: ")


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan")])
def test_a_deadline_that_is_not_positive_is_refused(
    server: MockProviderServer, timeout: float
) -> None:
    for option in ("request_timeout", "idle_timeout"):
        with pytest.raises(ValueError, match=f"invalid {option}"):
            adapter("openai", server, **{option: timeout})


@pytest.mark.parametrize("option", ["timeout", "connect_timeout"])
@pytest.mark.parametrize("seconds", [0, -5, float("nan")])
def test_a_transport_timeout_that_is_not_positive_is_refused(
    server: MockProviderServer, option: str, seconds: float
) -> None:
    with pytest.raises(ValueError, match=f"invalid {option}"):
        adapter("openai", server, **{option: seconds})


@pytest.mark.parametrize("base_url", ["localhost:11434/v1", "ftp://host/v1", ""])
def test_a_base_url_no_request_can_go_to_is_refused_when_the_model_is_made(
    base_url: str,
) -> None:
    # Not at every call, as a network error that retries would back off from for seconds.
    with pytest.raises(ValueError, match="invalid base_url"):
        openai_compatible(base_url, "m")


def test_a_password_in_the_base_url_stays_out_of_error_messages(
    server: MockProviderServer,
) -> None:
    server.enqueue(MockResponse(turn=ScriptedTurn(text="late"), delay=3.0))
    url = server.base_url("openai").replace("http://", "http://user:s3cret-pw@")
    model = openai_compatible(url, "m", api_key="k", timeout=0.3)
    with pytest.raises(NetworkError) as caught:
        model.generate_sync(HI, timeout=10)
    assert "s3cret-pw" not in caught.value.message and "user" not in caught.value.message
    assert server.base_url("openai") in caught.value.message


# -- connection reuse ------------------------------------------------------------------------------


class KeepAliveServer:
    """A loopback HTTP/1.1 server that keeps its connections open, answers every POST with
    one streamed "hi" in the request's wire format (chunked), and counts the TCP connections
    it accepted."""

    def __init__(self) -> None:
        self.accepted = 0
        self._lock = threading.Lock()
        owner = self

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def get_request(self) -> tuple[socket, Any]:
                request = super().get_request()
                with owner._lock:
                    owner.accepted += 1
                return request

        self._server = Server(("127.0.0.1", 0), _KeepAliveHandler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, wire: str) -> str:
        return WIRE_FORMATS[wire].base_url(self.url)

    def __enter__(self) -> KeepAliveServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in self.headers.items()}
        path = urlsplit(self.path).path
        wire = next(w for w in WIRE_FORMATS.values() if w.matches("POST", path, headers))
        frames = wire.render_events(ScriptedTurn(text="hi"), json.loads(raw), "m")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for frame in frames:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def keepalive_server() -> Iterator[KeepAliveServer]:
    with KeepAliveServer() as server:
        yield server


@pytest.mark.parametrize("wire", WIRES)
def test_fifty_streamed_calls_share_one_connection(
    keepalive_server: KeepAliveServer, wire: str
) -> None:
    model = adapter(wire, keepalive_server)  # type: ignore[arg-type]  # it has base_url(wire)

    async def fifty() -> list[str]:
        texts = []
        for _ in range(50):
            chunks = [chunk async for chunk in model.stream(HI)]
            assert isinstance(chunks[-1], FinishDelta)
            texts.append("".join(c.text for c in chunks if isinstance(c, TextDelta)))
        return texts

    assert run(model, fifty) == ["hi"] * 50
    assert keepalive_server.accepted == 1


def test_a_server_that_talks_on_after_done_does_not_hold_the_answer(
    server: MockProviderServer,
) -> None:
    done = [
        b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}'
        b"\n\n",
        b"data: [DONE]\n\n",
    ]
    server.enqueue(MockResponse(raw=done + [COMMENT] * FOREVER, chunk_delay=0.05))
    model = adapter("openai", server)

    async def answer() -> list[Any]:
        chunks = [chunk async for chunk in model.stream(HI)]
        await server.disconnected(timeout=5)  # closed by us while the server still talks
        return chunks

    chunks = run(model, answer)
    assert chunks[0] == TextDelta(text="hi") and isinstance(chunks[-1], FinishDelta)


# -- text that is not valid UTF-8 ------------------------------------------------------------------


def sent_texts(wire: str, body: dict[str, Any]) -> tuple[str, str, str]:
    """(system prompt, first user text, first tool description) of a request body."""
    if wire == "openai":
        tool = body["tools"][0]["function"]["description"]
        return body["messages"][0]["content"], body["messages"][1]["content"], tool
    if wire == "anthropic":
        user = body["messages"][0]["content"]
        text = user if isinstance(user, str) else user[0]["text"]
        return body["system"], text, body["tools"][0]["description"]
    tool = body["tools"][0]["functionDeclarations"][0]["description"]
    return (
        body["systemInstruction"]["parts"][0]["text"],
        body["contents"][0]["parts"][0]["text"],
        tool,
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_lone_surrogates_anywhere_in_a_request_are_sent_as_the_replacement_character(
    server: MockProviderServer, wire: str, streaming: bool
) -> None:
    server.enqueue("ok")
    model = adapter(wire, server)
    request = ChatRequest.model_construct(  # as the loop builds it: nothing validated
        messages=[UserMessage(content="q \udcff")],
        system="sys \udcff",
        tools=[ToolSpec(name="ls", description="list \udc80")],
        tool_choice=None,
        temperature=None,
        max_output_tokens=None,
        response_schema=None,
        reasoning=None,
    )

    async def call() -> str:
        if streaming:
            chunks = [chunk async for chunk in model.stream(request)]
            return "".join(c.text for c in chunks if isinstance(c, TextDelta))
        return (await model.generate(request)).text

    assert run(model, call) == "ok"
    assert sent_texts(wire, server.requests[0].json) == ("sys \ufffd", "q \ufffd", "list \ufffd")


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_lone_surrogate_in_model_output_becomes_the_replacement_character(
    server: MockProviderServer, wire: str, streaming: bool
) -> None:
    server.enqueue(ScriptedTurn(text="file \udcff.txt"))  # sent as the JSON escape \udcff
    model = adapter(wire, server)
    deltas: list[str] = []

    async def answer() -> Any:
        if not streaming:
            return (await model.generate(HI)).message
        builder = ChatResponseBuilder(model=model.info.model, provider=model.info.provider)
        async for chunk in model.stream(HI):
            builder.add(chunk)
            if isinstance(chunk, TextDelta):
                deltas.append(chunk.text)
        return builder.build().message

    message = run(model, answer)
    assert message.text == "file \ufffd.txt"
    assert type(message).model_validate_json(message.model_dump_json()) == message
    if streaming:  # the deltas too, as events carry them
        assert "".join(deltas) == "file \ufffd.txt"


# -- refused connections and timed-out reads -------------------------------------------------------


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.timing
@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
def test_a_refused_first_connection_fails_at_once_naming_the_url(streaming: bool) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    retries: list[LLMError] = []
    model = RetryingModel(
        openai_compatible(base_url, "m"),
        base_delay=5.0,  # a retry would take seconds: the call must not wait for one
        on_retry=lambda attempt, delay, error: retries.append(error),
    )
    started = time.monotonic()
    with pytest.raises(NetworkError) as caught:
        if streaming:
            run(model.inner, lambda: _drain(model))
        else:
            model.generate_sync(HI, timeout=10)
    assert time.monotonic() - started < 2.0 and retries == []
    error = caught.value
    assert not error.retryable and error.code == "connection_refused"
    assert f"{base_url}/chat/completions" in error.message
    assert fails_over(error)  # a pool moves on to its next model


async def _drain(model: RetryingModel) -> None:
    async for _ in model.stream(HI):
        pass


def test_a_refusal_after_the_server_has_answered_is_retried() -> None:
    retries: list[LLMError] = []
    with MockProviderServer(["hello"]) as server:
        inner = adapter("openai", server)
        model = RetryingModel(
            inner, base_delay=0.0, max_retries=2, on_retry=lambda a, d, e: retries.append(e)
        )
        assert model.generate_sync(HI, timeout=10).text == "hello"
    with pytest.raises(NetworkError) as caught:  # the server is gone now
        model.generate_sync(HI, timeout=10)
    assert caught.value.retryable and len(retries) == 2
    assert all(isinstance(error, NetworkError) for error in retries)


@pytest.mark.timing
def test_each_timed_out_attempt_reports_its_duration_in_provider_retry(
    server: MockProviderServer,
) -> None:
    server.enqueue(*[MockResponse(turn=ScriptedTurn(text="late"), delay=3.0)] * 3)
    model = adapter("openai", server, timeout=0.3)
    config = LoopConfig(model=model, retry=RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0))

    async def events() -> list[Event]:
        prompt = [UserMessage(content="hi")]
        return [e async for e in loop_run(prompt, AgentContext(system_prompt=""), config)]

    seen = run(model, events)
    retried = [e for e in seen if isinstance(e, ProviderRetry)]
    assert [e.attempt for e in retried] == [1, 2]
    pattern = re.compile(r"ReadTimeout talking to \S+ at \S+ after (\d+\.\d+)s")
    durations = [float(m.group(1)) for e in retried if (m := pattern.search(e.error))]
    assert len(durations) == 2 and all(0.3 <= d < 2.0 for d in durations)
    end = seen[-1]
    assert isinstance(end, Error) and pattern.search(end.reason)
