"""Catch-up for projections: pages of events -> row ops -> one transaction with tracking.

The tracking row is updated in the same transaction as the rows it covers, so every event
is applied exactly once even across crashes. Catch-up is driven by whoever needs the
read model current (a packet request, a rebuild): no polling loop, no polling lag.
Concurrent catch-ups serialise on the tracking row; the loser finds the work done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, update
from sqlalchemy.engine import Connection, Engine

from projections.sql_ops import Op, execute

PAGE_SIZE = 1000

tracking_metadata = MetaData()
tracking = Table(
    "rm_tracking", tracking_metadata,
    Column("projection", String(100), primary_key=True),
    Column("position", Integer, nullable=False),
)


class EventLog(Protocol):
    def position(self) -> int: ...

    def read(self, start: int, limit: int, stop: int | None, topics: Sequence[str]) -> list[tuple[int, Any]]:
        """Decoded (position, event) pairs from ``start`` on, at most ``limit``, up to ``stop``."""
        ...


class Projection(Protocol):
    name: str
    topics: list[str]

    def ops(self, events: list[tuple[int, Any]]) -> list[Op]: ...


class ProjectionRunner:
    def __init__(self, projection: Projection, metadata: MetaData, version: int, log: EventLog,
                 write_engine: Engine, read_engine: Engine | None = None, page_size: int = PAGE_SIZE) -> None:
        self.projection = projection
        self.metadata = metadata
        self.tracking_name = f"{projection.name}_v{version}"
        self.log = log
        self.write_engine = write_engine
        self.read_engine = read_engine or write_engine
        self.page_size = page_size

    def setup(self) -> None:
        tracking_metadata.create_all(self.write_engine)
        self.metadata.create_all(self.write_engine)
        with self.write_engine.begin() as conn:
            if self._tracked(conn, lock=False) is None:
                conn.execute(insert(tracking).values(projection=self.tracking_name, position=0))

    def position(self) -> int:
        with self.read_engine.begin() as conn:
            return self._tracked(conn, lock=False) or 0

    def _tracked(self, conn: Connection, *, lock: bool) -> int | None:
        stmt = select(tracking.c.position).where(tracking.c.projection == self.tracking_name)
        if lock and conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update()
        return conn.execute(stmt).scalar()

    def catch_up(self, target: int | None = None, progress: Callable[[int, int], None] | None = None) -> int:
        """Apply events until the read model reflects ``target`` (default: the log's end)."""
        goal = self.log.position() if target is None else target
        if self.position() >= goal:
            return self.position()
        while True:
            with self.write_engine.begin() as conn:
                # SQLite's write engine begins IMMEDIATE; PostgreSQL locks the row: one catcher at a time.
                tracked = self._tracked(conn, lock=True) or 0
                if tracked >= goal:
                    return tracked
                page = self.log.read(tracked + 1, self.page_size, goal, self.projection.topics)
                execute(conn, self.projection.ops(page))
                reached = page[-1][0] if len(page) == self.page_size else goal
                conn.execute(update(tracking).where(tracking.c.projection == self.tracking_name).values(position=reached))
            if progress is not None:
                progress(reached, goal)
            if reached >= goal:
                return reached
