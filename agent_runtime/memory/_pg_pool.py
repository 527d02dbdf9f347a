"""A small pool of PostgreSQL connections for one `PostgresStore`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

Connect = Callable[[], "psycopg.Connection[Any]"]


class PoolTimeout(Exception):
    """Every connection of the pool stayed in use until the caller's deadline."""


class PoolClosed(Exception):
    """The pool was closed."""


class Pool:
    """Up to `size` connections, made by `connect` on demand and reused.

    Thread-safe: one condition guards the counts and the idle list, and is never held while
    connecting, closing a connection or talking to the server. A connection comes back with
    `release`; one that broke, or is left inside a transaction, is closed rather than reused,
    and the next `acquire` makes a new one. After `close()`, idle connections are closed at
    once and those in use when they come back.
    """

    def __init__(self, connect: Connect, size: int) -> None:
        self._connect = connect
        self.size = size
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[psycopg.Connection[Any]] = []
        self._count = 0  # connections made and not yet discarded (idle or in use)
        self._closed = False

    def acquire(self, deadline: float) -> tuple[psycopg.Connection[Any], bool]:
        """A connection, and whether it is new (made for this call, not reused).

        Raises:
            PoolClosed: the pool is closed.
            PoolTimeout: all `size` connections stayed in use until `deadline`.
            psycopg.Error: a new connection failed.
        """
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed
                if self._idle:
                    return self._idle.pop(), False
                if self._count < self.size:
                    self._count += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PoolTimeout
                self._cond.wait(left)
        try:
            return self._connect(), True
        except BaseException:
            self._forget()
            raise

    def release(self, conn: psycopg.Connection[Any]) -> None:
        """Give `conn` back: kept for reuse if it is healthy and idle, else closed."""
        from psycopg.pq import TransactionStatus

        healthy = (
            not conn.closed
            and not conn.broken
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        with self._cond:
            if healthy and not self._closed:
                self._idle.append(conn)
                self._cond.notify()
                return
        conn.close()
        self._forget()

    def close(self) -> None:
        """Close the idle connections now and the others as they come back. Idempotent."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            conn.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _forget(self) -> None:
        with self._cond:
            self._count -= 1
            self._cond.notify()
