"""What hybrid search reads: a keyword index, a vector index and the documents behind them,
all in one snapshot of the read models (``projections/retrieval_view.py`` implements it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from application.retrieval.ports import Hit


@dataclass(frozen=True)
class KeywordResult:
    hits: list[Hit]  # best first; score = BM25 (higher is better)
    terms: list[str]  # the analysed query terms that were searched
    method: str  # e.g. "fts5 bm25" or "postgres bm25"


@dataclass(frozen=True)
class Doc:
    """An indexed chunk or wiki page as search returns it. A page is its last good TLDR."""

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

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> list[Hit]:
        """Nearest by cosine, best first; score = cosine. ``below`` as for ``keyword``."""
        ...

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        """The current text of each id that still exists (removed chunks are absent)."""
        ...

    def overview(self, collection_id: str) -> Doc | None:
        """The collection's table of contents (its topics), or None for an empty collection."""
        ...
