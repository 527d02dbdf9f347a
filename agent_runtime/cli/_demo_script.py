"""The demo's offline models: what each role says, with the latencies of a hosted model.

The orchestrator's script drives the story (delegate in parallel, re-ask a crashed critic,
hand over to the writer, answer). The subagents share one model, `RoleScripts`, that
answers each subagent from its role's script, told apart by the task the orchestrator gave
it (the first user message of its history): a spawned subagent starts from its task alone.
Every delay is multiplied by `pace` (tests run the same story faster).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent_runtime.llm.base import BaseChatModel, ChatModel
from agent_runtime.llm.errors import RateLimitError
from agent_runtime.llm.types import ChatRequest, ModelInfo, StreamChunk
from agent_runtime.messages import ToolCall, UserMessage
from agent_runtime.testing import ScriptedModel, ScriptedTurn

QUESTION = "Write a short brief: why run LLM agents under a supervision tree?"

ORCHESTRATOR_PROMPT = (
    "You lead a small team: a researcher, a critic and a writer, reached through the "
    "`delegate` tool (role and a complete task). Ask the researcher and the critic at once, "
    "then give their findings to the writer, then answer with the writer's brief."
)
SUBAGENT_PROMPT = (
    "You are one member of a team (researcher, critic or writer): do exactly the task you "
    "are given, briefly. The `search_notes` tool searches the team's notes."
)

TASKS = {
    "researcher": "Collect the facts: how do OTP-style supervisors keep LLM agents running?",
    "critic": "List the strongest objections to supervising LLM agents like OTP processes.",
    "writer": (
        "Draft a five-sentence brief from these findings: supervisors restart failed agents "
        "within a restart budget; a crash stays with the crashed agent; committed turns "
        "survive a restart. Caveat: an answer in flight is lost on a crash."
    ),
}
WRITER_RESUME = "You were interrupted: finish the brief you were drafting."
STEER = "Keep it to three points, and include how a crash stays isolated."

FINAL_ANSWER = (
    "Run LLM agents under a supervision tree because failures are ordinary: a provider "
    "drops a stream, a tool hangs, a process is killed. A supervisor restarts the failed "
    "agent within a restart budget, so a crash loop ends instead of spinning. A crash stays "
    "with the agent that crashed: its parent and its siblings keep working. Every committed "
    "turn is in session memory, so a restarted agent picks up where it was. What is lost is "
    "only the answer in flight, which the next run asks for again."
)


def _words(text: str) -> list[str]:
    """`text` as streamed deltas of one word each (with its trailing space)."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


def _delegate(call_id: str, role: str, task: str | None = None) -> ToolCall:
    return ToolCall(
        id=call_id, name="delegate", arguments={"role": role, "task": task or TASKS[role]}
    )


@dataclass(frozen=True)
class Pace:
    """Latencies of the scripted models, scaled by `factor`: time to first token, the gap
    between streamed words (~15 words/s) and the notes tool's lookup."""

    factor: float = 1.0

    def say(self, text: str, *, first: float = 0.45, gap: float = 0.065) -> ScriptedTurn:
        """A turn that streams `text` word by word."""
        return ScriptedTurn(
            chunks=_words(text), delay=first * self.factor, chunk_delay=gap * self.factor
        )

    def call(self, text: str, *calls: ToolCall, first: float = 0.45) -> ScriptedTurn:
        """A turn that streams `text`, then asks for `calls`."""
        return ScriptedTurn(
            chunks=_words(text),
            tool_calls=list(calls),
            delay=first * self.factor,
            chunk_delay=0.05 * self.factor,
        )

    @property
    def lookup(self) -> float:
        """Seconds the `search_notes` tool takes."""
        return 1.4 * self.factor


def orchestrator_model(pace: Pace) -> ScriptedModel:
    """The orchestrator's turns, in the order the demo's story plays them."""
    return ScriptedModel(
        [
            pace.call(
                "Two questions can run at once: facts from the researcher, objections from "
                "the critic.",
                _delegate("d1", "researcher"),
                _delegate("d2", "critic"),
            ),
            pace.call(
                "The critic crashed; the researcher was not touched. Asking a fresh critic.",
                _delegate("d3", "critic"),
            ),
            pace.call(
                "Both are in. Handing the findings to the writer.", _delegate("d4", "writer")
            ),
            # The operator aborts the run above while the writer drafts, then continues it:
            pace.call(
                "Resuming after the abort: the writer keeps what it drafted.",
                _delegate("d5", "writer", WRITER_RESUME),
            ),
            # This answer is cut short by a crash of the orchestrator, which is restarted
            # with its history and continued, so it is given again in full:
            pace.say(FINAL_ANSWER, gap=0.05),
            pace.say(FINAL_ANSWER, first=0.3, gap=0.03),
        ],
        model="scripted-orchestrator",
    )


def subagent_model(pace: Pace) -> RoleScripts:
    """The subagents' model: each role's turns, in the order the story asks for them."""
    researcher = ScriptedModel(
        [
            pace.call(
                "Checking the team's notes first.",
                ToolCall(id="s1", name="search_notes", arguments={"query": "supervisor restarts"}),
            ),
            pace.say(
                "Three points, as asked. One: a supervisor restarts a failed agent, "
                "one_for_one, so only that agent starts over. Two: a restart budget (3 "
                "in 5 s) stops crash loops. Three: a crash stays isolated: the parent and "
                "the siblings keep running.",
                first=0.35,
            ),
            # Only played if the steering message came after the notes lookup: it is then
            # delivered after the answer above, and answered here.
            pace.say("Noted: the three points above include how a crash stays isolated."),
        ],
        model="scripted-researcher",
    )
    critic = ScriptedModel(
        [
            # Crashed mid-answer by the demo's operator (long, so the crash is never late).
            pace.say(
                "Objections, strongest first. One: a restart replays only committed turns, "
                "so the answer in flight is lost and has to be asked for again. Two: "
                "supervision cannot fix a model that is confidently wrong; it only keeps the "
                "process alive. Three: restarts cost tokens when a long history is replayed "
                "into a fresh context. Four: a restart budget that is too generous hides a "
                "real fault behind a loop of quiet restarts, and one that is too strict gives "
                "up on an agent that only hit a passing network error.",
                gap=0.09,
            ),
            ScriptedTurn(
                delay=0.3 * pace.factor,
                error=RateLimitError("rate limited by the provider (scripted)"),
            ),
            pace.say(
                "Two caveats: an answer in flight is lost on a crash, only committed turns "
                "survive; and a supervisor cannot tell a wrong answer from a right one.",
                first=0.3,
            ),
        ],
        model="scripted-critic",
    )
    writer = ScriptedModel(
        [
            # Aborted mid-draft with its parent by the demo's operator (long, as above).
            pace.say(
                "Brief. LLM agents fail in ordinary ways: streams drop, tools hang, "
                "processes die, providers answer with rate limits at the worst moment. A "
                "supervision tree treats all of that as routine rather than as an "
                "emergency, because each agent is an actor with a supervisor that knows "
                "what to do when it exits: restart it, within a budget, or let it go, and "
                "in either case leave its parent and its siblings exactly as they were, "
                "with",
                gap=0.09,
            ),
            pace.say(
                "Brief. LLM agents fail in ordinary ways, so a supervision tree treats "
                "failure as routine: it restarts a failed agent within a restart budget, "
                "keeps a crash with the agent that crashed, and restores every committed "
                "turn from session memory. Only the answer in flight is lost.",
                first=0.35,
                gap=0.045,
            ),
        ],
        model="scripted-writer",
    )
    return RoleScripts({"researcher": researcher, "critic": critic, "writer": writer})


class RoleScripts(BaseChatModel):
    """A ChatModel for several roles: each call is answered by the script of the role whose
    task is the request's first user message (a request with another first message is an
    error that names the tasks it knows)."""

    def __init__(self, scripts: dict[str, ScriptedModel]) -> None:
        self.scripts = scripts
        self._info = ModelInfo(provider="scripted", model="scripted-subagents")

    @property
    def info(self) -> ModelInfo:
        """Provider `scripted`, every capability."""
        return self._info

    def role_of(self, request: ChatRequest) -> str:
        """The role whose task opens `request`.

        Raises:
            LookupError: no role's task opens it.
        """
        first = next((m.text for m in request.messages if isinstance(m, UserMessage)), "")
        for role, task in TASKS.items():
            if first == task:
                return role
        raise LookupError(f"no demo role has the task {first[:60]!r}")

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamChunk]:
        async for chunk in self.scripts[self.role_of(request)].stream(request):
            yield chunk


def offline_models(pace: Pace) -> tuple[ChatModel, ChatModel]:
    """The orchestrator's model and the subagents' model of the offline demo."""
    return orchestrator_model(pace), subagent_model(pace)
