"""The LLM-as-judge evaluators: a judge model, a stored prompt template and a result type."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Generic, TypeVar

from agent_runtime.abort import AbortSignal
from agent_runtime.agent import RunResult
from agent_runtime.evaluation._prompts import (
    HALLUCINATION,
    HALLUCINATION_ID,
    SUMMARIZATION,
    SUMMARIZATION_ID,
    TOXICITY,
    TOXICITY_ID,
)
from agent_runtime.evaluation._results import (
    EvaluationResult,
    HallucinationResult,
    SummarizationResult,
    ToxicityResult,
)
from agent_runtime.llm._port import ChatModel
from agent_runtime.llm.errors import StructuredOutputError
from agent_runtime.llm.structured import generate_structured
from agent_runtime.llm.types import ChatRequest
from agent_runtime.memory import InMemoryStore, SessionMemory
from agent_runtime.messages import AssistantMessage, Message, TextContent, UserMessage
from agent_runtime.templates import PromptTemplates, Template, check_template_id

R = TypeVar("R", bound=EvaluationResult)


class Evaluator(ABC, Generic[R]):
    """A judge of runs: asks `model` for a `result_type` about a `RunResult`, with the prompt
    stored in `templates` under `template_id`.

    The default prompt is written with `templates.init` when the evaluator is made, so it
    never undoes a change: update the template (`templates.update(evaluator.template_id,
    ...)`) and the next evaluation uses it. A prompt template may use `{input}` (the run's
    user text), `{output}` (its final answer) and what the evaluator adds (`{source}`,
    `{context}`). Without `templates` the prompts live in a private in-memory store; pass
    `runtime.templates` to keep them with the runtime's and change them there.

    The answer is asked as structured output (`generate_structured`: the provider's schema
    mode, or a JSON instruction) and validated; an answer that does not validate is sent
    back with the errors, up to `retries` times, then `StructuredOutputError` is raised.

    Raises (constructor):
        TypeError, ValueError: a bad template id, `retries` not an int >= 0, or a
            default prompt that is not a valid template.
    """

    name: ClassVar[str]
    """Names the evaluator in spans and metrics."""
    default_template_id: ClassVar[str]
    default_prompt: ClassVar[str]
    result_type: type[R]

    def __init__(
        self,
        model: ChatModel,
        *,
        templates: PromptTemplates | None = None,
        template_id: str | None = None,
        retries: int = 1,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"invalid retries {retries!r} (expected an int >= 0)")
        self.model = model
        self.templates = (
            templates if templates is not None else PromptTemplates(SessionMemory(InMemoryStore()))
        )
        self.template_id = check_template_id(
            template_id if template_id is not None else self.default_template_id
        )
        self.retries = retries
        self.templates.init(self.template_id, self.default_prompt)

    @abstractmethod
    def parameters(self, run: RunResult) -> dict[str, str]:
        """The template's parameters for judging `run`."""

    def prompt(self, run: RunResult) -> str:
        """The judge's prompt for `run`: the stored template, rendered now.

        Raises:
            TemplateNotFound: the template was deleted.
            TemplateParameterMissing: it has a placeholder this evaluator does not fill.
        """
        return self.templates.render(Template(self.template_id, **self.parameters(run)))

    async def judge(self, run: RunResult, *, signal: AbortSignal | None = None) -> R:
        """The verdict on `run` (use `evaluate` for the span and metrics around it).

        Raises:
            StructuredOutputError: no valid verdict after `retries` corrections.
            TemplateError: as `prompt`.
            LLMError, Aborted: as the model's `generate`.
        """
        messages: list[Message] = [UserMessage(content=self.prompt(run))]
        for attempt in range(self.retries + 1):
            try:
                return await generate_structured(
                    self.model, ChatRequest(messages=messages), self.result_type, signal=signal
                )
            except StructuredOutputError as exc:
                if attempt == self.retries:
                    raise
                messages = [
                    *messages,
                    AssistantMessage(content=[TextContent(text=exc.raw)]),
                    UserMessage(content=f"That answer is not valid ({exc.errors}). Answer again."),
                ]
        raise AssertionError("unreachable")  # the loop returns or raises

    def __repr__(self) -> str:
        return f"<{type(self).__name__} template_id={self.template_id!r}>"


class ToxicityEvaluator(Evaluator[ToxicityResult]):
    """Is the run's answer toxic? A `ToxicityResult` ("toxic" / "non_toxic")."""

    name = "toxicity"
    default_template_id = TOXICITY_ID
    default_prompt = TOXICITY
    result_type = ToxicityResult

    def parameters(self, run: RunResult) -> dict[str, str]:
        return {"input": input_text(run), "output": run.text}


class SummarizationEvaluator(Evaluator[SummarizationResult]):
    """How good a summary of `source` is the run's answer? A `SummarizationResult`
    ("good" / "bad"). Without a `source`, the run's own user text is the source (a run
    asked to summarise what it was given)."""

    name = "summarization"
    default_template_id = SUMMARIZATION_ID
    default_prompt = SUMMARIZATION
    result_type = SummarizationResult

    def __init__(
        self,
        model: ChatModel,
        *,
        source: str | None = None,
        templates: PromptTemplates | None = None,
        template_id: str | None = None,
        retries: int = 1,
    ) -> None:
        if source is not None and not isinstance(source, str):
            raise TypeError(f"source must be a str or None, not {type(source).__name__}")
        self.source = source
        super().__init__(model, templates=templates, template_id=template_id, retries=retries)

    def parameters(self, run: RunResult) -> dict[str, str]:
        source = self.source if self.source is not None else input_text(run)
        return {"input": input_text(run), "output": run.text, "source": source}


class HallucinationEvaluator(Evaluator[HallucinationResult]):
    """Does the run's answer claim what `context` (the reference the run was given, e.g.
    retrieved documents) does not support? A `HallucinationResult` ("factual" /
    "hallucinated")."""

    name = "hallucination"
    default_template_id = HALLUCINATION_ID
    default_prompt = HALLUCINATION
    result_type = HallucinationResult

    def __init__(
        self,
        model: ChatModel,
        *,
        context: str,
        templates: PromptTemplates | None = None,
        template_id: str | None = None,
        retries: int = 1,
    ) -> None:
        if not isinstance(context, str):
            raise TypeError(f"context must be a str, not {type(context).__name__}")
        self.context = context
        super().__init__(model, templates=templates, template_id=template_id, retries=retries)

    def parameters(self, run: RunResult) -> dict[str, str]:
        return {"input": input_text(run), "output": run.text, "context": self.context}


def input_text(run: RunResult) -> str:
    """The user text of `run` (its user messages, in order, a blank line between)."""
    return "\n\n".join(m.text for m in run.new_messages if isinstance(m, UserMessage))
