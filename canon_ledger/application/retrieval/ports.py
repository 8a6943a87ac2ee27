"""The ports and shared types of L1 retrieval: one retriever's hit, a fused candidate, the
reranker plug-in, what hybrid search reads (a keyword index, a vector index and the documents
behind them, all in one snapshot of the read models: ``projections/retrieval_view.py``
implements it) and the step-back providers. The embedder is ``knowledge.ports.Embedder``; the
step record is ``application.packets.packet.Stage``: neither is redefined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Hit:
    """One retriever's result: a chunk id, or "page:<collection>/<topic>" for a wiki page."""

    id: str
    score: float | None  # raw retriever score, higher is better; None when the retriever gives none


@dataclass(frozen=True)
class Candidate:
    id: str
    scores: Mapping[str, float | None]  # raw score per retriever name; absent if not in that list
    ranks: Mapping[str, int]  # 1-based rank per retriever list it appeared in
    fused: float  # RRF score, or the reranker's score after rerank


class Reranker(Protocol):
    """An optional plug-in that scores (query, text) pairs, higher is more relevant: a local
    cross-encoder, or a cloud reranker (Cohere / Voyage shape: POST {model, query, documents} ->
    {results: [{index, relevance_score}]}). A cloud reranker is the quality ceiling, never the
    default: it spends a paid call per query and sends the candidates' text off the machine.
    ``score`` returns one finite float per text, in order, or raises; ``rerank`` then falls back."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...


@dataclass(frozen=True)
class KeywordResult:
    hits: list[Hit]  # best first; score = BM25 (higher is better)
    terms: list[str]  # the analysed query terms that were searched
    method: str  # e.g. "fts5 bm25" or "postgres bm25"


@dataclass(frozen=True)
class TermStats:
    """What pseudo-relevance feedback reads: the analysed terms of some chunks, and the document
    frequencies of those terms over the documents the store's BM25 takes its IDF from."""

    terms: dict[str, list[str]]  # chunk id -> its analysed terms, in order, repeats kept
    documents: int  # N
    df: dict[str, int]  # term -> documents holding it


@dataclass(slots=True)
class Doc:
    """An indexed chunk or wiki page as search reads it and returns it (a hit: with its
    ``score``). A page is its last good TLDR. Slotted, not frozen (one is built per candidate
    of every search): treat it as a value."""

    id: str
    kind: str  # chunk | page | overview
    collection: str
    text: str
    stale: bool = False
    sources: list[int] = field(default_factory=list)  # log positions of the events behind the text
    score: float | None = None  # once ranked: the reranker's score (summed z by default); None for the overview

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "collection": self.collection, "text": self.text,
                "stale": self.stale, "sources": list(self.sources),
                "score": None if self.score is None else round(self.score, 6)}


class RetrievalSnapshot(Protocol):
    vector_model: str | None  # the model whose vectors this snapshot holds (None: no vector index)

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int,
                below: str | None = None) -> KeywordResult:
        """``below``: only documents whose id (a page's without ``page:``) sorts before it."""
        ...

    def keyword_weighted(self, weights: Mapping[str, float], collection_ids: Sequence[str], limit: int,
                         below: str | None = None) -> list[Hit]:
        """BM25 with each term's contribution times its weight, best first (an expanded query).
        With every weight 1 it ranks as ``keyword`` does. ``below`` as for ``keyword``."""
        ...

    def term_stats(self, doc_ids: Sequence[str], collection_ids: Sequence[str]) -> TermStats:
        """The terms of the chunks among ``doc_ids`` in ``collection_ids`` (pages and unknown
        ids are left out), and the df of every one of those terms."""
        ...

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> list[Hit]:
        """Nearest by cosine, best first; score = cosine. ``below`` as for ``keyword``."""
        ...

    def vectors(self, ids: Sequence[str], collection_ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vector (unit length) of each id among ``ids`` in ``collection_ids`` that the
        vector index holds; other ids are left out. Vector feedback reads it (``rocchio.py``)."""
        ...

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        """The current text of each id that still exists (removed chunks are absent)."""
        ...

    def overview(self, collection_id: str) -> Doc | None:
        """The collection's table of contents (its topics), or None for an empty collection."""
        ...


class QueryGeneraliser(Protocol):
    """The one generate call: a provider that rewrites a question into a more general one."""

    name: str

    def step_back(self, query: str) -> str: ...


class StepBackCache(Protocol):
    """Durable, shared by every process on the store; not canon, so a plain table is enough."""

    def get(self, key: str, now: float) -> str | None:
        """The generalised query cached under ``key``, unless it expired at or before ``now``."""
        ...

    def put(self, key: str, query: str, generalised: str, method: str, now: float, ttl_s: float) -> None: ...
