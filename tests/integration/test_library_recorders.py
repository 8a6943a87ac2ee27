"""The eventsourcing library's own recorder test cases, run against OUR configured stores.

The recorders are built the way ``CanonLedger`` builds them: ``InfrastructureFactory``
constructed from ``store_config(url).env`` under the application's name, so the library's
contract (contiguous notification ids, no interleaving of concurrent inserts, tracking
semantics) is checked with our lock timeouts, pool sizes and table names, not the
library's test defaults. The library's PostgreSQL tests resize the pool before the
concurrency tests; we deliberately do not: our pool (4 + 4 overflow) is what runs in
production.

The library's cases assume empty tables, so each test gets a fresh SQLite file or a fresh
scratch PostgreSQL database (created and dropped here, via conftest's helpers).
"""

from __future__ import annotations

import importlib
import sys
import threading
import unittest
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from eventsourcing.persistence import InfrastructureFactory, TrackingRecorder
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteFactory
from eventsourcing.utils import Environment

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.infrastructure.stores import open_ledger, store_config
from tests.conftest import create_database, drop_database


def _import_library_test_cases() -> ModuleType:
    """``eventsourcing.tests.persistence`` imports ``eventsourcing.cipher`` at module level,
    which needs pycryptodome (the ``eventsourcing[crypto]`` extra, not one of our
    dependencies). Only the library's cipher *factory* tests use it, and we run none of
    those, so when pycryptodome is missing a placeholder stands in for the duration of the
    import and is removed again: nothing else in the session sees it."""
    try:
        import Crypto  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        return importlib.import_module("eventsourcing.tests.persistence")

    import eventsourcing

    placeholder = ModuleType("eventsourcing.cipher")

    class AESCipher:  # never used by the test cases run here
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("pycryptodome is not installed (eventsourcing[crypto])")

    placeholder.AESCipher = AESCipher  # type: ignore[attr-defined]
    sys.modules["eventsourcing.cipher"] = placeholder
    try:
        return importlib.import_module("eventsourcing.tests.persistence")
    finally:
        del sys.modules["eventsourcing.cipher"]
        if getattr(eventsourcing, "cipher", None) is placeholder:
            del eventsourcing.cipher  # type: ignore[attr-defined]


# The module, not its abstract classes: pytest collects every unittest.TestCase subclass in
# a test module's namespace, and the abstract bases must not run.
library = _import_library_test_cases()


def _factory(url: str) -> InfrastructureFactory[Any]:
    """The factory CanonLedger would construct for ``url`` (same env, same name)."""
    return InfrastructureFactory.construct(Environment(CanonLedger.name, store_config(url).env))


@contextmanager
def _threads_finished_before_close(factory: InfrastructureFactory[Any]) -> Iterator[None]:
    """Close the factory only once the test's own threads have stopped.

    The library's ``test_concurrent_no_conflicts`` sets its readers' stop flag but never
    joins them, so they can still be mid-query when the test returns. Closing the SQLite
    datastore under a thread that is using one of its connections crashes the interpreter
    (SIGSEGV in sqlite3); on PostgreSQL the readers would fail on a closed pool. Pool
    workers are daemon threads and live until the close, so only non-daemon ones are waited
    for."""
    before = set(threading.enumerate())
    try:
        yield
    finally:
        started = [t for t in threading.enumerate() if t not in before and not t.daemon]
        for thread in started:
            thread.join(timeout=10)
        still_running = [t.name for t in started if t.is_alive()]
        if still_running:
            # Leave the store open (leaking it) rather than crash the whole session.
            raise AssertionError(f"threads still using the store after the test: {still_running}")
        factory.close()


# -- where the stores live ---------------------------------------------------------------------
class _SQLiteStore:
    """A fresh SQLite file per test, in pytest's tmp dir."""

    factory: InfrastructureFactory[Any]

    @pytest.fixture(autouse=True)
    def _store(self, tmp_path: Path) -> Iterator[None]:
        self.url = f"sqlite:///{tmp_path / 'canon.db'}"
        self.factory = _factory(self.url)
        assert isinstance(self.factory, SQLiteFactory)
        with _threads_finished_before_close(self.factory):
            yield


@pytest.mark.postgres
class _PostgresStore:
    """A fresh scratch PostgreSQL database per test, dropped afterwards."""

    factory: InfrastructureFactory[Any]

    @pytest.fixture(autouse=True)
    def _store(self) -> Iterator[None]:
        url, admin = create_database()  # skips locally / fails in CI without a server
        try:
            self.url = url
            self.factory = _factory(url)
            assert isinstance(self.factory, PostgresFactory)
            with _threads_finished_before_close(self.factory):
                yield
        finally:
            drop_database(url, admin)


class _OurConfigIsInEffect:
    """Guard: the recorders under test carry our store settings, exactly as the ledger that
    ``open_ledger`` builds for the same URL does (the ledger also reads os.environ: if that
    ever overrides a setting, this fails rather than testing a configuration we don't run)."""

    def test_recorders_use_our_store_config(self) -> None:
        recorder = self.create_recorder()  # type: ignore[attr-defined]
        env = store_config(self.url).env  # type: ignore[attr-defined]
        ours = recorder.datastore
        ledger = open_ledger(self.url)  # type: ignore[attr-defined]
        try:
            theirs = ledger.recorder.datastore  # type: ignore[attr-defined]
            assert type(ledger.recorder) is type(recorder)
            if isinstance(self.factory, PostgresFactory):  # type: ignore[attr-defined]
                assert ledger.recorder.events_table_name == recorder.events_table_name  # type: ignore[attr-defined]
                assert ours.lock_timeout == theirs.lock_timeout == int(env["POSTGRES_LOCK_TIMEOUT"])
                pool_max = int(env["POSTGRES_POOL_SIZE"]) + int(env["POSTGRES_MAX_OVERFLOW"])
                assert ours.pool.min_size == theirs.pool.min_size == int(env["POSTGRES_POOL_SIZE"])
                assert ours.pool.max_size == theirs.pool.max_size == pool_max
                assert ours.pool.timeout == theirs.pool.timeout == float(env["POSTGRES_CONNECT_TIMEOUT"])
                assert ours.idle_in_transaction_session_timeout == theirs.idle_in_transaction_session_timeout
                assert ours.schema == theirs.schema
                # FIELD-NOTES: the db-function insert path takes no table lock.
                assert ours.enable_db_functions is theirs.enable_db_functions is False
            else:
                assert ours.pool.lock_timeout == theirs.pool.lock_timeout == int(env["SQLITE_LOCK_TIMEOUT"])
                assert ours.pool.db_name == theirs.pool.db_name == env["SQLITE_DBNAME"]
        finally:
            ledger.close()


# -- ApplicationRecorder -----------------------------------------------------------------------
class TestSQLiteApplicationRecorder(
    _SQLiteStore, _OurConfigIsInEffect, library.ApplicationRecorderTestCase[SQLiteApplicationRecorder]
):
    def create_recorder(self) -> SQLiteApplicationRecorder:
        recorder = self.factory.application_recorder()
        assert isinstance(recorder, SQLiteApplicationRecorder)
        return recorder


class TestPostgresApplicationRecorder(
    _PostgresStore, _OurConfigIsInEffect, library.ApplicationRecorderTestCase[PostgresApplicationRecorder]
):
    def create_recorder(self) -> PostgresApplicationRecorder:
        recorder = self.factory.application_recorder()
        assert isinstance(recorder, PostgresApplicationRecorder)
        assert recorder.events_table_name == "canonledger_events"
        return recorder

    def test_insert_subscribe(self) -> None:
        # Optional in the library; PostgreSQL implements subscribe() (LISTEN/NOTIFY).
        # SQLite raises NotImplementedError, so it is not run there.
        self.optional_test_insert_subscribe()


# -- NonInterleavingNotificationIDs ------------------------------------------------------------
class TestSQLiteNonInterleavingNotificationIDs(_SQLiteStore, library.NonInterleavingNotificationIDsBaseCase):
    insert_num = 1000

    def create_recorder(self) -> SQLiteApplicationRecorder:
        recorder = self.factory.application_recorder()
        assert isinstance(recorder, SQLiteApplicationRecorder)
        return recorder


class TestPostgresNonInterleavingNotificationIDs(_PostgresStore, library.NonInterleavingNotificationIDsBaseCase):
    insert_num = 1000

    def create_recorder(self) -> PostgresApplicationRecorder:
        recorder = self.factory.application_recorder()
        assert isinstance(recorder, PostgresApplicationRecorder)
        return recorder


# -- TrackingRecorder --------------------------------------------------------------------------
class TestSQLiteTrackingRecorder(_SQLiteStore, library.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return self.factory.tracking_recorder()


class TestPostgresTrackingRecorder(_PostgresStore, library.TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        recorder = self.factory.tracking_recorder()
        assert recorder.tracking_table_name == "canonledger_tracking"  # type: ignore[attr-defined]
        return recorder


# -- ProcessRecorder (events + tracking in one transaction, what projections/processes use) ---
class TestSQLiteProcessRecorder(_SQLiteStore, library.ProcessRecorderTestCase):
    def create_recorder(self) -> Any:
        return self.factory.process_recorder()


class TestPostgresProcessRecorder(_PostgresStore, library.ProcessRecorderTestCase):
    def create_recorder(self) -> Any:
        return self.factory.process_recorder()


# Anything the library adds to these bases in a later version runs here automatically; make
# sure nothing abstract leaked into this module's namespace for pytest to collect.
assert not any(
    isinstance(v, type) and issubclass(v, unittest.TestCase) and getattr(v, "__abstractmethods__", None)
    for v in list(globals().values())
)
