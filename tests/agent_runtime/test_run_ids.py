"""Run ids: 16 hex digits, never repeated (across threads and a fork), read from the OS's
random source in blocks, not once per run."""

from __future__ import annotations

import os
import re
import threading

import pytest

from agent_runtime import _run_ids
from agent_runtime._run_ids import new_run_id

HEX16 = re.compile(r"[0-9a-f]{16}")


def test_ids_are_16_hex_digits_and_distinct_across_threads_and_blocks() -> None:
    made: list[list[str]] = [[] for _ in range(8)]

    def make(into: list[str]) -> None:
        into.extend(new_run_id() for _ in range(1000))  # several blocks per thread

    threads = [threading.Thread(target=make, args=(m,)) for m in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = [i for m in made for i in m]
    assert len(ids) == 8000
    assert all(HEX16.fullmatch(i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_burst_of_ids_reads_the_random_source_once_per_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[int] = []
    real = os.urandom
    me = threading.get_ident()

    def counted(n: int) -> bytes:
        if threading.get_ident() == me:  # other threads of the suite may read it too
            reads.append(n)
        return real(n)

    monkeypatch.setattr(_run_ids.os, "urandom", counted)
    _run_ids._pool.clear()
    ids = {new_run_id() for _ in range(600)}
    assert len(ids) == 600
    assert len(reads) == 3  # 256 ids a read, not one read an id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_hands_out_its_parents_next_ids() -> None:
    _run_ids._pool.clear()
    new_run_id()  # the parent now holds 255 ids it has not handed out
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave at once, whatever happens
        try:
            os.close(read)
            os.write(write, ",".join(new_run_id() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    _, status = os.waitpid(pid, 0)
    assert status == 0
    parent = {new_run_id() for _ in range(255)}
    assert len(child) == 10
    assert not child & parent
