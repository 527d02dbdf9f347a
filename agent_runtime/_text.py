"""Text that always encodes as UTF-8: lone surrogates replaced by U+FFFD.

Python strings may hold lone surrogates (`os.listdir` and `sys.argv` turn undecodable bytes
into `"\\udc80"`-`"\\udcff"`; `json.loads` makes one of a lone `"\\udcff"` escape). They cannot
be encoded as UTF-8, so JSON bodies, SQLite rows and HTTP requests holding one fail.
"""

from __future__ import annotations

from typing import Any


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (`"\\ufffd"`).

    A high surrogate followed by a low one (a pair split across two pieces of text, then
    joined) becomes the one character it encodes. Text without surrogates is returned as is,
    at the cost of one check (none for ASCII).
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def replace_lone_surrogates_in(value: Any) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with lone surrogates replaced
    in every string, dict keys included (containers are copied, other values kept)."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, dict):
        return {
            replace_lone_surrogates_in(key): replace_lone_surrogates_in(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [replace_lone_surrogates_in(item) for item in value]
    if isinstance(value, tuple):
        return tuple(replace_lone_surrogates_in(item) for item in value)
    return value
