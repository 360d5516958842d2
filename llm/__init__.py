"""Talking to language models: one OpenAI-compatible chat client for remote APIs and the embedded
local model, the LLM cassette that makes LLM runs replay exactly, and the local model server.

Imports nothing of webfreeze but this package (and, later, ``webfreeze.common``).
"""

from webfreeze.llm.cassette import (
                                    FORMAT,
                                    MODES,
                                    VERSION,
                                    Cassette,
                                    canonical_request,
                                    first_difference,
                                    merge,
                                    request_key,
                                    verify_file,
)
from webfreeze.llm.client import Completion, LLMClient, build_request, retry_delay
from webfreeze.llm.config import LLMConfig
from webfreeze.llm.errors import CassetteError, CassetteMiss, LLMError, ProviderError
from webfreeze.llm.local import LOCAL_MODEL_ID, LOCAL_SAMPLING, LocalModelServer, local_config, local_model_path
from webfreeze.llm.slots import SlotLimiter

__all__ = [
    "FORMAT", "MODES", "VERSION", "Cassette", "canonical_request", "first_difference", "merge", "request_key",
    "verify_file", "Completion", "LLMClient", "build_request", "retry_delay", "LLMConfig", "CassetteError",
    "CassetteMiss", "LLMError", "ProviderError", "LOCAL_MODEL_ID", "LOCAL_SAMPLING", "LocalModelServer",
    "local_config", "local_model_path", "SlotLimiter",
]
