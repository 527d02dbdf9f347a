"""SSE streams per agent and per session: resume with Last-Event-ID after a dropped connection
loses nothing within the replay buffer, and what fell out of it is reported, never skipped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_runtime.testing import ScriptedModel, wait_until

from .harness import Frame, Gateway, gateway, read_events

TERMINALS = {"agent_end", "error", "canceled"}


@pytest.fixture
def gw() -> Iterator[Gateway]:
    with gateway() as served:
        yield served


def _buffer_last_id(gw: Gateway, key: tuple[str, str, int]) -> int:
    buffer = gw.app.state.hub.agent_buffer(key)
    return 0 if buffer is None else buffer.last_id


def _newest_frame(gw: Gateway, key: tuple[str, str, int]) -> bytes:
    buffer = gw.app.state.hub.agent_buffer(key)
    frames = [] if buffer is None else buffer.after(buffer.last_id - 1).frames
    return frames[-1][1].body() if frames else b""


def _assert_gap_free(frames: list[Frame]) -> None:
    ids = [f.id for f in frames]
    assert ids == list(range(ids[0], ids[0] + len(ids))), "ids not consecutive"
    run_events = [f.data for f in frames if f.event not in ("stream_end",)]
    seqs = [e["seq"] for e in run_events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a run's seq has a gap"


def test_resume_after_a_dropped_connection_loses_nothing_within_the_buffer(gw: Gateway) -> None:
    gw.start("r/main/0")
    key = ("r", "main", 0)
    path = "/v1/agents/r/main/0/events"
    with gw.client() as client:
        client.post("/v1/agents/r/main/0/prompt", json={"text": "count"})
        first = read_events(client, path + "?last_event_id=0", lambda f: (f.id or 0) >= 10)
        last_seen = first[-1].id
        assert last_seen is not None
        # Disconnected while the run goes on: events pile up in the buffer meanwhile.
        wait_until(lambda: _buffer_last_id(gw, key) >= last_seen + 30, timeout=20)
        client.post("/v1/agents/r/main/0/abort")
        rest = read_events(
            client,
            path,
            lambda f: f.event in TERMINALS,
            headers={"Last-Event-ID": str(last_seen)},
        )
    assert rest[0].id == last_seen + 1
    assert all(f.event != "events_dropped" for f in first + rest)
    frames = first + rest
    _assert_gap_free(frames)
    assert frames[0].event == "agent_start" and frames[-1].event == "canceled"
    assert len(rest) >= 30


def test_events_that_fell_out_of_the_buffer_are_reported_as_events_dropped() -> None:
    with gateway(replay_buffer=5) as gw:
        gw.start("d/main/0")
        key = ("d", "main", 0)
        path = "/v1/agents/d/main/0/events"
        with gw.client() as client:
            client.post("/v1/agents/d/main/0/prompt", json={"text": "count"})
            wait_until(lambda: _buffer_last_id(gw, key) >= 20, timeout=20)
            client.post("/v1/agents/d/main/0/abort")
            # The actor hears of the run's end just before the end is delivered: wait for
            # the end itself to be in the buffer.
            wait_until(lambda: b"event: canceled" in _newest_frame(gw, key), timeout=10)
            total = _buffer_last_id(gw, key)
            frames = read_events(
                client, path, lambda f: f.event in TERMINALS, headers={"Last-Event-ID": "3"}
            )
    marker, kept = frames[0], frames[1:]
    assert marker.event == "events_dropped"
    assert marker.data["count"] == total - 3 - len(kept)  # lost + received: every one
    assert marker.data["agent"] == ["d", "main", 0]
    assert [f.id for f in kept] == list(range(total - len(kept) + 1, total + 1))
    assert marker.id == kept[0].id - 1  # a reconnect after the marker reports no gap again
    assert len(kept) == 5


def test_a_session_stream_carries_each_event_of_its_agents_once(gw: Gateway) -> None:
    for key in ("ss/one/0", "ss/two/0", "elsewhere/one/0"):
        gw.start(key, model="quick")
    with gw.client() as client:
        for key in ("ss/one/0", "ss/two/0", "elsewhere/one/0"):
            assert client.post(f"/v1/agents/{key}/run", json={"text": "hi"}).status_code == 200
        ends = 0

        def two_ends(frame: Frame) -> bool:
            nonlocal ends
            ends += frame.event == "agent_end"
            return ends == 2

        frames = read_events(client, "/v1/sessions/ss/events?last_event_id=0", two_ends)
    agents = {tuple(f.data["agent"]) for f in frames}
    assert agents == {("ss", "one", 0), ("ss", "two", 0)}
    assert [f.id for f in frames] == list(range(1, len(frames) + 1))
    for agent in agents:
        seqs = [f.data["seq"] for f in frames if tuple(f.data["agent"]) == agent]
        assert seqs == list(range(1, len(seqs) + 1))  # every event once, in order


def test_an_agent_started_by_the_application_is_streamed_too(gw: Gateway) -> None:
    agent = gw.runtime.start_agent(("app", "main", 0), model=ScriptedModel(["from the app"]))
    seen = []
    with gw.client() as client, client.stream("GET", "/v1/agents/app/main/0/events") as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines).startswith("retry:")
        agent.prompt("hello")  # after the stream is open: it is live from here
        for line in lines:
            if line.startswith("event: "):
                seen.append(line[7:])
                if line[7:] in TERMINALS:
                    break
    assert seen[0] == "agent_start" and seen[-1] == "agent_end"


def test_an_agent_stream_ends_with_stream_end_when_the_agent_stops(gw: Gateway) -> None:
    gw.start("end/main/0", model="quick")
    with gw.client() as client:
        client.post("/v1/agents/end/main/0/run", json={"text": "hi"})
        client.delete("/v1/agents/end/main/0")
        frames = read_events(
            client, "/v1/agents/end/main/0/events?last_event_id=0", lambda f: False
        )
    assert frames[-1].event == "stream_end" and frames[-1].data == {"reason": "agent_stopped"}
    assert frames[-2].event == "agent_end"


def test_message_updates_carry_the_delta_not_the_growing_message(gw: Gateway) -> None:
    gw.start("w/main/0", model="echo")
    with gw.client() as client:
        client.post("/v1/agents/w/main/0/run", json={"text": "a b c"})
        frames = read_events(
            client, "/v1/agents/w/main/0/events?last_event_id=0", lambda f: f.event in TERMINALS
        )
    updates = [f.data for f in frames if f.event == "message_update"]
    assert updates and all("message" not in u and u["delta"]["kind"] == "text" for u in updates)
    final = next(
        f.data
        for f in frames
        if f.event == "message_end" and f.data["message"]["role"] == "assistant"
    )
    text = "".join(u["delta"]["delta"] for u in updates)
    assert final["message"]["content"][0]["text"] == text
