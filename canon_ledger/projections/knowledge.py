"""The knowledge projection: documents and accepted chapter text -> chunks and topics; wiki
pages -> pages and what they cite; and, kept incrementally, whether each page is stale.

Staleness is derived from events alone: a chunk event recomputes only the pages of that
chunk's topic (never a sweep over all chunks). A reverted edit brings the hash back, and
with it a fresh page, at no cost. Drafts never reach this model: chapter text arrives only
as ``Chapter.TextAccepted``.
"""

from __future__ import annotations

from functools import singledispatchmethod
from typing import TYPE_CHECKING, Any

from canon_ledger.domain.topics import stored_topics
from sqlalchemy import and_, bindparam, case, exists, func, literal, select, update

from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.chunking import chunk_chapter
from canon_ledger.domain.document import Document
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.wiki import WikiPage
from canon_ledger.projections.knowledge_tables import KnowledgeTables
from canon_ledger.projections.partitioning import BY_COLLECTION
from canon_ledger.projections.sql_ops import Delete, Op, Run, Update, Upsert, no_ops, ops_of

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import BindParameter

TOPIC_DEPTH = 2


def topic_of(section_id: str) -> str:
    """A topic is a document's section down to the second heading level (a single H1 title
    and its H2 sections, or H1 chapters): ``coll/doc#a/b/c`` -> ``coll/doc#a/b``."""
    doc_key, _, path = section_id.partition("#")
    return f"{doc_key}#{'/'.join(path.split('/')[:TOPIC_DEPTH])}"


class KnowledgeProjection:
    """``on`` gives one event's ops, dispatched on the event's type: one ``on.register`` per
    handled type, and ``HANDLED`` (hence ``topics``) is read from that registry."""

    name = "knowledge"
    partitioning = BY_COLLECTION  # every row is a collection's; workers may split a build by it

    def __init__(self, tables: KnowledgeTables, tokens: TokenCounter) -> None:
        self.tables = tables
        self.tokens = tokens
        self.topics = stored_topics(*self.HANDLED)
        self._restale = self._staleness_statement()

    def ops(self, events: list[tuple[int, Any]]) -> list[Op]:
        return ops_of(self.on, events)

    on = singledispatchmethod(no_ops)

    # -- documents and chunks -------------------------------------------------------------
    @on.register
    def _(self, event: Document.Ingested, position: int) -> list[Op]:
        ops: list[Op] = [Upsert(self.tables.documents, {"collection_id": event.collection_id,
                                                   "document_id": event.document_id,
                                                   "title": event.title, "source": position})]
        ops += self._topics(event.collection_id, event.document_id, event.sections, position)
        touched: set[str] = set()
        for chunk in event.chunks:
            ops.append(self._chunk_row(event.collection_id, event.document_id, chunk, position))
            touched.add(topic_of(chunk["section_id"]))
        return ops + [self._recompute(event.collection_id, t, position) for t in sorted(touched)]

    @on.register
    def _(self, event: Document.Restructured, position: int) -> list[Op]:
        key = {"collection_id": event.collection_id, "document_id": event.document_id}
        ops: list[Op] = [Upsert(self.tables.documents, {**key, "title": event.title, "source": position}),
                         Delete(self.tables.topics, key)]
        return ops + self._topics(event.collection_id, event.document_id, event.sections, position)

    @on.register
    def _(self, event: Document.ChunkAdded, position: int) -> list[Op]:
        document_id = event.chunk["chunk_id"].rsplit("#", 1)[0].partition("/")[2]
        return [self._chunk_row(event.collection_id, document_id, event.chunk, position),
                self._recompute(event.collection_id, topic_of(event.chunk["section_id"]), position)]

    @on.register
    def _(self, event: Document.ChunkEdited, position: int) -> list[Op]:
        return [Update(self.tables.chunks, {"collection_id": event.collection_id, "chunk_id": event.chunk_id},
                       {"text": event.text, "hash": event.hash, "tokens": self.tokens.count(event.text),
                        "source": position}),
                self._recompute(event.collection_id, topic_of(event.chunk_id.rsplit("/", 1)[0]), position)]

    @on.register
    def _(self, event: Document.ChunkRemoved, position: int) -> list[Op]:
        return [Update(self.tables.chunks, {"collection_id": event.collection_id, "chunk_id": event.chunk_id},
                       {"removed": True, "source": position}),
                self._recompute(event.collection_id, topic_of(event.chunk_id.rsplit("/", 1)[0]), position)]

    @on.register
    def _(self, event: Chapter.TextAccepted, position: int) -> list[Op]:
        c = chunk_chapter(event.story_id, event.chapter, event.text, self.tokens)
        collection, document_id, title, sections, chunks = c.collection, c.document_id, c.title, c.sections, c.chunks
        ops: list[Op] = [
            Upsert(self.tables.documents, {"collection_id": collection, "document_id": document_id, "title": title,
                                      "source": position}),
            Delete(self.tables.topics, {"collection_id": collection, "document_id": document_id}),
            # A later accepted draft replaces the chapter's text: its old chunks go first.
            Update(self.tables.chunks, {"collection_id": collection, "document_id": document_id},
                   {"removed": True, "source": position}),
        ]
        ops += self._topics(collection, document_id, [{"section_id": s.section_id, "breadcrumb": list(s.breadcrumb)}
                                                      for s in sections], position)
        ops += [self._chunk_row(collection, document_id, c.as_dict(), position) for c in chunks]
        topics = sorted({topic_of(s.section_id) for s in sections})
        return ops + [self._recompute(collection, t, position) for t in topics]

    def _topics(self, collection: str, document_id: str, sections: list[dict[str, Any]], p: int) -> list[Op]:
        ops: list[Op] = []
        seen: set[str] = set()
        for s in sections:
            topic = topic_of(s["section_id"])
            if topic in seen:
                continue
            seen.add(topic)
            ops.append(Upsert(self.tables.topics, {"collection_id": collection, "topic_id": topic, "document_id": document_id,
                                              "title": " > ".join(s["breadcrumb"][:TOPIC_DEPTH + 1]),
                                              "ordinal": len(seen),
                                              "source": p}))
        return ops

    def _chunk_row(self, collection: str, document_id: str, chunk: dict[str, Any], p: int) -> Upsert:
        return Upsert(self.tables.chunks, {
            "collection_id": collection, "chunk_id": chunk["chunk_id"], "document_id": document_id,
            "topic_id": topic_of(chunk["section_id"]), "section_id": chunk["section_id"], "ordinal": chunk["ordinal"],
            "text": chunk["text"], "hash": chunk["hash"], "tokens": self.tokens.count(chunk["text"]),
            "removed": False, "source": p,
        })

    # -- pages ----------------------------------------------------------------------------------
    @on.register
    def _(self, event: WikiPage.PageCompiled, position: int) -> list[Op]:
        page = event.page
        key = {"collection_id": event.collection_id, "topic_id": event.topic_id}
        ops: list[Op] = [
            Upsert(self.tables.pages, {**key, "title": page["title"], "tldr": page["tldr"], "body": page["body"],
                                  "tags": list(page["tags"]), "wikilinks": list(page["wikilinks"]),
                                  "method": page["method"], "source_set_hash": page["source_set_hash"],
                                  "embedding_key": page.get("embedding_key"), "embedding": page.get("embedding"),
                                  "compiled": position, "edited": 0, "set_changed": 0, "drift_since": None}),
            Delete(self.tables.page_sources, key),
        ]
        ops += [Upsert(self.tables.page_sources, {**key, "chunk_id": s["chunk_id"], "hash_at_compile": s["hash"]})
                for s in page["sources"]]
        return ops + [self._recompute(event.collection_id, event.topic_id, position)]

    HANDLED = tuple(t for t in on.dispatcher.registry if t is not object)

    # -- staleness ------------------------------------------------------------------------------
    def _recompute(self, collection: str, topic: str, position: int) -> Run:
        return Run("restale", self._restale, {"c": collection, "t": topic, "p": position})

    def _staleness_statement(self) -> Any:
        pages, sources, chunks = self.tables.pages, self.tables.page_sources, self.tables.chunks
        c: BindParameter[Any] = bindparam("c")
        t: BindParameter[Any] = bindparam("t")
        edited = (
            select(func.count())
            .select_from(sources.outerjoin(chunks, and_(chunks.c.collection_id == sources.c.collection_id,
                                                        chunks.c.chunk_id == sources.c.chunk_id)))
            .where(sources.c.collection_id == c, sources.c.topic_id == t,
                   (chunks.c.chunk_id.is_(None)) | (chunks.c.removed == literal(True))
                   | (chunks.c.hash != sources.c.hash_at_compile))
            .scalar_subquery()
        )
        uncited = (
            select(func.count())
            .select_from(chunks)
            .where(chunks.c.collection_id == c, chunks.c.topic_id == t, chunks.c.removed == literal(False),
                   ~exists().where(sources.c.collection_id == c, sources.c.topic_id == t,
                                   sources.c.chunk_id == chunks.c.chunk_id))
            .scalar_subquery()
        )
        return (
            update(pages)
            .where(pages.c.collection_id == c, pages.c.topic_id == t)
            .values(edited=edited, set_changed=uncited,
                    drift_since=case((edited + uncited == 0, None),
                                     else_=func.coalesce(pages.c.drift_since, bindparam("p"))))
        )
