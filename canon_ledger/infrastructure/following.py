"""Whether a live worker follows a store's read models: a mark each following worker holds
while it runs (``canon worker``, the worker of ``canon serve``), so that a verb that leaves a
backlog behind (``canon import``) may hand the indexing to it instead of doing it twice.

A mark names one read model as its ``spec.name`` says it (``canon``, ..., ``vectors:<model>``:
a worker that embeds with another model does not follow this one's vectors):

- on PostgreSQL, a shared session advisory lock (key ``canon-ledger/follows/<name>``) on a
  connection of the worker's own, outside every pool. The server drops it with the session, so
  a worker killed with SIGKILL stops counting as soon as its connection is seen gone.
  ``followed`` reads ``pg_locks``: it never takes the lock.
- on SQLite, a shared ``flock`` on a file in the temporary directory named for the database
  file (its device and inode) and the model; the kernel drops it with the process. ``followed``
  tries an exclusive lock without waiting and lets go at once (refused, it tries twice more,
  20 ms apart, so another probe's instant hold is not taken for a worker).

Only a worker that follows the log until stopped holds marks: ``canon worker --once`` exits
once caught up, and an import's events could land after its last pass. Either mistake is
benign: a worker not seen means the import indexes too (the tracking rows keep every event
applied once); a worker seen that does not index (stuck on a store fault) leaves the catch-up
to the next packet or search, which says so.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from canon_ledger.infrastructure.stores import StoreConfig, pg_connect, sqlite_path

NAMESPACE = "canon-ledger/follows/"
PROBES = 3  # exclusive try-locks on SQLite before a refusal counts as a worker's hold
PROBE_PAUSE = 0.02  # seconds between them

_PG_HELD = """
SELECT count(*) FROM pg_locks l, (SELECT hashtextextended(%s, 0) AS k) h
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = ((h.k >> 32) & 4294967295) AND l.objid::bigint = (h.k & 4294967295)"""


def _lock_file(config: StoreConfig, name: str) -> Path | None:
    """The SQLite mark's file, or None for a store that is no file of its own (in memory)."""
    path = sqlite_path(config)
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    if st is None:
        return None
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"canon-ledger-follows-{st.st_dev}-{st.st_ino}-{digest}.lock"


class Marks:
    """The marks one worker holds (``hold``) until ``release``."""

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self._conn: Any = None
        self._files: list[int] = []

    def hold(self, names: Iterable[str]) -> None:
        names = list(names)
        if self.config.is_postgres:
            self._conn = pg_connect(self.config)
            for name in names:
                self._conn.execute("SELECT pg_advisory_lock_shared(hashtextextended(%s, 0))", (NAMESPACE + name,))
            return
        import fcntl

        for name in names:
            file = _lock_file(self.config, name)
            if file is None:
                continue
            fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits only while a probe holds it, for an instant
            self._files.append(fd)

    def release(self) -> None:
        if self._conn is not None and not self._conn.closed:
            try:
                # Gone when this returns: a closed session's locks go only once its server
                # process has exited, and a ``followed`` read at once could still see one.
                self._conn.execute("SELECT pg_advisory_unlock_all()")
            except Exception:  # noqa: BLE001 - a lost connection: its locks go with the session
                pass
            self._conn.close()
        self._conn = None
        while self._files:
            os.close(self._files.pop())  # the flock goes with the last descriptor


def followed(config: StoreConfig, names: Iterable[str]) -> set[str]:
    """The read models among ``names`` a running worker follows (holds a mark for)."""
    names = list(names)
    if config.is_postgres:
        with pg_connect(config) as conn:
            return {n for n in names if conn.execute(_PG_HELD, (NAMESPACE + n,)).fetchone()[0]}
    return {n for n in names if _sqlite_held(config, n)}


def _sqlite_held(config: StoreConfig, name: str) -> bool:
    import fcntl

    file = _lock_file(config, name)
    if file is None:
        return False
    try:
        fd = os.open(file, os.O_RDWR)
    except FileNotFoundError:
        return False  # no worker ever marked it
    try:
        for attempt in range(PROBES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if attempt + 1 < PROBES:
                    time.sleep(PROBE_PAUSE)
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)
