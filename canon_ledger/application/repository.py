"""How the ledger uses the library's storage: the ``Application`` hooks it overrides.

``LedgerApplication`` is the library's ``Application`` as the ledger configures it: only
the configuration passed in counts (never ``os.environ``); aggregates load through
``ShortFirstRepository``; long-lived aggregates are snapshotted, and a snapshot that cannot
be written never fails the command just saved; on SQLite this process's threads take turns
(``WriterTurn``) before they ask the library for its one writer connection. Nothing here
decides a command or reads the log: see ``ledger`` and ``event_log``.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Iterable
from itertools import chain
from threading import Lock
from typing import Any, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent, Repository
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    ConnectionUnavailableError,
    InfrastructureFactory,
    InterfaceError,
    OperationalError,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import Environment, retry

from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.document import Document
from canon_ledger.domain.quota import QuotaDay
from canon_ledger.domain.series import Series
from canon_ledger.domain.story import Story
from canon_ledger.domain.volume import Volume
from canon_ledger.domain.wiki import WikiPage

log = logging.getLogger(__name__)
SNAPSHOT_EVERY = 32  # events of one aggregate between snapshots
# The env key of the libpq parameters (JSON) the library's PostgreSQL pool connects with, beside
# the host, port, database and user it is given (``infrastructure.stores`` fills it in).
LIBPQ_PARAMS = "CANON_LIBPQ_PARAMS"


def project_events(aggregate: Any, events: Iterable[Any]) -> Any:
    """The library's ``project_aggregate`` without its per-event ``isinstance`` against a
    runtime Protocol: each event mutates the aggregate, in order (see docs/benchmarks.md)."""
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


class WriterTurn:
    """On SQLite, this process's threads take turns before they ask the library for its one
    writer connection. Its pool holds a fairness semaphore while a thread waits for the writer,
    so without turns three threads deadlocked (seen in tests/integration/test_threads.py):
    A held the writer and waited for the file's write lock; B held that lock (a read-model
    catch-up) and waited for a reader connection, behind C, who held the semaphore waiting
    for A's writer. With turns no thread waits for the writer inside the pool, so B gets its
    reader, commits, and A goes on. A turn is waited for as long as another process's lock
    (``SQLITE_LOCK_TIMEOUT``), then the store counts as unavailable. PostgreSQL needs none:
    its pool has no such semaphore and writers queue on the table lock in the server."""

    def __init__(self, timeout: float | None) -> None:
        self._lock = Lock() if timeout is not None else None
        self.timeout = timeout

    @classmethod
    def for_env(cls, env: Any) -> WriterTurn:
        if env.get("PERSISTENCE_MODULE") != "eventsourcing.sqlite":
            return cls(None)
        raw = env.get("SQLITE_LOCK_TIMEOUT") or "5"
        return cls(float(raw) if raw.isdigit() else 5.0)

    def __enter__(self) -> None:
        lock, timeout = self._lock, self.timeout  # both set, or neither
        if lock is not None and timeout is not None and not lock.acquire(timeout=timeout):
            raise ConnectionUnavailableError(f"waited {self.timeout:.0f} s for this process's turn to write")

    def __exit__(self, *_: Any) -> None:
        if self._lock is not None:
            self._lock.release()


class ShortFirstRepository(Repository[UUID]):
    """Loads an aggregate by reading its first ``SNAPSHOT_EVERY`` events: most aggregates are
    shorter (and a new one has none), so they load with that one query, as with no snapshots.
    Only a longer one also reads its latest snapshot and the events after it. The library's
    order (snapshot first) cost every load a second query.

    The stored snapshot of a long aggregate is then remembered (a few hundred bytes, up to
    ``KNOWN_SNAPSHOTS`` of them), so its next load is one query: the events after it. A
    snapshot is a pure function of the events up to its version, so a remembered one never
    goes stale, whoever writes next; it is only superseded, and forgotten once a load finds
    a full interval of events after it (a newer snapshot exists by then). The record is kept,
    not the decoded snapshot, so no two loads share mutable state."""

    KNOWN_SNAPSHOTS = 1024
    HEADS_PER_QUERY = 500  # ids per query in ``get_many``

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._known: OrderedDict[Any, Any] = OrderedDict()
        self._known_lock = Lock()

    def get(self, aggregate_id: Any, *, projector_func: Any = None, **kwargs: Any) -> Any:
        return super().get(aggregate_id, projector_func=projector_func or project_events, **kwargs)

    def _reconstruct_aggregate(self, aggregate_id: Any, version: int | None, projector_func: Any) -> Any:
        if self.snapshot_store is None or version is not None:
            return super()._reconstruct_aggregate(aggregate_id, version, projector_func)
        with self._known_lock:
            stored = self._known.get(aggregate_id)
            if stored is not None:
                self._known.move_to_end(aggregate_id)
        if stored is None:
            head = list(self.event_store.get(originator_id=aggregate_id, limit=SNAPSHOT_EVERY))
            if len(head) < SNAPSHOT_EVERY:
                aggregate = projector_func(None, head)
                if aggregate is None:
                    raise AggregateNotFoundError(f"Aggregate {aggregate_id!r} not found.")
                return aggregate
            found = self.snapshot_store.recorder.select_events(aggregate_id, desc=True, limit=1)
            if not found:  # not written (yet, or it failed): replay
                return super()._reconstruct_aggregate(aggregate_id, version, projector_func)
            stored = found[0]
        snapshot = self.snapshot_store.mapper.to_domain_event(stored)
        after = list(self.event_store.get(originator_id=aggregate_id, gt=snapshot.originator_version))
        with self._known_lock:
            if len(after) >= SNAPSHOT_EVERY:
                self._known.pop(aggregate_id, None)
            else:
                self._known[aggregate_id] = stored
                if len(self._known) > self.KNOWN_SNAPSHOTS:
                    self._known.popitem(last=False)
        return projector_func(None, chain([snapshot], after))

    def get_many(self, aggregate_ids: Iterable[UUID]) -> dict[UUID, Any]:
        """Each of ``aggregate_ids`` as ``get`` loads it now, or None where none is stored. The
        first ``SNAPSHOT_EVERY`` events of them all are read together (``HEADS_PER_QUERY`` ids
        a query), so an aggregate that does not exist yet costs no query of its own; a longer
        one, or one whose snapshot is remembered, is then loaded by ``get``. On a store without
        that query (not SQLite or PostgreSQL), or with the library's cache, each is loaded by ``get``."""
        wanted = list(dict.fromkeys(aggregate_ids))
        with self._known_lock:
            remembered = {i for i in wanted if i in self._known}
        heads = None if self.cache else self._select_heads([i for i in wanted if i not in remembered])
        to_domain_event = self.event_store.mapper.to_domain_event
        found: dict[UUID, Any] = {}
        for aggregate_id in wanted:
            head = None if heads is None or aggregate_id in remembered else heads.get(aggregate_id, [])
            if head is not None and _whole(head):
                found[aggregate_id] = project_events(None, map(to_domain_event, head))
                continue
            try:
                found[aggregate_id] = self.get(aggregate_id)
            except AggregateNotFoundError:
                found[aggregate_id] = None
        return found

    def _select_heads(self, aggregate_ids: list[UUID]) -> dict[UUID, list[StoredEvent]] | None:
        """The stored events of ``aggregate_ids`` up to version ``SNAPSHOT_EVERY``, by id, in
        version order (an id with none is absent); None when the store has no such query."""
        recorder: Any = self.event_store.recorder
        module = type(recorder).__module__
        if module not in ("eventsourcing.sqlite", "eventsourcing.postgres"):
            return None
        select = _sqlite_heads if module == "eventsourcing.sqlite" else _postgres_heads
        heads: dict[UUID, list[StoredEvent]] = {}
        for start in range(0, len(aggregate_ids), self.HEADS_PER_QUERY):
            for aggregate_id, stored in select(recorder, aggregate_ids[start:start + self.HEADS_PER_QUERY]):
                heads.setdefault(aggregate_id, []).append(stored)
        return heads


def _whole(head: list[StoredEvent]) -> bool:
    """Is ``head`` (an aggregate's events up to version ``SNAPSHOT_EVERY``) all its events, as
    ``ShortFirstRepository.get`` reads them: fewer than that many, versions 1..n?"""
    return len(head) < SNAPSHOT_EVERY and (not head or head[-1].originator_version == len(head))


def _sqlite_heads(recorder: Any, aggregate_ids: list[UUID]) -> list[tuple[UUID, StoredEvent]]:
    keys = {i.hex: i for i in aggregate_ids}  # the library's SQLite recorder stores a UUID as its hex
    statement = (f"SELECT originator_id, originator_version, topic, state FROM {recorder.events_table_name} "
                 f"WHERE originator_id IN ({','.join('?' * len(keys))}) AND originator_version <= ? "
                 "ORDER BY originator_id, originator_version")
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute(statement, [*keys, SNAPSHOT_EVERY])
        rows = cursor.fetchall()
    return [(keys[r["originator_id"]], StoredEvent(keys[r["originator_id"]], r["originator_version"], r["topic"],
                                                    r["state"])) for r in rows]


@retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's select_events
def _postgres_heads(recorder: Any, aggregate_ids: list[UUID]) -> list[tuple[UUID, StoredEvent]]:
    from psycopg.sql import SQL, Identifier

    statement = SQL("SELECT originator_id, originator_version, topic, state FROM {}.{} "
                    "WHERE originator_id = ANY(%s) AND originator_version <= %s "
                    "ORDER BY originator_id, originator_version").format(
        Identifier(recorder.datastore.schema), Identifier(recorder.events_table_name))
    as_text = recorder.datastore.originator_id_type == "text"
    keys = {str(i) if as_text else i: i for i in aggregate_ids}
    with recorder.datastore.get_connection() as conn, conn.cursor() as cursor:
        cursor.execute(statement, (list(keys), SNAPSHOT_EVERY), prepare=True)
        rows = cursor.fetchall()
    return [(keys[r["originator_id"]], StoredEvent(keys[r["originator_id"]], r["originator_version"], r["topic"],
                                                    bytes(r["state"]))) for r in rows]


class LedgerApplication(Application[UUID]):
    """The library's ``Application`` with the ledger's storage hooks (see the module docstring)."""

    # A command replays the aggregates it touches. Those that live long (a chapter summarised
    # again and again, a main character revised through a serial, a day of metered calls) are
    # loaded from a snapshot plus at most SNAPSHOT_EVERY - 1 events. Snapshots are a cache in
    # their own table: the log, projections and audits never read them.
    snapshotting_intervals = {cls: SNAPSHOT_EVERY for cls in (Story, Chapter, Volume, CanonEntry, Document,
                                                              WikiPage, QuotaDay, Series)}

    def __init__(self, env: Any = None) -> None:
        super().__init__(env)
        self._writer_turn = WriterTurn.for_env(self.env)

    def construct_env(self, name: str, env: Any = None) -> Any:
        # Only the configuration we pass counts: the library would also read os.environ, where
        # a stray POSTGRES_ENABLE_DB_FUNCTIONS=y (or CANONLEDGER_*) would silently drop the
        # insert table lock that keeps position order equal to commit order.
        return Environment(name, {"IS_SNAPSHOTTING_ENABLED": "y", **type(self).env, **(env or {})})

    def construct_factory(self, env: Environment) -> InfrastructureFactory[Any]:
        # The library's pool knows only host, port, database, user and password: the URL's
        # other libpq parameters (sslmode, application_name, ...) join them here, before its
        # first connection (the pool is built closed, and opens when the tables are created).
        factory = super().construct_factory(env)
        if env.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
            pool: Any = cast(Any, factory).datastore.pool  # psycopg_pool's, built with open=False
            pool.kwargs.update(json.loads(env.get(LIBPQ_PARAMS) or "{}"))
            if pool.kwargs.get("password") == "" and pool.get_password_func is None:
                del pool.kwargs["password"]  # no password: libpq reads the password file
        return factory

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """The library's ``save``. Aggregates alone (what the ledger saves) are collected as its
        ``ProcessingEvent.collect_events`` collects them, without its two ``isinstance`` checks
        of each against a runtime Protocol (a cost per aggregate on the command path)."""
        if not all(isinstance(o, Aggregate) for o in objs):
            return super().save(*objs, **kwargs)
        processing_event: ProcessingEvent[UUID] = ProcessingEvent()
        for aggregate in objs:
            processing_event.events.extend(aggregate.collect_events())
            processing_event.aggregates[aggregate.id] = aggregate
        processing_event.saved_kwargs.update(kwargs)
        recordings: list[Recording[UUID]] = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        self.notify(processing_event.events)  # deprecated in the library, which still calls it
        return recordings

    def _record(self, processing_event: Any) -> Any:
        with self._writer_turn:
            return super()._record(processing_event)

    def construct_repository(self) -> Repository[UUID]:
        return ShortFirstRepository(event_store=self.events, snapshot_store=self.snapshots)

    def _take_snapshots(self, processing_event: Any) -> None:
        # After the events' commit: a snapshot that cannot be written costs a longer replay
        # later, never the command that was just saved.
        try:
            with self._writer_turn:
                super()._take_snapshots(processing_event)
        except Exception:  # noqa: BLE001 - a cache write; the command is already saved
            log.warning("snapshot not taken; aggregates load from their events", exc_info=True)
