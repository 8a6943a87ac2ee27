"""The database URL is honoured whole against a real PostgreSQL server: its libpq parameters
reach every connection the project opens (the event store's pool, the read models' engines,
``pg_connect``), and a password can come from a password file instead of the URL.

The local server has no SSL: ``sslmode=require`` must fail to connect, as psql does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import PersistenceError
from sqlalchemy import text
from sqlalchemy.engine import make_url

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.infrastructure import read_store
from canon_ledger.infrastructure.store_faults import is_store_fault
from canon_ledger.infrastructure.stores import open_ledger, pg_connect, store_config
from tests.conftest import _conninfo

pytestmark = pytest.mark.postgres

SESSION = ("SELECT a.application_name, s.ssl, current_setting('statement_timeout') AS statement_timeout "
           "FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.pid = pg_backend_pid()")


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def _tables(url: str) -> list[str]:
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'public'")]


def _server_has_ssl(url: str) -> bool:
    with psycopg.connect(_conninfo(url), autocommit=True) as conn:
        return conn.execute("SHOW ssl").fetchone() == ("on",)


def test_sslmode_require_is_never_plaintext_on_any_path(pg_url: str) -> None:
    """Against a server without SSL (this machine's): every path refuses to connect. Against
    one with SSL: every path connects encrypted. Plaintext never."""
    url = _with(pg_url, "sslmode=require")
    if _server_has_ssl(pg_url):
        config = store_config(url)
        ledger = open_ledger(url)
        read, write = read_store.engines(config)
        try:
            with ledger.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
                assert conn.execute(SESSION).fetchone()["ssl"] is True
            with read.connect() as conn:
                assert tuple(conn.execute(text(SESSION)).one())[1] is True
            with pg_connect(config) as conn:
                assert conn.execute(SESSION).fetchone()[1] is True
        finally:
            write.dispose()
            ledger.close()
        return
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the kind is checked just below
        open_ledger(url)
    assert is_store_fault(caught.value) and "SSL" in str(caught.value)
    with pytest.raises(PersistenceError):  # the event store's own pool, on its own (it waits connect_timeout)
        CanonLedger(env=store_config(_with(url, "connect_timeout=1")).env)
    read, write = read_store.engines(store_config(url))
    try:
        with pytest.raises(Exception) as caught, read.connect():  # noqa: PT011
            pass
        assert is_store_fault(caught.value) and "SSL" in str(caught.value)
    finally:
        write.dispose()
    assert _tables(pg_url) == []  # nothing was created in plaintext


def test_sslmode_and_application_name_reach_every_connection(pg_url: str) -> None:
    url = _with(pg_url, "sslmode=disable&application_name=canon-x&options=-c%20statement_timeout%3D4321")
    config = store_config(url)
    ledger = open_ledger(url)
    read, write = read_store.engines(config)
    try:
        with ledger.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            row = conn.execute(SESSION).fetchone()
            assert row == {"application_name": "canon-x", "ssl": False, "statement_timeout": "4321ms"}
        with read.connect() as conn:
            assert tuple(conn.execute(text(SESSION)).one()) == ("canon-x", False, "4321ms")
            assert conn.execute(text("SHOW synchronous_commit")).scalar_one() == "off"  # the read models' own
        with pg_connect(config) as conn:
            assert conn.execute(SESSION).fetchone() == ("canon-x", False, "4321ms")
            # What the server sees: every session on the store (pool, engine, this one) carries it.
            names = conn.execute("SELECT application_name, count(*) FROM pg_stat_activity "
                                 "WHERE datname = current_database() GROUP BY 1").fetchall()
            assert dict(names).get("canon-x", 0) >= 3, names
            assert set(dict(names)) == {"canon-x"}, names
    finally:
        write.dispose()
        ledger.close()
    assert "canonledger_events" in _tables(pg_url)


def _passwords(url: str) -> list[str | None]:
    """The password libpq used on each path (``PQpass``: from a password file if it read one)."""
    config = store_config(url)
    ledger = open_ledger(url)
    read, write = read_store.engines(config)
    try:
        with ledger.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            found = [conn.info.password]
        with read.connect() as conn:
            driver: Any = conn.connection.driver_connection
            found.append(driver.info.password)
        with pg_connect(config) as conn:
            found.append(conn.info.password)
        return found
    finally:
        write.dispose()
        ledger.close()


def _passfile(url: str, folder: Path) -> tuple[str, str, str]:
    """(the URL without a password, a password file for it, the password it holds)."""
    u = make_url(url)
    password = u.password or "from-the-passfile"  # trust auth takes any; a real server needs the real one
    path = folder / "pgpass"
    path.write_text(f"{u.host or '127.0.0.1'}:{u.port or 5432}:*:{u.username or 'postgres'}:{password}\n")
    path.chmod(0o600)
    return u.set(password=None).render_as_string(hide_password=False), str(path), password


def test_a_password_from_PGPASSFILE_reaches_every_connection(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, path, password = _passfile(pg_url, tmp_path)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", path)
    assert password not in url and password not in store_config(url).display
    assert store_config(url).env["POSTGRES_PASSWORD"] == ""
    assert _passwords(url) == [password] * 3


def test_a_password_from_a_passfile_named_in_the_url_reaches_every_connection(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, path, password = _passfile(pg_url, tmp_path)
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", os.devnull)
    url = _with(url, f"passfile={path}")
    assert password not in url
    assert _passwords(url) == [password] * 3


def test_a_password_from_PGPASSWORD_still_reaches_every_connection(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url, _, password = _passfile(pg_url, tmp_path)
    monkeypatch.setenv("PGPASSWORD", password)
    assert _passwords(url) == [password] * 3
