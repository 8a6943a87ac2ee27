"""Which build of each projection serves reads, and blue/green rebuilds between builds.

A build is a set of tables tagged ``v{schema version}_{generation}`` plus its tracking row.
The registry row says which build is active (serving) and which, if any, is being built.
A rebuild fills a new build beside the active one, which keeps serving; the switch is one
transaction that applies the last events and flips the registry row; then the old tables
are dropped. A crashed rebuild resumes from its tracking row.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Column, Integer, MetaData, String, Table, and_, bindparam, insert, literal, select, update
from sqlalchemy.engine import Connection, Engine

from canon_ledger.application.event_log import Appended
from canon_ledger.application.packets.ports import Freshness
from canon_ledger.domain.errors import CanonError
from canon_ledger.projections.driver_sql import Statements, driver_rows
from canon_ledger.projections.partitions import PartitionRunner
from canon_ledger.projections.partitioning import Partitioning, partitioning_of
from canon_ledger.projections.runner import (
    PAGE_SIZE,
    BuildGone,
    EventLog,
    Progress,
    Projection,
    ProjectionRunner,
    partitions,
    start_tracking,
    stop_tracking,
    tracking,
    tracking_metadata,
)


registry_metadata = MetaData()
registry = Table(
    "rm_projections", registry_metadata,
    Column("projection", String(100), primary_key=True),
    Column("active_tag", String(40), nullable=False),
    Column("active_version", Integer, nullable=False),
    Column("building_tag", String(40)),
    Column("building_version", Integer),
    Column("generation", Integer, nullable=False),
)


_ACTIVE_OF = f"SELECT projection, active_tag, active_version FROM {registry.name} WHERE projection = ANY(:names)"
_READS = Statements()


class TableSet(Protocol):
    tag: str
    version: int
    metadata: MetaData

    def all(self) -> list[Table]: ...


@dataclass(frozen=True)
class ProjectionSpec:
    name: str
    version: int  # the schema version this code builds
    tables: Callable[[str, int], Any]  # (tag, version) -> TableSet
    projection: Callable[[Any], Projection]  # TableSet -> Projection


@dataclass(frozen=True)
class Build:
    tag: str
    version: int


@dataclass(frozen=True)
class RebuildReport:
    projection: str
    old: Build
    new: Build
    resumed: bool
    position: int
    events: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"projection": self.projection, "old": self.old.tag, "new": self.new.tag, "resumed": self.resumed,
                "position": self.position, "events": self.events, "seconds": round(self.seconds, 3),
                "events_per_second": round(self.events / self.seconds, 1) if self.seconds else None}


class Outdated(CanonError):
    """The active build was made by an earlier schema version, which this code no longer reads."""

    def __init__(self, projection: str, tag: str, version: int, current: int) -> None:
        super().__init__("read_model_outdated",
                         f"the {projection} read model is build {tag} (schema version {version}); this version of "
                         f"Canon Ledger reads schema version {current}: run `canon rebuild`")
        self.projection, self.tag, self.version, self.current = projection, tag, version, current


def _version_of(tag: str) -> int | None:
    """The schema version in a build tag ``v{version}_{generation}``."""
    head = tag.split("_", 1)[0]
    return int(head[1:]) if head.startswith("v") and head[1:].isdigit() else None


class ReadModels(Freshness):
    """One projection's builds in one database. Its four ways to ask for a current read model
    (``catch_up_serving``, ``ensure_reflects``, ``known_to_reflect``, ``snapshot_reflects``) are
    told apart in ``runner``'s docstring."""

    def __init__(self, spec: ProjectionSpec, log: EventLog, write_engine: Engine, read_engine: Engine,
                 page_size: int = PAGE_SIZE) -> None:
        self.spec = spec
        self.log = log
        self.write_engine = write_engine
        self.read_engine = read_engine
        self.page_size = page_size
        self._table_sets: dict[str, Any] = {}
        self._runners: dict[str, ProjectionRunner] = {}
        self._serving: str | None = None  # the tag this process last saw serving
        # One catch-up at a time in this process, and appends noted between them: the runner's
        # memory of the log (``memory``, ``at``) is shared by every request thread.
        # Across processes the tracking row's lock does the same.
        self._lock = threading.RLock()
        r = registry
        name = r.c.projection + literal(":") + r.c.active_tag
        # A story's own row, when workers split the build (``projections.partitions``): the
        # story stands at the greater of the two positions.
        share = partitions.alias("share")
        split = (select(literal(1)).where(partitions.c.projection == name, partitions.c.position > tracking.c.position)
                 .exists())
        self._serving_stmt = (select(r.c.active_tag, r.c.active_version, tracking.c.position, share.c.position, split)
                              .outerjoin(tracking, tracking.c.projection == name)
                              .outerjoin(share, and_(share.c.projection == name,
                                                     share.c.partition == bindparam("partition")))
                              .where(r.c.projection == spec.name))
        self._partitions: dict[str, PartitionRunner] = {}
        log.watch(self._appended)  # what this process appends, for ``ensure_reflects`` and ``snapshot_reflects``

    # -- builds ----------------------------------------------------------------------------
    def tables(self, build: Build) -> Any:
        if build.tag not in self._table_sets:
            self._table_sets[build.tag] = self.spec.tables(build.tag, build.version)
        return self._table_sets[build.tag]

    def runner(self, build: Build) -> ProjectionRunner:
        if build.tag not in self._runners:
            tables = self.tables(build)
            projection = self.spec.projection(tables)
            self._runners[build.tag] = ProjectionRunner(
                projection, self._tracking_name(build), self.log,
                self.write_engine, self.read_engine, self._page_size(projection), tables.all())
        return self._runners[build.tag]

    def _page_size(self, projection: Any) -> int:
        """Events per transaction: the one asked for, or, when that is the default, the size the
        projection prefers (``page_size``; the canon projection's bulk writes gain from larger
        pages, while other projections keep the default)."""
        if self.page_size != PAGE_SIZE:
            return self.page_size
        return getattr(projection, "page_size", PAGE_SIZE)

    def _tracking_name(self, build: Build) -> str:
        return f"{self.spec.name}:{build.tag}"  # ``serving`` builds the same name in SQL

    def setup(self) -> None:
        """Create the registry and, on a new database, the first build (empty, caught up lazily)."""
        registry_metadata.create_all(self.write_engine)
        tracking_metadata.create_all(self.write_engine)
        with self.write_engine.begin() as conn:
            if self._row(conn) is not None:
                return
            build = Build(f"v{self.spec.version}_1", self.spec.version)
            self.tables(build).metadata.create_all(conn)
            start_tracking(conn, self._tracking_name(build))
            conn.execute(insert(registry).values(projection=self.spec.name, active_tag=build.tag,
                                                 active_version=build.version, generation=1))

    def _row(self, conn: Connection, *, lock: bool = False) -> Any:
        stmt = select(registry).where(registry.c.projection == self.spec.name)
        if lock and conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update()
        return conn.execute(stmt).mappings().first()

    def active(self, conn: Connection | None = None) -> Build:
        if conn is None:
            with self.read_engine.begin() as own:
                return self.active(own)
        row = self._row(conn)
        return Build(row["active_tag"], row["active_version"])

    def active_tables(self, conn: Connection) -> Any:
        """The tables of the active build, read in ``conn``'s transaction: what a reader of
        this one model is handed (the knowledge reader, the story views)."""
        return self.tables(self.active(conn))

    @staticmethod
    def active_of(conn: Connection, models: Sequence[ReadModels | None]) -> list[Build | None]:
        """The active build of each of ``models`` (None for None), in one statement: what a
        reader of several models (the retrieval snapshot) asks first."""
        names = [m.spec.name for m in models if m is not None]
        rows = {name: Build(tag, version) for name, tag, version in _READS.rows(
            conn, _ACTIVE_OF, {"names": names})} if names else {}
        return [None if m is None else rows[m.spec.name] for m in models]

    def building(self) -> Build | None:
        with self.read_engine.begin() as conn:
            row = self._row(conn)
        return Build(row["building_tag"], row["building_version"]) if row["building_tag"] else None

    # -- serving ---------------------------------------------------------------------------
    def serving(self, conn: Connection, partition: str | None = None) -> tuple[Build, int]:
        """The serving build and its tracking position (with ``partition``: where that story
        stands, which is further when a worker has taken it past the build's row), in one
        statement of ``conn``'s transaction; ``Outdated`` if an earlier schema version made it
        (nothing reads or writes it then)."""
        params = {"partition": partition or ""}
        if conn.dialect.name == "postgresql":  # often a packet's first statement: with its BEGIN
            [row] = driver_rows(conn, self._serving_stmt, params)
        else:
            row = conn.execute(self._serving_stmt, params).one()
        if row[1] != self.spec.version:
            raise Outdated(self.spec.name, row[0], row[1], self.spec.version)
        self._serving = row[0]
        build = Build(row[0], row[1])
        if row[4] or build.tag in self._runners:  # split by workers: learnt here, before any catch-up
            self.runner(build).partitioned = bool(row[4])
        return build, max(row[2] or 0, row[3] or 0)

    def serving_tables(self, conn: Connection, story: str | None = None) -> tuple[Any, int]:
        """``serving``'s build as its tables, with its position: what the canon reader asks at
        the start of each snapshot."""
        build, position = self.serving(conn, story)
        return self.tables(build), position

    def catch_up_serving(self, target: int | None = None, progress: Progress | None = None) -> int:
        """Bring the serving build up to ``target`` (default: the log's end);
        ``progress(reached, goal)`` after each page."""
        with self._lock:
            return self._catch_up(target, progress)

    def _catch_up(self, target: int | None, progress: Progress | None = None) -> int:
        for _ in range(3):
            with self.read_engine.begin() as conn:
                build, position = self.serving(conn)
            try:
                return self.runner(build).catch_up(target, progress, start=position)
            except BuildGone:
                continue  # switched and dropped between the two transactions: the new one serves
        raise RuntimeError(f"{self.spec.name}: the serving build kept being replaced; retry")

    def _serving_runner(self) -> ProjectionRunner | None:
        """The runner of the build this process last saw serving (None before any read)."""
        return self._runners.get(self._serving) if self._serving else None

    def known_to_reflect(self, target: int) -> bool:
        """Does this process already know that the serving build reflects ``target``? Its
        tracking row never moves back, not even across a switch (a new build serves only once
        caught up to the log's end), so what a catch-up or an append taught stays true."""
        runner = self._serving_runner()
        return runner is not None and target <= runner.memory.reflected_up_to

    def ensure_reflects(self, target: int, partition: str | None = None) -> int:
        """Make the serving build reflect the log up to ``target`` (read-your-writes):
        ``catch_up_serving(target)``, with no read at all when this process knows it is done
        (``known_to_reflect``), and without first reading the build and its tracking row when it
        has caught this build up before: the page is read from where it left the row, and
        claimed only if the row is still there (``ProjectionRunner.step``); else the step reads
        the row itself.

        ``partition`` (a story): all the caller will read. When workers split the build, only
        that story is caught up (``catch_up_partition``), never the other stories' backlog."""
        if self.known_to_reflect(target):
            return target
        with self._lock:
            runner = self._serving_runner()
            if partition is not None and runner is None:
                with self.read_engine.begin() as conn:  # is it split? (``serving`` learns it)
                    build, _ = self.serving(conn, partition)
                runner = self.runner(build)
            if partition is not None and runner is not None and runner.partitioned:
                try:
                    return self._partition(runner).catch_up(partition, target)
                except BuildGone:
                    pass
            if runner is not None and runner.at is not None:
                try:
                    return runner.catch_up(target, start=runner.at)
                except BuildGone:
                    pass  # a rebuild switched builds and dropped this one: find the serving one
            return self.catch_up_serving(target)

    def splittable(self) -> bool:
        """Can workers split this model's builds (``partitioning``)?"""
        return self.partitioning() is not None

    def partitioning(self) -> Partitioning | None:
        """How workers may split this model's builds (by story, by collection), or None: a
        projection that declares none, or SQLite (one writer: builds are never split)."""
        if self.write_engine.dialect.name != "postgresql":
            return None
        return partitioning_of(self.spec.projection(self.tables(self.active())))

    def _partition(self, runner: ProjectionRunner) -> PartitionRunner:
        if runner.tracking_name not in self._partitions:
            self._partitions[runner.tracking_name] = PartitionRunner(runner)
        return self._partitions[runner.tracking_name]

    def catch_up_partition(self, partition: str, target: int | None = None, progress: Progress | None = None,
                           stop: Callable[[], bool] | None = None) -> int:
        """Bring one story's share of the serving build up to ``target`` (default: the log's
        end), as a worker that claimed it does; returns where the story stands."""
        if self.write_engine.dialect.name != "postgresql":
            raise CanonError("split_needs_postgres", "a build is split by story only on PostgreSQL", "split")
        goal = self.log.position() if target is None else target
        for _ in range(3):
            with self.read_engine.begin() as conn:
                build, _ = self.serving(conn)
            runner = self.runner(build)
            runner.partitioned = True  # this process splits it: never claim a page blind
            try:
                return self._partition(runner).catch_up(partition, goal, progress, stop=stop)
            except BuildGone:
                continue
        raise RuntimeError(f"{self.spec.name}: the serving build kept being replaced; retry")

    def shares(self) -> tuple[int, dict[str, int]]:
        """The serving build's G and every story row beyond it (``PartitionRunner.shares``)."""
        with self.read_engine.begin() as conn:
            build, _ = self.serving(conn)
            return self._partition(self.runner(build)).shares(conn)

    def advance(self, stories: list[str], goal: int) -> bool:
        """Move the serving build's G to ``goal`` if every story stands there (``PartitionRunner.advance``)."""
        with self.read_engine.begin() as conn:
            build, _ = self.serving(conn)
        return self._partition(self.runner(build)).advance(stories, goal)

    def applied(self) -> dict[str, int]:
        """Events this process applied per story through ``catch_up_partition`` (committed)."""
        out: dict[str, int] = {}
        for split in self._partitions.values():
            for story, n in split.applied.items():
                out[story] = out.get(story, 0) + n
        return out

    def snapshot_reflects(self, position: int, target: int) -> bool:
        """Does the serving build, read at tracking ``position``, reflect the log up to ``target``?"""
        runner = self._serving_runner()
        return position >= target or (runner is not None and runner.memory.reflects(position, target))

    def _appended(self, events: list[Appended]) -> None:
        # Never wait here: the writer has committed and its caller is waiting for the answer.
        # A note skipped while a catch-up runs costs only the shortcut (the runner ignores a
        # later append that does not follow what it knows, and reads the log instead).
        if not self._lock.acquire(blocking=False):
            return
        try:
            runner = self._serving_runner()
            if runner is not None:
                runner.appended(events)
        finally:
            self._lock.release()

    def position(self) -> int:
        with self.read_engine.begin() as conn:
            return self.serving(conn)[1]

    # -- rebuilding --------------------------------------------------------------------------
    def rebuild(self, progress: Progress | None = None, pause: float = 0.0, *, recount: bool = False) -> RebuildReport:
        """``recount``: derive everything afresh, for a repair: a new build even if one was
        left unfinished (its rows may hold memoised values), and the projection's memo, if it
        has one (the canon token counts), emptied first so that no entry is reused."""
        started = time.perf_counter()
        self.drop_orphans()
        build, resumed = self._begin_build(fresh=recount)
        runner = self.runner(build)
        counts = getattr(runner.projection, "counts", None)  # the runner's token counts (``page_ops``)
        memo = None if counts is None else counts.memo
        if recount and memo is not None:
            with self.write_engine.begin() as conn:
                memo.clear(conn)
        first = runner.position()
        begin = self.write_engine.begin
        runner.catch_up(None, progress, pause, final_analyze=False)  # analysed once, after the switch
        with begin() as conn:  # built in one pass, now that the rows are in
            for index in self._deferred_indexes(build):
                index.create(conn, checkfirst=True)
        with begin() as conn:
            row = self._row(conn, lock=True)
            if row["building_tag"] != build.tag:
                raise RuntimeError(f"another rebuild of {self.spec.name} took over ({row['building_tag']})")
            goal = self.log.position()
            while runner.step(conn, goal, careful=True) < goal:  # the last pages, in the switching transaction
                pass
            old = Build(row["active_tag"], row["active_version"])
            conn.execute(update(registry).where(registry.c.projection == self.spec.name).values(
                active_tag=build.tag, active_version=build.version, building_tag=None, building_version=None))
        runner.analyze()
        self._drop(old)
        return RebuildReport(self.spec.name, old, build, resumed, goal, goal - first, time.perf_counter() - started)

    def drop_orphans(self) -> list[Build]:
        """Drop builds that neither serve nor are being built: a rebuild killed after its
        switch and before its drop leaves the old build's tables and tracking row behind. A
        build's tracking row goes in the same transaction as its tables (``_drop``), so a
        tracking row is how a build that still has tables is found."""
        prefix = f"{self.spec.name}:"
        with self.write_engine.begin() as conn:
            row = self._row(conn, lock=True)
            keep = {row["active_tag"], row["building_tag"]}
            names = conn.execute(select(tracking.c.projection)
                                 .where(tracking.c.projection.startswith(prefix, autoescape=True))).scalars().all()
        orphans = []
        for name in names:
            tag = name[len(prefix):]
            version = _version_of(tag)
            if tag in keep or version is None:
                continue
            orphans.append(Build(tag, version))
        for build in orphans:
            self._drop(build)
        return orphans

    def _begin_build(self, fresh: bool = False) -> tuple[Build, bool]:
        with self.write_engine.begin() as conn:
            row = self._row(conn, lock=True)
            if row["building_tag"] and row["building_version"] == self.spec.version and not fresh:
                return Build(row["building_tag"], row["building_version"]), True
            if row["building_tag"]:  # an unfinished build of another schema version (or fresh): start over
                stale = Build(row["building_tag"], row["building_version"])
            else:
                stale = None
            generation = row["generation"] + 1
            build = Build(f"v{self.spec.version}_{generation}", self.spec.version)
            self.tables(build).metadata.create_all(conn)
            for index in self._deferred_indexes(build):
                index.drop(conn)
            start_tracking(conn, self._tracking_name(build))
            conn.execute(update(registry).where(registry.c.projection == self.spec.name).values(
                building_tag=build.tag, building_version=build.version, generation=generation))
        if stale is not None:
            self._drop(stale)
        return build, False

    def _deferred_indexes(self, build: Build) -> list[Any]:
        """Secondary (non-unique) indexes a projection lets a rebuild create after the fill
        (``defer_indexes = True``): one sorted build instead of maintaining them row by row.
        They never change what a statement does, only how fast; the projection opts in when
        its own writes do not need them."""
        if not getattr(self.runner(build).projection, "defer_indexes", False):
            return []
        return [index for table in self.tables(build).all() for index in sorted(table.indexes, key=lambda i: i.name)
                if not index.unique]

    def _drop(self, build: Build) -> None:
        with self.write_engine.begin() as conn:
            self.tables(build).metadata.drop_all(conn)
            stop_tracking(conn, self._tracking_name(build))
        self._runners.pop(build.tag, None)
