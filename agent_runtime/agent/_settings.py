"""The `LoopConfig` of an agent's run: its settings, validated once per change of options or
model, plus the run's own values, copied in without validating again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_runtime._errors import AgentStopped
from agent_runtime.agent._cell import AgentCell
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import LoopConfig
from agent_runtime.loop._output import OutputSpec


def loop_config(
    cell: AgentCell,
    model: ChatModel,
    run_id: str,
    trace_links: Sequence[Any],
    output: OutputSpec | None,
) -> tuple[LoopConfig, dict[str, Any]]:
    """The agent's settings for run `run_id` of the agent of `cell`, and the run's own values,
    to be copied in once with the run's callbacks (`AgentRun`): one copy per run.

    `output` is this run's typed output; None takes the agent's default (`options.output`).
    """
    update: dict[str, Any] = {"trace_links": list(trace_links), "run_id": run_id}
    if output is not None:
        update["output"] = output
    return _settings(cell, model), update


def _settings(cell: AgentCell, model: ChatModel) -> LoopConfig:
    options = cell.options
    cached = cell.loop_settings
    if cached is not None and cached[0] is options and cached[1] is model:
        config: LoopConfig = cached[2]
        return config
    level = options.thinking_level
    host = cell.host
    config = LoopConfig(
        model,
        max_tool_concurrency=options.max_tool_concurrency,
        max_tool_turns=options.max_tool_turns,
        tool_timeout=options.tool_timeout,
        retry=options.retry,
        abort_grace=options.abort_grace,
        approval_timeout=options.approval_timeout,
        tool_choice=options.tool_choice,
        temperature=options.temperature,
        max_output_tokens=options.max_output_tokens,
        transform_context=options.context_transform,
        spawner=_Spawner(cell),
        reasoning=None if level == "off" else level,
        agent=cell.key,
        runtime=host,
        run_sync=host.run_sync,
        guardrails=options.guardrails or (),
        output=options.output,
    )
    cell.loop_settings = (options, model, config)
    return config


class _Spawner:
    """`ToolContext.spawn` of the run's tools: a subagent of the agent of `cell`, called on
    a tool_tasks thread; `aspawn` is `ToolContext.aspawn`, awaited on the runtime's loop,
    where the subagent starts in place."""

    __slots__ = ("cell",)

    def __init__(self, cell: AgentCell) -> None:
        self.cell = cell

    def __call__(self, role: str, **options: Any) -> Any:
        return self.cell.host.spawn_subagent(self._parent(), role, options)

    async def aspawn(self, role: str, **options: Any) -> Any:
        return await self.cell.host.aspawn_subagent(self._parent(), role, options)

    def _parent(self) -> Any:
        """The spawning agent's handle.

        Raises:
            AgentStopped: the agent was stopped (its subagent would outlive it).
        """
        cell = self.cell
        handle = cell.handle  # read once: the agent's end sets it to None on the loop
        if cell.stopped or handle is None:
            raise AgentStopped(cell.key)
        return handle
