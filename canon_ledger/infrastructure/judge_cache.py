"""The continuity judge's cache (``canon check --provider gemini``): one table in the read store,
on SQLite and PostgreSQL alike, made on first use (like the step-back cache).

A row is the validated answer of one LLM review: the findings (JSON, the report's schema) the
model gave for one draft text against one evidence table. Its key is a digest of what the
answer depends on (``GeminiJudge.cache_key``: the model, the story, the draft, its chapter, the
draft text's hash and the canon steps sent), so a row never goes stale: a changed draft or canon
is another key. Not canon and not a projection: no event makes a row and a rebuild leaves it.
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Integer, MetaData, String, Table, Text, select
from sqlalchemy.engine import Engine

from canon_ledger.infrastructure.read_store import upsert

TABLE = "continuity_judge_cache_v1"

_metadata = MetaData()
judge_cache = Table(
    TABLE, _metadata,
    Column("key", String(64), primary_key=True),  # sha256 hex of the review's inputs
    Column("story_id", String(200), nullable=False),  # the rest is for people reading the table
    Column("draft_id", String(200), nullable=False),
    Column("position", Integer, nullable=False),  # the newest canon event in the evidence
    Column("method", String(200), nullable=False),  # which provider and model answered
    Column("findings", Text, nullable=False),  # JSON list, the report's finding schema
    Column("created_at", Float, nullable=False),  # seconds since the epoch
)


class SqlJudgeCache:
    def __init__(self, write_engine: Engine, read_engine: Engine | None = None) -> None:
        self.write_engine = write_engine
        self.read_engine = read_engine or write_engine

    def setup(self) -> None:
        """Create the table if it is missing; call it under the store's schema lock."""
        _metadata.create_all(self.write_engine, checkfirst=True)

    def get(self, key: str) -> str | None:
        with self.read_engine.connect() as conn:
            return conn.execute(select(judge_cache.c.findings).where(judge_cache.c.key == key)).scalar_one_or_none()

    def put(self, key: str, story_id: str, draft_id: str, position: int, method: str, findings: str,
            now: float) -> None:
        row = {"story_id": story_id, "draft_id": draft_id, "position": position, "method": method,
               "findings": findings, "created_at": now}
        with self.write_engine.begin() as conn:
            statement = upsert(judge_cache, conn.dialect.name).values(key=key, **row)
            conn.execute(statement.on_conflict_do_update(index_elements=["key"], set_=row))

