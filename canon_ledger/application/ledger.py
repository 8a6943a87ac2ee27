"""The canon ledger: applies commands to the event store, exactly once each.

Idempotency: every command saves a CommandReceipt (id from ``command_id``) in the same
transaction as its events, so a retry collides on the receipt and writes nothing.
Concurrency: a save that loses an optimistic-concurrency race raises IntegrityError; the
command is decided again on fresh state, a bounded number of times, then reported as a
conflict. Nothing is silently dropped.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from threading import Lock
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, Repository
from eventsourcing.persistence import ConnectionUnavailableError, IntegrityError

from canon_ledger.application.handlers import handle
from canon_ledger.application.results import CommandResult
from canon_ledger.application.unit_of_work import UnitOfWork
from canon_ledger.domain import ids
from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.commands import Command
from canon_ledger.domain.errors import CanonError, RuleViolated
from canon_ledger.domain.document import Document
from canon_ledger.domain.packet_log import PacketRecord
from canon_ledger.domain.quota import QuotaDay
from canon_ledger.domain.receipt import CommandReceipt, event_ref
from canon_ledger.domain.story import Story
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.volume import Volume
from canon_ledger.domain.wiki import WikiPage

log = logging.getLogger(__name__)
SNAPSHOT_EVERY = 32  # events of one aggregate between snapshots

CommandOrError = Command | CanonError


@dataclass(frozen=True)
class LoggedEvent:
    """One event of the global log, decoded, with the story it belongs to."""

    position: int
    type: str
    story_id: str | None
    originator_id: UUID
    version: int
    timestamp: datetime
    data: dict[str, Any]


def _project(aggregate: Any, events: Iterable[Any]) -> Any:
    """The library's ``project_aggregate`` without its per-event ``isinstance`` against a
    runtime Protocol, which cost ~60 us an event (1.6 ms to load a chapter 25 events past its
    snapshot)."""
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
        if self._lock is not None and not self._lock.acquire(timeout=self.timeout):
            raise ConnectionUnavailableError(f"waited {self.timeout:.0f} s for this process's turn to write")

    def __exit__(self, *_: Any) -> None:
        if self._lock is not None:
            self._lock.release()


class ShortFirstRepository(Repository):
    """Loads an aggregate by reading its first ``SNAPSHOT_EVERY`` events: most aggregates are
    shorter (and a new one has none), so they load with that one query, as with no snapshots.
    Only a longer one also reads its latest snapshot and the events after it. The library's
    order (snapshot first) cost every load a second query, ~0.15 ms each on PostgreSQL.

    The stored snapshot of a long aggregate is then remembered (a few hundred bytes, up to
    ``KNOWN_SNAPSHOTS`` of them), so its next load is one query: the events after it. A
    snapshot is a pure function of the events up to its version, so a remembered one never
    goes stale, whoever writes next; it is only superseded, and forgotten once a load finds
    a full interval of events after it (a newer snapshot exists by then). The record is kept,
    not the decoded snapshot, so no two loads share mutable state."""

    KNOWN_SNAPSHOTS = 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._known: OrderedDict[Any, Any] = OrderedDict()
        self._known_lock = Lock()

    def get(self, aggregate_id: Any, *, projector_func: Any = None, **kwargs: Any) -> Any:
        return super().get(aggregate_id, projector_func=projector_func or _project, **kwargs)

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


class CanonLedger(Application):
    name = "CanonLedger"
    max_attempts = 12
    page_size = 1000  # the library's default of 10 reads the log 4-5x slower
    # A command replays the aggregates it touches. Those that live long (a chapter summarised
    # again and again, a main character revised through a serial, a day of metered calls) are
    # loaded from a snapshot plus at most SNAPSHOT_EVERY - 1 events. Snapshots are a cache in
    # their own table: the log, projections and audits never read them.
    snapshotting_intervals = {cls: SNAPSHOT_EVERY for cls in (Story, Chapter, Volume, CanonEntry, Document,
                                                              WikiPage, QuotaDay)}

    def __init__(self, env: Any = None, tokens: TokenCounter | None = None) -> None:
        super().__init__(env)
        self.tokens = tokens  # knowledge commands chunk text by tokens
        self._writer_turn = WriterTurn.for_env(self.env)
        self._watchers: list[Callable[[list[tuple[int, str, Any]]], None]] = []

    def watch(self, listener: Callable[[list[tuple[int, str, Any]]], None]) -> None:
        """Call ``listener`` with (position, topic, stored record) of every event this process
        appends, once committed. In-process read models learn from it which positions hold
        none of their events, and hold their own until projected, so they need not read the
        log back (see ``ReadModels.reflects`` and ``runner.Tail``); ``decode`` gives the event."""
        self._watchers.append(listener)

    def _notify(self, recordings: list[Any]) -> None:
        super()._notify(recordings)
        if self._watchers and recordings:
            appended = [(r.notification.id, r.notification.topic, r.notification) for r in recordings]
            for listener in self._watchers:
                listener(appended)

    def decode(self, record: Any) -> Any:
        return self.mapper.to_domain_event(record)

    def construct_env(self, name: str, env: Any = None) -> Any:
        # Only the configuration we pass counts: the library would also read os.environ, where
        # a stray POSTGRES_ENABLE_DB_FUNCTIONS=y (or CANONLEDGER_*) would silently drop the
        # insert table lock that keeps position order equal to commit order.
        from eventsourcing.utils import Environment

        return Environment(name, {"IS_SNAPSHOTTING_ENABLED": "y", **type(self).env, **(env or {})})

    def _record(self, processing_event: Any) -> Any:
        with self._writer_turn:
            return super()._record(processing_event)

    def construct_repository(self) -> Repository:
        return ShortFirstRepository(event_store=self.events, snapshot_store=self.snapshots)

    def _take_snapshots(self, processing_event: Any) -> None:
        # After the events' commit: a snapshot that cannot be written costs a longer replay
        # later, never the command that was just saved.
        try:
            with self._writer_turn:
                super()._take_snapshots(processing_event)
        except Exception:  # noqa: BLE001 - a cache write; the command is already saved
            log.warning("snapshot not taken; aggregates load from their events", exc_info=True)

    # -- writing ---------------------------------------------------------------------------
    def apply(self, commands: Iterable[CommandOrError], *, atomic: bool = False) -> list[CommandResult]:
        """Apply commands in order. Parse failures may be passed in as ``CanonError``s so
        results line up with input lines; they are reported and change nothing."""
        items = list(commands)
        if atomic:
            return self._apply_atomically(items)
        return [self._apply_one(i, item) for i, item in enumerate(items, start=1)]

    def _apply_one(self, index: int, item: CommandOrError) -> CommandResult:
        if isinstance(item, CanonError):
            return CommandResult(index, "rejected", error=item)
        # The receipt is only read when something goes wrong: on the happy path its unique
        # (id, version 1) row already makes a second save of the same command fail.
        for attempt in range(self.max_attempts):
            uow = UnitOfWork(self.repository)
            try:
                changed = self._decide(item, uow)
            except CanonError as e:
                # A retry can be refused by its own earlier success ("chapter already planned").
                earlier = self._receipt_verdict(index, item, UnitOfWork(self.repository))
                return earlier or CommandResult(index, "rejected", item.command_id, item.type, error=e)
            if not changed:
                # A retry of a command applied before changes nothing now: it is a duplicate.
                earlier = self._receipt_verdict(index, item, UnitOfWork(self.repository))
                return earlier or CommandResult(index, "unchanged", item.command_id, item.type)
            try:
                recordings = self.save(*uow.pending())
            except IntegrityError:
                # Lost a race, or this command was applied before. The receipt tells which.
                earlier = self._receipt_verdict(index, item, UnitOfWork(self.repository))
                if earlier is not None:
                    return earlier
                self._back_off(attempt)
                continue
            position = max(r.notification.id for r in recordings)
            return CommandResult(index, "applied", item.command_id, item.type, position=position)
        return self._conflict(index, item)

    def _apply_atomically(self, items: Sequence[CommandOrError]) -> list[CommandResult]:
        careful = False  # after a failed save, read every receipt first
        for attempt in range(self.max_attempts):
            uow = UnitOfWork(self.repository)
            decided: list[CommandResult] = []
            in_batch: dict[str, tuple[Command, CommandResult]] = {}  # id -> its first copy and what it came to
            copies: set[int] = set()  # indexes of later copies of a command of this batch
            for index, item in enumerate(items, start=1):
                if isinstance(item, CanonError):
                    decided.append(CommandResult(index, "rejected", error=item))
                    continue
                twin = in_batch.get(item.command_id)
                if twin is not None:
                    copies.add(index)
                    decided.append(self._copy_verdict(index, item, *twin))
                    continue
                earlier = self._receipt_verdict(index, item, uow) if careful else None
                if earlier is not None:
                    decided.append(earlier)
                    in_batch[item.command_id] = (item, earlier)
                    continue
                try:
                    changed = self._decide(item, uow)
                except CanonError as e:
                    earlier = self._receipt_verdict(index, item, UnitOfWork(self.repository))
                    decided.append(earlier or CommandResult(index, "rejected", item.command_id, item.type, error=e))
                else:
                    # Changing nothing, it may be a retry of a command applied before: a duplicate.
                    earlier = None if changed or careful else \
                        self._receipt_verdict(index, item, UnitOfWork(self.repository))
                    status = "applied" if changed else "unchanged"
                    decided.append(earlier or CommandResult(index, status, item.command_id, item.type))
                in_batch[item.command_id] = (item, decided[-1])
            if any(not r.ok for r in decided):
                # Rolled back: nothing of the batch is written, copies of its commands included.
                return [
                    CommandResult(r.index, "not_applied", r.command_id, r.type)
                    if r.status == "applied" or (r.index in copies and r.ok) else r
                    for r in decided
                ]
            pending = uow.pending()
            if not pending:
                return decided
            try:
                recordings = self.save(*pending)
            except IntegrityError:
                careful = True
                self._back_off(attempt)
                continue
            # One transaction: every command in it becomes visible at the same position.
            position = max(r.notification.id for r in recordings)
            return [
                CommandResult(r.index, r.status, r.command_id, r.type, position=position)
                if r.status == "applied"
                else r
                for r in decided
            ]
        return [
            self._conflict(index, item) if not isinstance(item, CanonError) else CommandResult(index, "rejected", error=item)
            for index, item in enumerate(items, start=1)
        ]

    def _copy_verdict(self, index: int, command: Command, twin: Command, first: CommandResult) -> CommandResult:
        """A later copy of a command id seen earlier in the batch: a duplicate of what the first
        copy did, or refused as it was (a copy of a refused command is never a ``duplicate``)."""
        if twin.digest() != command.digest():
            return self._reused(index, command, twin.type)
        if first.ok:
            return CommandResult(index, "duplicate", command.command_id, command.type)
        code, message = (first.error.code, first.error.message) if first.error else (first.status, first.status)
        field = first.error.field if first.error else None
        return CommandResult(index, "rejected", command.command_id, command.type,
                             error=CanonError(code, f"a copy of command {first.index} of this batch, which was "
                                                    f"refused: {message}", field))

    def _decide(self, command: Command, uow: UnitOfWork) -> bool:
        """Decide ``command`` into ``uow``; False when it changes nothing."""
        uow.begin()
        handle(command, uow, self.tokens)
        produced = [event_ref(e.originator_id, e.originator_version) for e in uow.produced()]
        if not produced:
            return False  # it changes nothing (its outcome is the state already): nothing to record
        story = getattr(command, "story_id", None)
        uow.add(
            CommandReceipt(
                command_id=command.command_id, command_type=command.type, story_id=story,
                digest=command.digest(), events=produced,
            )
        )
        return True

    @staticmethod
    def _receipt_verdict(index: int, command: Command, uow: UnitOfWork) -> CommandResult | None:
        receipt = uow.get(CommandReceipt, ids.receipt_id(command.command_id))
        if receipt is None:
            return None
        if receipt.digest != command.digest():
            return CanonLedger._reused(index, command, receipt.command_type)
        return CommandResult(index, "duplicate", command.command_id, command.type)

    @staticmethod
    def _reused(index: int, command: Command, earlier_type: str) -> CommandResult:
        error = RuleViolated(
            "command_id_must_identify_one_command",
            f"command_id {command.command_id!r} was already used by a different {earlier_type} command",
            "command_id",
        )
        return CommandResult(index, "rejected", command.command_id, command.type, error=error)

    def _conflict(self, index: int, command: Command) -> CommandResult:
        error = CanonError(
            "concurrency_conflict",
            f"gave up after {self.max_attempts} attempts: other writers kept changing the same aggregates; "
            "nothing was written, retry the command",
        )
        return CommandResult(index, "conflict", command.command_id, command.type, error=error)

    @staticmethod
    def _back_off(attempt: int) -> None:
        time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))

    # -- packets ---------------------------------------------------------------------------------
    def record_packet(self, record: PacketRecord) -> int | None:
        """Append PacketIssued once per distinct packet; returns its position, None if known."""
        try:
            recordings = self.save(record)
        except IntegrityError:
            return None  # the same packet (same bytes, same id) was issued before
        return recordings[-1].notification.id

    def packet_record(self, packet_id: str) -> PacketRecord | None:
        try:
            return self.repository.get(ids.packet_id(packet_id))
        except AggregateNotFoundError:
            return None

    # -- reading the log -----------------------------------------------------------------------
    def position(self) -> int:
        """The last position in the global log (0 when empty)."""
        return self.recorder.max_notification_id() or 0

    def records(self, start: int, limit: int, stop: int | None = None, topics: Sequence[str] = ()) -> list[Any]:
        """Stored records (``.id``, ``.topic``, undecoded state) from ``start`` on: counting
        or routing entries without paying for their decoding (``decode`` gives the event)."""
        return list(self.recorder.select_notifications(start, limit, stop=stop, topics=list(topics)))

    def read(self, start: int, limit: int, stop: int | None = None, topics: Sequence[str] = ()) -> list[tuple[int, Any]]:
        """Decoded (position, event) pairs: the projections' view of the log."""
        return [(n.id, self.mapper.to_domain_event(n)) for n in self.records(start, limit, stop, topics)]

    def history(self, *, story_id: str | None = None, start: int = 1, stop: int | None = None) -> Iterator[LoggedEvent]:
        """The global log in order, decoded; optionally only one story's events."""
        while True:
            page = self.recorder.select_notifications(start, self.page_size, stop=stop)
            for notification in page:
                domain_event = self.mapper.to_domain_event(notification)
                owner = getattr(domain_event, "story_id", None)  # every story event names its story
                if story_id is not None and owner != story_id:
                    continue
                data = {
                    k: v
                    for k, v in vars(domain_event).items()
                    if k not in ("originator_id", "originator_version", "timestamp", "originator_topic")
                }
                yield LoggedEvent(
                    position=notification.id,
                    type=type(domain_event).__qualname__,
                    story_id=owner,
                    originator_id=domain_event.originator_id,
                    version=domain_event.originator_version,
                    timestamp=domain_event.timestamp,
                    data=data,
                )
            if len(page) < self.page_size:
                return
            start = page[-1].id + 1

