"""Waiting for the log to grow: what a live worker and an event stream block on.

``LogWakeup.wait_beyond(position, timeout)`` returns as soon as the log's end passes
``position`` (or at the timeout), and never busy-waits:
- an append by this process wakes every waiter at once (``EventLogReader.wait_for_change``);
- on PostgreSQL, an append by any process wakes them through the library's own
  notification: every insert of eventsourcing's recorder runs ``NOTIFY`` on the events
  table's channel (``recorder.channel_name``), and one connection of ours ``LISTEN``s to it;
  the log's end is re-read every ``safety`` seconds all the same (a lost connection, a
  notification missed while reconnecting);
- on SQLite there are no notifications: the log's end is read every ``poll`` seconds
  (one indexed ``max()``).

The invariant callers rely on: a return with ``end > position`` means the entries up to
``end`` are committed and readable; a return at the timeout changes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from canon_ledger.application.event_log import EventLogReader
from canon_ledger.infrastructure.stores import StoreConfig, pg_connect

log = logging.getLogger(__name__)
POLL = 0.05  # seconds between reads of the log's end on SQLite
SAFETY = 5.0  # on PostgreSQL, between reads of the end with no notification


class LogWakeup:
    def __init__(self, log: EventLogReader, config: StoreConfig, *, poll: float = POLL, safety: float = SAFETY,
                 reachable: Callable[[bool], None] | None = None) -> None:
        """``reachable``: told False when the listener loses the store, True when it is back
        (PostgreSQL; it tries again every second): the server's store gate."""
        self.log = log  # the ledger's ``event_log``
        self._reachable = reachable
        self.config = config
        self._closed = threading.Event()
        self._listening = False
        self._quiet = False
        self.poll = poll
        self.safety = safety
        if config.is_postgres:
            self._listener = threading.Thread(target=self._listen, name="canon-listen", daemon=True)
            self._listener.start()

    @property
    def listening(self) -> bool:
        """Connected to the store and listening (PostgreSQL); False on SQLite."""
        return self._listening

    @property
    def interval(self) -> float:
        """Seconds a waiter sleeps before it reads the log's end again on its own."""
        return self.safety if self._listening else self.poll

    def _tick(self) -> None:
        self.log.note_change()

    def _listen(self) -> None:
        """LISTEN on the library's channel, reconnecting after a fault until closed."""
        channel = self.log.recorder.channel_name
        while not self._closed.is_set():
            try:
                with pg_connect(self.config) as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    self._listening = True
                    self._quiet = False
                    if self._reachable is not None:
                        self._reachable(True)
                    self._tick()  # anything appended while not listening is found now
                    while not self._closed.is_set():
                        for _ in conn.notifies(timeout=1.0, stop_after=1):
                            self._tick()
            except Exception as e:  # noqa: BLE001 - a store fault: poll meanwhile, retry
                if self._reachable is not None and not self._closed.is_set():
                    self._reachable(False)
                # A closed listener's connection may fail on its way out (its database dropped,
                # the server stopping): nothing to report then.
                if not self._closed.is_set() and (self._listening or not self._quiet):
                    log.warning("LISTEN on the event log failed (%s); polling until it is back", type(e).__name__)
                self._quiet = True  # said once an outage, not every second
            self._listening = False
            self._closed.wait(1.0)

    def wait_beyond(self, position: int, timeout: float) -> int:
        """The log's end, once it is past ``position`` or ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.log.changes  # appends and notifications: a waiter re-reads the end when it moves
            end = self.log.position()
            left = deadline - time.monotonic()
            if end > position or left <= 0 or self._closed.is_set():
                return end
            self.log.wait_for_change(seen, min(left, self.interval))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        self._closed.set()
        self._tick()
