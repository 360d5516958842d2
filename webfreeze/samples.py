"""Real web archives nobody here wrote: pywb's ``sample_archive`` from its PyPI source release.

Fetched once with pip (PyPI is reachable where nothing else is) into a cache folder, and used by
the demo, the tests and the benchmarks.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from webfreeze.common.errors import WebfreezeError

PYWB_VERSION = "2.10.0"


def cache_dir() -> Path:
    """Where downloaded samples live: $WEBFREEZE_CACHE, else ~/.cache/webfreeze."""
    root = os.environ.get("WEBFREEZE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "webfreeze")
    return Path(root)


class SamplesUnavailable(WebfreezeError, RuntimeError):
    """The sample archives could not be downloaded (no route to PyPI)."""


def pywb_sample_archive() -> Path:
    """Path of pywb's ``sample_archive`` folder, downloading the sdist on first use."""
    target = cache_dir() / f"pywb-{PYWB_VERSION}"
    done = target / ".complete"
    if done.exists():
        return target / "sample_archive"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two processes may ask at once (the test suite's workers): one downloads, the others wait for it.
    with open(target.parent / f"pywb-{PYWB_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            _download(target)
    return target / "sample_archive"


def _download(target: Path) -> None:
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--no-binary", ":all:", f"pywb=={PYWB_VERSION}", "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        sdists = list(Path(tmp).glob("pywb-*.tar.gz"))
        if proc.returncode != 0 or not sdists:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise SamplesUnavailable(f"could not download pywb {PYWB_VERSION} from PyPI: {last}")
        extract = Path(tmp) / "x"
        with tarfile.open(sdists[0]) as tf:
            members = [m for m in tf.getmembers() if "/sample_archive/" in m.name]
            tf.extractall(extract, members=members, filter="data")
        src = next(extract.glob("pywb-*/sample_archive"))
        if target.exists():
            shutil.rmtree(target)
        target.mkdir()
        src.rename(target / "sample_archive")
        (target / ".complete").touch()
