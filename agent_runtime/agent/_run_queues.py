"""RunQueues: the steering and follow-ups a run delivers, owned by the run.

The run takes from it at its boundaries without asking its actor: the actor hands over
what it held when the run started, then pushes each new message in as it handles it
(`Pushed`, and mode changes as `ModeChanged`). What the run has not delivered when it ends
goes back to the actor with its end (`RunEnded`), ahead of anything queued since.
"""

from __future__ import annotations

from agent_runtime.agent._protocol import ModeChanged, Pushed, Queued, QueueKind
from agent_runtime.config import QueueMode


class RunQueues:
    """Two queues with their delivery modes; after `close()` they take nothing more.

    Guarantees: a message pushed before `close()` is either taken by `take` or returned by
    `close()`, once; `push` after `close()` returns False (the pusher keeps the message),
    so nothing pushed is lost and nothing is delivered twice.
    """

    __slots__ = ("closed", "follow_up_mode", "follow_ups", "steering", "steering_mode")

    def __init__(
        self,
        steering: tuple[Queued, ...],
        follow_ups: tuple[Queued, ...],
        steering_mode: QueueMode,
        follow_up_mode: QueueMode,
    ) -> None:
        self.steering = list(steering)
        self.follow_ups = list(follow_ups)
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.closed = False

    def _queue(self, kind: QueueKind) -> list[Queued]:
        return self.steering if kind == "steering" else self.follow_ups

    def deliver(self, message: Pushed | ModeChanged) -> bool:
        """Take a push from the actor; False once closed (the message is not taken)."""
        if self.closed:
            return False
        if isinstance(message, Pushed):
            self._queue(message.kind).append(message.queued)
        elif message.kind == "steering":
            self.steering_mode = message.mode
        else:
            self.follow_up_mode = message.mode
        return True

    def take(self, kind: QueueKind) -> list[Queued]:
        """What to deliver now, as the kind's mode says: all, or the oldest one."""
        queue = self._queue(kind)
        if not queue or self.closed:
            return []
        mode = self.steering_mode if kind == "steering" else self.follow_up_mode
        if mode == "all":
            taken = queue[:]
            queue.clear()
            return taken
        return [queue.pop(0)]

    def requeue(self, kind: QueueKind, items: tuple[Queued, ...]) -> bool:
        """Put taken, undelivered messages back first; False once closed."""
        if self.closed:
            return False
        self._queue(kind)[:0] = items
        return True

    def count(self, kind: QueueKind) -> int:
        return len(self._queue(kind))

    def queued(self, kind: QueueKind) -> tuple[Queued, ...]:
        return tuple(self._queue(kind))

    def close(self) -> tuple[tuple[Queued, ...], tuple[Queued, ...]]:
        """Stop taking pushes; what was not delivered, (steering, follow-ups), once."""
        if self.closed:
            return (), ()
        self.closed = True
        left = tuple(self.steering), tuple(self.follow_ups)
        self.steering.clear()
        self.follow_ups.clear()
        return left
