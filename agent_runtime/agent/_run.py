"""One run as the actor and the run's driver share it: its inbox of queued messages and its view.

Each field has one writer, named in its comment; readers on other threads see whole values
(reference swaps, and deque appends and pops, which CPython makes atomic).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

from agent_runtime.abort import AbortSignal
from agent_runtime.config import QueueMode
from agent_runtime.events import Event, MessageStart, MessageUpdate
from agent_runtime.messages import AssistantMessage, Message


@dataclass(frozen=True)
class Queued:
    """A steering or follow-up message, with the system prompt that travels with it."""

    message: Message
    system_prompt: str | None = None


class RunInbox:
    """The steering and follow-up messages of one run: the actor appends, the loop takes.

    A message taken with a system prompt makes that prompt the run's from the model call that
    message goes into, for the rest of the run (the agent's own prompt stays as it is).
    """

    def __init__(
        self,
        system_prompt: str,
        steering_mode: QueueMode,
        follow_up_mode: QueueMode,
        steering: Iterable[Queued] = (),
        follow_ups: Iterable[Queued] = (),
    ) -> None:
        self.steering: deque[Queued] = deque(steering)  # actor appends, loop pops
        self.follow_ups: deque[Queued] = deque(follow_ups)  # actor appends, loop pops
        self.steering_mode = steering_mode  # actor
        self.follow_up_mode = follow_up_mode  # actor
        self.system_prompt = system_prompt  # loop (when a message carries one), actor (set_*)
        self.taken: dict[int, Queued] = {}  # loop: taken by id(message), for what comes back
        # loop: it found no follow-up when it would stop, so whatever is queued from then on
        # arrived too late for it and starts the next run.
        self.ending = False

    def take_steering(self) -> list[Message]:
        """For `LoopConfig.get_steering_messages` (on the loop thread)."""
        return self._take(self.steering, self.steering_mode)

    def take_follow_ups(self) -> list[Message]:
        """For `LoopConfig.get_follow_up_messages` (on the loop thread)."""
        taken = self._take(self.follow_ups, self.follow_up_mode)
        self.ending = not taken
        return taken

    def returned(self, messages: list[Message]) -> list[Queued]:
        """Messages the run took but could not deliver, with the prompts they came with."""
        return [self.taken.pop(id(m), Queued(m)) for m in messages]

    def current_system_prompt(self) -> str:
        """For `LoopConfig.get_system_prompt` (on the loop thread)."""
        return self.system_prompt

    def _take(self, queue: deque[Queued], mode: QueueMode) -> list[Message]:
        taken: list[Message] = []
        while True:
            try:
                item = queue.popleft()
            except IndexError:
                break
            taken.append(item.message)
            self.taken[id(item.message)] = item
            if item.system_prompt is not None:
                self.system_prompt = item.system_prompt
            if mode != "all":
                break
        return taken


class RunView:
    """What the actor, the run's driver and the agent's exit monitor share of one run."""

    def __init__(
        self,
        run_id: str,
        signal: AbortSignal,
        inbox: RunInbox,
        outcome: Future[Event] | None = None,
    ) -> None:
        self.run_id = run_id
        self.signal = signal
        self.inbox = inbox
        # driver: the latest MessageStart/MessageUpdate of the answer streaming now (its message
        # is made only when someone asks for it: state())
        self.stream_event: MessageStart | MessageUpdate | None = None
        self.crashed: str | None = None  # exit monitor: the actor crashed during the run
        self.ended: Future[Event] = Future()  # actor (or driver, if first): the state shows the end
        # actor, under the shell's lock: it handled the run's end (its driver offers no ticket
        # then: the actor offered its own, or started another run)
        self.end_handled = False
        # driver: its end was delivered (run() returns); a reserved start brings its caller's
        self.outcome: Future[Event] = Future() if outcome is None else outcome

    @property
    def stream_message(self) -> AssistantMessage | None:
        """The answer streaming now, as far as it got."""
        event = self.stream_event
        message = event.message if event is not None else None
        return message if isinstance(message, AssistantMessage) else None

    def crash(self, reason: str) -> None:
        """The agent's actor crashed: end the run with `Error("agent_crashed: ...")`."""
        self.crashed = reason
        self.signal.abort(f"agent_crashed: {reason}")


@dataclass
class ReservedRun:
    """A run started with the agent's start ticket: its id and its outcome, as `RunView`
    has them (the actor makes the view, with this outcome, when the start arrives).
    `started` is set by the actor once the run's driver was launched: from then on the run
    ends through it, whatever happens to the start's reply."""

    run_id: str
    outcome: Future[Event] = field(default_factory=Future)
    started: bool = False


def take_all(queue: deque[Queued]) -> list[Queued]:
    """Empty `queue` (from the actor), oldest first."""
    items: list[Queued] = []
    while True:
        try:
            items.append(queue.popleft())
        except IndexError:
            return items
