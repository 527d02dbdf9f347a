"""Typed output of a run: ask for it in the mode the model has, validate it, and retry.

The mode follows the model's capabilities, per call: the provider's structured mode (the
request's `response_schema`) with `structured_output`; otherwise one forced call of the
`final_result` tool with `tools`; otherwise a JSON instruction in the system prompt. In every
mode a text answer that parses as JSON and validates is accepted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_runtime.llm.types import ChatRequest, ModelInfo, ToolSpec
from agent_runtime.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

OUTPUT_TOOL = "final_result"
"""The tool a model without a structured mode (but with tools) is made to call with its
output as the arguments."""

_WRAP = "response"  # the one property a non-object output is wrapped in for the tool mode
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


@dataclass(frozen=True)
class Parsed:
    """One answer checked against an OutputSpec: `value` when `ok`, else `errors`; `raw` is
    the text checked (a tool call's arguments as JSON)."""

    ok: bool
    value: Any = None
    raw: str = ""
    errors: list[Any] = field(default_factory=list)


class OutputSpec:
    """What a run's answer must be: any type a pydantic `TypeAdapter` takes, and how many
    times the model is told what failed and asked again (`retries`, >= 0).

    Built with `OutputSpec.of` (cached per type and count, so a run pays no schema build)."""

    def __init__(self, output_type: Any, retries: int) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"output_retries must be an int >= 0, not {retries!r}")
        try:
            self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = self.adapter.json_schema()
        except Exception as exc:  # pydantic raises several kinds for a type it cannot take
            raise TypeError(
                f"output_type must be a type pydantic can validate (a BaseModel, a dataclass, "
                f"list[int], ...), not {output_type!r}: {exc}"
            ) from None
        self.output_type = output_type
        self.retries = retries
        self.name = getattr(output_type, "__name__", None) or repr(output_type)
        self.schema: dict[str, Any] = schema
        self.wrapped = schema.get("type") != "object"
        # Providers' structured modes and tool parameters take an object schema only.
        self.object_schema: dict[str, Any] = _wrapped(schema) if self.wrapped else schema
        self.instruction = (
            "Answer with one JSON value only, no prose and no code fences, matching this JSON "
            f"schema:\n{json.dumps(schema)}"
        )

    @staticmethod
    def of(output_type: Any, retries: int) -> OutputSpec:
        """The spec of `output_type` with `retries`, built once per (type, retries).

        Raises:
            TypeError: `output_type` is not a type pydantic can validate.
            ValueError: `retries` is not an int >= 0.
        """
        try:
            return _cached(output_type, retries)
        except TypeError as exc:
            if "unhashable" not in str(exc):
                raise
            return OutputSpec(output_type, retries)

    # -- asking -------------------------------------------------------------------------------

    def prepare(self, request: ChatRequest, info: ModelInfo) -> ChatRequest:
        """`request` asking for this output in the mode `info`'s capabilities allow."""
        capabilities = info.capabilities
        if "structured_output" in capabilities:
            return request.model_copy(update={"response_schema": self.object_schema})
        system = f"{request.system}\n\n{self.instruction}" if request.system else self.instruction
        if "tools" not in capabilities:
            return request.model_copy(update={"system": system})
        spec = ToolSpec(
            name=OUTPUT_TOOL,
            description=f"Give the final answer, a {self.name}, as the arguments.",
            parameters=self.object_schema,
        )
        choice = request.tool_choice
        if choice in (None, "auto", "required"):
            choice = "required" if request.tools else OUTPUT_TOOL
        note = f"{system}\n\nGive the answer by calling the {OUTPUT_TOOL} tool."
        return request.model_copy(
            update={"tools": [*request.tools, spec], "tool_choice": choice, "system": note}
        )

    # -- checking -----------------------------------------------------------------------------

    def output_call(self, message: AssistantMessage) -> ToolCall | None:
        """The answer's call of the output tool, if it made one."""
        for call in message.tool_calls:
            if call.name == OUTPUT_TOOL:
                return call
        return None

    def parse(self, message: AssistantMessage) -> Parsed:
        """The answer checked: its output-tool call's arguments if it made one, else its text
        (a surrounding code fence tolerated; for a wrapped type `{"response": ...}` too)."""
        call = self.output_call(message)
        if call is not None:
            raw = call.raw_arguments or json.dumps(call.arguments)
            payload: Any = call.arguments
            if self.wrapped and isinstance(payload, dict) and set(payload) == {_WRAP}:
                payload = payload[_WRAP]
            return self._validate(raw, lambda: self.adapter.validate_python(payload))
        raw = message.text
        match = _FENCE.match(raw)
        text = match.group(1) if match else raw.strip()
        parsed = self._validate(raw, lambda: self.adapter.validate_json(text))
        if parsed.ok or not self.wrapped:
            return parsed
        try:
            wrapper = json.loads(text)
        except ValueError:
            return parsed
        if isinstance(wrapper, dict) and set(wrapper) == {_WRAP}:
            unwrapped = self._validate(raw, lambda: self.adapter.validate_python(wrapper[_WRAP]))
            if unwrapped.ok:
                return unwrapped
        return parsed

    def _validate(self, raw: str, validate: Any) -> Parsed:
        try:
            return Parsed(True, validate(), raw)
        except ValidationError as exc:
            return Parsed(False, None, raw, exc.errors(include_url=False))

    def feedback(self, message: AssistantMessage, parsed: Parsed) -> list[Any]:
        """What tells the model its answer failed: error results for an answer with tool calls
        (every call needs one), else a user message."""
        text = (
            f"The answer did not validate as {self.name}: {_summary(parsed.errors)}. "
            f"Answer again, with JSON matching the schema."
        )
        if not message.tool_calls:
            return [UserMessage(content=text)]
        return [self._result(call, text, is_error=True) for call in message.tool_calls]

    def accepted(self, message: AssistantMessage) -> list[ToolResultMessage]:
        """The results of an answer whose output-tool call was accepted (a result for every
        call of it, the others not run)."""
        return [
            self._result(call, "Final result accepted.", is_error=False)
            if call.name == OUTPUT_TOOL
            else self._result(call, "Not run: the final result was given.", is_error=True)
            for call in message.tool_calls
        ]

    def reason(self, parsed: Parsed) -> str:
        """The run's `Error` reason for a failed answer (retries spent)."""
        return (
            f"output_invalid: not a valid {self.name} after {self.retries + 1} attempt(s): "
            f"{_summary(parsed.errors)}"
        )

    @staticmethod
    def _result(call: ToolCall, text: str, *, is_error: bool) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=[TextContent(text=text)],
            is_error=is_error,
        )


@lru_cache(maxsize=256)
def _cached(output_type: Any, retries: int) -> OutputSpec:
    return OutputSpec(output_type, retries)


def _summary(errors: list[Any]) -> str:
    parts = []
    for error in errors[:10]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "(root)"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
    return "; ".join(parts) + more if parts else "not valid JSON"


class OutputTurns:
    """One run's checks of its answers against `spec`: how many retries are left."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.left = spec.retries

    def check(self, message: AssistantMessage) -> tuple[str, list[Any], str]:
        """The verdict on an answer that ends a turn: `("ok", results, "")` (results: those
        of an accepted output-tool call, to commit), `("retry", feedback, "")` (commit the
        feedback and call again), `("fail", results, reason)` (end the run with `reason`).
        An answer with tool calls but none of the output tool is `("tools", [], "")`: run
        them as usual."""
        spec = self.spec
        if message.tool_calls and spec.output_call(message) is None:
            return "tools", [], ""
        parsed = spec.parse(message)
        if parsed.ok:
            return "ok", spec.accepted(message), ""
        feedback = spec.feedback(message, parsed)
        if self.left > 0:
            self.left -= 1
            return "retry", feedback, ""
        return "fail", feedback if message.tool_calls else [], spec.reason(parsed)


def _wrapped(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as the one property of an object schema. Its `$defs` move to the root, where
    its `$ref`s (`#/$defs/...`, from the root of the document) point."""
    inner = dict(schema)
    defs = inner.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {_WRAP: inner}, "required": [_WRAP]}
    if defs is not None:
        wrapped["$defs"] = defs
    return wrapped
