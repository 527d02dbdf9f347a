"""The demo's operator: the story it plays on a running orchestrator, and what it checks.

The orchestrator delegates to a researcher and a critic at once; the operator steers the
researcher mid-run and crashes the critic (its parent and sibling go on); the orchestrator
re-asks a fresh critic, hands over to the writer, and is aborted while the writer drafts,
then continued; while it gives its answer it is crashed, and being `transient` it is
restarted with its history and continued, and answers.

Each action waits (with a deadline) for the moment it is meant for, seen in the journal.
With scripted models every moment comes; with a real model (`--model`) one may not (the
model did not delegate, say): the step is then reported as skipped, not failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_runtime._errors import AgentStopped, CannotContinue
from agent_runtime._key import AgentKey
from agent_runtime.agent import Agent
from agent_runtime.cli._demo_script import QUESTION, STEER
from agent_runtime.cli._journal import Journal, RunSpan, who
from agent_runtime.loop import validate_transcript
from agent_runtime.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from agent_runtime.runtime import Runtime
from agent_runtime.testing import wait_until
from supervisors import kill

STEPS = 5


@dataclass(frozen=True)
class Check:
    """One promise of the demo: held (True), broken (False) or not shown (None: skipped)."""

    name: str
    held: bool | None
    detail: str = ""


@dataclass(frozen=True)
class Outcome:
    """What the operator saw: its checks and the orchestrator's final answer ('' if none)."""

    checks: list[Check]
    answer: str


class Operator:
    """Plays the story on `orchestrator` (already started, idle) and checks each promise.

    `timeout` bounds every wait for a moment of the story; `announce(step)` is called as
    each step begins (the view shows it).
    """

    def __init__(
        self,
        runtime: Runtime,
        orchestrator: Agent,
        journal: Journal,
        *,
        timeout: float,
        announce: Callable[[str], None] = lambda step: None,
    ) -> None:
        self.runtime = runtime
        self.orchestrator = orchestrator
        self.journal = journal
        self.timeout = timeout
        self.announce = announce
        self.checks: list[Check] = []

    # -- what the journal shows -----------------------------------------------------------------

    def _spans(self, key: AgentKey) -> list[RunSpan]:
        tally = self.journal.tallies().get(key)
        return tally.runs if tally is not None else []

    def _running(self, role: str) -> AgentKey | None:
        for key, tally in self.journal.tallies().items():
            if key.role == role and tally.runs and tally.runs[-1].end is None:
                return key
        return None

    def _streamed(self, role: str, words: int = 8) -> AgentKey | None:
        key = self._running(role)
        if key is not None and len(self.journal.preview(key).split()) >= words:
            return key
        return None

    def _orchestrator_idle(self) -> bool:
        spans = self._spans(self.orchestrator.key)
        return bool(spans) and spans[-1].end is not None

    def _await(self, what: str, found: Callable[[], object]) -> bool:
        """Wait until `found()` is truthy; False (noted) if the orchestrator's run ended or
        the deadline passed first."""
        reached = self.journal.wait_for(
            lambda _: bool(found()) or self._orchestrator_idle(), self.timeout
        )
        if reached and found():
            return True
        self.journal.note(f"skipped: {what} did not happen", style="yellow")
        return False

    def _check(self, name: str, held: bool | None, detail: str = "") -> None:
        self.checks.append(Check(name, held, detail))
        mark = {True: "✔", False: "✘", None: "-"}[held]
        style = {True: "bold green", False: "bold red", None: "yellow"}[held]
        self.journal.note(f"{mark} {name}{': ' + detail if detail else ''}", style=style)

    def _step(self, number: int, title: str) -> None:
        step = f"step {number}/{STEPS}: {title}"
        self.announce(step)
        self.journal.note(f"── {step}", style="bold")

    def _agent(self, key: AgentKey) -> Agent | None:
        found = self.runtime.registry.lookup(key)
        return found if isinstance(found, Agent) else None

    # -- the story ------------------------------------------------------------------------------

    def play(self) -> Outcome:
        """Play every step; returns the checks and the final answer."""
        self._delegate_and_steer()
        self._crash_a_subagent()
        self._abort_and_continue()
        self._restart_transient()
        return Outcome(self.checks, self._answer())

    def _delegate_and_steer(self) -> None:
        self._step(1, "the orchestrator delegates to a researcher and a critic at once")
        self._started(self.orchestrator.prompt(QUESTION))
        if not self._await("a researcher run", lambda: self._running("researcher")):
            self._check("the researcher was steered mid-run", None, "no researcher ran")
            return
        key = self._running("researcher")
        researcher = self._agent(key) if key is not None else None
        if researcher is None:
            return
        self.journal.note(f"steering {who(researcher.key)}: {STEER}")
        researcher.steer(STEER)

    def _crash_a_subagent(self) -> None:
        self._step(2, "a crash of a subagent leaves its parent untouched")
        key = None
        if self._await("a critic answering", lambda: self._streamed("critic")):
            key = self._streamed("critic") or self._running("critic")
        critic = self._agent(key) if key is not None else None
        if critic is None:
            self._check("a crashed subagent left its parent untouched", None, "no critic ran")
        else:
            others = {
                k for k, t in self.journal.tallies().items() if t.runs and t.runs[-1].end is None
            }
            self.journal.note(f"crashing {who(critic.key)} (supervisors.kill: an abnormal exit)")
            kill(critic.ref, "demo: simulated crash")
            crashed = self.journal.wait_for(
                lambda _: self._spans(critic.key)[-1].outcome == "failed", self.timeout
            )
            parent_running = not self._orchestrator_idle() and self.orchestrator.alive
            siblings = sorted(
                who(k)
                for k in others - {critic.key, self.orchestrator.key}
                if self._spans(k)[-1].outcome in ("", "completed")
            )
            self._check(
                "a crashed subagent left its parent untouched",
                crashed and parent_running,
                f"{who(critic.key)} {'crashed' if crashed else 'did not crash'}; "
                f"{who(self.orchestrator.key)} {'still' if parent_running else 'not'} running"
                + (f"; {', '.join(siblings)} unaffected" if siblings else ""),
            )
        self._researcher_checks()

    def _researcher_checks(self) -> None:
        researchers = [k for k in self.journal.tallies() if k.role == "researcher"]
        if not researchers:
            self._check("two subagents ran in parallel", None, "no researcher ran")
            return
        key = researchers[0]
        self._await("the researcher's answer", lambda: self._spans(key)[-1].end is not None)
        researcher = self._agent(key)
        history: list[Message] = researcher.state().messages if researcher is not None else []
        at = next(
            (i for i, m in enumerate(history) if isinstance(m, UserMessage) and m.text == STEER),
            None,
        )
        if at is None:
            detail = "the steering message is not in its history"
        elif at > 0 and isinstance(history[at - 1], ToolResultMessage):
            detail = "the steering message entered its context at a tool boundary"
        else:
            detail = "the steering message entered its context after an answer"
        self._check("the researcher was steered mid-run", at is not None, detail)
        critics = [k for k in self.journal.tallies() if k.role == "critic"]
        if critics:
            mine, theirs = self._spans(key)[0], self._spans(critics[0])[0]
            overlap = _overlap(mine, theirs)
            self._check(
                "two subagents ran in parallel",
                overlap > 0,
                f"{who(key)} and {who(critics[0])} overlapped for {overlap:.1f} s",
            )

    def _abort_and_continue(self) -> None:
        self._step(3, "abort the orchestrator while the writer drafts, then continue")
        if not self._await("a writer drafting", lambda: self._streamed("writer")):
            self._check("an aborted run was continued", None, "no writer ran")
            return
        writer = self._streamed("writer") or self._running("writer")
        self.journal.note(f"aborting {who(self.orchestrator.key)} (and with it its delegates)")
        self.orchestrator.abort("demo: operator abort")
        self.orchestrator.wait_for_idle(self.timeout)
        history = self.orchestrator.state().messages
        problems = validate_transcript(history)
        writer_canceled = writer is not None and self.journal.wait_for(
            lambda _: self._spans(writer)[-1].outcome == "canceled", self.timeout
        )
        self._check(
            "an abort left a valid transcript",
            not problems and writer_canceled,
            "; ".join(problems or ["every tool call paired"])
            + ("; the writer's run was canceled with it" if writer_canceled else "")
            + ("" if writer_canceled else "; the writer's run was not canceled"),
        )
        self.journal.note(f"{who(self.orchestrator.key)}.continue_run()")
        try:
            self._started(self.orchestrator.continue_run())
        except CannotContinue as exc:
            self._check("an aborted run was continued", False, str(exc))
            return
        self._check("an aborted run was continued", True, "from the history the abort left")

    def _restart_transient(self) -> None:
        self._step(4, "a transient agent is restarted with its history")
        orchestrator = self.orchestrator
        # Its final answer: streaming, after the writer (if any) finished its work.
        self.journal.wait_for(
            lambda _: self._orchestrator_idle() or self._answering(), self.timeout
        )
        old = orchestrator.ref
        idle = self._orchestrator_idle()
        self.journal.note(
            f"crashing {who(orchestrator.key)}{' (idle)' if idle else ''}: "
            "it is transient, so its supervisor restarts it"
        )
        kill(old, "demo: simulated crash")
        try:
            wait_until(
                lambda: orchestrator.alive and orchestrator.ref is not old,
                timeout=self.timeout,
                what="the orchestrator restarted",
            )
            history = orchestrator.state().messages
        except (TimeoutError, AgentStopped) as exc:
            self._check("a transient agent was restarted with its history", False, str(exc))
            return
        results = sum(1 for m in history if isinstance(m, ToolResultMessage))
        self._check(
            "a transient agent was restarted with its history",
            bool(history) and not validate_transcript(history),
            f"same key, new actor, {_count(len(history), 'message')} "
            f"({_count(results, 'tool result')}) restored from session memory",
        )
        self._step(5, "the orchestrator answers")
        if history and not isinstance(history[-1], AssistantMessage):
            self.journal.note(f"{who(orchestrator.key)}.continue_run()")
            self._started(orchestrator.continue_run())

    def _answering(self) -> bool:
        key = self.orchestrator.key
        if len(self.journal.preview(key).split()) < 6:
            return False
        writers = [t.runs for k, t in self.journal.tallies().items() if k.role == "writer"]
        spans = [s for runs in writers for s in runs]
        done = all(s.end is not None for s in spans)
        return done and (not spans or any(s.outcome == "completed" for s in spans))

    def _started(self, run_id: str) -> None:
        """Wait until the journal saw run `run_id` of the orchestrator start."""
        key = self.orchestrator.key
        self.journal.wait_for(
            lambda _: any(s.run_id == run_id for s in self._spans(key)), self.timeout
        )

    def _answer(self) -> str:
        try:
            self.orchestrator.wait_for_idle(self.timeout)
            history = self.orchestrator.state().messages
        except (TimeoutError, AgentStopped) as exc:
            self._check("the orchestrator answered", False, str(exc))
            return ""
        last = history[-1] if history else None
        answer = last.text if isinstance(last, AssistantMessage) else ""
        self._check("the orchestrator answered", bool(answer.strip()), f"{len(answer)} characters")
        return answer


def _overlap(a: RunSpan, b: RunSpan) -> float:
    end_a = a.end if a.end is not None else float("inf")
    end_b = b.end if b.end is not None else float("inf")
    return max(0.0, min(end_a, end_b) - max(a.start, b.start))


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"
