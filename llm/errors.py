"""The LLM layer's errors: each one is a single line a user can act on."""

from __future__ import annotations

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.text import one_line

__all__ = ["one_line"]  # (the layer's modules take it from here)


class LLMError(WebfreezeError, RuntimeError):
    """Any error of the LLM layer; its message is one line."""

    def __init__(self, message: object):
        super().__init__(one_line(message))


class ProviderError(LLMError):
    """The provider still failed after the retries (or failed in a way that is not retried).

    ``kind`` is one of :data:`PROVIDER_ERROR_KINDS`; ``attempts`` counts the requests sent.
    """

    def __init__(self, message: object, *, kind: str, attempts: int):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts


# "bad_response": an answer that is not a chat completion (no choices); not retried.
PROVIDER_ERROR_KINDS = ("429", "5xx", "timeout", "connection", "4xx", "bad_response")


class CassetteMiss(LLMError):
    """Strict replay met a request that the cassette does not hold."""

    def __init__(self, message: object, *, key: str, task_id: str | None, step: int | None,
                 nearest: dict | None = None):
        super().__init__(message)
        self.key = key
        self.task_id = task_id
        self.step = step
        self.nearest = nearest


class CassetteError(LLMError):
    """A cassette file that cannot be used: missing, unreadable, damaged or of another format."""


class EmbeddingError(LLMError):
    """Embeddings cannot be computed: a model, its weights or a library it needs is missing or
    damaged, or its ONNX export does not match it."""
