"""The API's contract fuzzed by schemathesis against its own OpenAPI document, over loopback.

Every operation but the SSE streams (which never end by themselves) is called with generated
inputs, once with generated keys and once on a live agent (which the fuzzer may prompt, steer,
abort, stop and start again); each answer must be documented (status, content type, body
schema) and never a 5xx.
The number of examples is kept small so `make test` stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

schemathesis = pytest.importorskip(
    "schemathesis", reason="needs schemathesis: pip install --group dev"
)
from hypothesis import HealthCheck, given, settings  # noqa: E402

from agent_runtime.server._openapi import openapi_document  # noqa: E402

from .harness import Gateway, auth, gateway  # noqa: E402


@pytest.fixture(scope="module")
def gw() -> Iterator[Gateway]:
    with gateway(models=("quick", "echo")) as served:  # answers that end: `run` waits
        served.start("s/main/0", model="quick")
        yield served


LIVE = ("s", "main", 0)
OPERATIONS = [
    (method.upper(), path)
    for path, item in openapi_document()["paths"].items()
    for method in item
    if method != "parameters" and not path.endswith("/events")
]


@pytest.mark.parametrize("target", ["generated-key", "live-agent"])
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_answer_is_documented_and_none_is_a_server_error(
    gw: Gateway, method: str, path: str, target: str
) -> None:
    if target == "live-agent" and "{tool_call_id}" in path:
        # The live agent has no call waiting: every id is a 404, as for a generated key.
        # (Skipped here, not handled below: hypothesis derives its derandomized examples
        # from the source of `answers_as_documented`.)
        pytest.skip("no tool call waits for approval on the live agent")
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
        if target == "live-agent" and case.path_parameters:  # fuzzed bodies on a real agent
            if gw.runtime.registry.lookup(LIVE) is None:  # a fuzzed DELETE stopped it
                gw.start("s/main/0", model="quick")
            case.path_parameters = dict(zip(("session", "role", "index"), LIVE, strict=True))
        case.call_and_validate(base_url=gw.url, headers=auth(), timeout=30)

    answers_as_documented()
