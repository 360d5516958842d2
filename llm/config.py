"""What identifies an LLM endpoint and how it is called: :class:`LLMConfig`."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from webfreeze.llm.errors import LLMError

# The request fields the client sets itself; ``extra`` may not shadow them (a silent override would
# make the config say one thing and the request another).
CORE_REQUEST_FIELDS = ("model", "messages", "temperature", "top_p", "seed", "max_tokens", "stop")


@dataclass(frozen=True)
class LLMConfig:
    """One model behind an OpenAI-compatible chat-completions endpoint, and the sampling settings.

    ``model="local"`` is the embedded local model (see :mod:`webfreeze.llm.local`). ``api_key_env``
    names the environment variable that holds the key (the key itself is never stored here).
    ``extra`` holds further request parameters (llama.cpp's ``top_k``, ``repeat_penalty``...): they
    are sent as the request's extra body and are part of the cassette key. ``timeout_s``, the retry
    and the concurrency settings change how a call is made, never its answer, so they are not.
    """

    model: str = "local"
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    timeout_s: float = 120.0
    extra: dict = field(default_factory=dict)
    max_retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    concurrency: int = 4

    def __post_init__(self) -> None:
        def fix(name, value):  # frozen: normalised values are set through object.__setattr__
            object.__setattr__(self, name, value)

        if not isinstance(self.model, str) or not self.model:
            raise LLMError(f"LLM config: model must be a non-empty string, not {self.model!r}")
        for name in ("base_url", "api_key_env"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise LLMError(f"LLM config: {name} must be a non-empty string or null, not {value!r}")
        # 0 and 0.0 must give the same cassette key: floats are stored as floats
        for name in ("temperature", "top_p", "timeout_s", "backoff_s", "max_backoff_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise LLMError(f"LLM config: {name} must be a number >= 0, not {value!r}")
            fix(name, float(value))
        if self.timeout_s <= 0:
            raise LLMError(f"LLM config: timeout_s must be > 0, not {self.timeout_s!r}")
        for name, low in (("max_tokens", 1), ("max_retries", 0), ("concurrency", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise LLMError(f"LLM config: {name} must be an integer >= {low}, not {value!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise LLMError(f"LLM config: seed must be an integer or null, not {self.seed!r}")
        stop = (self.stop,) if isinstance(self.stop, str) else self.stop
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise LLMError(f"LLM config: stop must be a list of non-empty strings, not {self.stop!r}")
        fix("stop", tuple(stop))
        if not isinstance(self.extra, dict):
            raise LLMError(f"LLM config: extra must be an object, not {self.extra!r}")
        shadowed = sorted(set(self.extra) & set(CORE_REQUEST_FIELDS))
        if shadowed:
            raise LLMError(f"LLM config: extra may not set {', '.join(shadowed)} (a setting of its own)")
        try:  # extra goes into the cassette key and the manifest: plain JSON only
            extra = json.loads(json.dumps(self.extra, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise LLMError(f"LLM config: extra is not plain JSON: {exc}") from None
        fix("extra", extra)  # a copy: the caller's dict changing later cannot change this config

    @classmethod
    def from_dict(cls, d: dict) -> "LLMConfig":
        """A config from plain JSON values (a manifest's, an agent's settings); an unknown key is an
        LLMError naming it."""
        if not isinstance(d, dict):
            raise LLMError(f"LLM config must be an object, not {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise LLMError(f"LLM config: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        return cls(**d)

    def to_dict(self) -> dict:
        """The config as plain JSON values, for manifests: ``api_key_env`` is the variable's name,
        never the key."""
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        return d

    def __hash__(self) -> int:  # ``extra`` is a dict; hash the JSON form so configs can key a cache
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def replace(self, **changes) -> "LLMConfig":
        """A copy with some settings changed (validated as a new config)."""
        return dataclasses.replace(self, **changes)
