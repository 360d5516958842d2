"""An OpenAI-compatible chat-completions endpoint on 127.0.0.1 in front of an LLM cassette.

An agent we did not write (AgentLab's GenericAgent, any harness built on the ``openai`` package)
makes its own LLM calls. Pointed at this proxy (``OPENAI_BASE_URL=proxy.base_url``), every call it
makes goes through a :class:`~webfreeze.llm.cassette.Cassette` like our own agents' calls do:

- ``record``: each request goes to the upstream endpoint and its answer is stored;
- ``replay`` (strict): the cassette answers, nothing else is asked; a request it does not hold is
  an HTTP 422 whose error message is the one-line :class:`~webfreeze.llm.errors.CassetteMiss`
  (422, not 5xx: clients retry server errors, and a miss never heals);
- ``auto``: the cassette answers what it holds, the rest goes upstream and is stored.

The request is keyed as the client sent it (its body, canonical JSON; see
:func:`~webfreeze.llm.cassette.canonical_request`), and the reply is built from the stored fields
only, with a fixed id and ``created`` of 0, so a replay answers byte for byte what the recording
answered. Identical requests are numbered per episode (:meth:`CassetteProxy.begin_episode`), as
:class:`~webfreeze.llm.client.LLMClient` numbers them.

With ``local=True`` the upstream is the embedded local model (started by the proxy unless it
replays strictly): message content given as a list of text parts (as AgentLab sends it) is
flattened to one string, which SmolLM2's chat template needs, and a request holding an image is
refused in one line (the local model reads text only; a silently dropped screenshot would make the
recording answer a different question than the agent asked).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from webfreeze.common.canonical import canonical_json
from webfreeze.llm.cassette import MODES, Cassette, canonical_request, text_key
from webfreeze.llm.client import retry_delay
from webfreeze.llm.config import LLMConfig
from webfreeze.llm.errors import CassetteMiss, LLMError, one_line
from webfreeze.llm.local import LOCAL_MODEL_ID, LOCAL_SAMPLING, LocalModelServer

CHAT_PATH = "/chat/completions"
PROXY_MODEL = "webfreeze-cassette"
MAX_BODY = 64 * 1024 * 1024  # a request with a few screenshots fits; a runaway one does not


class ProxyRefusal(LLMError):
    """A request the proxy will not answer (its HTTP status in ``status``); one line."""

    def __init__(self, message: object, status: int = 400):
        super().__init__(message)
        self.status = status


def flatten_for_local(request: dict) -> dict:
    """``request`` as the local model's chat template takes it: each message whose content is a
    list of text parts gets their texts joined by newlines; an image part is a
    :class:`ProxyRefusal` (the local model reads text only)."""
    messages = []
    for i, message in enumerate(request.get("messages") or []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            texts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    texts.append(str(part.get("text") or ""))
                elif kind in ("image_url", "input_image", "image"):
                    raise ProxyRefusal(f"messages[{i}] holds an image: the local model reads text only "
                                       "(turn the agent's screenshots off)")
                else:
                    raise ProxyRefusal(f"messages[{i}] holds a content part of type {kind!r}; the local model "
                                       "takes text parts only")
            message = {**message, "content": "\n".join(texts)}
        messages.append(message)
    return {**request, "messages": messages}


def reply_body(key: str, n: int, stored: dict, asked_model: str | None) -> bytes:
    """The chat-completion body answering a request from its stored response: only stored fields
    and the key, so recording and replaying give the same bytes."""
    usage = stored.get("usage") or {}
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    body = {
        "id": f"chatcmpl-wf-{key[:24]}-{n}", "object": "chat.completion", "created": 0,
        "model": stored.get("model") or asked_model or PROXY_MODEL,
        "system_fingerprint": stored.get("system_fingerprint"),
        "choices": [{"index": 0, "finish_reason": stored.get("finish_reason") or "stop", "logprobs": None,
                     "message": {"role": "assistant", "content": stored.get("text") or ""}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
    return canonical_json(body).encode("utf-8")


def _error_body(message: str, kind: str) -> bytes:
    return canonical_json({"error": {"message": message, "type": kind, "code": kind, "param": None}}).encode("utf-8")


class CassetteProxy:
    """The proxy: ``start()`` listens on 127.0.0.1 (``port`` 0: a free one), ``base_url`` is then
    the endpoint to give the agent (``http://127.0.0.1:PORT/v1``), ``stop()`` ends it and closes
    the cassette (a context manager does both).

    ``upstream``: the base URL of the OpenAI-compatible endpoint recording calls (``record`` and
    ``auto``); ``local=True`` starts the embedded local model instead. ``api_key_env`` names the
    variable holding the upstream's key; without it the client's own ``Authorization`` header is
    passed on (it is never stored). ``log``: where one line per strict-replay miss or upstream
    failure goes (default stderr; None for silence). ``misses`` keeps those lines too.
    """

    def __init__(self, cassette: str | os.PathLike, mode: str = "auto", *, upstream: str | None = None,
                 local: bool = False, api_key_env: str | None = None, port: int = 0, timeout_s: float = 300.0,
                 max_retries: int = 3, local_n_ctx: int = 8192, log=sys.stderr):
        if mode not in MODES:
            raise LLMError(f"unknown cassette mode {mode!r} (one of {', '.join(MODES)})")
        if upstream and local:
            raise LLMError("give either an upstream URL or the local model, not both")
        if mode != "replay" and not upstream and not local:
            raise LLMError(f"cassette mode {mode!r} calls a model for what is not stored: give an upstream "
                           "URL or the local model (or replay strictly)")
        if upstream and urllib.parse.urlsplit(upstream).scheme not in ("http", "https"):
            raise LLMError(f"upstream {upstream!r} is not an http(s) URL")
        self.cassette_path = Path(cassette)
        self.mode = mode
        self.upstream = upstream.rstrip("/") if upstream else None
        self.local = local
        self.api_key_env = api_key_env
        self.port = port
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.local_n_ctx = local_n_ctx
        self.log = log
        self.cassette: Cassette | None = None
        self.misses: list[str] = []
        self.stats = {"calls": 0, "cassette_hits": 0, "upstream_calls": 0, "misses": 0, "refused": 0,
                      "upstream_errors": 0}
        self.task_id: str | None = None
        self.step: int | None = None
        self._occurrences: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._local: LocalModelServer | None = None
        # the retry schedule of our own client (its backoff settings), for upstream failures
        self._backoff = LLMConfig(model=PROXY_MODEL, max_retries=max_retries)

    # ------------------------------------------------------------------------------ life
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, once started."""
        if self._server is None:
            raise LLMError("the cassette proxy is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> CassetteProxy:
        """Open the cassette (and start the local model if asked), then listen."""
        if self._server is not None:
            return self
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise LLMError(f"the API key variable {self.api_key_env} is not set")
        self.cassette = Cassette(self.cassette_path, self.mode)
        try:
            if self.local and self.mode != "replay":
                self._local = LocalModelServer(n_ctx=self.local_n_ctx).start()
                self.upstream = self._local.base_url
            try:
                self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
            except OSError as exc:
                raise LLMError(f"cannot listen on 127.0.0.1:{self.port}: {exc.strerror or exc}") from None
        except BaseException:
            self.stop()
            raise
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="cassette-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening, stop the local model (if started) and close the cassette."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._local is not None:
            self._local.stop()
            self._local = None
        if self.cassette is not None:
            self.cassette.close()
            self.cassette = None

    def __enter__(self) -> CassetteProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ episodes
    def begin_episode(self, task_id: str | None) -> None:
        """Calls from now on belong to the episode of ``task_id``: they are stored with it, and
        identical requests are numbered from 0 again."""
        with self._lock:
            self.task_id, self.step = task_id, 0
            self._occurrences.clear()

    def set_step(self, step: int | None) -> None:
        """The episode's step the coming calls are made for (stored with them, outside the key)."""
        with self._lock:
            self.step = step

    def take_used(self) -> list[list]:
        """The ``[key, n]`` entries answered or stored since the last call (see
        :meth:`Cassette.take_used`): what an episode used, for its trajectory's ``llm_entries``."""
        return self.cassette.take_used() if self.cassette is not None else []

    # ------------------------------------------------------------------------------ one call
    def answer(self, body: bytes, authorization: str | None = None) -> tuple[int, bytes]:
        """The HTTP status and body answering one POSTed chat-completion request."""
        try:
            try:
                request = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                raise ProxyRefusal("the request body is not JSON") from None
            if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
                raise ProxyRefusal("a chat-completion request needs a JSON object with a list of messages")
            if request.get("stream"):
                raise ProxyRefusal("streamed completions are not recorded: ask without stream")
            if request.get("n") not in (None, 1):
                raise ProxyRefusal(f"n={request['n']!r}: a cassette stores one choice per call; ask for n=1")
            if self.local:
                flatten_for_local(request)  # refuses images before anything is looked up or stored
            return 200, self._chat(request, authorization)
        except ProxyRefusal as exc:
            with self._lock:
                self.stats["refused"] += 1
            self._say(f"cassette proxy: refused: {exc}")
            return exc.status, _error_body(str(exc), "invalid_request_error")
        except CassetteMiss as exc:
            with self._lock:
                self.stats["misses"] += 1
                self.misses.append(str(exc))
            self._say(f"cassette proxy: {exc}")
            return 422, _error_body(str(exc), "cassette_miss")
        except LLMError as exc:
            with self._lock:
                self.stats["upstream_errors"] += 1
            self._say(f"cassette proxy: {exc}")
            return 502, _error_body(str(exc), "upstream_error")

    def _chat(self, request: dict, authorization: str | None) -> bytes:
        text = canonical_request(request)
        key = text_key(text)
        with self._lock:
            n = self._occurrences.get(key, 0)
            self._occurrences[key] = n + 1
            task_id, step = self.task_id, self.step
            self.stats["calls"] += 1
        cassette = self.cassette
        if cassette is None:
            raise LLMError("the cassette proxy is stopped")
        if cassette.mode != "record":
            stored = cassette.lookup(key, n, repeat_last=cassette.mode == "replay")
            if stored is not None:
                with self._lock:
                    self.stats["cassette_hits"] += 1
                return reply_body(key, n, stored, request.get("model"))
            if cassette.mode == "replay":
                raise cassette.miss(text, key, task_id=task_id, step=step, purpose="proxy")
        response = self._call_upstream(request, authorization)
        kept, _ = cassette.store(key, n, text, response, task_id=task_id, step=step, purpose="proxy")
        return reply_body(key, n, kept, request.get("model"))

    def _call_upstream(self, request: dict, authorization: str | None) -> dict:
        sent = request
        if self.local:
            sent = flatten_for_local(request)
            # the local server has one model; its sampling defaults are switched off as our own
            # client switches them off (see LOCAL_SAMPLING), unless the agent asked for them
            sent = {**{k: v for k, v in LOCAL_SAMPLING.items() if k not in sent}, **sent, "model": LOCAL_MODEL_ID}
            if "max_tokens" not in sent and sent.get("max_completion_tokens"):
                # newer clients send only the new name, which not every local server reads (the
                # earlier one, llama-cpp-python's, generated up to its context's end): both are sent
                sent["max_tokens"] = sent["max_completion_tokens"]
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ.get(self.api_key_env, '')}"
        elif authorization:
            headers["Authorization"] = authorization
        data = json.dumps(sent).encode("utf-8")
        url = self.upstream + CHAT_PATH
        host = urllib.parse.urlsplit(url).hostname
        # a proxy configured in the environment must not carry calls to a server on this machine
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) \
            if host in ("127.0.0.1", "localhost", "::1") else urllib.request.build_opener()
        attempts = 1 + self.max_retries
        for attempt in range(1, attempts + 1):
            with self._lock:
                self.stats["upstream_calls"] += 1
            started = time.perf_counter()
            retry_after = None
            try:
                with opener.open(urllib.request.Request(url, data=data, headers=headers, method="POST"),
                                 timeout=self.timeout_s) as reply:
                    raw = reply.read()
                latency_ms = round((time.perf_counter() - started) * 1000, 1)
                return _parse_completion(raw, latency_ms, url)
            except urllib.error.HTTPError as exc:
                detail = one_line(exc.read().decode("utf-8", "replace"), 300)
                cause, retried = f"HTTP {exc.code}: {detail}", exc.code in (408, 409, 429) or exc.code >= 500
                retry_after = exc.headers.get("retry-after") if exc.headers else None
            except (urllib.error.URLError, OSError) as exc:
                cause, retried = f"cannot connect: {one_line(getattr(exc, 'reason', exc), 200)}", True
            if not retried or attempt == attempts:
                tries = "(not retried)" if not retried else f"after {attempt} attempt{'s' if attempt > 1 else ''}"
                raise LLMError(f"upstream {self.upstream} failed {tries}: {cause}")
            time.sleep(retry_delay(attempt, self._backoff, retry_after))
        raise AssertionError("unreachable")  # the loop returns or raises

    def _say(self, line: str) -> None:
        if self.log is not None:
            print(one_line(line, 2000), file=self.log, flush=True)


def _parse_completion(raw: bytes, latency_ms: float, url: str) -> dict:
    """The stored fields of an upstream chat completion."""
    try:
        reply = json.loads(raw)
        choice = reply["choices"][0]
        usage = reply.get("usage") or {}
        return {"text": choice["message"].get("content") or "", "finish_reason": choice.get("finish_reason"),
                "usage": {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                          "completion_tokens": int(usage.get("completion_tokens") or 0)},
                "model": reply.get("model"), "system_fingerprint": reply.get("system_fingerprint"),
                "latency_ms": latency_ms}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(f"upstream {url} answered something that is not a chat completion: "
                       f"{one_line(raw[:200].decode('utf-8', 'replace'), 200)}") from None


def _handler(proxy: CassetteProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the openai package expects

        def log_message(self, *args):  # one line per miss or failure is said by the proxy itself
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, canonical_json({"object": "list", "data": [
                    {"id": PROXY_MODEL, "object": "model", "created": 0, "owned_by": "webfreeze"}]}).encode())
            else:
                self._send(404, _error_body(f"no route GET {self.path}", "not_found"))

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                self._send(413, _error_body(f"request body over {MAX_BODY} bytes", "invalid_request_error"))
                return
            body = self.rfile.read(length)
            if not self.path.split("?", 1)[0].rstrip("/").endswith(CHAT_PATH):
                self._send(404, _error_body(f"no route POST {self.path} (only {CHAT_PATH})", "not_found"))
                return
            self._send(*proxy.answer(body, self.headers.get("Authorization")))

    return Handler


__all__ = ["CassetteProxy", "ProxyRefusal", "flatten_for_local", "reply_body"]
