"""Evaluators: LLM-as-judge verdicts on a run (toxicity, summary quality, hallucination
against a given context), each a pydantic result with a label, a score and an explanation.

```python
from agent_runtime.evaluation import HallucinationEvaluator, evaluate_sync
judge = HallucinationEvaluator(judge_model, context=docs, templates=runtime.templates)
result = agent.run("When was the bridge opened?")
verdict = evaluate_sync(result, judge)        # HallucinationResult(label="factual", ...)
runtime.templates.update(judge.template_id, "...")   # a new judge prompt, from now on
```

Each evaluator's prompt is a prompt template (`agent_runtime.templates`), its default
written with `init` so a change made at runtime is kept. `evaluate` (async) and
`evaluate_sync` record each verdict as a span event and as metrics (see `evaluate`).
"""

from agent_runtime.evaluation._evaluate import RESULT_EVENT, evaluate, evaluate_sync
from agent_runtime.evaluation._evaluators import (
    Evaluator,
    HallucinationEvaluator,
    SummarizationEvaluator,
    ToxicityEvaluator,
)
from agent_runtime.evaluation._prompts import HALLUCINATION_ID, SUMMARIZATION_ID, TOXICITY_ID
from agent_runtime.evaluation._results import (
    EvaluationResult,
    HallucinationResult,
    SummarizationResult,
    ToxicityResult,
)

__all__ = [
    "HALLUCINATION_ID",
    "RESULT_EVENT",
    "SUMMARIZATION_ID",
    "TOXICITY_ID",
    "EvaluationResult",
    "Evaluator",
    "HallucinationEvaluator",
    "HallucinationResult",
    "SummarizationEvaluator",
    "SummarizationResult",
    "ToxicityEvaluator",
    "ToxicityResult",
    "evaluate",
    "evaluate_sync",
]
