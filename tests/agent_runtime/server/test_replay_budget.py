"""The bytes all replay buffers hold together stay within `[server] replay_max_bytes`, the
oldest closed stream released first, and a stream released that way keeps its ids: a new
agent under the key goes on from them and a resume gets `events_dropped` for what was lost."""

from __future__ import annotations

import os
import resource
from typing import Any

from agent_runtime.testing import wait_until

from .harness import Gateway, gateway, read_events

BOUND = 256 * 1024
ROUNDS = 5
AGENTS = 20  # per round: each run streams ~100 message_update frames (the `chatty` model)


def held_bytes(hub: Any) -> int:
    """What the hub's buffers hold, counted from their frames (not from the hub's ledger),
    each frame its encoding plus the hub's FRAME_OVERHEAD (128)."""
    buffers = [feed.buffer for feed in hub._feeds.values()] + list(hub._sessions.values())
    return sum(len(f.body()) + 128 for b in buffers for f in b._frames)


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def run_and_delete(gw: Gateway, key: str) -> None:
    gw.start(key, model="chatty")
    with gw.client() as client:
        assert client.post(f"/v1/agents/{key}/run", json={"text": "go"}).status_code == 200
        assert client.delete(f"/v1/agents/{key}").status_code == 200


def test_replay_buffers_stay_within_the_byte_bound_over_rounds_of_agents() -> None:
    with gateway(("chatty", "quick"), replay_max_bytes=BOUND) as gw:
        hub = gw.app.state.hub
        sizes: list[tuple[int, float]] = []
        for round_ in range(ROUNDS):
            keys = [f"r{round_}-{i}/main/0" for i in range(AGENTS)]
            for key in keys:
                run_and_delete(gw, key)
            wait_until(
                lambda: all(feed.agent is None for feed in list(hub._feeds.values())),
                timeout=30,
                what="every stream of the round closed",
            )
            held = held_bytes(hub)
            sizes.append((held, rss_mib()))
            # Without a byte bound the 256 newest closed streams alone hold megabytes.
            assert held <= BOUND * 1.2, sizes
            assert hub.budget.used <= BOUND, sizes
        print("held bytes and RSS (MiB) after each round:", sizes)


def test_a_released_stream_keeps_its_ids_and_a_resume_is_told_what_it_lost() -> None:
    with gateway(("chatty", "quick"), replay_max_bytes=65_536) as gw:
        hub = gw.app.state.hub
        run_and_delete(gw, "old/main/0")
        wait_until(lambda: hub.agent_buffer(("old", "main", 0)).closed, timeout=10)
        last = hub.agent_buffer(("old", "main", 0)).last_id
        assert last > 100
        n = 0
        while hub.agent_buffer(("old", "main", 0)) is not None:  # released by newer streams
            run_and_delete(gw, f"other{n}/main/0")
            n += 1
            assert n < 20, "the oldest closed stream was never released"
        gw.start("old/main/0", model="quick")
        with gw.client() as client:
            assert client.post("/v1/agents/old/main/0/prompt", json={"text": "hi"}).status_code
            frames = read_events(
                client,
                "/v1/agents/old/main/0/events",
                until=lambda f: f.event == "agent_end",
                headers={"Last-Event-ID": str(last - 5)},
            )
        lost, *rest = frames
        assert (lost.event, lost.data["count"], lost.id) == ("events_dropped", 5, last)
        assert [f.id for f in rest] == list(range(last + 1, last + 1 + len(rest)))
