"""The HTTP/SSE gateway from a client's side: start an agent over the JSON API, prompt it,
read its event stream, resume the stream after a lost connection, and stop it.

    python examples/gateway_client.py

What it shows (needs the `server` extra: `pip install '.[server]'`):
- `agent_runtime.server.asgi_app(runtime, tokens=[...])` served by uvicorn on 127.0.0.1 (a
  free port), as `agent-runtime serve --token ...` does;
- every route needs a bearer token (401 without one), and a token scoped to sessions
  (`[server.tokens.NAME] sessions = [...]`) gets 403 on any other session;
- `POST /v1/agents/{session}/{role}/{index}` starts an agent on a model profile of the config
  (the offline `scripted` profile here, which answers `echo: <prompt>`), `POST .../prompt`
  starts a run (202, its run id), `GET .../events` streams the agent's events as SSE frames
  (`id:`, `event:`, `data:`) and `message_update` frames carry only the new delta;
- reconnecting with `Last-Event-ID: N` replays what came after N from the gateway's buffer
  (`[server] replay_buffer` events per agent; a gap is reported as `events_dropped`);
- `DELETE` stops the agent, and its stream ends.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn
from pydantic import SecretStr

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig, ServerConfig, ServerTokenConfig
from agent_runtime.server import asgi_app

TOKEN = "example-admin-token-0123"  # every session (as `agent-runtime serve --token`)
ALICE = "example-alice-token-0123"  # session "other" only
AGENT = "/v1/agents/s1/assistant/0"


def frames(lines: Iterator[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(id, event type, data) of each SSE frame read from `lines`; comments are skipped."""
    fields: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            if name:  # a line starting with ':' is a comment (a keep-alive)
                fields[name] = value.removeprefix(" ")
            continue
        if "event" in fields:
            yield int(fields["id"]), fields["event"], json.loads(fields["data"])
        fields = {}


def serve(runtime: Runtime) -> tuple[uvicorn.Server, threading.Thread, str]:
    """The gateway over `runtime` under uvicorn on a free port of 127.0.0.1, started."""
    tokens = {"alice": ServerTokenConfig(token=SecretStr(ALICE), sessions=("other",))}
    app = asgi_app(runtime, settings=ServerConfig(tokens=tokens), tokens=[TOKEN])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=url, timeout=5) as probe:
        for _ in range(500):  # up to about 10 s for uvicorn to start
            try:
                probe.get("/openapi.json")
                break
            except httpx.TransportError:
                threading.Event().wait(0.02)
    return server, thread, url


def main() -> None:
    with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        server, thread, url = serve(runtime)
        try:
            with httpx.Client(base_url=url, timeout=30) as anonymous:
                print("no token:", anonymous.get("/v1/tree").status_code)
            alice = {"Authorization": f"Bearer {ALICE}"}
            with httpx.Client(base_url=url, headers=alice, timeout=30) as client:
                print("alice on session s1:", client.get(AGENT).status_code)

            headers = {"Authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                started = client.post(AGENT, json={"model": "scripted"})
                print("start:", started.status_code, started.json()["model"])

                # From the agent's first event on (Last-Event-ID 0): the stream then holds
                # every event of the run below, however soon it starts.
                first = {"Last-Event-ID": "0"}
                with client.stream("GET", AGENT + "/events", headers=first) as stream:
                    prompted = client.post(AGENT + "/prompt", json={"text": "hello gateway"})
                    print("prompt:", prompted.status_code, "run_id" in prompted.json())
                    seen: list[tuple[int, str]] = []
                    text = ""
                    for event_id, kind, data in frames(stream.iter_lines()):
                        seen.append((event_id, kind))
                        if kind == "message_update":
                            text += data["delta"]["delta"]
                        if kind in ("agent_end", "error", "canceled"):
                            break
                print("events:", " ".join(kind for _, kind in seen))
                print("streamed text:", text)

                # A reconnect after a lost connection: the events after the one last seen.
                last_seen = next(i for i, kind in seen if kind == "message_start")
                resumed = {"Last-Event-ID": str(last_seen)}
                with client.stream("GET", AGENT + "/events", headers=resumed) as stream:
                    replayed = []
                    for event_id, kind, _ in frames(stream.iter_lines()):
                        replayed.append(event_id)
                        if kind == "agent_end":
                            break
                after = [i for i, _ in seen if i > last_seen]
                print("replayed after", last_seen, "->", replayed == after)

                print("stop:", client.delete(AGENT).json())
        finally:
            server.should_exit = True
            thread.join(10)


if __name__ == "__main__":
    main()
