"""The retrieval read models: a keyword index and, per embedding model, a vector index.

Keyword index. ``rt_docs`` has one row per indexed chunk or wiki page (its terms, length and
a 64-bit ``doc_key``). On SQLite an FTS5 table (contentless, rowid = ``doc_key``) is kept
in step with it by triggers, so every upsert or delete of a doc row updates the index in the
same statement and transaction. On PostgreSQL the projection writes postings (term, doc,
term frequency, doc length) and per-collection totals, and BM25 is computed in SQL from
them (``projections/retrieval_view.py``): ``ts_rank`` has no IDF.

Vector index. ``rt_vectors`` holds one float32 vector per (doc, model); ``rt_vecsets`` holds,
per collection, the position that last changed its vectors: a reader's cached matrix for
that collection is good while that position stands.

Version history:
- v1: the first shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import (
    DDL,
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    event,
)

from canon_ledger.projections.read_models import TableSet

VERSION = 1
VECTORS_VERSION = 1
FTS_TOKENIZER = "unicode61 remove_diacritics 0"  # the terms arrive analysed; it only splits them


@dataclass(frozen=True)
class RetrievalTables(TableSet):
    tag: str
    version: int
    metadata: MetaData
    docs: Table
    postings: Table | None  # PostgreSQL only
    stats: Table | None  # PostgreSQL only
    fts: str | None  # SQLite only: the FTS5 table's name

    def all(self) -> list[Table]:
        return [t for t in (self.docs, self.postings, self.stats) if t is not None]


def retrieval_tables(tag: str, version: int = VERSION, *, postgres: bool = False) -> RetrievalTables:
    md = MetaData()

    def name(base: str) -> str:
        return f"rt_{base}_{tag}"

    docs = Table(
        name("docs"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("doc_id", String(1000), primary_key=True),  # a chunk id, or page:<topic id>
        Column("kind", String(10), nullable=False),  # chunk | page
        Column("document_id", String(600), nullable=False),  # a chunk's document; a page's topic
        Column("doc_key", BigInteger, nullable=False),
        Column("length", Integer, nullable=False),  # terms, repeats counted
        Column("terms", Text, nullable=False),  # analysed, space-separated
        Column("source", Integer, nullable=False),
    )
    Index(f"ix_{name('docs')}_key", docs.c.doc_key, unique=True)
    Index(f"ix_{name('docs')}_document", docs.c.collection_id, docs.c.document_id)
    # Each collection's fingerprint (count, highest source) and its docs' sources from the index
    # alone (``keyword_memory``).
    Index(f"ix_{name('docs')}_source", docs.c.collection_id, docs.c.source, docs.c.doc_id)
    if not postgres:
        fts = name("fts")
        _sqlite_fts(md, docs, fts)
        return RetrievalTables(tag, version, md, docs, None, None, fts)
    postings = Table(
        name("postings"), md,
        Column("coll_key", BigInteger, primary_key=True),
        Column("term", String(64), primary_key=True),
        Column("doc_key", BigInteger, primary_key=True),
        Column("tf", Integer, nullable=False),
        Column("dl", Integer, nullable=False),  # the doc's length, here so scoring reads one table
    )
    Index(f"ix_{name('postings')}_doc", postings.c.doc_key)
    stats = Table(
        name("stats"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("docs", Integer, nullable=False),
        Column("total_length", BigInteger, nullable=False),
    )
    return RetrievalTables(tag, version, md, docs, postings, stats, None)


def _sqlite_fts(md: MetaData, docs: Table, fts: str) -> None:
    """FTS5 cannot be declared as a SQLAlchemy table: create and drop it with the metadata.
    Column ``coll`` holds one token per collection, to scope a MATCH; bm25 weighs it 0."""
    d = docs.name
    statements = [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(coll, terms, content='', "
        f"tokenize='{FTS_TOKENIZER}')",
        f"CREATE TRIGGER IF NOT EXISTS {d}_ai AFTER INSERT ON {d} BEGIN "
        f"INSERT INTO {fts}(rowid, coll, terms) VALUES (new.doc_key, {_coll('new')}, new.terms); END",
        f"CREATE TRIGGER IF NOT EXISTS {d}_ad AFTER DELETE ON {d} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, coll, terms) VALUES ('delete', old.doc_key, {_coll('old')}, old.terms); END",
        f"CREATE TRIGGER IF NOT EXISTS {d}_au AFTER UPDATE ON {d} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, coll, terms) VALUES ('delete', old.doc_key, {_coll('old')}, old.terms); "
        f"INSERT INTO {fts}(rowid, coll, terms) VALUES (new.doc_key, {_coll('new')}, new.terms); END",
    ]
    for sql in statements:
        event.listen(docs, "after_create", DDL(sql).execute_if(dialect="sqlite"))  # type: ignore[no-untyped-call]
    event.listen(docs, "before_drop",
                 DDL(f"DROP TABLE IF EXISTS {fts}").execute_if(dialect="sqlite"))  # type: ignore[no-untyped-call]


def _coll(row: str) -> str:
    # The collection's token: 'c' + hex of its text, so any collection id is one plain token.
    return f"'c' || hex({row}.collection_id)"


def collection_token(collection_id: str) -> str:
    return "c" + collection_id.encode().hex().upper()


@dataclass(frozen=True)
class VectorTables(TableSet):
    tag: str
    version: int
    metadata: MetaData
    vectors: Table
    vecsets: Table

    def all(self) -> list[Table]:
        return [self.vectors, self.vecsets]


def model_slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:24]


def vector_tables(model: str, tag: str, version: int = VECTORS_VERSION) -> VectorTables:
    md = MetaData()

    def name(base: str) -> str:
        return f"rt_{base}_{model_slug(model)}_{tag}"

    vectors = Table(
        name("vectors"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("doc_id", String(1000), primary_key=True),
        Column("model", String(100), primary_key=True),
        Column("kind", String(10), nullable=False),
        Column("document_id", String(600), nullable=False),
        Column("hash", String(64), nullable=False),  # of the text embedded
        Column("vector", LargeBinary, nullable=False),  # float32, little-endian
        Column("source", Integer, nullable=False),
    )
    Index(f"ix_{name('vectors')}_document", vectors.c.collection_id, vectors.c.document_id)
    vecsets = Table(
        name("vecsets"), md,
        Column("collection_id", String(100), primary_key=True),
        Column("changed", Integer, nullable=False),  # the last position that changed a vector here
    )
    return VectorTables(tag, version, md, vectors, vecsets)
