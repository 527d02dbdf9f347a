"""Switching and falling back between providers, over real HTTP, offline.

    python examples/providers.py

`MockProviderServer` is a real HTTP server on 127.0.0.1 that speaks the OpenAI, Anthropic and
Gemini wire formats (chosen by the request's path) and plays a script, so the real adapters
make real requests here; point `base_url` at the providers (or leave it out) and set their
keys (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`) for the real thing.

- `FallbackModel([primary, backup])`: the primary (an OpenAI-compatible host) answers 503,
  a failure another provider may not have, so the same call goes to the backup (Anthropic);
  each model sits behind a circuit breaker that opens after repeated failures;
- `agent.set_model(...)` switches the agent to Gemini from its next model call on; the
  history, written by other providers' models, goes along.
In config, a fallback pool is `[llm.pools.NAME] members = [...]` and `from_config("NAME")`
builds the same FallbackModel (see docs/providers.md).
"""

from __future__ import annotations

from agent_runtime import Runtime
from agent_runtime.config import MemoryConfig, RuntimeConfig
from agent_runtime.llm import FallbackModel, anthropic, gemini, openai_compatible
from agent_runtime.testing import MockProviderServer, MockResponse


def main() -> None:
    with MockProviderServer() as server:
        server.enqueue(
            MockResponse(status=503, body={"error": {"message": "overloaded"}}),
            "Answer from the backup (Anthropic).",
            "Answer from Gemini, with the whole history.",
        )
        primary = openai_compatible(server.base_url("openai"), "host-model", "key-1")
        backup = anthropic("claude-sonnet-4-5", "key-2", base_url=server.base_url("anthropic"))
        model = FallbackModel([primary, backup], failure_threshold=3, reset_timeout=30.0)

        with Runtime.start(config=RuntimeConfig(memory=MemoryConfig(store="memory"))) as runtime:
            agent = runtime.start_agent(("s1", "assistant", 0), model=model)
            print(agent.run("Hello", timeout=30).text)
            print("primary's circuit:", model.breakers[0].state, "(one failure of three)")

            agent.set_model(gemini("gemini-2.5-flash", "key-3", base_url=server.base_url("gemini")))
            print(agent.run("And now?", timeout=30).text)

        for request in server.requests:
            print(f"{request.format:10} {request.method} {request.path}")
        assert [r.format for r in server.requests] == ["openai", "anthropic", "gemini"]
        contents = server.requests[2].json["contents"]
        print("Gemini was sent", len(contents), "messages")  # both prompts and the first answer
        assert len(contents) == 3


if __name__ == "__main__":
    main()
