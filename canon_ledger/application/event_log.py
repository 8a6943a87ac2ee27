"""The global log, read in order, and what this process appends to it.

``EventLogReader`` is the read models' view of the ledger (the projections' ``EventLog``
port): the last position, stored records and decoded events from a position on, a story's
history; ``watch``, which tells in-process read models of every event this process
appends, once committed; and ``wait_for_change``, which a live worker and an event stream
block on until the log may have grown. Positions are those of the library's notification log: they only
grow, and position order is commit order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

Appended = tuple[int, str, Any]  # (position, topic, the stored record) of an event this process appended
Listener = Callable[[list[Appended]], None]


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


_ENVELOPE = ("originator_id", "originator_version", "timestamp", "originator_topic")  # not an event's ``data``


class EventLogReader:
    """Reads the library's notification log through its ``recorder``, decodes with its
    ``mapper``; ``page_size`` records per query when walking the whole log (``history``)."""

    def __init__(self, recorder: Any, mapper: Any, page_size: int) -> None:
        self.recorder = recorder
        self.mapper = mapper
        self.page_size = page_size
        self._listeners: list[Listener] = []
        # Waiting for the log to grow (``wait_for_change``): each append of this process, and
        # each change another process is known to have made (``note_change``), counts one.
        self._changed = threading.Condition()
        self.changes = 0

    # -- what this process appends -----------------------------------------------------------
    def watch(self, listener: Listener) -> None:
        """Call ``listener`` with (position, topic, stored record) of every event this process
        appends, once committed. In-process read models learn from it which positions hold
        none of their events, and hold their own until projected, so they need not read the
        log back (see ``projections.runner_cache``); ``decode`` gives the event."""
        self._listeners.append(listener)

    def appended(self, recordings: list[Any]) -> None:
        """Tell every listener of ``recordings`` (the library's, of one committed save)."""
        if self._listeners and recordings:
            appended = [(r.notification.id, r.notification.topic, r.notification) for r in recordings]
            for listener in self._listeners:
                listener(appended)
        if recordings:
            self.note_change()

    def note_change(self) -> None:
        """The log may have grown (an append here, another process's append heard of): wake
        every ``wait_for_change``."""
        with self._changed:
            self.changes += 1
            self._changed.notify_all()

    def wait_for_change(self, seen: int, timeout: float) -> None:
        """Block until ``changes`` moves past ``seen`` (a value read before) or ``timeout``
        seconds pass; it never says which."""
        with self._changed:
            if self.changes == seen:
                self._changed.wait(timeout)

    # -- reading -------------------------------------------------------------------------------
    def decode(self, record: Any) -> Any:
        """The event of a stored record."""
        return self.mapper.to_domain_event(record)

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

    def read_partition(self, start: int, limit: int, stop: int, topics: Sequence[str],
                       matches: Sequence[tuple[str, str]], belongs: Callable[[Any], bool],
                       ) -> tuple[list[tuple[int, Any]], int | None]:
        """The events of ``topics`` in [start, stop] of one share of a split build (a story's,
        a collection's): those whose stored JSON holds one of ``matches`` (a field and its
        value) and whose decoded event ``belongs``; at most ``limit`` rows looked at; and the
        last position looked at when the limit was reached (None: the range was read to ``stop``).

        PostgreSQL only (a split build's read): the rows are selected by their stored bytes
        (each field and value as the library's JSON transcoder writes them), so other shares'
        events are neither sent nor decoded; each event is then checked by ``belongs``."""
        needles = [self.mapper.transcoder.encode({field: value})[1:-1] for field, value in matches]  # b'"story_id":"x"'
        if not needles:
            raise ValueError("a share is read by at least one (field, value)")
        table = f'"{self.recorder.datastore.schema}"."{self.recorder.events_table_name}"'
        held = " OR ".join(["position(%s::bytea IN state) > 0"] * len(needles))
        sql = (f"SELECT notification_id, originator_id, originator_version, topic, state FROM {table} "
               f"WHERE notification_id >= %s AND notification_id <= %s AND topic = ANY(%s) AND ({held}) "
               "ORDER BY notification_id LIMIT %s")
        from eventsourcing.persistence import Notification

        with self.recorder.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(sql, (start, stop, list(topics), *needles, limit), prepare=True)
            rows = curs.fetchall()
        page = [(n.id, e) for n in (Notification(id=r["notification_id"], originator_id=r["originator_id"],
                                                 originator_version=r["originator_version"], topic=r["topic"],
                                                 state=bytes(r["state"])) for r in rows)
                if belongs(e := self.decode(n))]
        return page, (rows[-1]["notification_id"] if len(rows) == limit else None)

    def history(self, *, story_id: str | None = None, start: int = 1, stop: int | None = None) -> Iterator[LoggedEvent]:
        """The global log in order, decoded; optionally only one story's events."""
        while True:
            page = self.recorder.select_notifications(start, self.page_size, stop=stop)
            for notification in page:
                domain_event = self.mapper.to_domain_event(notification)
                owner = getattr(domain_event, "story_id", None)  # every story event names its story
                if story_id is not None and owner != story_id:
                    continue
                data = {k: v for k, v in vars(domain_event).items() if k not in _ENVELOPE}
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
