"""Safe output files: refusing a path whose writing would destroy something, and writing a file
so that readers see the old one or the whole new one, never a half-written file."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import OutputError

SQLITE_SIDE_SUFFIXES = ("-wal", "-shm", "-journal")


def with_side_files(path: str | os.PathLike) -> list[Path]:
    """``path`` and the side files SQLite may keep beside it (what an archive at ``path`` is)."""
    return [Path(f"{path}{suffix}") for suffix in ("", *SQLITE_SIDE_SUFFIXES)]


def check_new_file(path: Path) -> None:
    """Refuse, in one line, a path where a new file cannot be created."""
    if path.exists():
        raise OutputError(f"{path}: already exists")
    if not path.parent.exists():
        raise OutputError(f"{path.parent}: no such directory")
    if not os.access(path.parent, os.W_OK):
        raise OutputError(f"{path.parent}: directory is not writable")


def _file_mode() -> int:
    """The mode a new ordinary file gets under this process's umask (read once, at import, while
    no other thread can be changing it)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


def _same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file: the same inode, or (one of them not there yet)
    the same resolved path."""
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def check_output_file(path: str | os.PathLike, *, overwrite: bool = True, protect=(), what: str = "output",
                      devices_ok: bool = False) -> Path:
    """Refuse, in one line, an output path whose writing would destroy something: a file this
    command reads (``protect``: archives, with their SQLite side files, scripts, rule files), an
    existing file unless ``overwrite``, something that is not a regular file (a directory; a device
    unless ``devices_ok``: written into, never replaced, see :func:`write_output`), or a place where
    no file can be made. Returns the path."""
    path = Path(path)
    for source in protect:
        if source is None:
            continue
        for f in with_side_files(source):
            if _same_path(path, f):
                raise OutputError(f"{path}: is {source}, which this command reads; choose another {what} file")
    if path.exists():
        if path.is_dir():
            raise OutputError(f"{path}: is a directory; choose another {what} file")
        if not path.is_file() and not devices_ok:
            raise OutputError(f"{path}: exists and is not a regular file; choose another {what} file")
        if not overwrite:
            raise OutputError(f"{path}: already exists (use --force to replace it)")
        if path.is_file() and not path.is_symlink() and not os.access(path.parent, os.W_OK):
            raise OutputError(f"{path.parent}: directory is not writable")
    else:
        check_new_file(path)
    return path


@contextlib.contextmanager
def _beside(path: Path) -> Iterator[str]:
    """A temporary file beside ``path`` for the block to write, renamed onto ``path`` when the block
    succeeds and removed when anything fails (the OSError, if that is what failed, goes on up)."""
    mode = path.stat().st_mode & 0o7777 if path.is_file() else FILE_MODE
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, mode)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[str]:
    """A temporary file beside ``path`` for the block to write, renamed onto ``path`` when the block
    succeeds and removed when it fails: readers see the old file or the whole new one, and a
    failure (a full disk) leaves nothing behind. A file replaced keeps its permissions; a new one
    gets the usual ones. An OSError is one line naming ``path``, not the temporary file."""
    path = Path(path)
    try:
        with _beside(path) as tmp:
            yield tmp
    except OSError as exc:  # a full disk: name the file the user asked for, not ours
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def write_atomically(path: str | os.PathLike, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` (text as UTF-8, line ends as given) to ``path`` so that readers see the old
    file or the whole new one: a temporary file beside it, then renamed onto it. A failure leaves
    no temporary file and raises its OSError, for the caller to word (a run folder's writer and a
    report name their files differently). Permissions as :func:`replacing`. ``durable=True`` also
    syncs the bytes to disk before the rename (a power cut then leaves the old or the new file);
    run folders do without it (a sync per trajectory, snapshot and manifest costs milliseconds
    each, and a crash costs only a re-run of the episodes it hit)."""
    path = Path(path)
    data = data.encode("utf-8") if isinstance(data, str) else data
    with _beside(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())  # the bytes on disk before the new name: a power cut leaves old or new


def json_text(obj) -> str:
    """The house style of the JSON files we write for people and diffs (manifests, reports):
    keys sorted, one-space indents, non-ASCII as itself, a final newline."""
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: str | os.PathLike, obj, *, durable: bool = False) -> None:
    """Write ``obj`` as :func:`json_text` to ``path`` with :func:`write_atomically`."""
    write_atomically(path, json_text(obj), durable=durable)


def write_output(path: str | os.PathLike, data: bytes | str) -> None:
    """A command's output file: a regular file (or a new one) is written atomically (see
    :func:`replacing`); a symbolic link or a device (``/dev/stdout``) is written through, never
    replaced."""
    path = Path(path)
    data = data.encode("utf-8") if isinstance(data, str) else data
    through = path.is_symlink() or (path.exists() and not path.is_file())
    if not through:
        with replacing(path) as target, open(target, "wb") as fh:
            fh.write(data)
        return
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:  # a full device (/dev/full), a dangling link into a missing folder
        raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None


def sync_dir(folder: Path) -> None:
    """Make a rename into ``folder`` durable (the file's own bytes are synced before it): without
    this, a power cut soon after could lose the new name. Filesystems that cannot sync a folder
    are left as they are."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
