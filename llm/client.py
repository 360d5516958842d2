"""One client for OpenAI-compatible chat completions, remote APIs and the local model alike, with
the cassette in front of it, retries with backoff, and a concurrency limit."""

from __future__ import annotations

import copy
import email.utils
import os
import threading
import time
import urllib.parse
from dataclasses import dataclass

from webfreeze.llm.cassette import Cassette, canonical_request, text_key
from webfreeze.llm.config import LLMConfig
from webfreeze.llm.errors import LLMError, ProviderError, one_line
from webfreeze.llm.slots import SlotLimiter


@dataclass(frozen=True)
class Completion:
    """One chat completion as the agent sees it, from the provider or from the cassette."""

    text: str
    finish_reason: str | None
    usage: dict  # {"prompt_tokens": int, "completion_tokens": int}
    model: str | None  # the provider's model id
    system_fingerprint: str | None
    latency_ms: float | None  # the provider call's, as recorded (a replayed one keeps its recorded latency)
    from_cassette: bool
    key: str  # the cassette key of the request

    @property
    def prompt_tokens(self) -> int:
        """Tokens of the prompt, as the provider counted them."""
        return int(self.usage.get("prompt_tokens") or 0)

    @property
    def completion_tokens(self) -> int:
        """Tokens of the reply, as the provider counted them."""
        return int(self.usage.get("completion_tokens") or 0)


def build_request(config: LLMConfig, messages: list, max_tokens: int | None = None) -> dict:
    """The request a chat call makes, as it is keyed and stored: model, messages and every setting
    that can change the answer (``extra`` included). Endpoint, timeout and retries are not in it.
    ``max_tokens`` overrides the config's for this call."""
    if not isinstance(messages, list) or not messages:
        raise LLMError("an LLM chat needs a non-empty list of messages")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise LLMError(f"max_tokens must be an integer >= 1, not {max_tokens!r}")
    return {"model": config.model, "messages": messages, "temperature": config.temperature,
            "top_p": config.top_p, "seed": config.seed,
            "max_tokens": config.max_tokens if max_tokens is None else max_tokens,
            "stop": list(config.stop), **config.extra}


def retry_delay(attempt: int, config: LLMConfig, retry_after: str | None = None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first): the provider's
    ``Retry-After`` (seconds or an HTTP date) when it sent one, else ``backoff_s`` doubled per
    attempt; either way at most ``max_backoff_s``. No jitter: waiting never changes an answer."""
    delay = None
    if retry_after:
        try:
            delay = float(retry_after)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(retry_after)
                delay = when.timestamp() - time.time()
            except (TypeError, ValueError, IndexError):
                delay = None
    if delay is None or delay != delay:  # absent, unreadable or NaN: our own backoff
        delay = config.backoff_s * 2 ** (attempt - 1)
    return min(max(delay, 0.0), config.max_backoff_s)


def _retry_after(exc) -> str | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")  # OpenAI's finer-grained variant
    if ms:
        try:
            return str(float(ms) / 1000)
        except ValueError:
            pass
    return headers.get("retry-after")


def _classify(exc, config: LLMConfig) -> tuple[str, bool, str]:
    """(kind, retried?, cause in one line) of an error the openai package raised."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True, f"no answer within {config.timeout_s:g} s"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return "connection", True, f"cannot connect: {one_line(cause or exc, 200)}"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"HTTP {status}: {one_line(getattr(exc, 'message', exc), 300)}"
        if status == 429:
            return "429", True, message
        if status == 408:  # the server's own request timeout: as transient as ours
            return "timeout", True, message
        if status >= 500:
            return "5xx", True, message
        return "4xx", False, message
    return "bad_response", False, f"{type(exc).__name__}: {one_line(exc, 300)}"


class LLMClient:
    """Chat completions through an OpenAI-compatible endpoint, behind an optional cassette.

    With a cassette in ``replay`` mode the provider is never called (nor needed); in ``auto`` the
    stored (key, n) answers and the rest is called and stored; in ``record`` every call goes to the
    provider and is stored. Identical requests within an episode (see :meth:`begin_episode`) are
    numbered n = 0, 1, ... and answered in recorded order.

    ``stats`` counts: ``calls`` (chat calls), ``cassette_hits``, ``provider_calls`` (requests sent,
    retries included), ``retries``, ``provider_errors`` (failed requests by kind), ``failed_calls``
    (chats that raised ProviderError), ``already_stored`` (recorded calls whose (key, n) the
    cassette already held: the stored answer is returned), ``prompt_tokens``, ``completion_tokens``.

    ``slots_dir``: a directory shared by the run's worker processes, so that ``config.concurrency``
    holds for the whole run; None limits each process alone.
    """

    def __init__(self, config: LLMConfig, cassette: Cassette | None = None, *, slots_dir=None):
        if not isinstance(config, LLMConfig):
            raise LLMError(f"LLMClient needs an LLMConfig, not {type(config).__name__}")
        self.config = config
        self.cassette = cassette
        self.task_id: str | None = None
        self._slots = SlotLimiter(config.concurrency, slots_dir)
        self._lock = threading.Lock()
        self._occurrences: dict[str, int] = {}
        self._openai = None
        self._stats = {"calls": 0, "cassette_hits": 0, "provider_calls": 0, "retries": 0, "provider_errors": {},
                       "failed_calls": 0, "already_stored": 0, "prompt_tokens": 0, "completion_tokens": 0}

    @property
    def stats(self) -> dict:
        """A snapshot of the counters (see the class docstring)."""
        with self._lock:
            return copy.deepcopy(self._stats)

    def begin_episode(self, task_id: str | None) -> None:
        """Start an episode: calls are tagged with ``task_id`` and identical requests are counted
        from n = 0 again."""
        with self._lock:
            self.task_id = task_id
            self._occurrences.clear()

    def chat(self, messages: list, *, step: int | None = None, purpose: str = "act",
             max_tokens: int | None = None) -> Completion:
        """One chat completion for ``messages`` (OpenAI message dicts; image parts are sent as
        they are). ``step`` and ``purpose`` are stored with the call, outside its key; ``max_tokens``
        overrides the config's for this call (and is part of the key). Raises CassetteMiss (strict
        replay, request not stored) or ProviderError (after the retries)."""
        request = build_request(self.config, messages, max_tokens)
        text = canonical_request(request)
        key = text_key(text)
        with self._lock:
            n = self._occurrences.get(key, 0)
            self._occurrences[key] = n + 1
            task_id = self.task_id
            self._stats["calls"] += 1
        cassette = self.cassette
        if cassette is not None and cassette.mode != "record":
            # strict replay repeats the last recorded answer past the last one; auto calls the
            # provider for an occurrence it has not stored, and stores it
            stored = cassette.lookup(key, n, repeat_last=cassette.mode == "replay")
            if stored is not None:
                return self._completion(stored, key, from_cassette=True)
            if cassette.mode == "replay":
                raise cassette.miss(text, key, task_id=task_id, step=step, purpose=purpose)
        response = self._call_provider(request)
        if cassette is not None:
            # answer with what the cassette holds, so that this run and its replay cannot differ
            response, inserted = cassette.store(key, n, text, response, task_id=task_id, step=step, purpose=purpose)
            if not inserted:
                with self._lock:
                    self._stats["already_stored"] += 1
        return self._completion(response, key, from_cassette=False)

    def _completion(self, response: dict, key: str, *, from_cassette: bool) -> Completion:
        usage = response.get("usage") or {}
        usage = {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                 "completion_tokens": int(usage.get("completion_tokens") or 0)}
        with self._lock:
            self._stats["cassette_hits"] += from_cassette
            self._stats["prompt_tokens"] += usage["prompt_tokens"]
            self._stats["completion_tokens"] += usage["completion_tokens"]
        return Completion(text=response.get("text") or "", finish_reason=response.get("finish_reason"), usage=usage,
                          model=response.get("model"), system_fingerprint=response.get("system_fingerprint"),
                          latency_ms=response.get("latency_ms"), from_cassette=from_cassette, key=key)

    # ------------------------------------------------------------------------------ the provider
    def _endpoint(self) -> str:
        return self.config.base_url or "the default OpenAI endpoint"

    def _provider(self):
        """The openai client, made at the first provider call (a replay never needs one)."""
        with self._lock:
            if self._openai is not None:
                return self._openai
            cfg = self.config
            if cfg.model == "local" and cfg.base_url is None:
                raise LLMError("model 'local' needs the local model server's base_url: start "
                               "webfreeze.llm.LocalModelServer, or run through the runner (--llm local)")
            api_key = "none"  # OpenAI-compatible servers without auth still expect some key
            if cfg.api_key_env:
                api_key = os.environ.get(cfg.api_key_env, "")
                if not api_key:
                    raise LLMError(f"the API key variable {cfg.api_key_env} (api_key_env) is not set")
            try:
                import openai
            except ImportError:
                raise LLMError("the openai package is not installed: pip install 'webfreeze[llm]'") from None
            http_client = None
            if cfg.base_url and urllib.parse.urlsplit(cfg.base_url).hostname in ("127.0.0.1", "localhost", "::1"):
                # a proxy configured in the environment must not carry calls to a server on this machine
                http_client = openai.DefaultHttpxClient(trust_env=False, timeout=cfg.timeout_s)
            # the package's own retries are off: ours count them and honour the backoff settings
            self._openai = openai.OpenAI(base_url=cfg.base_url, api_key=api_key, timeout=cfg.timeout_s,
                                         max_retries=0, http_client=http_client)
            return self._openai

    def _wire_arguments(self, request: dict) -> dict:
        """The keyword arguments of ``chat.completions.create``. An unset seed and an empty stop
        list are left out, not sent as null and []: some providers refuse those, and leaving them
        out asks for the same thing."""
        core = {k: request[k] for k in ("model", "messages", "temperature", "top_p", "max_tokens")}
        if request["seed"] is not None:
            core["seed"] = request["seed"]
        if request["stop"]:
            core["stop"] = request["stop"]
        extra = {k: v for k, v in request.items() if k not in core and k not in ("seed", "stop")}
        if extra:
            core["extra_body"] = extra
        return core

    def _call_provider(self, request: dict) -> dict:
        import openai

        client = self._provider()
        arguments = self._wire_arguments(request)
        attempts = 1 + self.config.max_retries
        for attempt in range(1, attempts + 1):
            error = None
            with self._slots.slot():
                with self._lock:
                    self._stats["provider_calls"] += 1
                started = time.perf_counter()
                try:
                    reply = client.chat.completions.create(**arguments)
                except openai.OpenAIError as exc:
                    error = exc
                latency_ms = round((time.perf_counter() - started) * 1000, 1)
            if error is None:
                response = self._parse(reply, latency_ms)
                if response is not None:
                    return response
                kind, retried = "bad_response", False
                cause = f"the answer is not a chat completion: {one_line(reply, 200)}"
            else:
                kind, retried, cause = _classify(error, self.config)
            with self._lock:
                errors = self._stats["provider_errors"]
                errors[kind] = errors.get(kind, 0) + 1
                if not retried or attempt == attempts:
                    self._stats["failed_calls"] += 1
                else:
                    self._stats["retries"] += 1
            if not retried or attempt == attempts:
                tries = "(not retried)" if not retried else f"after {attempt} attempt{'s' if attempt > 1 else ''}"
                raise ProviderError(f"LLM provider at {self._endpoint()} failed {tries}: {cause}",
                                    kind=kind, attempts=attempt)
            time.sleep(retry_delay(attempt, self.config, _retry_after(error)))
        raise AssertionError("unreachable")  # the loop returns or raises

    @staticmethod
    def _parse(reply, latency_ms: float) -> dict | None:
        """The stored fields of a chat completion; None when ``reply`` is not one."""
        try:
            choice = reply.choices[0]
            usage = reply.usage
            return {
                "text": choice.message.content or "",
                "finish_reason": choice.finish_reason,
                "usage": {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                          "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)},
                "model": getattr(reply, "model", None),
                "system_fingerprint": getattr(reply, "system_fingerprint", None),
                "latency_ms": latency_ms,
            }
        except (AttributeError, IndexError, TypeError, ValueError):
            return None

    def close(self) -> None:
        """Close the HTTP connections (the cassette belongs to whoever opened it)."""
        with self._lock:
            client, self._openai = self._openai, None
        if client is not None:
            client.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
