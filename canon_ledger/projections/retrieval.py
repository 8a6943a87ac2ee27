"""The retrieval projections: chunks and wiki pages -> a keyword index, and -> vectors.

Both read the same events as the knowledge projection and see the same documents: a
document's chunks, a chapter's accepted text chunked the same way (drafts never), and each
compiled wiki page as its title, TLDR and tags. ``changes`` turns an event into what to
(re)index or drop; each projection's ``on`` turns that into idempotent row ops. ``changes``
is the one dispatch on the event's type (``functools.singledispatch``, one registration per
handled type, ``HANDLED`` read from its registry): both projections and the read models'
status counts (``model_status.TextCounts``) share it.

The vector projection embeds inside its catch-up, never on a command. ``prefetch`` lets the
caller embed a backlog before the write transaction opens, so a slow model does not hold the
store's write lock: the transaction then finds every vector ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import singledispatch
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.chunking import chunk_chapter, content_hash
from canon_ledger.domain.document import Document
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.topics import stored_topics
from canon_ledger.domain.wiki import WikiPage, page_doc_id
from canon_ledger.projections.partitioning import BY_COLLECTION
from canon_ledger.projections.retrieval_tables import RetrievalTables, VectorTables
from canon_ledger.projections.retrieval_text import key64, term_counts
from canon_ledger.projections.sql_ops import Delete, Op, Run, Upsert, ops_of

if TYPE_CHECKING:  # numpy loads with the first vector: a verb that stores or reads none never imports it
    import numpy as np


@dataclass(frozen=True)
class Put:
    collection_id: str
    doc_id: str
    kind: str  # chunk | page
    document_id: str  # a chunk's document, a page's topic
    text: str
    embedding: tuple[str, list[float]] | None = None  # (model, vector) a page was compiled with


@dataclass(frozen=True)
class Drop:
    collection_id: str
    doc_id: str


@dataclass(frozen=True)
class DropDocument:
    """Every chunk of one document: a chapter whose accepted text was replaced."""

    collection_id: str
    document_id: str


Change = Put | Drop | DropDocument


def page_text(title: str, tldr: str, tags: Sequence[str]) -> str:
    """What a page is indexed (and embedded) as: the same text the wiki compiler embeds."""
    return f"{title}\n{tldr}\n{' '.join(tags)}"


def _document_of(chunk_id: str) -> str:
    return chunk_id.rsplit("#", 1)[0].partition("/")[2]


@singledispatch
def changes(event: object, tokens: TokenCounter) -> list[Change]:
    """What ``event`` (re)indexes or drops: nothing for a type no retrieval model handles."""
    return []


@changes.register
def _(event: Document.Ingested, tokens: TokenCounter) -> list[Change]:
    return [Put(event.collection_id, c["chunk_id"], "chunk", event.document_id, c["text"]) for c in event.chunks]


@changes.register
def _(event: Document.ChunkAdded, tokens: TokenCounter) -> list[Change]:
    c = event.chunk
    return [Put(event.collection_id, c["chunk_id"], "chunk", _document_of(c["chunk_id"]), c["text"])]


@changes.register
def _(event: Document.ChunkEdited, tokens: TokenCounter) -> list[Change]:
    return [Put(event.collection_id, event.chunk_id, "chunk", _document_of(event.chunk_id), event.text)]


@changes.register
def _(event: Document.ChunkRemoved, tokens: TokenCounter) -> list[Change]:
    return [Drop(event.collection_id, event.chunk_id)]


@changes.register
def _(event: WikiPage.PageCompiled, tokens: TokenCounter) -> list[Change]:
    page = event.page
    embedded = (page["embedder"], page["embedding"]) if page.get("embedder") and page.get("embedding") else None
    return [Put(event.collection_id, page_doc_id(event.topic_id), "page", event.topic_id,
                page_text(page["title"], page["tldr"], page["tags"]), embedded)]


@changes.register
def _(event: Chapter.TextAccepted, tokens: TokenCounter) -> list[Change]:
    # The knowledge projection's chunking, so the chunk ids are the same ones.
    c = chunk_chapter(event.story_id, event.chapter, event.text, tokens)
    return [DropDocument(c.collection, c.document_id),
            *(Put(c.collection, chunk.chunk_id, "chunk", c.document_id, chunk.text) for chunk in c.chunks)]


HANDLED = tuple(t for t in changes.registry if t is not object)


class _IndexProjection:
    """What both retrieval projections share: an event's ``changes``, each turned into the
    projection's own row ops (``_ops``)."""

    tokens: TokenCounter

    def on(self, event: object, position: int) -> list[Op]:
        """The ops of one event at ``position``: none for a type ``changes`` does not handle."""
        ops: list[Op] = []
        for change in changes(event, self.tokens):
            ops += self._ops(change, position)
        return ops

    def _ops(self, change: Change, p: int) -> list[Op]:
        raise NotImplementedError


class KeywordProjection(_IndexProjection):
    """Doc rows (and on SQLite, through triggers, FTS5); on PostgreSQL, postings and totals too."""

    name = "retrieval"
    partitioning = BY_COLLECTION  # docs, postings and totals are per collection; workers may split by it

    def __init__(self, tables: RetrievalTables, tokens: TokenCounter) -> None:
        self.tables = tables
        self.tokens = tokens
        self.topics = stored_topics(*HANDLED)
        if tables.postings is not None:
            d, p, s = tables.docs.name, tables.postings.name, tables.stats.name  # type: ignore[union-attr]
            self._drop_document_postings = text(
                f"DELETE FROM {p} WHERE doc_key IN "
                f"(SELECT doc_key FROM {d} WHERE collection_id = :c AND document_id = :d)")
            self._restat = text(
                f"INSERT INTO {s} (collection_id, docs, total_length) "
                f"SELECT CAST(:c AS VARCHAR), count(*), coalesce(sum(length), 0) FROM {d} WHERE collection_id = :c "
                f"ON CONFLICT (collection_id) DO UPDATE SET docs = EXCLUDED.docs, total_length = EXCLUDED.total_length")

    def ops(self, events: list[tuple[int, Any]]) -> list[Op]:
        return ops_of(self.on, events)

    def _ops(self, change: Change, p: int) -> list[Op]:
        docs, postings = self.tables.docs, self.tables.postings
        if isinstance(change, DropDocument):
            ops: list[Op] = []
            if postings is not None:
                ops.append(Run("rt_drop_document_postings", self._drop_document_postings,
                               {"c": change.collection_id, "d": change.document_id}))
            return ops + [Delete(docs, {"collection_id": change.collection_id, "document_id": change.document_id}),
                          *self._restats(change.collection_id)]
        doc_key = key64(change.collection_id, change.doc_id)
        if isinstance(change, Drop):
            ops = [Delete(docs, {"collection_id": change.collection_id, "doc_id": change.doc_id})]
            if postings is not None:
                ops.append(Delete(postings, {"doc_key": doc_key}))
            return ops + self._restats(change.collection_id)
        counts = term_counts(change.text)
        length = sum(counts.values())
        ops = [Upsert(docs, {"collection_id": change.collection_id, "doc_id": change.doc_id, "kind": change.kind,
                             "document_id": change.document_id, "doc_key": doc_key, "length": length,
                             "terms": " ".join(sorted(counts.elements())), "source": p})]
        if postings is not None:
            coll_key = key64(change.collection_id)
            ops.append(Delete(postings, {"doc_key": doc_key}))
            ops += [Upsert(postings, {"coll_key": coll_key, "term": term, "doc_key": doc_key, "tf": tf, "dl": length})
                    for term, tf in sorted(counts.items())]
        return ops + self._restats(change.collection_id)

    def _restats(self, collection_id: str) -> list[Op]:
        if self.tables.stats is None:
            return []
        return [Run("rt_restat", self._restat, {"c": collection_id}, deferred=True)]


def to_blob(vector: Sequence[float]) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")


class VectorProjection(_IndexProjection):
    """One embedding model's vectors for every indexed chunk and page.

    Split by collection like the keyword index: a share's step embeds its page's texts inside
    its own transaction (``ops``), which locks only that share's row; a whole-build catch-up
    embeds first, outside the transaction (``catch_up_vectors``)."""

    partitioning = BY_COLLECTION  # vectors and their change marks (rt_vecsets) are per collection

    def __init__(self, tables: VectorTables, tokens: TokenCounter, embedder: Any, batch: int = 32) -> None:
        self.tables = tables
        self.tokens = tokens
        self.embedder = embedder
        self.model = embedder.name
        self.name = f"vectors:{self.model}"
        self.batch = batch
        self.topics = stored_topics(*HANDLED)
        self._ready: dict[str, bytes] = {}  # text hash -> vector, embedded ahead by prefetch

    # -- embedding --------------------------------------------------------------------------------
    def _wanted(self, events: list[tuple[int, Any]]) -> dict[str, str]:
        """text hash -> text, for every Put that needs this model to embed it."""
        wanted: dict[str, str] = {}
        for _, e in events:
            for change in changes(e, self.tokens):
                if isinstance(change, Put) and not self.given(change):
                    h = content_hash(change.text)
                    if h not in self._ready:
                        wanted[h] = change.text
        return wanted

    def given(self, change: Put) -> bool:
        return change.embedding is not None and change.embedding[0] == self.model

    def embed(self, wanted: dict[str, str], progress: Any = None) -> None:
        """Embed ``wanted`` (hash -> text) in batches; ``progress(done, total)`` after each."""
        items = list(wanted.items())
        for start in range(0, len(items), self.batch):
            part = items[start:start + self.batch]
            try:
                vectors = self.embedder.embed([t for _, t in part])
            except ProviderError:
                raise
            except Exception as e:  # any embedder's failure is the provider's: retried, never quarantined
                raise ProviderError(f"{self.model}: {type(e).__name__}: {e}") from e
            if len(vectors) != len(part):
                raise ProviderError(f"{self.model} returned {len(vectors)} vectors for {len(part)} texts")
            for (h, _), v in zip(part, vectors):
                self._ready[h] = to_blob(v)
            if progress is not None:
                progress(start + len(part), len(items))

    def prefetch(self, log: Any, start: int, goal: int, page_size: int = 1000, progress: Any = None) -> int:
        """Embed the texts of positions ``start``..``goal`` now, outside any transaction: all
        of them are found first, so ``progress(done, total)`` knows the total. Returns how
        many texts were embedded."""
        wanted: dict[str, str] = {}
        while start <= goal:
            page = log.read(start, page_size, goal, self.topics)
            if not page:
                break
            wanted.update(self._wanted(page))
            if len(page) < page_size:
                break
            start = page[-1][0] + 1
        self.embed(wanted, progress)
        return len(wanted)

    # -- ops --------------------------------------------------------------------------------------
    def ops(self, events: list[tuple[int, Any]]) -> list[Op]:
        self.embed(self._wanted(events))
        ops = ops_of(self.on, events)
        for op in ops:  # what this page used is no longer needed ahead
            if isinstance(op, Upsert) and op.table is self.tables.vectors:
                self._ready.pop(op.values["hash"], None)
        return ops

    def _ops(self, change: Change, p: int) -> list[Op]:
        vectors, vecsets = self.tables.vectors, self.tables.vecsets
        touched = Upsert(vecsets, {"collection_id": change.collection_id, "changed": p})
        if isinstance(change, DropDocument):
            return [Delete(vectors, {"collection_id": change.collection_id, "document_id": change.document_id}), touched]
        if isinstance(change, Drop):
            return [Delete(vectors, {"collection_id": change.collection_id, "doc_id": change.doc_id}), touched]
        h = content_hash(change.text)
        if self.given(change):
            blob = to_blob(change.embedding[1])  # type: ignore[index]
        else:
            blob = self._ready[h]  # ops() embedded whatever prefetch had not
        return [Upsert(vectors, {"collection_id": change.collection_id, "doc_id": change.doc_id, "model": self.model,
                                 "kind": change.kind, "document_id": change.document_id, "hash": h, "vector": blob,
                                 "source": p}), touched]


def catch_up_vectors(models: Any, target: int | None = None, progress: Any = None) -> int:
    """``ReadModels.catch_up_serving`` for the vector read model, with the backlog embedded first,
    outside the write transaction (``models`` is its ``projections.read_models.ReadModels``)."""
    if target is not None and models.known_to_reflect(target):
        return target
    goal = models.log.position() if target is None else target
    with models.read_engine.begin() as conn:
        build, start = models.serving(conn)
    runner = models.runner(build)
    if start < goal:
        runner.projection.prefetch(models.log, start + 1, goal, models.page_size, progress)
    reached: int = runner.catch_up(goal, start=start)
    return reached
