"""What of a failure's text the protocol endpoints may show their clients."""

from __future__ import annotations

import re

from agent_runtime.telemetry import redact_text

__all__ = ["public_text"]

# a URL, without the punctuation that ends the sentence around it
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()]*[^\s'\"<>():;,.]")


def public_text(text: str) -> str:
    """`text` without credentials (as the logs redact them) and without URLs: a provider's
    error names the host the server calls (an internal address, a query with a key), which
    is the server's configuration, not the client's business."""
    return redact_text(_URL.sub("<url>", text))
