"""Built-in guardrails over the text alone: patterns and keywords, and a length limit."""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_runtime.guardrails._base import (
    Guardrail,
    GuardrailContext,
    GuardrailMode,
    GuardrailPoint,
    GuardrailResult,
    validated,
)


class RegexGuardrail(Guardrail):
    """Fails a text in which any of `patterns` (regular expressions) or `keywords` (whole
    words, matched literally) occurs; case-insensitive unless `ignore_case=False`.

    The explanation names the pattern or keyword that matched, never the text around it.

    Raises:
        ValueError: no pattern and no keyword, or a pattern that does not compile (named).
    """

    def __init__(
        self,
        patterns: str | Sequence[str] = (),
        *,
        keywords: Sequence[str] = (),
        at: GuardrailPoint = "model_response",
        mode: GuardrailMode = "block",
        ignore_case: bool = True,
    ) -> None:
        self.at, self.mode = at, mode
        sources = [patterns] if isinstance(patterns, str) else list(patterns)
        if isinstance(keywords, str):
            keywords = [keywords]
        if not sources and not keywords:
            raise ValueError("RegexGuardrail needs at least one pattern or keyword")
        flags = re.IGNORECASE if ignore_case else 0
        self._checks: list[tuple[re.Pattern[str], str]] = []
        for source in sources:
            try:
                self._checks.append((re.compile(source, flags), f"pattern {source!r}"))
            except re.error as exc:
                raise ValueError(
                    f"RegexGuardrail pattern {source!r} does not compile: {exc}"
                ) from None
        for word in keywords:
            if not word.strip():
                raise ValueError("RegexGuardrail keywords must not be empty")
            regex = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", flags)
            self._checks.append((regex, f"keyword {word!r}"))
        validated(self)

    def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        """Failed when any pattern or keyword occurs in `text`."""
        for regex, what in self._checks:
            if regex.search(text):
                return GuardrailResult(False, f"the text matches the {what}")
        return GuardrailResult(True)


class MaxLengthGuardrail(Guardrail):
    """Fails a text longer than `max_chars` characters.

    Raises:
        ValueError: `max_chars` is not a positive int.
    """

    def __init__(
        self,
        max_chars: int,
        *,
        at: GuardrailPoint = "model_request",
        mode: GuardrailMode = "block",
    ) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise ValueError(f"MaxLengthGuardrail max_chars must be an int >= 1, not {max_chars!r}")
        self.at, self.mode, self.max_chars = at, mode, max_chars
        validated(self)

    def check(self, text: str, *, context: GuardrailContext) -> GuardrailResult:
        """Failed when `text` has more than `max_chars` characters."""
        if len(text) > self.max_chars:
            return GuardrailResult(
                False,
                f"the text is {len(text)} characters long, over the limit of {self.max_chars}",
            )
        return GuardrailResult(True)
