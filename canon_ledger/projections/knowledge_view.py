"""Reads the knowledge tables for compile, lint and search."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import false, select
from sqlalchemy.engine import Connection, Engine

from canon_ledger.application.knowledge.ports import (
    ChunkView,
    KnowledgeReader,
    KnowledgeSnapshot,
    PageView,
    StaleTopic,
    TopicView,
)
from canon_ledger.projections.knowledge_tables import KnowledgeTables


class SqlKnowledgeReader(KnowledgeReader):
    def __init__(self, engine: Engine, builds: Callable[[Connection], KnowledgeTables]) -> None:
        self.engine = engine
        self._builds = builds

    @contextmanager
    def snapshot(self) -> Iterator[SqlKnowledgeSnapshot]:
        with self.engine.begin() as conn:
            yield SqlKnowledgeSnapshot(conn, self._builds(conn))


def _page(r: Any) -> PageView:
    return PageView(r["collection_id"], r["topic_id"], r["title"], r["tldr"], list(r["tags"]), list(r["wikilinks"]),
                    r["method"], r["source_set_hash"], r["embedding_key"], r["embedding"], r["edited"],
                    r["set_changed"], r["drift_since"])


class SqlKnowledgeSnapshot(KnowledgeSnapshot):
    def __init__(self, conn: Connection, tables: KnowledgeTables) -> None:
        self.conn = conn
        self.tables = tables

    def collections(self) -> list[str]:
        tp = self.tables.topics
        return [r[0] for r in self.conn.execute(select(tp.c.collection_id).distinct().order_by(tp.c.collection_id))]

    def topics(self, collection_id: str) -> list[TopicView]:
        tp = self.tables.topics
        rows = self.conn.execute(select(tp).where(tp.c.collection_id == collection_id)
                                 .order_by(tp.c.document_id, tp.c.ordinal)).mappings()
        return [TopicView(r["collection_id"], r["topic_id"], r["title"], r["document_id"]) for r in rows]

    def topic_chunks(self, collection_id: str, topic_id: str) -> list[ChunkView]:
        ch = self.tables.chunks
        rows = self.conn.execute(
            select(ch.c.chunk_id, ch.c.text, ch.c.hash)
            .where(ch.c.collection_id == collection_id, ch.c.topic_id == topic_id, ch.c.removed == false())
            .order_by(ch.c.section_id, ch.c.ordinal))
        return [ChunkView(r.chunk_id, r.text, r.hash) for r in rows]

    def page(self, collection_id: str, topic_id: str) -> PageView | None:
        pg = self.tables.pages
        row = self.conn.execute(select(pg).where(pg.c.collection_id == collection_id, pg.c.topic_id == topic_id)).mappings().first()
        return _page(row) if row else None

    def pages(self, collection_id: str | None = None) -> list[PageView]:
        pg = self.tables.pages
        stmt = select(pg).order_by(pg.c.collection_id, pg.c.topic_id)
        if collection_id is not None:
            stmt = stmt.where(pg.c.collection_id == collection_id)
        return [_page(r) for r in self.conn.execute(stmt).mappings()]

    def stale(self, collection_id: str | None = None) -> list[StaleTopic]:
        tp, pg = self.tables.topics, self.tables.pages
        stmt = select(tp, pg.c.topic_id.label("page_topic"), pg.c.drift_since).select_from(
            tp.outerjoin(pg, (pg.c.collection_id == tp.c.collection_id) & (pg.c.topic_id == tp.c.topic_id))
        ).where(pg.c.topic_id.is_(None) | pg.c.drift_since.is_not(None))
        if collection_id is not None:
            stmt = stmt.where(tp.c.collection_id == collection_id)
        out = []
        for r in self.conn.execute(stmt).mappings():
            topic = TopicView(r["collection_id"], r["topic_id"], r["title"], r["document_id"])
            page = self.page(r["collection_id"], r["topic_id"]) if r["page_topic"] else None
            out.append(StaleTopic(topic, page, r["drift_since"] if page else r["source"]))
        return sorted(out, key=lambda s: (s.drift_since, s.topic.collection_id, s.topic.topic_id))
