"""What hybrid search reads: a keyword index, a vector index and the documents behind them,
all in one snapshot of the read models (``projections/retrieval_view.py`` implements it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from canon_ledger.application.retrieval.ports import Hit


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
    """An indexed chunk or wiki page as search returns it. A page is its last good TLDR.
    Slotted, not frozen (one is built per candidate of every search): treat it as a value."""

    id: str
    kind: str  # chunk | page | overview
    collection: str
    text: str
    stale: bool = False
    sources: list[int] = field(default_factory=list)  # log positions of the events behind the text


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
