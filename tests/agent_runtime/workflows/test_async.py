"""The async twins, from an application's loop that the runtime shares (`Runtime.astart`):
nothing blocks that loop, and the sync methods refuse it, naming their twin."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from agent_runtime import Runtime, RuntimeConfig
from agent_runtime.workflows import Workflows
from tests.agent_runtime.workflows.flows import Approval, Counter, Log


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("share_loop", [True, False])
def test_async_twins_on_the_applications_loop(share_loop: bool) -> None:
    async def main() -> None:
        async with Runtime.astart(RuntimeConfig(), share_loop=share_loop) as runtime:
            workflows = runtime.workflows
            wf_id = await workflows.astart(Approval, Counter())

            await _until(lambda: _status(workflows, wf_id, "paused"))
            assert [i.id for i in await workflows.alist(status="paused")] == [wf_id]
            if share_loop:
                with pytest.raises(RuntimeError, match=r"aresume_with"):
                    workflows.resume_with(wf_id, "ok")
            await workflows.aresume_with(wf_id, "ok")

            await _until(lambda: _status(workflows, wf_id, "completed"))
            assert await workflows.aresume() == []
            other = await workflows.astart(Approval, Counter())
            await _until(lambda: _status(workflows, other, "paused"))
            await workflows.acancel(other)
            assert (await workflows.aget(other)).status == "canceled"

    asyncio.run(main())
    assert Log.events.count("decision:ok") == 1


async def _status(workflows: Workflows, wf_id: str, status: str) -> bool:
    return (await workflows.aget(wf_id)).status == status
