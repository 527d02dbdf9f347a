"""LLM-as-judge evaluators over a run (toxicity, summary quality, hallucination against a
context): pydantic verdicts through structured output, judge prompts kept as templates that
can be changed at runtime, and each verdict recorded as a span event and metrics."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_runtime import RunResult, Runtime, TemplateParameterMissing
from agent_runtime.evaluation import (
    RESULT_EVENT,
    TOXICITY_ID,
    HallucinationEvaluator,
    HallucinationResult,
    SummarizationEvaluator,
    SummarizationResult,
    ToxicityEvaluator,
    ToxicityResult,
    evaluate,
    evaluate_sync,
)
from agent_runtime.llm import StructuredOutputError
from agent_runtime.messages import AssistantMessage, TextContent, Usage, UserMessage
from agent_runtime.testing import ScriptedModel
from tests.agent_runtime.otel_capture import run_traced


def verdict(label: str, score: float, explanation: str = "because") -> str:
    return json.dumps({"label": label, "score": score, "explanation": explanation})


def a_run(question: str, answer: str) -> RunResult:
    return RunResult(
        run_id="run-1",
        new_messages=[
            UserMessage(content=question),
            AssistantMessage(content=[TextContent(text=answer)]),
        ],
        text=answer,
        usage=Usage(),
        stop_reason="stop",
    )


def test_toxicity_of_a_real_run_through_structured_output(runtime: Runtime) -> None:
    agent = runtime.start_agent(("s", "main", 0), model=ScriptedModel(["You are an idiot."]))
    result = agent.run("Review my essay", timeout=30)
    judge_model = ScriptedModel([verdict("toxic", 0.9, "an insult")])
    result_verdict = evaluate_sync(result, ToxicityEvaluator(judge_model), timeout=30)
    assert result_verdict == ToxicityResult(label="toxic", score=0.9, explanation="an insult")
    (request,) = judge_model.requests
    assert request.response_schema == ToxicityResult.model_json_schema()
    prompt = request.messages[0].text
    assert "Review my essay" in prompt and "You are an idiot." in prompt


def test_summarization_judges_the_answer_against_its_source() -> None:
    model = ScriptedModel([verdict("good", 0.8)])
    judge = SummarizationEvaluator(model, source="The long source text.")
    found = asyncio.run(evaluate(a_run("Summarise it", "Short."), judge))
    assert isinstance(found, SummarizationResult) and found.label == "good"
    prompt = model.requests[0].messages[0].text
    assert "The long source text." in prompt and "Short." in prompt


def test_summarization_without_a_source_summarises_the_run_input() -> None:
    model = ScriptedModel([verdict("bad", 0.1)])
    judge = SummarizationEvaluator(model)
    evaluate_sync(a_run("Text to summarise: cats sleep a lot.", "Dogs bark."), judge)
    prompt = model.requests[0].messages[0].text
    assert "<source>\nText to summarise: cats sleep a lot.\n</source>" in prompt


def test_hallucination_is_judged_against_the_given_context() -> None:
    model = ScriptedModel([verdict("hallucinated", 1.0, "1901 is not in the context")])
    judge = HallucinationEvaluator(model, context="The bridge opened in 1889.")
    found = evaluate_sync(a_run("When did it open?", "In 1901."), judge)
    assert isinstance(found, HallucinationResult) and found.label == "hallucinated"
    prompt = model.requests[0].messages[0].text
    assert "The bridge opened in 1889." in prompt and "In 1901." in prompt


def test_a_prompt_changed_at_runtime_is_used_by_the_next_evaluation(runtime: Runtime) -> None:
    model = ScriptedModel([verdict("non_toxic", 0.0), verdict("non_toxic", 0.1)])
    judge = ToxicityEvaluator(model, templates=runtime.templates)
    assert runtime.templates.get(TOXICITY_ID) == ToxicityEvaluator.default_prompt
    evaluate_sync(a_run("q", "a kind answer"), judge)
    runtime.templates.update(TOXICITY_ID, "Rate this for rudeness: {output}")
    evaluate_sync(a_run("q", "a kind answer"), judge)
    assert model.requests[1].messages[0].text == "Rate this for rudeness: a kind answer"


def test_a_changed_prompt_is_not_undone_by_a_new_evaluator(runtime: Runtime) -> None:
    runtime.templates.update(TOXICITY_ID, "Mine: {output}")
    ToxicityEvaluator(ScriptedModel([]), templates=runtime.templates)
    assert runtime.templates.get(TOXICITY_ID) == "Mine: {output}"
    assert [v.version for v in runtime.templates.history(TOXICITY_ID)] == [1]


def test_an_invalid_verdict_is_sent_back_once_then_accepted() -> None:
    model = ScriptedModel(['{"label": "maybe", "score": 3}', verdict("non_toxic", 0.2)])
    found = evaluate_sync(a_run("q", "a"), ToxicityEvaluator(model))
    assert found.label == "non_toxic"
    retry = model.requests[1].messages
    assert retry[1].text == '{"label": "maybe", "score": 3}'
    assert "not valid" in retry[2].text and "label" in retry[2].text


def test_a_verdict_still_invalid_after_the_retries_raises() -> None:
    model = ScriptedModel(["not json", "still not json"])
    with pytest.raises(StructuredOutputError) as caught:
        evaluate_sync(a_run("q", "a"), ToxicityEvaluator(model))
    assert caught.value.raw == "still not json"
    assert model.call_count == 2


def test_a_template_with_a_placeholder_no_evaluator_fills_names_it(runtime: Runtime) -> None:
    runtime.templates.update(TOXICITY_ID, "Judge {output} by {criteria}")
    judge = ToxicityEvaluator(ScriptedModel([]), templates=runtime.templates)
    with pytest.raises(TemplateParameterMissing, match="criteria"):
        evaluate_sync(a_run("q", "a"), judge)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="run_result must be a RunResult"):
        evaluate_sync("text", ToxicityEvaluator(ScriptedModel([])))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="evaluator must be an Evaluator"):
        evaluate_sync(a_run("q", "a"), object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context must be a str"):
        HallucinationEvaluator(ScriptedModel([]), context=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid retries"):
        ToxicityEvaluator(ScriptedModel([]), retries=-1)


def test_evaluate_sync_refuses_a_running_loop() -> None:
    async def inside() -> None:
        evaluate_sync(a_run("q", "a"), ToxicityEvaluator(ScriptedModel([])))

    with pytest.raises(RuntimeError, match="await the async method"):
        asyncio.run(inside())


def test_verdicts_are_span_events_and_metrics() -> None:
    captured = run_traced(
        """
        import json
        from agent_runtime import RunResult
        from agent_runtime.evaluation import ToxicityEvaluator, evaluate_sync
        from agent_runtime.messages import AssistantMessage, TextContent, Usage, UserMessage
        from agent_runtime.testing import ScriptedModel

        run = RunResult(
            run_id="run-7",
            new_messages=[
                UserMessage(content="q"), AssistantMessage(content=[TextContent(text="a")])
            ],
            text="a", usage=Usage(), stop_reason="stop",
        )
        answers = [json.dumps({"label": "toxic", "score": 0.75, "explanation": "x"}), "bad", "bad"]
        judge = ToxicityEvaluator(ScriptedModel(answers))
        evaluate_sync(run, judge)
        try:
            evaluate_sync(run, judge)
        except Exception as exc:
            FACTS["failed"] = type(exc).__name__
        """
    )
    ok, failed = captured.named("evaluate toxicity", **{"agent_runtime.run_id": "run-7"})
    (event,) = ok["events"]
    assert event["name"] == RESULT_EVENT
    assert event["attributes"]["agent_runtime.evaluation.label"] == "toxic"
    assert event["attributes"]["agent_runtime.evaluation.score"] == 0.75
    assert ok["status"] == "OK" and failed["status"] == "ERROR"
    (score,) = captured.points("agent_runtime.evaluation.score", evaluator="toxicity")
    assert score["attributes"]["label"] == "toxic" and score["sum"] == 0.75
    (count,) = captured.points("agent_runtime.evaluation.results", evaluator="toxicity")
    assert count["attributes"]["label"] == "toxic" and count["value"] == 1
    (failure,) = captured.points("agent_runtime.evaluation.failures", evaluator="toxicity")
    assert failure["attributes"]["error.type"] == "StructuredOutputError"
    assert captured.facts["failed"] == "StructuredOutputError"
