"""Catch-up for one build of a projection: pages of events -> row ops -> one transaction
that also moves the tracking row.

The tracking row is updated in the same transaction as the rows it covers, so every event
is applied exactly once even across crashes (kill -9 mid-rebuild, rerun: same tables).
Catch-up is driven by whoever needs the read model current (a packet request, a rebuild):
no polling loop, no polling lag. Concurrent catch-ups serialise on the tracking row; the
loser finds the work done.

Poison: an event the projection cannot turn into rows (any exception but a store fault) is
**quarantined** for that build: a row in ``rm_quarantine`` (position, type, the story or
collection it belongs to, the error), written in the same transaction as the tracking row,
and the build moves on. One bad event then costs its own effect only, never the read model.
A rebuild starts a new build with no quarantine, so it retries every such event.

What the runner knows of the log without reading it (which positions hold none of its
events, which of its events this process appended) lives in ``runner_cache.LogMemory``;
the runner asks it before reading and tells it what each catch-up found.

Entry points, on ``read_models.ReadModels`` (none is a synonym of another):

- ``catch_up_serving(target=None, progress=None)``: the full catch-up. Reads which build
  serves and its tracking position, then ``ProjectionRunner.catch_up`` pages events into it
  until it reflects ``target`` (default: the log's end); ``progress(reached, goal)`` after
  each page. For the worker, ``canon rebuild`` and tests.
- ``ensure_reflects(target)``: the same outcome for a request that must see its own writes,
  at the least cost: nothing at all when ``known_to_reflect(target)``; else the catch-up
  starts from where this process last left the tracking row (the page is claimed only if the
  row is still there), falling back to ``catch_up_serving``.
- ``known_to_reflect(target)``: no I/O. Has this process already learnt that the serving
  build reflects ``target``?
- ``snapshot_reflects(position, target)``: no I/O. Does the serving build, read at tracking
  ``position`` in the caller's own snapshot, reflect ``target``?
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy import Column, Index, Integer, MetaData, String, Table, Text, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from canon_ledger.application.event_log import Appended
from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.projections import driver_sql
from canon_ledger.projections.driver_sql import PipelineFailed, pipelined
from canon_ledger.projections.partitioning import partitioning_of
from canon_ledger.projections.runner_cache import LogMemory, OwnAppends, QuietRange
from canon_ledger.projections.sql_ops import Counted, Op, execute

PAGE_SIZE = 1000  # events per transaction, unless the projection prefers another size (``page_size``)
ANALYZE_AFTER = 5000  # a catch-up this big changes the planner's picture: refresh its statistics
Progress = Callable[[int, int], None]

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

    def read_partition(self, start: int, limit: int, stop: int, topics: Sequence[str],
                       matches: Sequence[tuple[str, str]], belongs: Callable[[Any], bool],
                       ) -> tuple[list[tuple[int, Any]], int | None]:
        """One share's events (holding one of ``matches``, and ``belongs``) from ``start`` to
        ``stop``, and the last position looked at if ``limit`` cut the read short
        (``EventLogReader.read_partition``)."""
        ...

    def watch(self, listener: Callable[[list[Appended]], None]) -> None:
        """Have ``listener`` called with (position, topic, record) of what this process appends."""
        ...

    def decode(self, record: Any) -> Any:
        """The event of an appended record, as ``read`` would give it."""
        ...


class Projection(Protocol):
    name: str
    topics: list[str]

    def ops(self, events: list[tuple[int, Any]]) -> Sequence[Op | Counted]:
        """Ops for (position, event) pairs: a pure function of the events (no I/O). ``Counted``
        ops are filled by ``page_ops`` with the projection's ``counts``."""
        ...


def page_ops(conn: Connection, projection: Projection, page: list[tuple[int, Any]]) -> list[Op]:
    """The ops that write ``page`` in ``conn``'s transaction: the projection's, with the token
    counts of its ``Counted`` ops filled there (``TokenCounts``: the memo is read, and new counts
    stored, in this transaction). The one place a page's I/O before its writes happens."""
    ops = projection.ops(page)
    counts = getattr(projection, "counts", None)
    return counts.fill(conn, ops) if counts is not None else ops  # type: ignore[return-value]


# A story's (or collection's) share of a build, when workers split it (``projections.partitions``):
# every event of ``partition`` up to max(the build's tracking position, ``position``) is applied.
partitions = Table(
    "rm_partitions", tracking_metadata,
    Column("projection", String(100), primary_key=True),  # the build's tracking name
    Column("partition", String(220), primary_key=True),
    Column("position", Integer, nullable=False),
)

quarantine = Table(
    "rm_quarantine", tracking_metadata,
    Column("projection", String(100), primary_key=True),  # the build's tracking name
    Column("position", Integer, primary_key=True),
    Column("event_type", String(200), nullable=False),
    Column("scope", String(200)),  # the story (or collection) the event belongs to
    Column("error", Text, nullable=False),
    Index("rm_quarantine_scope", "projection", "scope"),
)

# Faults of the store itself (a lost connection, a lock timeout, a read-only file) or of a
# provider a projection calls (an embedding model's outage or refusal): the event is not to
# blame, so it is never quarantined for them; the catch-up fails and is retried.
RETRIED_FAULTS = (OperationalError, InterfaceError, ProviderError)


def _scope(event: Any) -> str | None:
    scope = getattr(event, "story_id", None) or getattr(event, "collection_id", None)
    return None if scope is None else str(scope).replace("\x00", "")[:200]


def _error(exc: BaseException) -> str:
    """The error, short and single-line: no SQL, no parameters (they may hold user text)."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}".replace("\x00", "")[:500]


def project_safely(conn: Connection, projection: Projection, page: list[tuple[int, Any]],
                   name: str) -> list[tuple[int, Any, str]]:
    """Write ``page``'s rows in ``conn``'s transaction; if that fails, event by event, each in
    a savepoint, quarantining (under tracking ``name``) every event whose rows fail. Returns
    the (position, event, error) quarantined. A store fault is raised, never quarantined."""
    try:
        with conn.begin_nested():
            execute(conn, page_ops(conn, projection, page))
        return []
    except RETRIED_FAULTS:
        raise
    except Exception:  # noqa: BLE001 - some event of the page is poison: find which
        pass
    bad: list[tuple[int, Any, str]] = []
    for position, event in page:
        try:
            with conn.begin_nested():
                execute(conn, page_ops(conn, projection, [(position, event)]))
        except RETRIED_FAULTS:
            raise
        except Exception as exc:  # noqa: BLE001 - quarantined, with its error
            bad.append((position, event, _error(exc)))
            conn.execute(insert(quarantine).values(
                projection=name, position=position, event_type=type(event).__qualname__[:200],
                scope=_scope(event), error=_error(exc)))
            later = getattr(projection, "quarantined", None)
            if later is not None:  # what the projection records of it (a story's position)
                execute(conn, later(position, event))
    return bad


def quarantined(conn: Connection, name: str | None = None) -> list[dict[str, Any]]:
    """Quarantined events, of one build (tracking ``name``) or of all, in log order."""
    stmt = select(quarantine).order_by(quarantine.c.projection, quarantine.c.position)
    if name is not None:
        stmt = stmt.where(quarantine.c.projection == name)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def tracked(conn: Connection, name: str, *, lock: bool = False) -> int | None:
    stmt = select(tracking.c.position).where(tracking.c.projection == name)
    if lock and conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    return conn.execute(stmt).scalar()


def start_tracking(conn: Connection, name: str) -> None:
    if tracked(conn, name) is None:
        conn.execute(insert(tracking).values(projection=name, position=0))


def stop_tracking(conn: Connection, name: str) -> None:
    conn.execute(delete(quarantine).where(quarantine.c.projection == name))
    conn.execute(delete(partitions).where(partitions.c.projection == name))
    conn.execute(delete(tracking).where(tracking.c.projection == name))


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a page is decoded, projected and written.

    A page allocates tens of thousands of small dicts, lists and tuples, none of them in a
    cycle (reference counting frees them); each allocation burst would otherwise trigger
    collections that walk every live object, about half of the projection's CPU time on
    a 100k-event log. Collection resumes (and catches up) when the page is done."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


QUIET_GAP = 1000  # positions of others' events a read model may trail by without a write


class BuildGone(Exception):
    """The build's tracking row is gone: a rebuild switched builds and dropped this one."""


class Unclaimed(Exception):
    """A prefetched page's writes went out, but the tracking row was no longer where the page
    was read from: the transaction must be rolled back (PostgreSQL's pipelined claim)."""


# Any partition of the build beyond where a prefetched page was read from (``partitions_ahead``).
_AHEAD = (select(partitions.c.partition).where(partitions.c.projection == bindparam("name"),
                                               partitions.c.position > bindparam("start")).limit(1))


def partition_of(projection: Any, event: Any) -> str | None:
    """The partition ``event`` belongs to in ``projection`` (``projections.partitioning``: its
    story or collection), or None: a projection that declares none is not split."""
    partitioning = partitioning_of(projection)
    return None if partitioning is None else partitioning.of(event)


def partitions_ahead(conn: Connection, name: str, position: int) -> dict[str, int]:
    """Partitions of build ``name`` whose own position is beyond the build's ``position``
    (none on SQLite, where builds are never split)."""
    if conn.dialect.name != "postgresql":
        return {}
    rows = conn.execute(select(partitions.c.partition, partitions.c.position).where(
        partitions.c.projection == name, partitions.c.position > position))
    return dict(rows.all())


# Moves the tracking row only if it is where a prefetched page was read from.
_CLAIM = (update(tracking).where(tracking.c.projection == bindparam("name"), tracking.c.position == bindparam("start"))
          .values(position=bindparam("reached")))


class ProjectionRunner:
    """Catch-up and tracking for one build of one projection (tracking row ``tracking_name``).

    Invariant: the tracking row and the rows it covers change in one transaction, and the row
    never moves back. ``at`` is the position this process last read or wrote there; ``memory``
    (``runner_cache.LogMemory``) what it knows of the log beyond that without reading it."""

    def __init__(self, projection: Projection, tracking_name: str, log: EventLog, write_engine: Engine,
                 read_engine: Engine | None = None, page_size: int = PAGE_SIZE, tables: Sequence[Any] = ()) -> None:
        self.projection = projection
        self.tracking_name = tracking_name
        self.log = log
        self.write_engine = write_engine
        self.read_engine = read_engine or write_engine
        self.page_size = page_size
        self.tables = list(tables)
        self.memory = LogMemory(projection.topics, page_size)
        self.at: int | None = None  # the tracking position this process last read or wrote (it never moves back)
        # Did the last whole-build step find partitions ahead of the build (``partitions_ahead``)?
        # Then prefetched pages are not claimed blind; a step that finds none clears it.
        self.partitioned = False

    def appended(self, events: list[Appended]) -> None:
        """What this process just appended (``EventLog.watch``), for ``memory``."""
        self.memory.appended(events)

    def reflected(self, position: int) -> None:
        self.at = max(self.at or 0, position)
        self.memory.caught_up(position)

    def position(self) -> int:
        with self.read_engine.begin() as conn:
            return tracked(conn, self.tracking_name) or 0

    def catch_up(self, target: int | None = None, progress: Progress | None = None, pause: float = 0.0,
                 *, final_analyze: bool = True, start: int | None = None) -> int:
        """Apply events until the read model reflects ``target`` (default: the log's end).
        ``final_analyze=False``: the caller refreshes statistics itself when it is done.
        ``start``: the tracking position, when the caller has just read it."""
        goal = self.log.position() if target is None else target
        position = start = self.position() if start is None else start
        self.at = max(self.at or 0, position)
        if position >= goal:
            self.reflected(position)  # learnt even when nothing was left to do
            return position
        # The first page is read before the write transaction: a packet request's catch-up
        # mostly finds one event or none, and then this is its only read of the log (none at
        # all when this process appended them).
        first_page = self.memory.events_between(position, goal, self.log.decode)
        if first_page is None:
            first_page = self.log.read(position + 1, self.page_size, goal, self.projection.topics)
        if not first_page and goal - position <= QUIET_GAP:
            # Only other models' events since (a PacketIssued, say): this model already reflects
            # the goal. Say so without a write transaction; the tracking row moves with the next
            # event of ours, or once the gap grows past QUIET_GAP (the check reads that range).
            self.memory.quiet_between(position, goal)
            return goal
        prefetched: tuple[int, list[tuple[int, Any]]] | None = (position, first_page)
        del first_page
        long = goal - start >= ANALYZE_AFTER
        first = True
        careful = False
        while True:
            try:
                with self.write_engine.begin() as conn:
                    # SQLite's write engine begins IMMEDIATE; PostgreSQL locks the row: one catcher at a time.
                    reached = self.step(conn, goal, prefetched, careful=careful)
            except Unclaimed:
                prefetched = None  # rolled back: read where the row is now
                continue
            except (BuildGone, *RETRIED_FAULTS):
                raise
            except Exception:
                if careful:
                    raise
                # Rolled back: the page holds an event the projection cannot apply. Again,
                # carefully: event by event where it fails, quarantining the poison.
                prefetched, careful = None, True
                continue
            prefetched, careful = None, False
            if progress is not None:
                progress(reached, goal)
            if reached >= goal:
                self.reflected(reached)
                if final_analyze and reached - start >= ANALYZE_AFTER:
                    self.analyze()
                return reached
            if long and first:
                # Statistics from the first page already tell the planner which index finds one
                # entry (the primary key): with none (a fresh build), SQLite may prefer a
                # covering index that reads every entry of a kind, per statement.
                self.analyze()
            first = False
            if pause:
                time.sleep(pause)

    def analyze(self) -> None:
        """Refresh planner statistics (SQLite has none until asked; autovacuum may be off)."""
        with self.write_engine.begin() as conn:
            for table in self.tables:
                conn.exec_driver_sql(f'ANALYZE "{table.name}"')

    def step(self, conn: Connection, goal: int, prefetched: tuple[int, list[tuple[int, Any]]] | None = None,
             *, careful: bool = False) -> int:
        """One page inside the caller's transaction; returns the position now reflected.
        ``prefetched``: (the tracking position it was read after, that page), used if the
        tracking row still says so (another catcher may have moved it). ``careful``: in a
        savepoint, quarantining what cannot be projected (``project_safely``), so the
        transaction survives a poison event."""
        if prefetched is not None and not careful and not self.partitioned:
            start, page = prefetched
            reached = self._reached(page, goal)
            if self.write_page(conn, page, claim=(start, reached)):
                return reached
            del page
        position = tracked(conn, self.tracking_name, lock=True)
        if position is None:
            raise BuildGone(self.tracking_name)
        if position >= goal:
            return position
        # Stories that partition workers took past this position (PostgreSQL): their events up to
        # there are applied already. Read after the lock: no partition step is in flight now.
        ahead = partitions_ahead(conn, self.tracking_name, position)
        self.partitioned = bool(ahead)
        page = self.log.read(position + 1, self.page_size, goal, self.projection.topics)
        reached = self._reached(page, goal)
        if ahead:
            page = [(p, e) for p, e in page if p > ahead.get(partition_of(self.projection, e) or "", 0)]
        if careful:
            with gc_paused():
                project_safely(conn, self.projection, page, self.tracking_name)
        else:
            self.write_page(conn, page)
        conn.execute(update(tracking).where(tracking.c.projection == self.tracking_name).values(position=reached))
        if ahead:  # the rows this position now covers say nothing more
            conn.execute(delete(partitions).where(partitions.c.projection == self.tracking_name,
                                                  partitions.c.position <= reached))
        return reached

    def _reached(self, page: list[tuple[int, Any]], goal: int) -> int:
        return page[-1][0] if len(page) == self.page_size else goal

    def write_page(self, conn: Connection, page: list[tuple[int, Any]], claim: tuple[int, int] | None = None) -> bool:
        """Write the page's rows in ``conn``'s transaction; with ``claim`` (start, reached), only
        if the tracking row moves from ``start`` to ``reached`` (see ``_claim_and_write``)."""
        with gc_paused():
            ops = page_ops(conn, self.projection, page)  # may read (the token memo): before any pipeline
            if claim is None:
                execute(conn, ops)
            elif not self._claim_and_write(conn, ops, *claim):
                return False
            # Freed while the GC is off: each free takes back an allocation from the GC's count,
            # so re-enabling it does not start by walking the whole page just to find it garbage.
            page.clear()
            del ops
        return True

    def _claim_and_write(self, conn: Connection, ops: list[Op], start: int, reached: int) -> bool:
        """Move the tracking row from ``start`` to ``reached`` (which locks it until commit: one
        statement instead of a locking read and a later update), then write ``ops``. If the row
        is elsewhere (another catcher moved it), nothing is written: False on SQLite. On
        PostgreSQL the claim goes to the server with the writes in one pipeline (a round trip
        instead of one per statement), so a failed claim, or any error there (a build another
        process dropped), raises ``Unclaimed``: the caller rolls back and takes the ordinary
        path, which says what went wrong."""
        params = {"name": self.tracking_name, "start": start, "reached": reached}
        try:
            with pipelined(conn) as driver:
                if driver is None:
                    if conn.execute(_CLAIM, params).rowcount != 1:
                        return False
                    execute(conn, ops)
                    return True
                claimed = driver.cursor()  # its row count is there once the pipeline has synced
                driver_sql.execute(claimed, conn, _CLAIM, params)
                # After the claim (which waited for any partition step holding the row): do
                # partition workers have this page's stories ahead? Then the ops may repeat theirs.
                split = driver.cursor()
                driver_sql.execute(split, conn, _AHEAD, params)
                execute(conn, ops)
        except PipelineFailed as e:
            raise Unclaimed(self.tracking_name) from e
        if claimed.rowcount != 1:
            raise Unclaimed(self.tracking_name)
        if split.fetchone() is not None:
            self.partitioned = True  # from now on the locked path, which skips what they applied
            raise Unclaimed(self.tracking_name)
        return True


