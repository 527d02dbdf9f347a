"""evaluate: one evaluator's verdict on a run, recorded as a span event and as metrics."""

from __future__ import annotations

from typing import TypeVar

from opentelemetry.trace import Status, StatusCode

from agent_runtime.abort import AbortSignal
from agent_runtime.agent import RunResult
from agent_runtime.evaluation._evaluators import Evaluator
from agent_runtime.evaluation._results import EvaluationResult
from agent_runtime.llm._sync import run_sync
from agent_runtime.telemetry import HIDDEN, log_content, meter, tracer

R = TypeVar("R", bound=EvaluationResult)

RESULT_EVENT = "agent_runtime.evaluation.result"
"""The span event each verdict adds to its `evaluate <name>` span."""

_m = meter()
SCORES = _m.create_histogram(
    "agent_runtime.evaluation.score",
    unit="1",
    description="Scores of evaluator verdicts on runs, by evaluator and label",
)
RESULTS = _m.create_counter(
    "agent_runtime.evaluation.results",
    unit="{verdict}",
    description="Evaluator verdicts on runs, by evaluator and label",
)
FAILURES = _m.create_counter(
    "agent_runtime.evaluation.failures",
    unit="{evaluation}",
    description="Evaluations that gave no verdict, by evaluator and error.type",
)


async def evaluate(
    run_result: RunResult, evaluator: Evaluator[R], *, signal: AbortSignal | None = None
) -> R:
    """`evaluator`'s verdict on `run_result`.

    Recorded (no-ops until the application installs an OpenTelemetry SDK): a span
    `evaluate <evaluator.name>` (a child of the current span) with the attributes
    `agent_runtime.evaluation.evaluator` and `agent_runtime.run_id`, and on it the event
    `agent_runtime.evaluation.result` with the evaluator, run id, label, score and
    explanation (the explanation hidden unless `[telemetry] log_content`); the histogram
    `agent_runtime.evaluation.score` and the counter `agent_runtime.evaluation.results`,
    both by `evaluator` and `label`. A failure sets the span's status to error and counts
    in `agent_runtime.evaluation.failures` by `evaluator` and `error.type`.

    Raises:
        TypeError: `run_result` is not a RunResult or `evaluator` not an Evaluator.
        StructuredOutputError, TemplateError, LLMError, Aborted: as `Evaluator.judge`.
    """
    if not isinstance(run_result, RunResult):
        raise TypeError(f"run_result must be a RunResult, not {type(run_result).__name__}")
    if not isinstance(evaluator, Evaluator):
        raise TypeError(f"evaluator must be an Evaluator, not {type(evaluator).__name__}")
    name = evaluator.name
    attributes = {
        "agent_runtime.evaluation.evaluator": name,
        "agent_runtime.run_id": run_result.run_id,
    }
    with tracer().start_as_current_span(
        f"evaluate {name}",
        attributes=attributes,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        try:
            result = await evaluator.judge(run_result, signal=signal)
        except BaseException as exc:
            FAILURES.add(1, {"evaluator": name, "error.type": type(exc).__name__})
            raise
        span.add_event(
            RESULT_EVENT,
            {
                **attributes,
                "agent_runtime.evaluation.label": result.label,
                "agent_runtime.evaluation.score": result.score,
                "agent_runtime.evaluation.explanation": (
                    result.explanation if log_content() else HIDDEN
                ),
            },
        )
        span.set_status(Status(StatusCode.OK))
    labels = {"evaluator": name, "label": result.label}
    SCORES.record(result.score, labels)
    RESULTS.add(1, labels)
    return result


def evaluate_sync(
    run_result: RunResult,
    evaluator: Evaluator[R],
    *,
    signal: AbortSignal | None = None,
    timeout: float | None = None,
) -> R:
    """`evaluate`, for code without an event loop: waits up to `timeout` seconds (None: no
    limit) on the runtime-wide sync bridge loop.

    Raises:
        RuntimeError: called from a running event loop (await `evaluate` instead).
        TimeoutError: `timeout` passed (the evaluation was cancelled).

    Otherwise it raises what `evaluate` raises.
    """
    return run_sync(evaluate(run_result, evaluator, signal=signal), timeout)
