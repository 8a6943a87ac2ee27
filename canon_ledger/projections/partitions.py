"""A build split between workers (PostgreSQL), by story or by collection
(``projections.partitioning``): each share (a story's, a collection's) is caught up on its
own, in its own transactions, while other shares move in parallel. Below, "story" stands for
either.

Tracking: the build's row in ``rm_tracking`` is the low-water mark G (every event up to G is
applied, for every story); a row in ``rm_partitions`` says story S is applied up to p_S > G.
Story S therefore stands at max(G, p_S).

Locks (the invariant that nothing is applied twice rests on them, not on any claim):
- a partition step holds G's row ``FOR SHARE`` and S's row ``FOR UPDATE``: steps of different
  stories run at once; two steps of one story serialise, the second finds the work done;
- a whole-build step (``ProjectionRunner.step``) holds G's row exclusively, so no partition step
  is in flight while it reads the partition rows, skips the events they cover, moves G and
  drops the rows G has passed. Lock order is always G, then a partition row: no deadlock.

Who does which story is the worker's business (``infrastructure.worker``'s advisory-lock
claims); it only spreads the work. SQLite builds are never split (one writer at a time).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection

from canon_ledger.projections.partitioning import partitioning_of
from canon_ledger.projections.runner import (
    RETRIED_FAULTS,
    BuildGone,
    Progress,
    ProjectionRunner,
    gc_paused,
    partitions,
    project_safely,
    tracking,
)


class PartitionRunner:
    """Catch-up of one story's share of the build ``runner`` serves (its projection, tracking
    name, log and engines). ``applied`` counts the events this process applied per story, in
    committed pages only."""

    def __init__(self, runner: ProjectionRunner) -> None:
        partitioning = partitioning_of(runner.projection)
        if partitioning is None:
            raise ValueError(f"the {runner.projection.name} projection is not split")
        self.runner = runner
        self.partitioning = partitioning
        self.applied: dict[str, int] = {}
        self.reached: dict[str, int] = {}  # what this process committed or read per story (never back)

    def position(self, conn: Connection, partition: str) -> int:
        """Where ``partition`` stands: max(G, its own row), in ``conn``'s snapshot."""
        name = self.runner.tracking_name
        g: int | None = conn.execute(select(tracking.c.position).where(tracking.c.projection == name)).scalar()
        if g is None:
            raise BuildGone(name)
        p = conn.execute(select(partitions.c.position).where(
            partitions.c.projection == name, partitions.c.partition == partition)).scalar()
        return max(g, p or 0)

    def catch_up(self, partition: str, goal: int, progress: Progress | None = None,
                 *, stop: Any = None) -> int:
        """Apply ``partition``'s events until it stands at ``goal``; returns where it stands.
        ``stop()``, asked between pages, ends early (a worker told to stop)."""
        if self.reached.get(partition, 0) >= goal:
            return self.reached[partition]
        careful = False
        while True:
            try:
                with self.runner.write_engine.begin() as conn:
                    reached, applied = self.step(conn, partition, goal, careful=careful)
            except (BuildGone, *RETRIED_FAULTS):
                raise
            except Exception:
                if careful:
                    raise
                careful = True  # rolled back: again event by event, quarantining the poison
                continue
            careful = False
            self.applied[partition] = self.applied.get(partition, 0) + applied
            self.reached[partition] = max(self.reached.get(partition, 0), reached)
            if progress is not None:
                progress(reached, goal)
            if reached >= goal or (stop is not None and stop()):
                return reached

    def step(self, conn: Connection, partition: str, goal: int, *, careful: bool = False) -> tuple[int, int]:
        """One page of ``partition``'s events inside the caller's transaction: (where it now
        stands, how many events were applied)."""
        r = self.runner
        name = r.tracking_name
        g = conn.execute(select(tracking.c.position).where(tracking.c.projection == name).with_for_update(read=True)
                         ).scalar()
        if g is None:
            raise BuildGone(name)
        if g >= goal:
            return g, 0
        conn.execute(pg_insert(partitions).values(projection=name, partition=partition, position=g)
                     .on_conflict_do_nothing())
        own = conn.execute(select(partitions.c.position).where(
            partitions.c.projection == name, partitions.c.partition == partition).with_for_update()).scalar_one()
        start = max(g, own)
        if start >= goal:
            return start, 0
        of = self.partitioning.of
        page, last = r.log.read_partition(start + 1, r.page_size, goal, r.projection.topics,
                                          self.partitioning.matches(partition), lambda e: of(e) == partition)
        reached = goal if last is None else last
        with gc_paused():
            if careful:
                bad = project_safely(conn, r.projection, page, name)
                applied = len(page) - len(bad)
            else:
                applied = len(page)
                if page:
                    r.write_page(conn, page)
        conn.execute(update(partitions).where(partitions.c.projection == name, partitions.c.partition == partition)
                     .values(position=reached))
        return reached, applied

    def shares(self, conn: Connection) -> tuple[int, dict[str, int]]:
        """G and every story row beyond it, in ``conn``'s snapshot."""
        name = self.runner.tracking_name
        g: int | None = conn.execute(select(tracking.c.position).where(tracking.c.projection == name)).scalar()
        if g is None:
            raise BuildGone(name)
        rows = conn.execute(select(partitions.c.partition, partitions.c.position).where(
            partitions.c.projection == name, partitions.c.position > g))
        return g, dict(rows.all())

    def advance(self, stories: list[str], goal: int) -> bool:
        """Move G to ``goal`` without reading the log, if every story in ``stories`` stands at
        ``goal`` or later: ``stories`` must be every story with an event up to ``goal`` (every
        event of a split projection names its story, and a story's events follow its start).
        Returns whether G now stands at ``goal``."""
        name = self.runner.tracking_name
        with self.runner.write_engine.begin() as conn:
            g = conn.execute(select(tracking.c.position).where(tracking.c.projection == name).with_for_update()
                             ).scalar()
            if g is None:
                raise BuildGone(name)
            if g >= goal:
                return True
            own = dict(conn.execute(select(partitions.c.partition, partitions.c.position).where(
                partitions.c.projection == name)).all())
            if any(own.get(story, g) < goal for story in stories):
                return False
            conn.execute(update(tracking).where(tracking.c.projection == name).values(position=goal))
            conn.execute(delete(partitions).where(partitions.c.projection == name, partitions.c.position <= goal))
        self.runner.reflected(goal)
        return True
