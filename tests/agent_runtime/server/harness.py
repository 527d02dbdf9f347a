"""The gateway under a real uvicorn on 127.0.0.1 (a thread of the test process), over a runtime
whose model profiles are test doubles, and a small SSE reader."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

pytest.importorskip("starlette", reason="needs the server extra: pip install -e '.[server]'")
uvicorn = pytest.importorskip(
    "uvicorn", reason="needs the server extra: pip install -e '.[server]'"
)

from agent_runtime import Runtime  # noqa: E402
from agent_runtime.config import (  # noqa: E402
    LLMConfig,
    MemoryConfig,
    ModelProfile,
    RuntimeConfig,
    ServerConfig,
    ServerTokenConfig,
    SupervisionConfig,
    TelemetryConfig,
)
from agent_runtime.llm import ChatModel, ChatRequest, register_profile_kind  # noqa: E402
from agent_runtime.server import asgi_app  # noqa: E402
from agent_runtime.testing import FunctionModel, ScriptedModel, wait_until  # noqa: E402

ADMIN = "admin-token-0123456789"
ALICE = "alice-token-0123456789"  # session "a" only
TICK = 0.02  # seconds between the pieces of the `slow` model's answer
CHATTY = 100  # pieces of the `chatty` model's answer


async def _slow_answer(request: ChatRequest) -> AsyncIterator[str]:
    """A long answer, one piece every TICK seconds, until the run is aborted."""
    for i in range(5000):
        await asyncio.sleep(TICK)
        yield f"tick{i} "


async def _chatty_answer(request: ChatRequest) -> AsyncIterator[str]:
    """An answer of CHATTY pieces, streamed as fast as they go."""
    for i in range(CHATTY):
        await asyncio.sleep(0.001)
        yield f"w{i} "


def _quick(request: ChatRequest) -> str:
    return "done"


MODELS: dict[str, Callable[[], ChatModel]] = {
    "slow": lambda: FunctionModel(_slow_answer, record_requests=False),
    "quick": lambda: FunctionModel(_quick),
    "chatty": lambda: FunctionModel(_chatty_answer, record_requests=False),
    "echo": lambda: ScriptedModel(echo=True),
}


def _build(name: str, profile: ModelProfile, config: RuntimeConfig) -> ChatModel:
    return MODELS[profile.model]()


register_profile_kind("gateway_test", _build)


def gateway_config(models: tuple[str, ...] = tuple(MODELS), **server: Any) -> RuntimeConfig:
    """A runtime config with the test profiles `models` (of `slow`, `quick`, `chatty`,
    `echo`) and two tokens: ADMIN (every session) and ALICE (session `a`)."""
    # Only profiles that build here (no API key needed): the fuzzer tries each one.
    profiles = {
        "scripted": LLMConfig().profiles["scripted"],
        **{n: ModelProfile(provider="gateway_test", model=n) for n in models},
    }
    tokens = {
        "admin": ServerTokenConfig(token=ADMIN),
        "alice": ServerTokenConfig(token=ALICE, sessions=("a",)),
    }
    return RuntimeConfig(
        llm=LLMConfig(profiles=profiles),
        memory=MemoryConfig(store="memory"),
        supervision=SupervisionConfig(max_agents=300),
        telemetry=TelemetryConfig(log_level="warning"),
        server=ServerConfig(**{"tokens": tokens, **server}),
    )


def auth(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Gateway:
    runtime: Runtime
    url: str
    app: Any

    def client(self, token: str | None = ADMIN, **kwargs: Any) -> httpx.Client:
        headers = auth(token) if token is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)

    def start(self, key: str, model: str = "slow", **options: Any) -> None:
        with self.client() as client:
            reply = client.post(f"/v1/agents/{key}", json={"model": model, **options})
            assert reply.status_code == 201, reply.text


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (a free port) in a thread; yield its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=15, what="uvicorn started")
        yield f"http://127.0.0.1:{port}"
    finally:
        hub = app.state.hub
        if hub.loop is not None:  # end the open streams, so uvicorn's shutdown is quick
            asyncio.run_coroutine_threadsafe(hub.close(), hub.loop).result(10)
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextmanager
def gateway(models: tuple[str, ...] = tuple(MODELS), **server: Any) -> Iterator[Gateway]:
    """A runtime and its gateway on loopback (see `gateway_config` for the options)."""
    with Runtime.start(gateway_config(models, **server)) as runtime:
        app = asgi_app(runtime)
        with serving(app) as url:
            yield Gateway(runtime, url, app)


@dataclass
class Frame:
    id: int | None
    event: str
    data: Any


@dataclass
class SseReader:
    """Reads SSE frames of one response into `frames` (comments are counted apart)."""

    frames: list[Frame] = field(default_factory=list)
    comments: int = 0

    def feed(self, lines: Iterator[str]) -> Iterator[Frame]:
        event_id: int | None = None
        event = "message"
        data: list[str] = []
        for line in lines:
            if line == "":
                if data:
                    frame = Frame(event_id, event, json.loads("\n".join(data)))
                    self.frames.append(frame)
                    yield frame
                event_id, event, data = None, "message", []
            elif line.startswith(":"):
                self.comments += 1
            elif line.startswith("id: "):
                event_id = int(line[4:])
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])


def read_events(
    client: httpx.Client,
    path: str,
    until: Callable[[Frame], bool],
    *,
    headers: dict[str, str] | None = None,
) -> list[Frame]:
    """The frames of the SSE stream at `path` up to the first for which `until` is true."""
    reader = SseReader()
    with client.stream("GET", path, headers=headers or {}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for frame in reader.feed(response.iter_lines()):
            if until(frame):
                break
    return reader.frames
