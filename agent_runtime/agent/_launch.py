"""Starting one run: its loop and its driver on the runtime's event loop."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pykka

from agent_runtime.agent._driver import RunDriver
from agent_runtime.agent._messages import teller
from agent_runtime.agent._run import RunView
from agent_runtime.agent._shell import AgentShell
from agent_runtime.llm.base import ChatModel
from agent_runtime.loop import AgentContext, LoopConfig
from agent_runtime.loop._output import OutputSpec
from agent_runtime.loop._run import run_into
from agent_runtime.messages import Message


def launch_run(
    shell: AgentShell,
    actor: pykka.ActorRef[Any],
    view: RunView,
    prompts: list[Message] | None,
    context: AgentContext,
    model: ChatModel,
    trace_links: Sequence[Any],
    output: OutputSpec | None = None,
) -> None:
    """Submit the run's driver, which iterates its loop, to the event loop; never waits.

    `output` is this run's typed output; None takes the agent's default (`options.output`).

    Raises:
        RuntimeError: the event loop is gone (the runtime stopped).
    """
    host = shell.host
    model = host.model_for_run(shell.key, model)  # Runtime.override_model, for tests
    tell = teller(actor)
    config = _loop_config(shell, view, model, trace_links, tell)
    if output is not None:
        config = config.model_copy(update={"output": output})
    writer = host.memory_writer if shell.options.memory.write else None
    loop = functools.partial(run_into, prompts, context, config, view.signal)
    driver = RunDriver(shell, view, loop, tell, writer, actor)
    host.loop_tasks.spawn(driver.drive(), driver.done)


def _loop_config(
    shell: AgentShell,
    view: RunView,
    model: ChatModel,
    trace_links: Sequence[Any],
    tell: Any,
) -> LoopConfig:
    """The run's LoopConfig: the agent's settings, validated once per change of options or
    model (`_settings`), plus this run's callbacks, copied in without validating again."""
    run_id = view.run_id
    return _settings(shell, model).model_copy(
        update={
            "trace_links": list(trace_links),
            "get_steering_messages": view.inbox.take_steering,
            "get_follow_up_messages": view.inbox.take_follow_ups,
            "on_undelivered_steering": functools.partial(tell, "requeue", run_id, "steering"),
            "on_undelivered_follow_ups": functools.partial(tell, "requeue", run_id, "follow_up"),
            "get_system_prompt": view.inbox.current_system_prompt,
            "run_id": run_id,
        }
    )


def _settings(shell: AgentShell, model: ChatModel) -> LoopConfig:
    options = shell.options
    cached = shell.loop_settings
    if cached is not None and cached[0] is options and cached[1] is model:
        config: LoopConfig = cached[2]
        return config
    level = options.thinking_level

    def spawn(role: str, **spawn_options: Any) -> Any:
        # `ToolContext.spawn`, called by tools (never on the actor's thread).
        return shell.host.spawn_subagent(shell.handle, role, spawn_options)

    config = LoopConfig(
        model,
        max_tool_concurrency=options.max_tool_concurrency,
        max_tool_turns=options.max_tool_turns,
        tool_timeout=options.tool_timeout,
        retry=options.retry,
        abort_grace=options.abort_grace,
        tool_choice=options.tool_choice,
        temperature=options.temperature,
        max_output_tokens=options.max_output_tokens,
        transform_context=options.context_transform,
        spawner=spawn,
        reasoning=None if level == "off" else level,
        agent=shell.key,
        runtime=shell.host,
        run_sync=shell.host.run_sync,
        guardrails=options.guardrails or (),
        output=options.output,
    )
    shell.loop_settings = (options, model, config)
    return config
