"""Scratch read models: the canon of one story as of a past position, built in memory from
the log alone. Used to audit a packet and to compile a packet as it would have been."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.pool import StaticPool

from canon_ledger.application.ports import Scratch
from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.series import homes_of
from canon_ledger.domain.story import Story
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.topics import stored_topics
from canon_ledger.projections.canon import CanonProjection
from canon_ledger.projections.canon_tables import canon_tables
from canon_ledger.projections.canon_view import SqlCanonReader, SqlCanonSnapshot
from canon_ledger.projections.runner import gc_paused, project_safely, tracking_metadata

TRACKING = "canon:scratch"  # the scratch build's name, as ``canon:<tag>`` names a live build
PAGE = 5000  # events read per query
BATCH = 50_000  # the story's events projected per batch


_PLACE = (Story.Started, Story.JoinedSeries)  # what a replay reads of a series' other books


def _joined(ledger: CanonLedger, position: int) -> dict[str, tuple[str, str, int]]:
    """Every story's series as the log up to ``position`` says (``Story.JoinedSeries``)."""
    joined: dict[str, tuple[str, str, int]] = {}
    topics = stored_topics(Story.JoinedSeries)
    start = 1
    while start <= position:
        page = ledger.event_log.read(start, PAGE, position, topics)
        joined.update((e.story_id, (e.series_id, e.role, e.ordinal)) for _, e in page)
        if len(page) < PAGE:
            break
        start = page[-1][0] + 1
    return joined


class ScratchCanon(Scratch):
    """A reader over an in-memory build of one story's canon up to ``position``; for a book of a
    series, with the canon of the stories it inherits from (``series.homes_of``) up to it too."""

    def __init__(self, ledger: CanonLedger, tokens: TokenCounter, story_id: str, position: int) -> None:
        self.story_id = story_id
        self.position = position
        self.engine = create_engine("sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False})

        @event.listens_for(self.engine, "connect")
        def _connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            dbapi_connection.isolation_level = None

        @event.listens_for(self.engine, "begin")
        def _begin(conn):  # type: ignore[no-untyped-def]
            conn.exec_driver_sql("BEGIN")

        self.tables = canon_tables("scratch")
        self.tables.metadata.create_all(self.engine)
        tracking_metadata.create_all(self.engine)  # its quarantine: the same poison as the live build's
        projection = CanonProjection(self.tables, tokens)
        self.events: dict[int, Any] = {}  # position -> the canon events replayed (the story's and its homes')
        joined = _joined(ledger, position)
        self.homes = frozenset(homes_of(story_id, joined))
        # The other stories of its series: their place in it only (a bible step may name a later book).
        series = joined.get(story_id, (None,))[0]
        places = {s for s, (of, _, _) in joined.items() if of == series} - self.homes
        mine: list[tuple[int, Any]] = []
        start = 1
        with self.engine.begin() as conn, gc_paused():
            while start <= position:
                page = ledger.event_log.read(start, PAGE, position, projection.topics)
                mine += [(p, e) for p, e in page if getattr(e, "story_id", None) in self.homes
                         or (isinstance(e, _PLACE) and e.story_id in places)]
                if len(mine) >= BATCH or len(page) < PAGE:
                    # Big batches: an entry whose whole timeline is in one batch gets its
                    # valid_to computed in Python, with no per-entry SQL re-derivation.
                    self.events.update(mine)
                    project_safely(conn, projection, mine, TRACKING)
                    mine = []
                if len(page) < PAGE:
                    break
                start = page[-1][0] + 1
            self.events.update(mine)
            project_safely(conn, projection, mine, TRACKING)
        with self.engine.begin() as conn:  # planner statistics for the compile's queries
            for table in self.tables.all():
                conn.exec_driver_sql(f'ANALYZE "{table.name}"')
        self.reader = SqlCanonReader(self.engine, lambda conn, story: (self.tables, position))

    def snapshot(self, story: str | None = None) -> AbstractContextManager[SqlCanonSnapshot]:
        return self.reader.snapshot(story)

    def close(self) -> None:
        self.engine.dispose()


def scratch_canon(ledger: CanonLedger, tokens: TokenCounter, story_id: str, position: int) -> ScratchCanon:
    return ScratchCanon(ledger, tokens, story_id, position)
