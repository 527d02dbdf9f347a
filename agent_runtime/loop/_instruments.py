"""The OpenTelemetry instruments a run records into (its spans and events are in `_trace`).

Created once, at import, on the runtime's meter: until the application (or
`telemetry.exporter`) installs an SDK they are the API's no-op proxies, and a run skips
recording altogether (`telemetry_enabled()`). Durations are in seconds.

Counters: `agent.runs` (by `outcome`), `agent.turns`, `agent.tool_calls` (started ones, by
`outcome`: ok | error), `agent.tokens` (by `type`: input | output), `agent.provider_retries`.
Histograms:
- `gen_ai.client.operation.duration` (s) and `gen_ai.client.token.usage` ({token}, by
  `gen_ai.token.type`): one model call (attempt) each, with the GenAI attributes
  `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model` (and `error.type` for a
  failed call; `gen_ai.response.model` when the answer names it);
- `agent_runtime.time_to_first_token` (s): from the request to its first streamed chunk;
- `agent_runtime.run.duration` (s, by `agent.role` and `outcome`: completed | failed |
  canceled | closed) and `agent_runtime.turn.duration` (s, by `agent.role`);
- `agent_runtime.tool.duration` (s, by `gen_ai.tool.name` and `outcome`: ok, or an error's
  `details.outcome`: error | timeout | invalid_arguments | not_found | unknown | ...), for
  the calls that started;
- `agent_runtime.loop.wait` (s): a run's wait for its turn of the event loop, before its
  start or a model call, when other runs' steps had taken the iteration (see
  `agent._loop_share`); recorded only for the waits there were.
"""

from __future__ import annotations

from agent_runtime.telemetry import GEN_AI_SECONDS, gen_ai_histograms, meter

# Runs and tools reach further than the GenAI conventions' buckets of a model call.
RUN_SECONDS = (*GEN_AI_SECONDS, 163.84, 327.68, 655.36, 1310.72, 2621.44)
TOOL_SECONDS = (0.001, 0.005, *RUN_SECONDS)
# A wait for the loop is a few of its iterations: milliseconds, more on a saturated loop.
LOOP_WAIT_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

_meter = meter()

RUNS = _meter.create_counter("agent.runs", unit="{run}", description="Runs ended, by outcome")
TURNS = _meter.create_counter("agent.turns", unit="{turn}", description="Turns started")
TOOL_CALLS = _meter.create_counter(
    "agent.tool_calls", unit="{call}", description="Tool calls ended, by outcome"
)
TOKEN_COUNT = _meter.create_counter("agent.tokens", unit="{token}", description="Tokens, by type")
RETRIES = _meter.create_counter(
    "agent.provider_retries", unit="{retry}", description="Provider retries scheduled"
)

# The very instruments ObservableModel records into (a run of one leaves them to it).
OPERATION_DURATION, TOKEN_USAGE = gen_ai_histograms(_meter)
TIME_TO_FIRST_TOKEN = _meter.create_histogram(
    "agent_runtime.time_to_first_token",
    unit="s",
    description="Time from a model request to its first streamed chunk",
    explicit_bucket_boundaries_advisory=GEN_AI_SECONDS,
)
RUN_DURATION = _meter.create_histogram(
    "agent_runtime.run.duration",
    unit="s",
    description="Run duration, by role and outcome",
    explicit_bucket_boundaries_advisory=RUN_SECONDS,
)
TURN_DURATION = _meter.create_histogram(
    "agent_runtime.turn.duration",
    unit="s",
    description="Turn duration (model call and tool calls), by role",
    explicit_bucket_boundaries_advisory=RUN_SECONDS,
)
TOOL_DURATION = _meter.create_histogram(
    "agent_runtime.tool.duration",
    unit="s",
    description="Tool call duration, by tool name and outcome",
    explicit_bucket_boundaries_advisory=TOOL_SECONDS,
)
LOOP_WAIT = _meter.create_histogram(
    "agent_runtime.loop.wait",
    unit="s",
    description="A run's wait for its turn of the event loop, before its start or a model call",
    explicit_bucket_boundaries_advisory=LOOP_WAIT_SECONDS,
)
