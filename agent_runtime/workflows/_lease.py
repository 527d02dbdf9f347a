"""Leases of workflows between processes: who this process is (`new_owner`), and whether a
lease held by another owner still stands (`held_elsewhere`)."""

from __future__ import annotations

import contextlib
import os
import socket
import uuid

from agent_runtime.workflows._records import Lease

LEASE_SECONDS = 15.0
"""How long a lease lasts unless renewed (renewed every third of it while a step runs)."""


def _pid_namespace() -> str:
    with contextlib.suppress(OSError):
        return str(os.stat("/proc/self/ns/pid").st_ino)
    return "-"


def new_owner() -> str:
    """A new owner name: `host/pid-namespace/pid/random` (unique per `Workflows` object)."""
    return f"{socket.gethostname()}/{_pid_namespace()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def owner_gone(owner: str) -> bool:
    """Whether `owner` is known to be dead: a process of this host and pid namespace whose pid
    no longer exists. Unknown (another host, an unreadable name) is not gone."""
    parts = owner.split("/")
    if len(parts) != 4 or parts[0] != socket.gethostname() or parts[1] != _pid_namespace():
        return False
    if parts[1] == "-" or not parts[2].isdigit():
        return False
    pid = int(parts[2])
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists (not ours to signal)
        return False
    with contextlib.suppress(OSError, IndexError), open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    return False


def held_elsewhere(lease: Lease | None, owner: str, now: float) -> bool:
    """Whether `lease` keeps `owner` from taking the workflow at wall-clock time `now`: held by
    another owner, not expired, and that owner not known to be dead."""
    return (
        lease is not None
        and lease.owner != owner
        and lease.expires_at > now
        and not owner_gone(lease.owner)
    )
