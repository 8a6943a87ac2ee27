"""Which worker does which share of the projection work (PostgreSQL session advisory locks).

A claim is ``pg_try_advisory_lock`` on a key naming the share (``canon/<story>``, or a whole
model such as ``vectors``), held on one connection of the worker's own, outside every pool.
The server releases every claim of a session that ends, so a worker killed with SIGKILL
gives its shares back as soon as its connection is seen gone, and another worker takes them
over from the committed tracking positions.

A claim only spreads the work: exactly-once comes from the tracking rows, which commit with
the rows they cover (``projections.partitions``), so two workers racing past a claim still
never apply an event twice. Why advisory locks and not ``SKIP LOCKED`` claim rows:
docs/architecture.md, "Splitting a build by story".
"""

from __future__ import annotations

from typing import Any

from canon_ledger.infrastructure.stores import StoreConfig, pg_connect

NAMESPACE = "canon-ledger/"  # keeps our keys apart from any other user of advisory locks


class Claims:
    """The claims of one worker process, on its own session."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._conn: Any = None
        self.held: set[str] = set()

    def _session(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = pg_connect(self.config)
            self.held.clear()  # a new session holds nothing
        return self._conn

    def take(self, share: str) -> bool:
        """Claim ``share`` unless another session holds it; True if this worker holds it now."""
        if share in self.held:
            return True
        row = self._session().execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                                      (NAMESPACE + share,)).fetchone()
        if row and row[0]:
            self.held.add(share)
            return True
        return False

    def release(self, share: str) -> None:
        if share in self.held:
            self.held.discard(share)
            self._session().execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (NAMESPACE + share,))

    def close(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None
        self.held.clear()
