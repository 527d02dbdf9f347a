"""ChatResponseBuilder: assembles stream chunks into one ChatResponse, tolerating quirks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from agent_runtime.llm.errors import NetworkError
from agent_runtime.llm.types import (
    ChatResponse,
    FinishDelta,
    StreamChunk,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    UsageDelta,
)
from agent_runtime.messages import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)


@dataclass
class _Text:
    parts: list[str] = field(default_factory=list)
    # The parts joined the last time, as (how many, text): a block's parts only grow, so the
    # next snapshot joins only what came since. One tuple, so that readers on several threads
    # never see a count and a text of different snapshots.
    joined: tuple[int, str] = (0, "")


@dataclass
class _Thinking:
    parts: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted: bool = False
    joined: tuple[int, str] = (0, "")


@dataclass
class _Call:
    id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)
    index: int | None = None  # the provider's index of the call, if it gave one


_Block = _Text | _Thinking | _Call


class ChatResponseBuilder:
    """Accumulates `StreamChunk`s and builds the final `ChatResponse`.

    Rules (each one a quirk seen in the wild):
    - Tool-call fragments are grouped by `index`; without an index, by `id`; with neither,
      they continue the most recent call. An empty id is no id; calls of different indexes
      stay apart even when a server gives them the same id. `id` and `name` are set by the
      first fragment that carries them and never concatenated (servers that repeat them in
      every chunk are fine).
    - Parallel tool calls are ordered by the provider's `index`, not by arrival: a call whose
      first fragment arrives after one of a higher index is placed before it.
    - Arguments are parsed once, at the end: `""` means `{}`; a JSON string holding an
      object (double-encoded, as some servers send) is that object; JSON that is not a
      complete object gives empty `arguments` and is kept verbatim in `ToolCall.raw_arguments`, also
      for a call cut off by the token limit, so the tool executor reports what is missing
      instead of running on half the arguments (snapshots, a progress view, parse a partial
      object as far as it goes).
    - Usage chunks replace each other (providers send running totals), never sum.
    - Whether the model asked for tools is decided from the accumulated calls, not from the
      finish reason (some servers say `stop` on a tool-call turn).
    - An answer cut off by the token limit keeps its partial text and calls, `stop_reason`
      `length`; a stream that ends with no terminal marker raises `NetworkError`.
    Not thread-safe: one builder per stream.
    """

    def __init__(self, *, model: str = "", provider: str = "") -> None:
        self.model = model
        self.provider = provider
        self._blocks: list[_Block] = []
        self._calls_by_key: dict[tuple[str, Any], _Call] = {}
        self._last_call: _Call | None = None
        self._usage = Usage()
        self._finish: FinishDelta | None = None
        self.request_id: str | None = None

    @property
    def finished(self) -> bool:
        """True once a terminal marker was added."""
        return self._finish is not None

    def deferred_snapshot(self) -> Callable[[], AssistantMessage]:
        """`snapshot()` as of now, made only when called. It marks how far each content block
        has grown (blocks only grow), so making it costs the number of blocks, holding it no
        copy of the text, and calling it what `snapshot()` costs."""
        blocks = self._blocks
        if len(blocks) == 1:  # once per streamed token: the common case is one object
            return _MarkedSnapshot(self.model, self.provider, self._usage, blocks[0], None)
        return _MarkedSnapshot(
            self.model, self.provider, self._usage, None, tuple([_mark(b) for b in blocks])
        )

    def add(self, chunk: StreamChunk) -> int | None:
        """Fold one chunk into the answer; returns the index of the content block it touched
        (None for usage and finish chunks, and for empty text)."""
        block: _Block | None = None
        if isinstance(chunk, TextDelta):
            block = self._text(chunk)
        elif isinstance(chunk, ThinkingDelta):
            block = self._thinking(chunk)
        elif isinstance(chunk, ToolCallDelta):
            block = self._tool_call(chunk)
        elif isinstance(chunk, UsageDelta):
            self._usage = chunk.usage
        elif isinstance(chunk, FinishDelta):
            self._finish = chunk
            if chunk.provider is not None:  # a pool's backup answered: the answer is its
                self.provider = chunk.provider
            if chunk.model is not None:
                self.model = chunk.model
        if block is None:
            return None
        for index in range(len(self._blocks) - 1, -1, -1):
            if self._blocks[index] is block:
                return index
        return None

    def _text(self, chunk: TextDelta) -> _Text | None:
        if not chunk.text:
            return None
        last = self._blocks[-1] if self._blocks else None
        if not isinstance(last, _Text):
            last = _Text()
            self._blocks.append(last)
        last.parts.append(chunk.text)
        return last

    def _thinking(self, chunk: ThinkingDelta) -> _Thinking:
        last = self._blocks[-1] if self._blocks else None
        if not isinstance(last, _Thinking) or (
            last.signature is not None and (chunk.text or chunk.redacted)
        ):
            last = _Thinking()
            self._blocks.append(last)
        if chunk.text:
            last.parts.append(chunk.text)
        if chunk.signature is not None:
            last.signature = chunk.signature
        last.redacted = last.redacted or chunk.redacted
        return last

    def _tool_call(self, chunk: ToolCallDelta) -> _Call:
        call: _Call | None
        chunk_id = chunk.id or None  # an empty id (some servers send "") is no id
        if chunk.index is not None:
            key: tuple[str, Any] = ("index", chunk.index)
        elif chunk_id is not None:
            key = ("id", chunk_id)
        else:
            key = ("continue", None)
        if key[0] == "continue":
            call = self._last_call
        else:
            call = self._calls_by_key.get(key)
            if call is None and key[0] == "index" and chunk_id is not None:
                by_id = self._calls_by_key.get(("id", chunk_id))
                if by_id is not None and by_id.index is None:  # it began without an index
                    call = by_id
            elif call is not None and chunk_id and call.id and chunk_id != call.id:
                call = None  # a server that reuses one index for several calls
        if call is None:
            call = _Call(index=chunk.index)
            self._place(call)
        if key[0] != "continue":
            self._calls_by_key[key] = call
        if chunk_id is not None:
            self._calls_by_key[("id", chunk_id)] = call
        if call.id is None and chunk_id:
            call.id = chunk_id
        if call.name is None and chunk.name:
            call.name = chunk.name
        if chunk.arguments:
            call.parts.append(chunk.arguments)
        self._last_call = call
        return call

    def _place(self, call: _Call) -> None:
        """Add a new call after the blocks so far, but before the calls just before it whose
        provider index is higher (they arrived first)."""
        position = len(self._blocks)
        while position and call.index is not None:
            before = self._blocks[position - 1]
            if not isinstance(before, _Call) or before.index is None or before.index <= call.index:
                break
            position -= 1
        self._blocks.insert(position, call)

    def snapshot(
        self, *, stop_reason: StopReason = "stop", with_calls: bool = True, error: str | None = None
    ) -> AssistantMessage:
        """The answer so far, as a message (tool arguments parsed as far as they go).

        Used for progress events and for the partial message of a failed or aborted attempt
        (`with_calls=False` drops tool calls, which may be incomplete).
        """
        return _snapshot_of(
            [_mark(b) for b in self._blocks],
            self._usage,
            self.model,
            self.provider,
            stop_reason=stop_reason,
            with_calls=with_calls,
            error=error,
        )

    def build(self, *, allow_unfinished: bool = False) -> ChatResponse:
        """The assembled response: tool calls in the provider's index order, the arguments of a
        call that is not a complete JSON object (one cut off by the token limit too) empty,
        with the text in `raw_arguments`.

        Raises:
            NetworkError: no terminal marker was seen (the stream was cut), unless
                `allow_unfinished` (then the partial answer has stop_reason `error`).
        """
        if self._finish is None and not allow_unfinished:
            raise NetworkError(
                "the stream ended without a terminal marker (connection cut mid-answer)",
                provider=self.provider or None,
                request_id=self.request_id,
            )
        reason: StopReason = self._finish.reason if self._finish is not None else "error"
        content = _content_of(self._blocks, partial=False)
        has_calls = any(isinstance(block, ToolCall) for block in content)
        if has_calls and reason == "stop":
            reason = "tool_use"
        elif not has_calls and reason == "tool_use":
            reason = "stop"
        message = AssistantMessage(
            content=content,
            stop_reason=reason,
            usage=self._usage,
            model=self.model,
            provider=self.provider,
        )
        return ChatResponse(
            message=message,
            usage=self._usage,
            stop_reason=reason,
            request_id=self.request_id,
            raw_finish_reason=self._finish.raw_reason if self._finish is not None else None,
        )


def _content_of(
    blocks: Sequence[_Block], *, partial: bool, with_calls: bool = True
) -> list[AssistantContent]:
    return _content_as_marked([_mark(b) for b in blocks], partial=partial, with_calls=with_calls)


def _content_as_marked(
    marks: Sequence[_Mark], *, partial: bool, with_calls: bool = True
) -> list[AssistantContent]:
    """The content of blocks as they were when marked (see `_mark`)."""
    content: list[AssistantContent] = []
    for number, (block, count, first, second) in enumerate(marks):
        if isinstance(block, _Text):
            content.append(TextContent(text=_joined(block, count)))
        elif isinstance(block, _Thinking):
            content.append(
                ThinkingContent(thinking=_joined(block, count), signature=first, redacted=second)
            )
        elif with_calls:
            # Always a copy: the live block may grow on another thread while this reads it.
            content.append(
                _finish_call(_Call(first, second, block.parts[:count]), number, partial=partial)
            )
    return content


def _joined(block: _Text | _Thinking, count: int) -> str:
    """`"".join(block.parts[:count])`, joining only the parts added since the last time."""
    done, text = block.joined
    if count == done:
        return text
    if count < done:  # a snapshot older than the last one made: made whole, not kept
        return "".join(block.parts[:count])
    text += "".join(block.parts[done:count])
    block.joined = (count, text)
    return text


def _snapshot_of(
    marks: Sequence[_Mark],
    usage: Usage,
    model: str,
    provider: str,
    *,
    stop_reason: StopReason = "stop",
    with_calls: bool = True,
    error: str | None = None,
) -> AssistantMessage:
    """`ChatResponseBuilder.snapshot()` of blocks as they were when marked."""
    return AssistantMessage(
        content=_content_as_marked(marks, partial=True, with_calls=with_calls),
        stop_reason=stop_reason,
        error_message=error,
        usage=usage,
        model=model,
        provider=provider,
    )


def _finish_call(call: _Call, number: int, *, partial: bool) -> ToolCall:
    raw = "".join(call.parts)
    arguments, raw_kept = parse_arguments(raw, partial=partial)
    return ToolCall(
        id=call.id or f"call_{number}",
        name=call.name or "",
        arguments=arguments,
        raw_arguments=raw_kept,
    )


def parse_arguments(raw: str, *, partial: bool = False) -> tuple[dict[str, Any], str | None]:
    """Parse streamed tool arguments: `(arguments, raw_if_not_a_complete_object)`.

    `""` is `{}`. With `partial`, an unfinished object is parsed as far as it goes.
    """
    if not raw.strip():
        return {}, None
    try:
        value = pydantic_core.from_json(raw)
    except ValueError:
        if partial:
            try:
                value = pydantic_core.from_json(raw, allow_partial="trailing-strings")
            except ValueError:
                return {}, raw
            return (value, raw) if isinstance(value, dict) else ({}, raw)
        return {}, raw
    if isinstance(value, dict):
        return value, None
    if isinstance(value, str):  # double-encoded (a JSON string holding the object): decoded
        # here, so what checks the call (guardrails, approval, a human) sees what runs
        try:
            inner = pydantic_core.from_json(value)
        except ValueError:
            return {}, raw
        if isinstance(inner, dict):
            return inner, None
    return {}, raw


# A block as it was: the block (whose parts only grow), how many parts it had, and the
# fields that may still change (a thinking block's signature, a call's id and name).
_Mark = tuple[_Block, int, Any, Any]


def _mark(block: _Block) -> _Mark:
    if isinstance(block, _Thinking):
        return (block, len(block.parts), block.signature, block.redacted)
    if isinstance(block, _Call):
        return (block, len(block.parts), block.id, block.name)
    return (block, len(block.parts), None, None)


class _MarkedSnapshot:
    """The answer as it was when made: one object for a one-block answer, so a streamed token
    leaves one object for the garbage collector to track here, not four (a partial, its
    arguments and two tuples of marks) while a reader has not taken it yet."""

    __slots__ = (
        "block",
        "changing_a",
        "changing_b",
        "count",
        "marks",
        "model",
        "provider",
        "usage",
    )

    def __init__(
        self,
        model: str,
        provider: str,
        usage: Usage,
        block: _Block | None,
        marks: tuple[_Mark, ...] | None,
    ) -> None:
        self.model, self.provider, self.usage, self.marks = model, provider, usage, marks
        self.block = block
        if block is not None:  # the block's part count and the two fields that may change
            _, self.count, self.changing_a, self.changing_b = _mark(block)

    def __call__(self) -> AssistantMessage:
        # Without a builder: this runs once per streamed token that a reader looks at.
        marks = self.marks
        if marks is None:
            assert self.block is not None
            marks = ((self.block, self.count, self.changing_a, self.changing_b),)
        return _snapshot_of(marks, self.usage, self.model, self.provider)
