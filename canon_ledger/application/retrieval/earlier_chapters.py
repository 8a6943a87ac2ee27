"""A story's retrieval snapshot seen through a chapter: only documents of chapters before it.

A packet's L1 retrieval searches the chapters before the packet's chapter (a writer at chapter
5 must not be shown chapter 8), and a search of a story's collection below author scope the
chapters up to the one asked (``canon_reads.search_through``): both search through
``EarlierChapters``, whose indexes filter by document before ranking, so the top is still full
when enough is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from canon_ledger.application.retrieval.ports import Doc, Hit, KeywordResult, RetrievalSnapshot, TermStats
from canon_ledger.domain.chunking import chapter_document, document_chapter
from canon_ledger.domain.wiki import PAGE_PREFIX


def _document(doc_id: str) -> str | None:
    """``story:s/chapter-00005#a/b/0`` or ``page:story:s/chapter-00005#a`` -> ``chapter-00005``."""
    rest = doc_id[len(PAGE_PREFIX):] if doc_id.startswith(PAGE_PREFIX) else doc_id
    _, slash, tail = rest.partition("/")
    return tail.partition("#")[0] if slash else None


@lru_cache(maxsize=65_536)
def _chapter(doc_id: str) -> int | None:
    """The chapter whose text ``doc_id`` comes from, or None (remembered: every search of a
    packet checks the same ids again)."""
    return document_chapter(_document(doc_id))


class EarlierChapters(RetrievalSnapshot):
    """A retrieval snapshot that sees only documents before one chapter of the story: the
    indexes filter by document before ranking (``below``), and every id is checked again."""

    def __init__(self, inner: RetrievalSnapshot, chapter: int) -> None:
        self.inner = inner
        self.chapter = chapter
        self.before = chapter_document(chapter)
        self.vector_model = inner.vector_model

    def _keep(self, doc_id: str) -> bool:
        # By number: the ids' zero padding sorts in chapter order only below chapter 100,000.
        number = _chapter(doc_id)
        return number is not None and number < self.chapter

    def _below(self, collection_ids: Sequence[str], below: str | None = None) -> str:
        """The tighter of this chapter's bound and the caller's ``below``."""
        [collection] = collection_ids  # a packet searches its story's collection only
        bound = f"{collection}/{self.before}"
        return bound if below is None else min(bound, below)

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int,
                below: str | None = None) -> KeywordResult:
        r = self.inner.keyword(query, collection_ids, limit, below=self._below(collection_ids, below))
        return KeywordResult([h for h in r.hits if self._keep(h.id)], r.terms,
                             f"{r.method}, chapters before {self.before[len('chapter-'):].lstrip('0')}")

    def keyword_weighted(self, weights: Mapping[str, float], collection_ids: Sequence[str], limit: int,
                         below: str | None = None) -> list[Hit]:
        hits = self.inner.keyword_weighted(weights, collection_ids, limit,
                                           below=self._below(collection_ids, below))
        return [h for h in hits if self._keep(h.id)]

    def term_stats(self, doc_ids: Sequence[str], collection_ids: Sequence[str]) -> TermStats:
        # Feedback text only from earlier chapters; the df are the collection's, as BM25's IDF.
        return self.inner.term_stats([i for i in doc_ids if self._keep(i)], collection_ids)

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int,
               below: str | None = None) -> list[Hit]:
        hits = self.inner.vector(query_vector, collection_ids, limit, below=self._below(collection_ids, below))
        return [h for h in hits if self._keep(h.id)]

    def vectors(self, ids: Sequence[str], collection_ids: Sequence[str]) -> dict[str, list[float]]:
        # Vector feedback (Rocchio) learns only from earlier chapters' chunks.
        return self.inner.vectors([i for i in ids if self._keep(i)], collection_ids)

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        return self.inner.docs([i for i in ids if self._keep(i)])

    def overview(self, collection_id: str) -> Doc | None:
        return None  # the table of contents names later chapters too

    def stored_vector(self, model: str, query: str) -> list[float] | None:
        found: list[float] | None = getattr(self.inner, "stored_vector", lambda *_: None)(model, query)
        return found
