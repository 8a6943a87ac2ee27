"""The knowledge read model: chunks, the overview skeleton (topics), wiki pages and what
they cite. Staleness is kept here, incrementally, from chunk and page events only.

Version history:
- v1: the first shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import JSON, Boolean, Column, Index, Integer, MetaData, String, Table, Text

from canon_ledger.projections.read_models import TableSet

VERSION = 1


@dataclass(frozen=True)
class KnowledgeTables(TableSet):
    tag: str
    version: int
    metadata: MetaData
    documents: Table
    topics: Table
    chunks: Table
    pages: Table
    page_sources: Table

    def all(self) -> list[Table]:
        return [self.documents, self.topics, self.chunks, self.pages, self.page_sources]


def knowledge_tables(tag: str, version: int = VERSION) -> KnowledgeTables:
    md = MetaData()

    def name(base: str) -> str:
        return f"kb_{base}_{tag}"

    documents = Table(
        name("documents"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("document_id", String(400), primary_key=True),
        Column("title", Text, nullable=False),
        Column("source", Integer, nullable=False),
    )
    # The overview skeleton: one topic per document heading of depth <= 1 (or the document).
    topics = Table(
        name("topics"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("topic_id", String(600), primary_key=True),
        Column("document_id", String(400), nullable=False),
        Column("title", Text, nullable=False),
        Column("ordinal", Integer, nullable=False),
        Column("source", Integer, nullable=False),
    )
    chunks = Table(
        name("chunks"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("chunk_id", String(1000), primary_key=True),
        Column("document_id", String(400), nullable=False),
        Column("topic_id", String(600), nullable=False),
        Column("section_id", String(1000), nullable=False),
        Column("ordinal", Integer, nullable=False),
        Column("text", Text, nullable=False),
        Column("hash", String(64), nullable=False),
        Column("tokens", Integer, nullable=False),
        Column("removed", Boolean, nullable=False),
        Column("source", Integer, nullable=False),
    )
    Index(f"ix_{name('chunks')}_topic", chunks.c.collection_id, chunks.c.topic_id)
    pages = Table(
        name("pages"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("topic_id", String(600), primary_key=True),
        Column("title", Text, nullable=False),
        Column("tldr", Text, nullable=False),
        Column("body", Text, nullable=False),
        Column("tags", JSON, nullable=False),
        Column("wikilinks", JSON, nullable=False),
        Column("method", String(100), nullable=False),
        Column("source_set_hash", String(64), nullable=False),
        Column("embedding_key", String(64)),
        Column("embedding", JSON),
        Column("compiled", Integer, nullable=False),  # position of PageCompiled
        # Cited chunks that changed or went, plus topic chunks the page does not cite.
        Column("edited", Integer, nullable=False),
        Column("set_changed", Integer, nullable=False),
        Column("drift_since", Integer),  # the position that first made it stale
    )
    page_sources = Table(
        name("page_sources"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("topic_id", String(600), primary_key=True),
        Column("chunk_id", String(1000), primary_key=True),
        Column("hash_at_compile", String(64), nullable=False),
    )
    Index(f"ix_{name('page_sources')}_chunk", page_sources.c.collection_id, page_sources.c.chunk_id)
    return KnowledgeTables(tag, version, md, documents, topics, chunks, pages, page_sources)
