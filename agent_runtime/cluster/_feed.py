"""Feed: the buffer of one cluster subscription and the thread that fills it from the node.

The feed pulls the node's buffered events in batches (never one Ray call per event), only as
many as its own buffer (of the subscription's `max_queue`) has room for, so a slow reader's
backpressure reaches the node, where the subscription's overflow policy applies as it would
locally. It holds no reference to the `ClusterSubscription` that reads it: a subscription
dropped by its reader is collected, which closes its feed.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import Any

from agent_runtime._errors import StreamOverflow
from agent_runtime._key import AgentKey
from agent_runtime.cluster._host import ClusterHost
from agent_runtime.cluster._node import UNKNOWN_SUBSCRIPTION, Pulled
from agent_runtime.cluster._ray import get, node_failure
from agent_runtime.cluster._wire import RemoteError, decode_events
from agent_runtime.event_stream import OverflowPolicy
from agent_runtime.events import AgentStart, Error, Event, is_terminal
from supervisors._log import get_logger

log = get_logger(__name__)

NODE_LOST = "node_lost"
"""The `Error.reason` a run gets when its node is lost mid-run."""

OVERFLOW_PREFIX = "subscriber_overflow"
PULL_WAIT = 0.5  # seconds a pull waits on the node for a first event: bounds close latency
PULL_TIMEOUT = 30.0  # seconds for a pull's answer before it is asked again
RELOCATE_TIMEOUT = 60.0  # seconds to wait for a lost transient agent to come back
RELOCATE_POLL = 0.1  # seconds between looks at the registry while it comes back


class Feed:
    """One subscription's events on their way from a node to this process (thread-safe)."""

    def __init__(
        self,
        cluster: ClusterHost,
        key: AgentKey,
        max_queue: int,
        overflow: OverflowPolicy,
        block_timeout: float,
    ) -> None:
        self.key = key
        self.max_queue = max_queue
        self._options = (max_queue, overflow, block_timeout)
        self._cluster = cluster
        self._cond = threading.Condition()
        self._buffer: collections.deque[Event] = collections.deque()
        self.end: str | None = None  # why it ended; None while open
        self._closing = False
        self._open_runs: set[str] = set()
        self._ended_runs: collections.deque[str] = collections.deque(maxlen=64)
        self._node, self.incarnation, self._sub_id = self._attach()
        self._thread = threading.Thread(
            target=self._pump, name=f"cluster-feed-{key.session}/{key.role}", daemon=True
        )
        self._thread.start()

    # -- the node side ------------------------------------------------------------------------

    def _attach(self) -> tuple[Any, str, str]:
        """Subscribe on the node that runs the agent now: (node, its incarnation, sub id).

        Raises:
            AgentStopped: no such agent; ValueError: a bad bound or policy (from the node).
        """
        node, incarnation = self._cluster._locate(self.key)
        answer = get(node.subscribe.remote(self.key, *self._options), PULL_TIMEOUT)
        if isinstance(answer, RemoteError):
            raise answer.rebuild()
        return node, incarnation, str(answer)

    def _pump(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._closing or len(self._buffer) < self.max_queue, PULL_WAIT
                )
                if self._closing:
                    break
                room = self.max_queue - len(self._buffer)
            if room <= 0:
                continue
            try:
                pulled: Pulled = get(
                    self._node.pull.remote(self._sub_id, room, PULL_WAIT), PULL_TIMEOUT
                )
            except TimeoutError:
                continue  # a busy node: ask again (a dead one fails the call instead)
            except Exception as exc:
                if not node_failure(exc):
                    log.exception("cluster.subscription.pull_failed", agent=tuple(self.key))
                    self.finish(f"pull_failed: {exc}")
                    return
                if self._lost():
                    continue
                return
            self._take(decode_events(pulled.events), pulled.running)
            if pulled.end == UNKNOWN_SUBSCRIPTION:  # a new incarnation: the old one was lost
                if self._lost():
                    continue
                return
            if pulled.end is not None:
                self.finish(pulled.end)
                return
        with contextlib.suppress(Exception):
            self._node.unsubscribe.remote(self._sub_id)

    def _take(self, events: list[Event], running: str | None) -> None:
        with self._cond:
            for event in events:
                if event.agent == self.key:
                    if isinstance(event, AgentStart):
                        self._open_runs.add(event.run_id)
                    elif is_terminal(event):
                        self._open_runs.discard(event.run_id)
                        self._ended_runs.append(event.run_id)
                self._buffer.append(event)
            if running is not None and running not in self._ended_runs:
                self._open_runs.add(running)
            self._cond.notify_all()

    def expect(self, run_id: str) -> None:
        """Count `run_id` as running (its handle started it): a node loss ends it here."""
        with self._cond:
            if run_id not in self._ended_runs:
                self._open_runs.add(run_id)

    def _lost(self) -> bool:
        """The node was lost: end its open runs with `node_lost`, then follow the agent to
        its next node; False (and the feed ended) if it does not come back."""
        with self._cond:
            runs = sorted(self._open_runs)
            self._open_runs.clear()
            for run_id in runs:
                self._buffer.append(Error(agent=self.key, run_id=run_id, reason=NODE_LOST))
                self._ended_runs.append(run_id)
            self._cond.notify_all()
        log.warning("cluster.subscription.node_lost", agent=tuple(self.key), runs=runs)
        deadline = time.monotonic() + RELOCATE_TIMEOUT
        while time.monotonic() < deadline and not self._closing:
            where = self._cluster._whereabouts(self.key, self.incarnation)
            if where == "gone":
                break
            if where == "moved":
                try:
                    self._node, self.incarnation, self._sub_id = self._attach()
                    return True
                except Exception:
                    log.debug("cluster.subscription.reattach_failed", agent=tuple(self.key))
            time.sleep(RELOCATE_POLL)
        self.finish("agent_lost")
        return False

    def finish(self, end: str) -> None:
        """End the feed with `end` (the first end wins); the reader gets what is buffered."""
        with self._cond:
            if self.end is None:
                self.end = end
            self._cond.notify_all()

    def close(self) -> None:
        """Stop pulling and unsubscribe on the node; idempotent."""
        with self._cond:
            self._closing = True
            if self.end is None:
                self.end = "unsubscribed"
            self._cond.notify_all()

    # -- the reader side ----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closing or self.end is not None

    def next(self, deadline: float | None) -> Event | None:
        """The next event; None at the end (buffer drained) or on timeout."""
        with self._cond:
            while not self._buffer:
                if self.end is not None:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            event = self._buffer.popleft()
            self._cond.notify_all()  # room for the pump
            return event

    def drained(self) -> bool:
        """True once ended and every event was read.

        Raises:
            StreamOverflow: it ended because the reader fell behind.
        """
        with self._cond:
            if self._buffer or self.end is None:
                return False
            if self.end.startswith(OVERFLOW_PREFIX):
                raise StreamOverflow(f"subscription closed: {self.end}")
            return True
