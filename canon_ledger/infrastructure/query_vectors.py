"""Query vectors kept in the read store, and the worker's step that embeds a chapter's L1 queries
before anyone asks for its packet.

A row is one embedding model's vector of one query text (keyed by the text's sha256), stored as
float64 so a vector read back is the list the model gave, bit for bit: a search that finds it
ranks exactly as one that embedded the text. Not canon and not a projection: no event makes a
row, a rebuild leaves them, and a row never goes stale (a changed text is another key). Made on
first use, on SQLite and PostgreSQL alike, like the step-back cache.

``QueryPrefetch`` runs in a worker after the canon read model moves: the chapters whose plan or
scene cards changed since its last run get their L1 queries (the whole chapter's and each
scene's, ``PacketService.l1_queries``) embedded and stored, so the first packet of a newly
planned chapter embeds nothing. An embedder that spends quota (Gemini) is never used ahead of a
request.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Integer, LargeBinary, MetaData, String, Table, bindparam, inspect, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from canon_ledger.infrastructure.read_store import upsert

TABLE = "query_vectors_v1"

_metadata = MetaData()
query_vectors = Table(
    TABLE, _metadata,
    Column("model", String(100), primary_key=True),
    Column("digest", String(64), primary_key=True),  # sha256 hex of the query text
    Column("dims", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),  # float64, little-endian
)


_GET = select(query_vectors.c.dims, query_vectors.c.vector).where(
    query_vectors.c.model == bindparam("model"), query_vectors.c.digest == bindparam("digest"))


def digest(query: str) -> str:
    return hashlib.sha256(query.encode()).hexdigest()


class SqlQueryVectors:
    def __init__(self, write_engine: Engine, read_engine: Engine | None = None) -> None:
        self.write_engine = write_engine
        self.read_engine = read_engine or write_engine

        self._ready = False

    def setup(self) -> None:
        """Create the table if it is missing (once per process: the first write makes it; a
        read before that finds nothing). Two processes making it at once: one wins, the other
        finds it made."""
        if self._ready:
            return
        try:
            _metadata.create_all(self.write_engine, checkfirst=True)
        except DBAPIError:
            if not inspect(self.write_engine).has_table(TABLE):
                raise
        self._ready = True

    def get(self, model: str, query: str, conn: Connection | None = None) -> list[float] | None:
        """The stored vector, or None; read in ``conn`` when given (a snapshot's own: no
        connection more for a request that already holds two)."""
        if conn is None:
            with self.read_engine.connect() as own:
                return self.get(model, query, own)
        if not self._ready and not inspect(conn).has_table(TABLE):
            return None
        self._ready = True
        row = conn.execute(_GET, {"model": model, "digest": digest(query)}).first()
        return None if row is None else list(struct.unpack(f"<{row[0]}d", row[1]))

    def missing(self, model: str, queries: Sequence[str]) -> list[str]:
        """The queries among ``queries`` with no vector of ``model`` here, in order, once each."""
        wanted = {digest(q): q for q in queries if q.strip()}
        if not wanted:
            return []
        self.setup()
        with self.read_engine.connect() as conn:
            held = set(conn.execute(select(query_vectors.c.digest).where(
                query_vectors.c.model == model, query_vectors.c.digest.in_(list(wanted)))).scalars())
        return [q for d, q in wanted.items() if d not in held]

    def put(self, model: str, query: str, vector: Sequence[float]) -> None:
        row = {"dims": len(vector), "vector": struct.pack(f"<{len(vector)}d", *vector)}
        self.setup()
        with self.write_engine.begin() as conn:
            statement = upsert(query_vectors, conn.dialect.name).values(model=model, digest=digest(query), **row)
            conn.execute(statement.on_conflict_do_update(index_elements=["model", "digest"], set_=row))


class QueryPrefetch:
    """Embeds the L1 queries of the chapters planned or given scene cards since its last run."""

    def __init__(self, services: Any) -> None:
        self.services = services
        self.reached: int | None = None  # the canon position of the last run (None: not run yet)

    @property
    def usable(self) -> bool:
        embedder = self.services.embedder
        return embedder is not None and not getattr(embedder, "uses_quota", False) and self.services.vectors is not None

    def run(self) -> int:
        """Embed what changed since the last run; returns how many queries were embedded. The
        first run only notes where canon stands (a worker starting on an old store does not
        embed every chapter it ever planned)."""
        canon = self.services.canon
        with canon.read_engine.begin() as conn:
            build, position = canon.serving(conn)
            if self.reached is None or position <= self.reached:
                self.reached = position
                return 0
            t = canon.tables(build)
            since = self.reached
            chapters = conn.execute(text(
                f"SELECT story_id, chapter FROM {t.chapters.name} WHERE goals_source > :p UNION "
                f"SELECT story_id, chapter FROM {t.scene_cards.name} WHERE source > :p"), {"p": since}).all()
        queries: list[str] = []
        for story_id, chapter in sorted(set(map(tuple, chapters))):
            queries += self.services.packets.l1_queries(story_id, chapter)
        embedded = self.embed(queries)
        self.reached = position
        return embedded

    def embed(self, queries: Sequence[str]) -> int:
        embedder, store = self.services.embedder, self.services.query_vectors
        todo = store.missing(embedder.name, queries)
        for query in todo:  # one at a time, as a search embeds it: a batch pads, and may round otherwise
            [vector] = embedder.embed([query])
            store.put(embedder.name, query, list(vector))
        return len(todo)
