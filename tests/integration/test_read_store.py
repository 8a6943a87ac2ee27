"""The read models' connection pool on PostgreSQL: no ping per transaction, yet a connection
the server dropped while it sat idle is replaced, not handed to a packet request."""

from __future__ import annotations

import psycopg
from sqlalchemy import text

from canon_ledger.infrastructure import read_store
from canon_ledger.infrastructure.stores import resolve_url, store_config


def _pid(engine) -> int:  # noqa: ANN001
    with engine.begin() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def _terminate(pg_url: str, pid: int) -> None:
    env = store_config(resolve_url(pg_url)).env
    with psycopg.connect(host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], user=env["POSTGRES_USER"],
                         dbname=env["POSTGRES_DBNAME"], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_busy_pool_sends_no_ping(pg_url, monkeypatch):
    read, write = read_store.engines(store_config(resolve_url(pg_url)))
    try:
        pings = []
        real = write.dialect.do_ping
        monkeypatch.setattr(write.dialect, "do_ping", lambda c: pings.append(1) or real(c))
        for _ in range(3):
            _pid(read)
        assert pings == []
        monkeypatch.setattr(read_store, "IDLE_PING_SECONDS", 0.0)
        _pid(read)
        assert pings == [1]
    finally:
        write.dispose()


def test_a_connection_dropped_while_idle_is_replaced(pg_url, monkeypatch):
    read, write = read_store.engines(store_config(resolve_url(pg_url)))
    try:
        first = _pid(read)
        _terminate(pg_url, first)
        monkeypatch.setattr(read_store, "IDLE_PING_SECONDS", 0.0)  # it has sat idle long enough
        second = _pid(read)  # would raise "server closed the connection" without the ping
        assert second != first
        monkeypatch.setattr(read_store, "IDLE_PING_SECONDS", 3600.0)
        _terminate(pg_url, second)
        try:
            _pid(read)  # not idle long: used as is, fails once, and the pool replaces it
            failed = False
        except Exception:  # noqa: BLE001 - the optimistic half: one failure, then a fresh connection
            failed = True
        assert failed and _pid(read) not in (first, second)
    finally:
        write.dispose()
