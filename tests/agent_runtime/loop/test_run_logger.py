"""A run's own lines go through the logger of `agent_runtime.loop._run`, as an application
that sets levels per stdlib logger expects (structlog's stdlib integration)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
import structlog

from agent_runtime.abort import AbortSignal
from agent_runtime.loop import AgentContext, LoopConfig, run
from agent_runtime.messages import UserMessage
from agent_runtime.testing import FunctionModel

RUN_LOGGER = "agent_runtime.loop._run"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        event = record.msg["event"] if isinstance(record.msg, dict) else str(record.msg)
        self.seen.append((record.name, record.levelno, event))


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", RUN_LOGGER)}
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(RUN_LOGGER).setLevel(logging.DEBUG)  # debug for the run's lines only
    structlog.configure(
        processors=[structlog.stdlib.filter_by_level, structlog.stdlib.render_to_log_kwargs],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    try:
        yield handler
    finally:
        structlog.reset_defaults()
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def test_a_runs_lines_come_from_its_module_logger_at_the_levels_set_for_it(
    records: Records,
) -> None:
    async def main() -> None:
        config = LoopConfig(model=FunctionModel(lambda request: "hi"))
        context = AgentContext("s")
        async for _ in run([UserMessage(content="go")], context, config):
            pass
        aborted = AbortSignal()
        aborted.abort("user_abort")
        async for _ in run([UserMessage(content="go")], context, config, aborted):
            pass

    asyncio.run(main())

    ours = [(level, event) for name, level, event in records.seen if name == RUN_LOGGER]
    assert ours == [
        (logging.DEBUG, "loop.run.started"),
        (logging.DEBUG, "loop.run.finished"),
        (logging.DEBUG, "loop.run.started"),
        (logging.INFO, "loop.run.canceled"),
    ]
    assert all(
        name == RUN_LOGGER for name, _, _ in records.seen if name.startswith("agent_runtime.loop")
    )
