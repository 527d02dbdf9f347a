"""The config file as `ProviderConfiguration` reads and replaces it: revisions, lock, atomic writes.

- `revision(data)` is a digest of the file's bytes: equal bytes, equal revision.
- `locked(path)` holds an exclusive `flock` on the file (POSIX; on Windows no lock is taken),
  so writers through this module take turns; it re-opens the file when a writer replaced it
  while it waited, so what it hands out is what the path holds now.
- `replace_file(path, data)` writes a temporary file beside it, syncs it and renames it over the
  path: a reader (or a crash) sees the old file or the new one, never a part; the file's
  permission bits are kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agent_runtime._errors import ConfigError

if sys.platform != "win32":
    import fcntl


def revision(data: bytes) -> str:
    """An opaque token of the file's contents (a truncated SHA-256 of its bytes)."""
    return hashlib.sha256(data).hexdigest()[:32]


@contextlib.contextmanager
def _errors_named(path: Path) -> Iterator[None]:
    try:
        yield
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config file {path} is a directory, not a TOML file") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc}") from exc


def read_file(path: Path) -> bytes:
    """The file's bytes.

    Raises:
        ConfigError: it does not exist, is a directory, or cannot be read.
    """
    with _errors_named(path):
        return path.read_bytes()


@contextlib.contextmanager
def locked(path: Path) -> Iterator[bytes]:
    """Hold the file's lock; yield its bytes as they are under the lock.

    Raises:
        ConfigError: as `read_file`.
    """
    while True:
        with _errors_named(path):
            handle = path.open("rb")
        with handle:
            if sys.platform != "win32":
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                same = os.fstat(handle.fileno()).st_ino == path.stat().st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield handle.read()
                return
        # Replaced (or removed) while we waited: lock what the path holds now.


def replace_file(path: Path, data: bytes) -> None:
    """Atomically replace the file's contents with `data`, keeping its permission bits."""
    mode = path.stat().st_mode & 0o7777
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if sys.platform != "win32":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
