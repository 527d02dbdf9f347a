"""AsyncioActor: a pykka actor whose messages are handled one at a time on an asyncio loop.

pykka lets new actor kinds plug in through three extension points (`_create_actor_inbox`,
`_create_future`, `_start_actor_loop`), as its GeventActor and EventletActor once did. This
kind has no thread of its own: its inbox schedules a drain of its messages on the loop it
was given, the way an Erlang process runs on a scheduler, so an idle actor costs a few
objects, not an OS thread.
"""

from __future__ import annotations

import asyncio
import collections
import collections.abc
import contextlib
import queue
import sys
import threading
import time
import uuid
from collections.abc import Generator
from typing import Any, ClassVar, Self, TypeVar

import pykka
from pykka import messages as pykka_messages
from pykka._envelope import Envelope
from pykka._future import _Unset

from supervisors._actor import ExitReason, ReportsExit
from supervisors._gate import Gate, made_once, wait_on_gate
from supervisors._step_watch import report_if_slow

T = TypeVar("T")

# Messages one drain handles before it yields the loop to other callbacks (an Erlang
# scheduler's reductions): an actor with a long mailbox never holds the loop for long.
DRAIN_BUDGET = 64

# Makes each lazy object here once. Reentrant, and no section allocates: a collection that
# starts inside one (at an allocation on 3.11, between steps on 3.12+) runs finalizers on this
# thread, and one of them may tell an actor or settle a future; a plain lock deadlocked there.
_waiters_lock = threading.RLock()
_running_loop = asyncio._get_running_loop  # the C accessor: ~30 ns, called per message


class _Flag(threading.Event):
    """A `threading.Event` that costs one bool until a thread waits on it.

    pykka's `actor_stopped` is an Event (pykka's refs read it); a real one is a Condition, a
    lock and a deque per actor. Here a thread that waits makes a `Gate` (one C lock), which
    `set` opens and lets go of: as for an ask's or a start's wait, a finalizer that a
    collection runs during the wait cannot hang it on the Event's own lock (3.13).
    """

    def __init__(self) -> None:  # threading.Event.__init__ deliberately not called
        self._is_set = False
        self._gate: Gate | None = None

    def __repr__(self) -> str:
        return f"<_Flag {'set' if self._is_set else 'unset'}>"

    def is_set(self) -> bool:
        return self._is_set

    isSet = is_set  # threading.Event's old alias

    def set(self) -> None:
        with _waiters_lock:
            self._is_set = True
            gate, self._gate = self._gate, None
        if gate is not None:  # opened once: it is no longer the flag's to open again
            gate.open()

    def clear(self) -> None:
        with _waiters_lock:
            self._is_set = False

    def wait(self, timeout: float | None = None) -> bool:
        return wait_on_gate(self, "_gate", self.is_set, _waiters_lock, timeout)


_UNSET = _Unset()


class LoopFuture(pykka.Future[T]):
    """The future of an `AsyncioActor`'s `ask`: settled from any thread, awaited on a loop.

    Guarantees:
    - `await future` on an event loop waits without blocking it (the future may be settled
      from any thread);
    - `get()` from a thread that runs no event loop blocks that thread only, up to `timeout`
      (`pykka.Timeout` then);
    - `get()` on a thread running an event loop returns a settled future's value, but raises
      `RuntimeError` instead of waiting for an unsettled one: waiting there would stop the
      loop that is to settle it (a deadlock); await it instead.
    """

    def __init__(self) -> None:  # pykka.Future.__init__ deliberately not called
        # Its fields, with one shared "no hook result" marker where it makes one per future:
        # an object for the cyclic collector per ask, and per idle agent (its cell's future).
        self._get_hook = None
        self._get_hook_result = _UNSET
        self._result: tuple[Any, Any] | None = None  # (value, exc_info or None)
        self._event: Gate | None = None  # made when a thread first blocks on it
        self._callbacks: list[collections.abc.Callable[[], None]] | None = None

    def __repr__(self) -> str:
        return f"<LoopFuture {'settled' if self._result is not None else 'pending'}>"

    def get(self, *, timeout: float | None = None) -> T:
        if self._get_hook is not None:
            return super().get(timeout=timeout)
        result = self._result
        if result is None:
            if _running_loop() is not None:
                raise RuntimeError(
                    "LoopFuture.get() called on a thread that runs an event loop: waiting "
                    "there would block the loop that is to answer; use `await future`"
                )
            if not self._block(timeout):
                raise pykka.Timeout(f"{timeout} seconds")
            result = self._result
            assert result is not None
        value, exc_info = result
        if exc_info is not None:
            exc_type, exc_value, exc_traceback = exc_info
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        return value  # type: ignore[no-any-return]

    def set(self, value: Any | None = None) -> None:
        self._settle((value, None))

    def set_exception(self, exc_info: Any = None) -> None:
        if exc_info is None:
            exc_info = sys.exc_info()
        self._settle((None, exc_info))

    def _settle(self, result: tuple[Any, Any]) -> None:
        with _waiters_lock:
            if self._result is not None or self._get_hook is not None:
                raise queue.Full  # as pykka's ThreadingFuture: a future is settled once
            self._result = result
            callbacks, self._callbacks = self._callbacks, None
            event = self._event
            if event is not None:  # its waiters hold it; the future need not
                self._event = None
        if event is not None:
            event.open()
        for callback in callbacks or ():
            callback()

    @property
    def settled(self) -> bool:
        """True once a value or an exception was set."""
        return self._result is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the future is settled; False if `timeout` passed
        first. Unlike `get()` it works on a thread that runs an event loop: for a short wait
        there on a future that another loop settles (never call it on the loop that is to
        settle it: that loop would stop)."""
        if self._result is not None or self._get_hook is not None:
            return True
        return self._block(timeout)

    def _block(self, timeout: float | None) -> bool:
        """Block this thread until the future is settled, on a `Gate` made by the first
        thread that waits (most asks are awaited on a loop, or answered before anyone
        waits: no gate, and no object per ask for the cyclic collector)."""
        return wait_on_gate(
            self, "_event", lambda: self._result is not None, _waiters_lock, timeout
        )

    def add_done_callback(self, fn: collections.abc.Callable[[LoopFuture[T]], None]) -> None:
        """Call `fn(self)` once the future is settled: at once if it is, else on the thread
        that settles it. An exception `fn` raises propagates to that thread."""
        callback = lambda: fn(self)  # noqa: E731
        if self._result is None and self._pending(callback):
            return
        fn(self)

    def _pending(self, callback: collections.abc.Callable[[], None]) -> bool:
        """Keep `callback` for the settling, if the future is not settled; True if kept."""
        fresh: list[collections.abc.Callable[[], None]] = []  # made outside the lock
        with _waiters_lock:
            if self._result is not None:
                return False
            if self._callbacks is None:
                self._callbacks = fresh
            self._callbacks.append(callback)
            return True

    def __await__(self) -> Generator[Any, None, T]:
        if self._result is None and self._get_hook is None:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake() -> None:
                if _running_loop() is loop:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    with contextlib.suppress(RuntimeError):  # its loop closed: nobody waits
                        loop.call_soon_threadsafe(_resolve, waiter)

            if self._pending(wake):
                yield from waiter.__await__()
        return self.get()

    __iter__ = __await__


def _name_of(message: Any) -> str:
    """What a handler is known by in the watchdog's log: the message's type, or for a proxy
    call the attribute it calls."""
    attr_path = getattr(message, "attr_path", None)
    if attr_path:
        return ".".join(attr_path)
    return type(message).__name__


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _LoopInbox:
    """An actor's mailbox: a deque, drained on the actor's loop.

    `put` from any thread appends, and schedules one drain if none is scheduled; the drain
    handles up to DRAIN_BUDGET messages per loop step. The `scheduled` flag is read and set
    without a lock: a drain that finds the deque empty clears it and looks once more, so a
    message put meanwhile is always drained (at worst by two drains, the second finding
    nothing).
    """

    __slots__ = ("_actor", "_loop", "_queue", "_scheduled")

    def __init__(self) -> None:
        # Made at the first message: an empty deque is ~760 bytes of each idle actor.
        self._queue: collections.deque[Envelope[Any]] | None = None
        self._actor: AsyncioActor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False

    def bind(self, actor: AsyncioActor, loop: asyncio.AbstractEventLoop) -> None:
        self._actor, self._loop = actor, loop

    def _made(self) -> collections.deque[Envelope[Any]]:
        """The deque, made once (two first puts from two threads must not make two)."""
        return made_once(self, "_queue", collections.deque, _waiters_lock)

    def put(self, envelope: Envelope[Any], /) -> None:
        queue = self._queue
        if queue is None:
            queue = self._made()
        queue.append(envelope)
        if self._actor is None:  # the actor finished: it can never handle this
            self.reject_all()
        elif not self._scheduled:
            self._scheduled = True
            self._schedule()

    def reject_all(self) -> None:
        """Fail every message left with ActorDeadError (its actor will never handle it)."""
        queue = self._queue
        if queue is None:
            return
        while True:
            try:
                envelope = queue.popleft()
            except IndexError:
                return
            reply = envelope.reply_to
            if reply is None:
                continue
            if isinstance(envelope.message, pykka_messages._ActorStop):
                reply.set(None)
                continue
            try:
                raise pykka.ActorDeadError("the actor stopped before handling the message")
            except pykka.ActorDeadError:
                reply.set_exception()

    def _schedule(self) -> None:
        loop = self._loop
        assert loop is not None
        try:
            if _running_loop() is loop:
                loop.call_soon(self._drain)
            else:
                loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: nothing will ever handle this actor
            actor = self._actor
            if actor is not None:
                actor._loop_gone()

    def get(self) -> Envelope[Any]:
        """The oldest message.

        Raises:
            IndexError: the inbox is empty.
        """
        queue = self._queue
        if queue is None:
            raise IndexError("empty inbox")
        return queue.popleft()

    def empty(self) -> bool:
        return not self._queue

    def _drain(self) -> None:
        actor = self._actor
        if actor is None or not actor._started:
            self._scheduled = False
            return
        queue = self._queue
        if queue is None:
            queue = self._made()
        for _ in range(DRAIN_BUDGET):
            if actor.actor_stopped.is_set():
                self._scheduled = False
                actor._finish()
                return
            try:
                envelope = queue.popleft()
            except IndexError:
                self._scheduled = False
                if not queue:
                    return
                self._scheduled = True
                continue
            actor._handle_one(envelope)
        if actor.actor_stopped.is_set():
            self._scheduled = False
            actor._finish()
        elif queue:
            self._schedule()  # the rest in a later step: other callbacks go first
        else:
            self._scheduled = False
            if queue:  # put after the check above, and its putter saw `scheduled`
                self._scheduled = True
                self._schedule()

    def unbind(self) -> None:
        self._actor = None


class AsyncioActor(ReportsExit, pykka.Actor):
    """A pykka actor whose messages are handled one at a time by its event loop.

    Same `ActorRef`, `tell`, `ask`, proxies and `ActorRegistry` as any pykka actor, but no
    thread: `start(..., loop=loop)` (default: the running loop) binds it to `loop`, whose
    thread runs `on_start`, every handler, `on_stop` and `on_exit`.

    Guarantees:
    - Messages are handled in the order they were put, one at a time, at most DRAIN_BUDGET
      per loop step (other tasks and callbacks run in between).
    - Handlers are synchronous: one that returns an awaitable raises `TypeError` (to the
      caller of `ask`; a `tell` handler crashes the actor), and the awaitable is closed.
    - `ask(...)` returns a `LoopFuture`: `get()` from another thread blocks that thread only;
      on the loop it is awaited (`await ref.ask(msg, block=False)`), and a blocking `get()`
      there raises RuntimeError instead of deadlocking.
    - Started on its loop's thread, `on_start` runs before `start` returns; from another
      thread it runs soon on the loop (`wait_initialized` waits for it).
    - It is supervisable as `SupervisedActor` children are: exit reasons (`normal`, `crash`
      for an exception escaping a `tell` handler, `on_start` or `on_stop`, `killed`),
      monitors, `kill` from any thread.
    - `use_actor_registry = False` on a subclass keeps its actors out of pykka's global
      `ActorRegistry` (a list behind a lock, whose unregister is linear in its size).
    - Should its loop be closed under it, the actor exits abnormally ("event loop closed")
      at the next message put.
    """

    use_actor_registry: ClassVar[bool] = True

    _loop: asyncio.AbstractEventLoop
    _initialized_gate: Gate | None = None  # made when a thread waits for the start

    @classmethod
    def start(  # adds the `loop` keyword
        cls, *args: Any, loop: asyncio.AbstractEventLoop | None = None, **kwargs: Any
    ) -> pykka.ActorRef[Self]:
        """Start an actor on `loop` (default: the running loop); see pykka's `Actor.start`.

        Raises:
            RuntimeError: no `loop` given and none is running, or `loop` is closed.
        """
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise RuntimeError(
                    f"{cls.__name__}.start() needs an event loop: pass loop=... or call it "
                    "from a coroutine running on the loop"
                ) from None
        if loop.is_closed():
            raise RuntimeError(f"{cls.__name__}.start(): the event loop is closed")
        obj = cls.__new__(cls)
        obj._loop = loop  # before __init__: the inbox is bound to it there
        obj.__init__(*args, **kwargs)  # type: ignore[misc]
        if cls.use_actor_registry:
            pykka.ActorRegistry.register(obj.actor_ref)
        obj._start_actor_loop()
        return obj.actor_ref

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        # pykka.Actor.__init__'s fields, with a light Event (see _Flag) and a bound inbox.
        self.actor_urn = uuid.uuid4().urn
        inbox = _LoopInbox()
        self.actor_inbox = inbox
        self.actor_stopped = _Flag()
        self._actor_ref = pykka.ActorRef(self)
        self._started = False
        self._handling = False
        self._finished = False
        self._initialized = False  # on_start has returned or failed (or the actor ended)
        self._init_exit_reporting()
        inbox.bind(self, self._loop)

    @property
    def actor_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop this actor's messages are handled on."""
        return self._loop

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Block until `on_start` has returned or failed; False if `timeout` passed first.
        The gate it waits on is made by the first thread that waits (most starts are not
        waited for from another thread: no object per actor for the cyclic collector)."""
        return wait_on_gate(
            self, "_initialized_gate", lambda: self._initialized, _waiters_lock, timeout
        )

    def _mark_initialized(self) -> None:
        with _waiters_lock:
            self._initialized = True
            gate = self._initialized_gate
            if gate is not None:  # its waiters hold it; the actor need not
                self._initialized_gate = None
        if gate is not None:
            gate.open()

    def on_loop_thread(self) -> bool:
        """True when called on the thread running this actor's loop."""
        return _running_loop() is self._loop

    @staticmethod
    def _create_actor_inbox() -> _LoopInbox:
        return _LoopInbox()

    @staticmethod
    def _create_future() -> LoopFuture[Any]:
        return LoopFuture()

    def _start_actor_loop(self) -> None:
        if self.on_loop_thread():
            self._begin()
        else:
            self._loop.call_soon_threadsafe(self._begin)

    # -- on the loop ------------------------------------------------------------------------

    def _begin(self) -> None:
        try:
            self.on_start()
        except BaseException:  # an on_start failure of any kind is a crash
            self._handle_failure(*sys.exc_info())
        self._started = True
        self._mark_initialized()
        if self.actor_stopped.is_set():
            self._finish()
        elif not self.actor_inbox.empty():
            inbox = self.actor_inbox
            assert isinstance(inbox, _LoopInbox)
            inbox._scheduled = True
            inbox._schedule()

    def _handle_one(self, envelope: Envelope[Any]) -> None:
        self._handling = True
        started = time.thread_time() if self._loop.get_debug() else None
        try:
            self._handle_envelope(envelope)
        finally:
            self._handling = False
            if started is not None:
                report_if_slow(f"{type(self).__name__}:{_name_of(envelope.message)}", started)

    def _handle_receive(self, message: Any) -> Any:
        result = super()._handle_receive(message)
        if result is not None and isinstance(result, collections.abc.Awaitable):
            if isinstance(result, collections.abc.Coroutine):
                result.close()
            raise TypeError(
                f"{type(self).__name__} handler returned an awaitable ({type(result).__name__}): "
                "AsyncioActor handlers are synchronous; start a task for async work and tell "
                "the actor its result"
            )
        return result

    def handle_now(self, message: Any) -> Any:
        """Handle `message` at once, on this actor's loop thread, after the messages already
        in the inbox (a sync call made on the loop, where waiting for an answer is impossible).

        Raises:
            RuntimeError: not on this actor's loop thread, or inside this actor's own
                handler (a handler cannot call itself).
            pykka.ActorDeadError: the actor has stopped.
            Exception: what the handler raised (the actor goes on, as for an `ask`).
        """
        if not self.on_loop_thread():
            raise RuntimeError("handle_now() must be called on the actor's event-loop thread")
        if self._handling or not self._started:
            raise RuntimeError(f"{self} cannot handle a message inside its own handler")
        inbox = self.actor_inbox
        assert isinstance(inbox, _LoopInbox)
        while not self.actor_stopped.is_set():  # what was sent before, first (mailbox order)
            try:
                envelope = inbox.get()
            except IndexError:
                break
            self._handle_one(envelope)
        if self.actor_stopped.is_set():
            self._finish()
            raise pykka.ActorDeadError(f"{self.actor_ref} not found")
        future: LoopFuture[Any] = LoopFuture()
        self._handle_one(Envelope(message, reply_to=future))
        if self.actor_stopped.is_set():
            self._finish()
        return future.get()

    def stop_now(self) -> None:
        """Stop at once, on this actor's loop thread: `on_stop`, then messages still in the
        inbox fail with ActorDeadError, then the exit is reported. Does nothing if it has
        stopped already. A handler calling it on its own actor stops the actor once the
        handler returns.

        Raises:
            RuntimeError: not on this actor's loop thread.
        """
        if not self.on_loop_thread():
            raise RuntimeError("stop_now() must be called on the actor's event-loop thread")
        if self.actor_stopped.is_set():
            if not self._handling:
                self._finish()
            return
        try:
            self._stop()
        except BaseException as exc:
            self._record_reason(ExitReason("crash", f"on_stop failed: {exc!r}", exc))
            self.actor_stopped.set()
        if not self._handling:
            self._finish()
        else:
            self._wake()

    def _finish(self) -> None:
        """The actor has stopped (normally, crashed or killed): fail what is left in the
        inbox, report the exit, run `on_exit`. Once."""
        if self._finished:
            return
        self._finished = True
        self._mark_initialized()
        inbox = self.actor_inbox
        assert isinstance(inbox, _LoopInbox)
        # Unbound first: a message put from now on is failed by its `put`, one put before
        # by the teardown (a reply is never left waiting for an actor that is gone).
        inbox.unbind()
        self._actor_loop_teardown()
        self._run_on_exit(self._fire_exit())

    def _actor_loop_teardown(self) -> None:
        inbox = self.actor_inbox
        assert isinstance(inbox, _LoopInbox)
        inbox.reject_all()

    def _loop_gone(self) -> None:
        """The loop was closed: this actor can never handle another message."""
        self._exit_abnormally(ExitReason("crash", "event loop closed"))
        if not self._finished:
            self._finished = True
            self._mark_initialized()
            inbox = self.actor_inbox
            assert isinstance(inbox, _LoopInbox)
            inbox.unbind()
            inbox.reject_all()

    def _wake(self) -> None:
        if not self._finished:
            super()._wake()
