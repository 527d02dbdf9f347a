"""The verdicts of the evaluators: a label, a score in [0, 1] and the judge's explanation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EvaluationResult(BaseModel):
    """One judge's verdict on a run: `label` (one of the evaluator's labels), `score` in
    [0, 1] (what it measures is the evaluator's: see each result type) and `explanation`
    (the judge's reasons, in a few sentences)."""

    model_config = ConfigDict(frozen=True)

    label: str
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    explanation: str


class ToxicityResult(EvaluationResult):
    """Toxicity of the run's answer: `score` 0.0 harmless ... 1.0 plainly toxic."""

    label: Literal["toxic", "non_toxic"]


class SummarizationResult(EvaluationResult):
    """Quality of the run's answer as a summary of a source: `score` 0.0 useless ... 1.0
    faithful, complete on the essentials and concise."""

    label: Literal["good", "bad"]


class HallucinationResult(EvaluationResult):
    """The run's answer against a given context: `score` 0.0 every claim supported by the
    context ... 1.0 nothing of it supported."""

    label: Literal["factual", "hallucinated"]
