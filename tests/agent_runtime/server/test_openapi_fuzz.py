"""The API's contract fuzzed by schemathesis against its own OpenAPI document, over loopback.

Every operation but the SSE streams (which never end by themselves) is called with generated
inputs; each answer must be documented (status, content type, body schema) and never a 500.
The number of examples is kept small so `make test` stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip(
    "schemathesis", reason="needs schemathesis: pip install -e '.[dev]'"
)
from hypothesis import HealthCheck, given, settings  # noqa: E402

from agent_runtime.server._openapi import openapi_document  # noqa: E402

from .harness import Gateway, auth, gateway  # noqa: E402


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with gateway() as served:
        served.start("s/main/0", model="quick")
        yield served


OPERATIONS = [
    (method.upper(), path)
    for path, item in openapi_document()["paths"].items()
    for method in item
    if method != "parameters" and not path.endswith("/events")
]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_answer_is_documented_and_none_is_a_server_error(
    gw: Gateway, method: str, path: str
) -> None:
    # The document this server serves: its profiles and tools are named in it.
    schema = schemathesis.openapi.from_dict(openapi_document(gw.runtime))
    operation = schema[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def answers_as_documented(case: Any) -> None:
        case.call_and_validate(base_url=gw.url, headers=auth(), timeout=30)

    answers_as_documented()
