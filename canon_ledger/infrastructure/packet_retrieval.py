"""L1 for packets: hybrid search over the story's own accepted chapters, before the chapter.

Only the story collection (``story:<id>``) is searched: its chunks come from accepted
chapter text, which is canon, so nothing unconfirmed can enter a packet through retrieval.
Only chapters before the packet's chapter count: a writer at chapter 5 must not be shown
chapter 8. Wiki pages of the collection enter only while its lint is green, and the ``wiki``
stage says which way it went. Nothing here raises: a failure is an ``error`` stage and the
packet is built from L0 alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from canon_ledger.application.knowledge.lint import lint
from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.packets.ports import Recall, Recalled, Retriever
from canon_ledger.application.retrieval.feedback import OFF
from canon_ledger.application.retrieval.ports import Doc, KeywordResult, RetrievalSnapshot, TermStats
from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.domain.chunking import chapter_document, document_chapter, story_collection
from canon_ledger.domain.wiki import PAGE_PREFIX

TOP_K = 8


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


class StoryRetriever(Retriever):
    """The packet compiler's Retriever port, over the live knowledge and retrieval read models."""

    def __init__(self, position: Callable[[], int], catch_up: Callable[[int], None],
                 catch_up_vectors: Callable[[int], None], reader: Any, pipeline: Any, knowledge_reader: Any,
                 top_k: int = TOP_K, feedback: str = OFF,
                 lag: Callable[[Sequence[str]], Mapping[str, str]] | None = None) -> None:
        self.position = position
        self.lag = lag  # a worker feeds the indexes: stage notes for what they do not hold yet
        self.catch_up = catch_up  # knowledge and keyword index: a failure is an error stage
        self.catch_up_vectors = catch_up_vectors  # a failure leaves keyword search standing
        self.reader = reader
        self.pipeline = pipeline
        self.knowledge_reader = knowledge_reader
        self.top_k = top_k
        # RM3 on the keyword list: off for packets, even when keyword search answers alone. It
        # adds index reads to every packet, and its gain is measured on Cranfield queries
        # (docs/benchmarks.md, issue 6), not on packet queries; a packet's L1 stays what it was.
        self.feedback = feedback

    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        collection = story_collection(story_id)
        try:
            goal = self.position()
            self.catch_up(goal)
            problem = None
            try:
                self.catch_up_vectors(goal)
            except Exception as e:  # noqa: BLE001
                problem = f"{type(e).__name__}: {str(e)[:160]}"
            lag = self.lag([collection]) if self.lag is not None else None
            with self.reader.snapshot() as snap:
                result = self.pipeline.search(EarlierChapters(snap, chapter), [collection], query, top_k or self.top_k,
                                              vector_problem=problem, feedback=self.feedback, lag=lag)
            hits = [h for h in result.hits if h.kind in ("chunk", "page")]
            pages = [h for h in hits if h.kind == "page"]
            wiki = Stage("wiki", "skipped", "no wiki page of the story ranked")
            if pages:
                with self.knowledge_reader.snapshot() as k:
                    report = lint(k, collection)
                if report.green:
                    wiki = Stage("wiki", "done", f"lint green: {len(pages)} page TLDR(s) offered")
                else:
                    codes = sorted({i.code for i in report.issues})
                    wiki = Stage("wiki", "skipped", f"lint not green ({len(report.issues)} issue(s): {', '.join(codes)}): "
                                                    f"{len(pages)} page(s) left out, chunks still offered")
                    hits = [h for h in hits if h.kind != "page"]
            recalled = [Recalled(h.id, "wiki_page" if h.kind == "page" else "chunk", h.text, tuple(h.sources))
                        for h in hits]
            return Recall(query, recalled, [*result.stages, wiki])
        except Exception as e:  # noqa: BLE001 - L1 is supplementary: the packet stands on L0
            return Recall(query, [], [Stage("l1-retrieval", "error",
                                            f"{type(e).__name__}: {str(e)[:160]}; L0 structured recall only")])
