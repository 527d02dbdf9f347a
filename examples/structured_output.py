"""Typed answers: `run(..., output_type=Book)` returns a validated `Book` in `result.output`.

    python examples/structured_output.py

The model (scripted) first answers without a required field; the run tells it what failed
and asks again (`output_retries`, 1 by default), and the second answer validates. A run whose
answers never validate raises `OutputValidationError` with the raw answer and pydantic's
errors, unless `on_failure=` turns the failure into a fallback value.
The request carries the type's JSON schema (`response_schema`) because this model has the
`structured_output` capability; a model without it gets a forced `final_result` tool call or
a JSON instruction instead, and the code here stays the same.
"""

from __future__ import annotations

from pydantic import BaseModel

from agent_runtime import OutputValidationError, Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.messages import UserMessage
from agent_runtime.testing import ScriptedModel


class Book(BaseModel):
    title: str
    year: int


def main() -> None:
    model = ScriptedModel(
        [
            '{"title": "Dune"}',  # no year: invalid, so the model is asked again
            '{"title": "Dune", "year": 1965}',
            "Dune, I think, from the sixties.",  # not JSON at all, and no retry left
        ]
    )
    with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
        agent = runtime.start_agent(("s1", "librarian", 0), model=model)

        result = agent.run("Which book is this?", timeout=30, output_type=Book)
        book = result.output  # a Book for type checkers too: run() gave a RunResult[Book]
        assert book.year == 1965
        print("output:", repr(book))
        print("schema sent:", model.requests[0].response_schema is not None)
        retry_prompt = model.requests[1].messages[-1]
        assert isinstance(retry_prompt, UserMessage)
        print("told on retry:", retry_prompt.text.splitlines()[0][:70])

        try:
            agent.run("And this one?", timeout=30, output_type=Book, output_retries=0)
        except OutputValidationError as failure:
            print("OutputValidationError, raw answer:", failure.raw)
            print("first error:", failure.errors[0]["msg"])

        model.add('{"title": "Emma"}')

        def unknown(error: Exception) -> Book:  # a RunFailed (never a cancellation)
            print("on_failure got:", type(error).__name__)
            return Book(title="unknown", year=0)

        fallback = agent.run(
            "A third?", timeout=30, output_type=Book, output_retries=0, on_failure=unknown
        )
        print("with on_failure:", repr(fallback.output), fallback.stop_reason)


if __name__ == "__main__":
    main()
