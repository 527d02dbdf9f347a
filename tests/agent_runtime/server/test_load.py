"""Load: 200 concurrent SSE clients on loopback watch one agent's runs. Every client gets every
event exactly once, in order, with no gap and one terminal per run; the server's memory stays
bounded (its buffers never exceed their capacity, and a second round costs no more memory
than the first). Bounded in time: the whole test gives up after `LIMIT` seconds."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from agent_runtime.testing import wait_until

from .harness import Gateway, auth, gateway

CLIENTS = 200
LIMIT = 240.0  # seconds for the whole test: a hang fails instead of blocking the suite
TERMINALS = {"agent_end", "error", "canceled"}


@pytest.fixture
def gw() -> Iterator[Gateway]:
    with gateway(replay_buffer=1000) as served:
        yield served


@dataclass
class Client:
    ids: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)


async def watch(http: httpx.AsyncClient, path: str, client: Client, runs: int) -> None:
    """Read the stream until `runs` terminals arrived."""
    ends = 0
    async with http.stream("GET", path) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("retry:"):
                client.connected.set()
            elif line.startswith("id: "):
                client.ids.append(int(line[4:]))
            elif line.startswith("event: "):
                client.events.append(line[7:])
                if line[7:] in TERMINALS:
                    ends += 1
                    if ends == runs:
                        return


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _round(gw: Gateway, first_id: int) -> list[Client]:
    clients = [Client() for _ in range(CLIENTS)]
    limits = httpx.Limits(max_connections=CLIENTS + 10, max_keepalive_connections=0)
    path = f"/v1/agents/load/main/0/events?last_event_id={first_id}"
    async with httpx.AsyncClient(
        base_url=gw.url, headers=auth(), limits=limits, timeout=60
    ) as http:
        tasks = [asyncio.create_task(watch(http, path, c, runs=1)) for c in clients]
        await asyncio.gather(*(c.connected.wait() for c in clients))
        reply = await http.post("/v1/agents/load/main/0/prompt", json={"text": "go"})
        assert reply.status_code == 202, reply.text
        await asyncio.gather(*tasks)
    return clients


def _check(clients: list[Client], first_id: int) -> int:
    reference = clients[0].ids
    assert reference[0] == first_id + 1
    assert reference == list(range(first_id + 1, first_id + 1 + len(reference)))
    for client in clients:
        assert client.ids == reference  # every event, once, in order: nothing lost
        assert "events_dropped" not in client.events
        assert sum(e in TERMINALS for e in client.events) == 1
        assert client.events[-1] == "agent_end"
    return reference[-1]


def test_200_concurrent_sse_clients_lose_nothing_and_memory_stays_bounded(gw: Gateway) -> None:
    gw.start("load/main/0", model="chatty")
    key = ("load", "main", 0)
    hub = gw.app.state.hub

    async def scenario() -> None:
        last = _check(await _round(gw, 0), 0)
        wait_until(lambda: gw.runtime.tree().agent(key).status == "idle", timeout=10)
        after_first = _rss_mib()
        last = _check(await _round(gw, last), last)
        grown = _rss_mib() - after_first
        assert grown < 64, f"the second round grew the peak RSS by {grown:.0f} MiB"
        buffer = hub.agent_buffer(key)
        assert buffer is not None and len(buffer) <= buffer.capacity
        assert buffer.last_id == last

    asyncio.run(asyncio.wait_for(scenario(), LIMIT))
