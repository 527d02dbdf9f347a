"""Logs keep secrets and content out: no frame locals, no credentials, and no prompt, answer or
tool-argument text unless `log_content = true`, through every failure a loopback server can
cause, in both log formats."""

from __future__ import annotations

import contextlib
import io
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import structlog

from agent_runtime import Agent, RunCanceled, RunFailed, Runtime
from agent_runtime.config import RuntimeConfig, TelemetryConfig
from agent_runtime.llm import ObservableModel
from agent_runtime.loop import RetryPolicy
from agent_runtime.memory import MemoryPolicy
from agent_runtime.messages import ToolCall
from agent_runtime.telemetry import HIDDEN, REDACTED, configure_logging, redact_text
from agent_runtime.testing import MockProviderServer, MockResponse, ScriptedTurn, wait_until
from agent_runtime.tools import tool
from tests.agent_runtime.llm.helpers import adapter

KEY = "k3y-LEAKCHECK-7f3a9c2e"  # not shaped like any provider's key: found by where it is
PROMPT = "PROMPTWORD: what does the zebra say?"
ANSWER = "ANSWERWORD the zebra says hello"
ARGUMENT = "ARGWORD-/etc/passwd"
CONTENT = ("PROMPTWORD", "ANSWERWORD", "ARGWORD")
WIRES = ["openai", "anthropic", "gemini"]


def configured(fmt: str, *, log_content: bool = False) -> io.StringIO:
    stream = io.StringIO()
    config = TelemetryConfig.model_validate(
        {"log_format": fmt, "log_level": "debug", "log_content": log_content}
    )
    assert configure_logging(config, stream=stream, force=True)
    return stream


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@tool
def read_file(path: str) -> str:
    """Read a file."""
    contents = f"{PROMPT} {path}"  # a local that names the argument and the prompt
    raise PermissionError(f"not allowed ({len(contents)} bytes asked)")


def error_body(wire: str, status: int, message: str) -> dict[str, Any]:
    if wire == "gemini":
        return {"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}
    return {"error": {"type": "api_error", "message": message}}


class Closed:
    """Stands for a server that is gone: its port takes no connections."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{probe.getsockname()[1]}"

    def base_url(self, wire: str) -> str:
        return {"openai": f"{self.url}/v1"}.get(wire, self.url)


class Scenario:
    """One runtime and mock server; each failure path runs on an agent of its own session."""

    def __init__(self, runtime: Runtime, server: MockProviderServer, wire: str) -> None:
        self.runtime, self.server, self.wire = runtime, server, wire
        self.count = 0

    def agent(self, **options: Any) -> Agent:
        self.count += 1
        model = options.pop("model", None) or adapter(
            self.wire, self.server, api_key=KEY, timeout=options.pop("timeout", 60.0)
        )
        return self.runtime.start_agent(
            (f"s{self.count}", "main", 0),
            model=ObservableModel(model, log_content=True),  # logs content unless hidden
            retry=options.pop("retry", RetryPolicy(max_retries=0)),
            tools=[read_file],
            memory=MemoryPolicy.none(),
            **options,
        )

    def fails(self, *entries: MockResponse | ScriptedTurn, **options: Any) -> None:
        self.server.enqueue(*entries)
        with pytest.raises((RunFailed, RunCanceled)):
            self.agent(**options).run(PROMPT, timeout=30)

    def every_failure(self) -> None:
        wire, answer = self.wire, ScriptedTurn(text=ANSWER, chunks=[ANSWER[:10], ANSWER[10:]])
        self.fails(MockResponse(status=401, body=error_body(wire, 401, "bad key")))
        self.fails(  # retried, then given up
            MockResponse(status=503, body=error_body(wire, 503, "busy")),
            MockResponse(status=500, body="<html>internal error</html>"),
            retry=RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0),
        )
        self.fails(
            MockResponse(status=200, headers={"content-type": "text/html"}, body="<p>hi</p>")
        )
        self.fails(MockResponse(events=["{not json"]))
        self.fails(MockResponse(turn=answer, disconnect_after=1))
        self.fails(MockResponse(turn=answer, hang_after=1), timeout=0.2)
        self.fails(model=adapter(wire, Closed(), api_key=KEY))  # nobody listens there
        # a tool that raises, then an answer
        call = ToolCall(id="c1", name="read_file", arguments={"path": ARGUMENT})
        self.server.enqueue(ScriptedTurn(tool_calls=[call]), answer)
        assert self.agent().run(PROMPT, timeout=30).text == ANSWER
        # aborted while the answer streams
        self.server.enqueue(MockResponse(turn=answer, hang_after=1))
        asked = len(self.server.requests) + 1
        agent = self.agent()
        agent.prompt(PROMPT)
        wait_until(lambda: len(self.server.requests) == asked, timeout=30)
        agent.abort()
        agent.wait_for_idle(timeout=30)
        # a lone surrogate in the prompt: the body cannot be encoded (or, once replaced, is
        # answered)
        self.server.enqueue(answer)
        with contextlib.suppress(RunFailed):
            self.agent().run(f"{PROMPT} \udcff", timeout=30)


def offending(out: str, words: tuple[str, ...]) -> list[str]:
    return [line[:400] for line in out.splitlines() if any(word in line for word in words)]


@pytest.mark.parametrize("fmt", ["json", "console"])
@pytest.mark.parametrize("wire", WIRES)
def test_no_failure_path_logs_the_key_or_any_content(wire: str, fmt: str) -> None:
    stream = configured(fmt)
    with MockProviderServer() as server, Runtime.start(RuntimeConfig()) as runtime:
        Scenario(runtime, server, wire).every_failure()
        sent = server.requests
    out = stream.getvalue()
    assert any(KEY in json.dumps(r.headers) for r in sent)  # the key did go on the wire
    assert any(PROMPT in json.dumps(r.json) for r in sent)
    assert out.count("llm.call.failed") >= 7 and "agent.run.finished" in out  # all logged
    assert offending(out, (KEY,)) == []
    assert offending(out, CONTENT) == []


def test_content_is_logged_only_with_log_content_and_the_key_never() -> None:
    stream = configured("json", log_content=True)
    with MockProviderServer() as server, Runtime.start(RuntimeConfig()) as runtime:
        server.enqueue(ScriptedTurn(text=ANSWER))
        assert Scenario(runtime, server, "openai").agent().run(PROMPT, timeout=30).text == ANSWER
    out = stream.getvalue()
    assert PROMPT in out and ANSWER in out
    assert KEY not in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_tracebacks_show_frames_and_messages_but_never_locals(fmt: str) -> None:
    stream = configured(fmt)

    def leaky(prompt: str) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}  # noqa: F841 (a local to be kept out)
        raise RuntimeError("the request failed")

    try:
        leaky(PROMPT)
    except RuntimeError:
        structlog.get_logger("test").exception("thing.failed")
    out = stream.getvalue()
    assert "thing.failed" in out and "the request failed" in out and "leaky" in out
    assert KEY not in out and "PROMPTWORD" not in out


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_credentials_are_redacted_in_headers_options_and_text(fmt: str) -> None:
    stream = configured(fmt)
    structlog.get_logger("test").info(
        "request.sent",
        headers=httpx.Headers({"Authorization": f"Bearer {KEY}", "X-Goog-Api-Key": KEY}),
        options={"api_key": KEY, "nested": [{"x-api-key": KEY}], "timeout": 5},
        api_key=KEY,
        url=f"https://host/v1/models?key={KEY}&alt=sse",
        note=f"sent Authorization: Bearer {KEY} and 'x-api-key': '{KEY}'",
    )
    out = stream.getvalue()
    assert KEY not in out
    assert REDACTED in out and "timeout" in out and "alt=sse" in out


@pytest.mark.parametrize(
    "text",
    [
        f"Authorization: Bearer {KEY}",
        f"{{'authorization': 'Bearer {KEY}'}}",
        f'{{"x-api-key": "{KEY}"}}',
        f"x-goog-api-key={KEY}",
        f"GeminiModel(api_key='{KEY}')",
        f"env GEMINI_API_KEY={KEY} set",
        f"https://generativelanguage.googleapis.com/v1beta/models/m?key={KEY}",
        "token sk-proj-abcdefghijklmnopqrstuvwx leaked",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    ],
)
def test_credential_patterns_are_redacted_in_text(text: str) -> None:
    redacted = redact_text(text)
    assert REDACTED in redacted
    assert KEY not in redacted and "abcdefghijklmnop" not in redacted


@pytest.mark.parametrize(
    "text",
    [
        "no API key for openai: set OPENAI_API_KEY or pass api_key= (for a keyless server: "
        "openai_compatible(..., api_key_env=None))",
        "set api_key: the key your provider gave you",
        "the Authorization: header is sent on every request",
        "api_key=(none)",
    ],
)
def test_words_after_a_credentials_name_are_not_redacted(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        (f"x-api-key: {KEY}", f"x-api-key: {REDACTED}"),
        ("api_key: abcdefghijklmnopqrstuvwxyz", f"api_key: {REDACTED}"),
        ('api_key = "hunter"', f'api_key = "{REDACTED}"'),
        ("api_key=hunter", f"api_key={REDACTED}"),
    ],
)
def test_values_after_a_credentials_name_are_redacted(text: str, redacted: str) -> None:
    assert redact_text(text) == redacted


def test_content_keys_are_hidden_but_counts_stay() -> None:
    stream = configured("json")
    structlog.get_logger("test").info(
        "loop.run.started", prompt=PROMPT, prompts=2, arguments={"path": ARGUMENT}, answer=None
    )
    line = json.loads(stream.getvalue())
    assert line["prompt"] == HIDDEN and line["arguments"] == HIDDEN
    assert line["prompts"] == 2 and line["answer"] is None
