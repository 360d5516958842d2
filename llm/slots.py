"""A limit on concurrent provider calls, per process or shared by every process of a run."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path

from webfreeze.llm.errors import LLMError


class SlotLimiter:
    """At most ``n`` calls at a time.

    Within a process a semaphore holds the limit. With ``slots_dir``, the limit also holds across
    every process using that directory (the workers of one run): slot ``i`` is the file
    ``slot-<i>.lock``, held with a non-blocking ``flock``; a caller that finds every slot taken
    sleeps briefly and tries again. The kernel drops a dead process's locks, so a crashed worker
    never keeps a slot.
    """

    def __init__(self, n: int, slots_dir: str | os.PathLike | None = None, *, poll_s: float = 0.02):
        if n < 1:
            raise LLMError(f"concurrency must be at least 1, not {n}")
        self.n = n
        self.poll_s = poll_s
        self._local = threading.BoundedSemaphore(n)
        self.slots_dir = Path(slots_dir) if slots_dir is not None else None
        if self.slots_dir is not None:
            try:
                self.slots_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LLMError(f"{self.slots_dir}: cannot create the LLM slots directory: "
                               f"{exc.strerror or exc}") from None

    def _try_file_slot(self) -> tuple[int, int] | None:
        # start at a slot that depends on the thread, so that callers do not all queue on slot 0
        start = (os.getpid() + threading.get_ident()) % self.n
        for j in range(self.n):
            i = (start + j) % self.n
            path = self.slots_dir / f"slot-{i}.lock"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as exc:
                raise LLMError(f"{path}: cannot open the LLM slot file: {exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return i, fd
        return None

    def acquire(self, timeout: float | None = None) -> tuple[int, int] | None:
        """Take a slot, waiting up to ``timeout`` seconds (None: as long as it takes). Returns the
        token to give :meth:`release`. No slot in time is an LLMError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._local.acquire(timeout=timeout):
            raise LLMError(f"no free LLM call slot within {timeout} s (concurrency {self.n})")
        if self.slots_dir is None:
            return None
        try:
            while True:
                token = self._try_file_slot()
                if token is not None:
                    return token
                if deadline is not None and time.monotonic() >= deadline:
                    raise LLMError(f"no free LLM call slot in {self.slots_dir} within {timeout} s "
                                   f"(concurrency {self.n})")
                time.sleep(self.poll_s)
        except BaseException:
            self._local.release()
            raise

    def release(self, token: tuple[int, int] | None) -> None:
        """Give back a slot taken by :meth:`acquire`."""
        try:
            if token is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(token[1], fcntl.LOCK_UN)
                os.close(token[1])
        finally:
            self._local.release()

    @contextlib.contextmanager
    def slot(self, timeout: float | None = None):
        """Hold a slot for the block."""
        token = self.acquire(timeout)
        try:
            yield token[0] if token is not None else None
        finally:
            self.release(token)
