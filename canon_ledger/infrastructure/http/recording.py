"""How many packets a read-only key may have recorded: reads do not write unbounded.

A packet's record (``PacketIssued``) is what ``canon audit``, ``GET /v1/packets/{id}/audit``
and MCP ``audit_packet`` replay, so every door that answers packets records them. A key of
scope author or admin may write to the log anyway: its packets are always recorded. A key
below author scope (``worker``) only reads, so its recordings are bounded: each such key has a
token bucket of ``CANON_WORKER_RECORDS`` recordings (default 30), refilled evenly over a
minute. Only a packet that would append a record takes a token (asking again for a packet
already recorded takes none). Past the budget the packet is answered all the same, the same
bytes and id, but not recorded (``X-Canon-Recorded: false``; MCP: ``_meta.recorded``), so
its audit answers ``404 unknown_packet`` as for any id never issued. The buckets live in the
process: each replica (``canon serve``, ``canon mcp``) keeps its own.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from canon_ledger.domain.api_key import Principal

RECORDS_ENV = "CANON_WORKER_RECORDS"
DEFAULT_RECORDS = 30  # a minute, per key below author scope
MAX_RECORDS = 100_000


def records_per_minute() -> int:
    """``CANON_WORKER_RECORDS`` (0..100,000; 0: a worker key's packets are never recorded),
    else the default."""
    raw = os.environ.get(RECORDS_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) <= MAX_RECORDS else DEFAULT_RECORDS


class RecordBudgets:
    """A token bucket per key below author scope: at most ``per_minute`` at once, refilled at
    ``per_minute`` a minute."""

    def __init__(self, per_minute: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = records_per_minute() if per_minute is None else per_minute
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key name: (tokens, when counted)
        self._lock = threading.Lock()

    def gate(self, principal: Principal) -> Callable[[], bool] | None:
        """What decides whether ``principal``'s next new packet is recorded: None (always,
        author scope and above), else a call that takes one of its key's tokens."""
        if principal.has("author"):
            return None
        return lambda: self.take(principal.name)

    def take(self, name: str) -> bool:
        """One recording for key ``name``, if its bucket holds one."""
        if self.per_minute <= 0:
            return False
        with self._lock:
            now = self._clock()
            tokens, then = self._buckets.get(name, (float(self.per_minute), now))
            tokens = min(float(self.per_minute), tokens + (now - then) * self.per_minute / 60.0)
            taken = tokens >= 1.0
            self._buckets[name] = (tokens - 1.0 if taken else tokens, now)
            return taken
