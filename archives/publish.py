"""Publishing a new archive: built under a temporary name, synced, and renamed into place only
when complete, so a failed or interrupted job never leaves a half-written archive behind."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from webfreeze.common.files import sync_dir

from .descriptors import close_archive_fd, open_archive_fd
from .errors import ArchiveError
from .store import Archive, check_new_archive

__all__ = ["new_archive_atomically", "sync_dir"]


class _Writeback:
    """``fdatasync`` of a file on a background thread, one at a time: what was written before a
    call reaches the disk while the caller goes on; an early start of the sync that ``_publish``
    makes anyway. A write the disk refused is reported once, to the first sync that asks (Linux
    does not tell a later one), so the error is kept and :meth:`close` raises it."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None
        self.thread: threading.Thread | None = None
        self.error: OSError | None = None

    def start(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            return  # the one running takes what it finds written; the next call takes the rest
        if self.fd is None:
            try:
                self.fd = open_archive_fd(self.path)
            except OSError:
                return
        self.thread = threading.Thread(target=self._sync, args=(self.fd,), name="archive-writeback", daemon=True)
        self.thread.start()

    def _sync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            if self.error is None:
                self.error = exc

    def close(self) -> None:
        try:
            if self.thread is not None:
                self.thread.join()
                self.thread = None
        finally:
            if self.fd is not None:
                close_archive_fd(self.fd)  # (the archive's own connection is still open)
                self.fd = None
        if self.error is not None:
            raise ArchiveError(f"{self.path.parent}: cannot write the new archive: "
                               f"{self.error.strerror or self.error}")


@contextlib.contextmanager
def new_archive_atomically(path: str | os.PathLike, **meta) -> Iterator[Archive]:
    """Create an archive that appears at ``path`` only if the block succeeds.

    It is built under a temporary name in the same folder and renamed into place at the end, so a
    failed or interrupted job never leaves a half-written archive behind.
    """
    final = Path(path)
    check_new_archive(final)
    _remove_stale_partials(final)
    tmp = final.with_name(f".{final.name}.partial-{os.getpid()}")
    _remove_db_files(tmp)

    def as_given(exc: ArchiveError) -> ArchiveError:  # named as the user named it, not by its temporary name
        return ArchiveError(str(exc).replace(str(tmp), str(final)))

    try:
        arc = Archive.create(tmp, _private=True, **meta)
    except ArchiveError as exc:
        _remove_db_files(tmp)
        raise as_given(exc) from None
    except BaseException:
        _remove_db_files(tmp)  # the disk filled while the schema was written
        raise
    try:
        yield arc
        try:
            _publish(arc)
        except ArchiveError as exc:
            raise as_given(exc) from None
        if final.exists():
            raise ArchiveError(f"{final}: was created by someone else meanwhile")
        os.replace(tmp, final)
        sync_dir(final.parent)
    except BaseException:
        try:
            arc.close()  # may fail too (a full disk): the files go anyway
        except Exception:
            pass
        finally:
            _remove_db_files(tmp)
        raise


def _publish(arc: Archive) -> None:
    """Finish and close a privately built archive (``Archive.create(_private=True)``): WAL mode, as
    every archive is, and its bytes on disk before it is renamed into place."""
    p = arc.path
    try:
        # Refused while a statement the block left unfinished holds a read transaction; no other
        # connection could do it then either (the closed one would keep its lock until the
        # statement is gone), so that is an error and the new archive is not published.
        arc.conn.execute("PRAGMA journal_mode=WAL")
        arc.close(checkpoint=False)  # nothing was written in WAL mode
    except sqlite3.Error as exc:
        raise ArchiveError(f"{p}: cannot finish the new archive: {exc}") from None
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_db_files(p: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{p}{suffix}")


def _remove_stale_partials(final: Path) -> None:
    """Delete what a killed job left under a temporary name (its process no longer exists)."""
    import re

    pattern = re.compile(re.escape(f".{final.name}.partial-") + r"(\d+)(?:-wal|-shm|-journal)?$")
    for leftover in final.parent.iterdir():
        m = pattern.match(leftover.name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        except PermissionError:
            pass  # alive, someone else's
