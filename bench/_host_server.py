"""examples/starlette_sse.py under uvicorn, with one more route, `/floor`: the bench of the
host's loop lag (`python -m bench.host`) runs it in a process of its own.

`/floor` streams the events of `/control` (made on the server's loop without the library)
through the skeleton of one loop actor per agent, the design's: each session gets a bare
`supervisors.AsyncioActor` on the server's loop (started from a worker thread, as
`Runtime.astart_agent` starts an agent, and waited for), each run is a message to it that
starts the run, the facts an agent's actor hears of during a tool run (the tool's start and
end, the turn's end) are messages to it, and so is the run's end. No code of the library
runs: what it lags the loop by is what one actor per agent costs the host.
"""

from __future__ import annotations

import asyncio
import runpy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pykka
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from supervisors import AsyncioActor

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "starlette_sse.py"
FACTS = frozenset({"tool_execution_start", "tool_execution_end", "turn_end"})


class FloorAgent(AsyncioActor):
    """A bare actor in an agent's place, on the server's loop: it starts each run and keeps
    what it is told."""

    use_actor_registry = False  # as agents

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[str] = []

    def on_receive(self, message: Any) -> None:
        kind, payload = message
        if kind == "start":
            payload.set_result(None)
        elif kind == "fact":
            self.heard.append(payload)


def main() -> None:
    example = runpy.run_path(str(EXAMPLE), run_name="starlette_sse")
    agents: dict[bytes, pykka.ActorRef[Any]] = {}

    async def floor(request: Request) -> Response:
        chunks = int(request.query_params.get("chunks", "20"))
        delay = float(request.query_params.get("delay", "0.01"))
        session = await request.body()
        loop = asyncio.get_running_loop()
        agent = agents.get(session)
        if agent is None:
            agent = await asyncio.to_thread(lambda: FloorAgent.start(loop=loop))
            await agent.ask(("ready", None), block=False)  # started, as start_agent waits
            agents[session] = agent
        started: asyncio.Future[None] = loop.create_future()
        agent.tell(("start", started))
        await started

        async def body_stream() -> AsyncIterator[str]:
            for event in example["control_events"](chunks):
                if event is None:
                    await asyncio.sleep(delay)
                    continue
                if event.type in FACTS:
                    agent.tell(("fact", event.type))
                yield example["sse"](event)
            agent.tell(("fact", "run_ended"))

        return StreamingResponse(body_stream(), media_type="text/event-stream")

    example["app"].router.routes.append(Route("/floor", floor, methods=["POST"]))
    example["main"]()


if __name__ == "__main__":
    main()
