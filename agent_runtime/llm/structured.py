"""Structured output: ask for JSON matching a pydantic model, and always validate the answer."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from agent_runtime.abort import AbortSignal
from agent_runtime.llm._port import ChatModel
from agent_runtime.llm.errors import StructuredOutputError
from agent_runtime.llm.types import ChatRequest

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def structured_request(
    model: ChatModel, request: ChatRequest, output_type: type[BaseModel]
) -> ChatRequest:
    """`request` asking for `output_type`: the provider's JSON-schema mode when the model has
    the `structured_output` capability, otherwise a JSON instruction in the system prompt."""
    schema = output_type.model_json_schema()
    if "structured_output" in model.info.capabilities:
        return request.model_copy(update={"response_schema": schema})
    instruction = (
        "Answer with one JSON object only, no prose and no code fences, matching this JSON "
        f"schema:\n{json.dumps(schema)}"
    )
    system = f"{request.system}\n\n{instruction}" if request.system else instruction
    return request.model_copy(update={"system": system, "response_schema": None})


def parse_structured(text: str, output_type: type[M], *, provider: str | None = None) -> M:
    """Validate the answer `text` as `output_type` (a surrounding code fence is tolerated).

    Raises:
        StructuredOutputError: with pydantic's `errors` and the `raw` text.
    """
    match = _FENCE.match(text)
    payload = match.group(1) if match else text.strip()
    try:
        return output_type.model_validate_json(payload)
    except ValidationError as exc:
        raise StructuredOutputError(
            f"the answer does not validate as {output_type.__name__}: {exc.error_count()} "
            f"error(s): {exc.errors(include_url=False)}",
            errors=exc.errors(include_url=False),
            raw=text,
            provider=provider,
        ) from exc


async def generate_structured(
    model: ChatModel,
    request: ChatRequest,
    output_type: type[M],
    *,
    signal: AbortSignal | None = None,
) -> M:
    """One answer from `model`, validated as `output_type`.

    Raises:
        StructuredOutputError: the answer did not validate (`errors`, `raw`).
        TruncatedResponseError: the answer was cut off (raise max_output_tokens).
        LLMError, Aborted: as `generate`.
    """
    response = await model.generate(structured_request(model, request, output_type), signal=signal)
    response.ensure_complete()
    return parse_structured(response.text, output_type, provider=model.info.provider)
