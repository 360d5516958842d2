"""The descriptors this process opens on archive files, and when they may be closed.

SQLite's locks are POSIX locks, which belong to the process: closing *any* descriptor of a file
drops every lock this process holds on it, under each of its connections (SQLite guards the
descriptors it opens itself, not ours). A reader that lost its locks can see a writer in another
process take the file for its last connection and delete the WAL under it. So a descriptor we
open on an archive file (the header check, the writer lock, a digest) is closed only when no
Archive of this process has that file open; until then it is parked.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from pathlib import Path

_OPEN_FILES: dict[tuple[int, int], int] = {}  # (device, inode) -> Archives of this process open on it
_PARKED: dict[tuple[int, int], list[int]] = {}  # descriptors waiting for the last one to close
_FILES_GUARD = threading.Lock()  # held while a descriptor is closed too, so no open slips in between


def open_archive_fd(path: str | os.PathLike, flags: int = os.O_RDONLY) -> int:
    """A descriptor of an archive file: a parked one of that file when there is one (so repeated
    reads while the archive is open do not pile descriptors up), else a new one. Give it back with
    :func:`close_archive_fd`; read it with ``pread`` or from a ``lseek`` to where you need."""
    with contextlib.suppress(OSError), _FILES_GUARD:
        st = os.stat(path)
        spare = _PARKED.get((st.st_dev, st.st_ino))
        if spare:
            return spare.pop()
    return os.open(path, flags, 0o644)


def close_archive_fd(fd: int) -> None:
    """Close a descriptor of an archive file, or park it while an Archive of this process has the
    file open (closing it would drop that connection's SQLite locks)."""
    with _FILES_GUARD:
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return
        key = (st.st_dev, st.st_ino)
        if _OPEN_FILES.get(key):
            _PARKED.setdefault(key, []).append(fd)
        else:
            os.close(fd)


def _unlock(lock_fd: int, owner: int) -> None:
    """Give up the writer lock taken by process ``owner``: the flock is released explicitly (a
    parked descriptor would keep it), except in a forked child, where the lock still belongs to the
    parent (the open file is shared) and only the child's copy of the descriptor is closed."""
    if os.getpid() != owner:
        os.close(lock_fd)
        return
    with contextlib.suppress(OSError):
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
    close_archive_fd(lock_fd)


def _file_opened(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (st.st_dev, st.st_ino)
    with _FILES_GUARD:
        _OPEN_FILES[key] = _OPEN_FILES.get(key, 0) + 1
    return key


def _file_closed(key: tuple[int, int]) -> None:
    with _FILES_GUARD:
        left = _OPEN_FILES.get(key, 0) - 1
        if left > 0:
            _OPEN_FILES[key] = left
            return
        _OPEN_FILES.pop(key, None)
        for fd in _PARKED.pop(key, []):
            with contextlib.suppress(OSError):
                os.close(fd)


def file_sha256(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, read through a descriptor that is safe for an open archive."""
    fd = open_archive_fd(path)
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    finally:
        close_archive_fd(fd)
