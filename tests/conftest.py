"""Shared fixtures: real stores only.

PostgreSQL is found in this order: ``TEST_DATABASE_URL`` (a server URL whose user may
create databases), then the local server on 127.0.0.1:5432. Each test gets a database of
its own, created and dropped here; an existing database is never touched. Without a
server the PostgreSQL tests skip locally but FAIL when ``CI=true``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import make_url

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.infrastructure.stores import open_ledger

LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def _server_url() -> str | None:
    candidates = [os.environ.get("TEST_DATABASE_URL"), LOCAL_SERVER]
    for url in filter(None, candidates):
        try:
            with psycopg.connect(_conninfo(url), connect_timeout=3):
                return url
        except psycopg.OperationalError:
            continue
    return None


def _conninfo(url: str, database: str | None = None) -> str:
    """A libpq connection string for ``url``, its query string's parameters (sslmode, ...) included."""
    u = make_url(url)
    parts: dict[str, object] = {name: value for name, value in u.query.items() if isinstance(value, str)}
    parts.update({
        "host": u.host or "127.0.0.1",
        "port": u.port or 5432,
        "user": u.username or "postgres",
        "dbname": database or u.database or "postgres",
    })
    if u.password:
        parts["password"] = u.password
    return make_conninfo(**parts)


_SERVER: list[str | None] = []


def postgres_server() -> str:
    """The admin URL of a reachable server, or skip (fail in CI)."""
    if not _SERVER:
        _SERVER.append(_server_url())
    if _SERVER[0] is None:
        missing_service("PostgreSQL: no server answered (set TEST_DATABASE_URL, or run one on 127.0.0.1:5432)")
    return _SERVER[0]  # type: ignore[return-value]


def missing_service(what: str) -> None:
    """A service a test needs is absent: the test fails in CI (``CI`` set to 1, true or yes),
    and is skipped, saying what is missing, on a developer's machine."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"required in CI: {what}")
    pytest.skip(what)


def create_database() -> tuple[str, str]:
    """Create a scratch database; returns (its URL, the admin URL that drops it)."""
    admin = postgres_server()
    name = f"canon_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(admin).set(database=name).render_as_string(hide_password=False), admin


def drop_database(url: str, admin: str) -> None:
    name = make_url(url).database
    assert name and name.startswith("canon_test_"), name
    with psycopg.connect(_conninfo(admin), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    url, admin = create_database()
    try:
        yield url
    finally:
        drop_database(url, admin)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The same test on the embedded SQLite file and on a scratch PostgreSQL database."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'canon.db'}"
        open_ledger(url).close()  # as `canon init` does: every verb but init and demo needs the file
        yield url
    else:
        url, admin = create_database()
        try:
            yield url
        finally:
            drop_database(url, admin)


def initialised(url: str) -> str:
    """``url``'s store, created as `canon init` does (every verb but init and demo refuses a
    SQLite file that does not exist)."""
    open_ledger(url).close()
    return url


@pytest.fixture
def ledger(store_url: str) -> Iterator[CanonLedger]:
    app = open_ledger(store_url)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def services(store_url: str):
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def rs(store_url: str):
    """Services on the hashing embedder: retrieval tests need vectors, not a model."""
    from canon_ledger.infrastructure.bootstrap import bootstrap

    s = bootstrap(store_url, embedder="hashing")
    try:
        yield s
    finally:
        s.close()
