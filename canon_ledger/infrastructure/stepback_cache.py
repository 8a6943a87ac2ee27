"""The step-back cache: one table in the read store, on SQLite and PostgreSQL alike.

It is not canon and not a projection (no event makes a row; a rebuild does not touch it), so it
is a plain table outside the projection registry. Rows carry their expiry; an expired row is
ignored on read and replaced on the next write (an upsert), and ``purge`` drops the old ones.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, MetaData, String, Table, Text, delete, select
from sqlalchemy.engine import Engine

from canon_ledger.application.retrieval.ports import StepBackCache
from canon_ledger.infrastructure.read_store import upsert

TABLE = "stepback_cache_v1"

_metadata = MetaData()
stepback_cache = Table(
    TABLE, _metadata,
    Column("key", String(64), primary_key=True),  # sha256 of the normalised query
    Column("query", Text, nullable=False),  # the normalised query, for people reading the table
    Column("generalised", Text, nullable=False),
    Column("method", String(200), nullable=False),  # which provider and model wrote it
    Column("created_at", Float, nullable=False),  # seconds since the epoch
    Column("expires_at", Float, nullable=False),
)


class SqlStepBackCache(StepBackCache):
    def __init__(self, write_engine: Engine, read_engine: Engine | None = None) -> None:
        """``read_engine``: reads need no write lock (on SQLite the write engine begins IMMEDIATE)."""
        self.write_engine = write_engine
        self.read_engine = read_engine or write_engine

    def setup(self) -> None:
        """Create the table if it is missing; call it under the store's schema lock, like the read models."""
        _metadata.create_all(self.write_engine, checkfirst=True)

    def get(self, key: str, now: float) -> str | None:
        with self.read_engine.connect() as conn:
            return conn.execute(select(stepback_cache.c.generalised).where(
                stepback_cache.c.key == key, stepback_cache.c.expires_at > now)).scalar_one_or_none()

    def put(self, key: str, query: str, generalised: str, method: str, now: float, ttl_s: float) -> None:
        row = {"query": query, "generalised": generalised, "method": method, "created_at": now,
               "expires_at": now + ttl_s}
        with self.write_engine.begin() as conn:
            statement = upsert(stepback_cache, conn.dialect.name).values(key=key, **row)
            conn.execute(statement.on_conflict_do_update(index_elements=["key"], set_=row))

    def purge(self, now: float) -> int:
        with self.write_engine.begin() as conn:
            return conn.execute(delete(stepback_cache).where(stepback_cache.c.expires_at <= now)).rowcount

