"""Where events live: a database URL turned into an eventsourcing persistence setup.

Accepted forms (SQLAlchemy URL syntax): ``sqlite:///relative.db``,
``sqlite:////absolute/path.db`` and ``postgresql://user[:password]@host[:port]/db``
(``postgresql+psycopg://`` too). The default is ``sqlite:///canon.db``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from urllib.parse import quote, unquote, urlsplit

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.domain.errors import CanonError

DEFAULT_URL = "sqlite:///canon.db"
URL_ENV = "CANON_DATABASE_URL"
_SCHEMA_LOCK_KEY = 0x63616E6F6E  # "canon": one advisory lock id for schema creation


@dataclass(frozen=True)
class StoreConfig:
    url: str
    env: dict[str, str]
    display: str  # the URL with any password masked: safe for logs and errors

    @property
    def is_postgres(self) -> bool:
        return self.env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"


def resolve_url(explicit: str | None) -> str:
    return explicit or os.environ.get(URL_ENV) or DEFAULT_URL


@dataclass(frozen=True)
class _ParsedURL:
    backend: str
    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None

    def display(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.database}"
        auth = quote(self.username or "", safe="") + (":***" if self.password else "")
        where = (self.host or "") + (f":{self.port}" if self.port else "")
        return f"{self.backend}://{auth + '@' if auth else ''}{where}/{self.database or ''}"


def _parse(url: str) -> _ParsedURL:
    """SQLAlchemy's URL forms, parsed without importing SQLAlchemy (a CLI start-up cost)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme:
        raise ValueError(url)
    backend = scheme.split("+", 1)[0].lower()
    if backend == "sqlite":
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs.db -> "/abs.db"
        return _ParsedURL("sqlite", None, None, None, None, rest[1:] if rest.startswith("/") else rest)
    parts = urlsplit(f"//{rest}")
    return _ParsedURL(
        backend,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password else None,
        parts.hostname,
        parts.port,
        unquote(parts.path.lstrip("/")) or None,
    )


def password_of(url: str) -> str | None:
    try:
        return _parse(url).password
    except ValueError:
        return None


LOCK_TIMEOUT_ENV = "CANON_LOCK_TIMEOUT"


def lock_timeout() -> int:
    """Seconds a writer waits for another's lock before the store counts as unavailable
    (``CANON_LOCK_TIMEOUT``, default 60; 1..3600)."""
    raw = os.environ.get(LOCK_TIMEOUT_ENV, "60")
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= 3600 else 60


def store_config(url: str) -> StoreConfig:
    try:
        parsed = _parse(url)
    except ValueError:
        raise CanonError("invalid_database_url", "cannot parse the database URL (expected sqlite:///file.db "
                         "or postgresql://user@host:port/db)", "db") from None
    display = parsed.display()
    backend = parsed.backend
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise CanonError("invalid_database_url", f"{display}: the embedded store needs a file path", "db")
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": parsed.database,
            # Several writer processes may share one file: wait for the write lock, don't fail.
            "SQLITE_LOCK_TIMEOUT": str(lock_timeout()),
        }
        return StoreConfig(url, env, display)
    if backend in ("postgresql", "postgres"):
        if not parsed.database:
            raise CanonError("invalid_database_url", f"{display}: name the database", "db")
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parsed.database,
            "POSTGRES_HOST": parsed.host or "127.0.0.1",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": parsed.username or os.environ.get("PGUSER", "postgres"),
            "POSTGRES_PASSWORD": parsed.password or os.environ.get("PGPASSWORD", ""),
            "POSTGRES_CONNECT_TIMEOUT": "5",
            # Inserts wait for the table lock that keeps commit order = position order.
            "POSTGRES_LOCK_TIMEOUT": str(min(lock_timeout(), 30)),
            "POSTGRES_POOL_SIZE": "4",
            "POSTGRES_MAX_OVERFLOW": "4",
            # Never the lock-free DB-function insert path: it breaks commit-order positions.
            "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
        }
        return StoreConfig(url, env, display)
    raise CanonError("invalid_database_url", f"{display}: unsupported backend {backend!r} (use sqlite or postgresql)", "db")


def require_store(url: str | None) -> None:
    """Refuse a SQLite store whose file does not exist (``store_not_found``): opening it would
    create an empty store, and a mistyped path would then take commands into the wrong file.
    ``canon init`` (and the demo) create stores; a PostgreSQL URL is checked when connected."""
    config = store_config(resolve_url(url))
    if config.is_postgres:
        return
    name = config.env["SQLITE_DBNAME"]
    if name.startswith("file:"):  # an SQLite URI filename (file:PATH?mode=ro&uri=true): its path
        name = unquote(name[len("file:"):].split("?", 1)[0])
    path = Path(name)
    if not path.is_file():
        where = "there is no such file" if not path.exists() else "it is not a file"
        raise CanonError("store_not_found", f"no store at {config.display}: {where} (run `canon init --db "
                         f"{config.display}` to create one, or check the path)", "db")


def open_ledger(url: str | None = None) -> CanonLedger:
    """Open (creating tables if needed) the ledger at ``url`` or the configured default."""
    from canon_ledger.infrastructure.tokenizer import token_counter

    config = store_config(resolve_url(url))
    with schema_lock(config):
        return CanonLedger(env=config.env, tokens=token_counter())


@contextmanager
def schema_lock(config: StoreConfig) -> Iterator[None]:
    """Serialise table creation on PostgreSQL: concurrent CREATE ... IF NOT EXISTS / CREATE OR
    REPLACE FUNCTION from several processes fails with "tuple concurrently updated".
    (SQLite serialises schema changes itself.)"""
    if not config.is_postgres:
        yield
        return
    with pg_connect(config) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK_KEY,))


def pg_connect(config: StoreConfig) -> Any:
    """A connection of its own to the PostgreSQL store (autocommit), outside every pool: for
    session-long work such as an advisory lock or LISTEN. A refused connection is the
    library's OperationalError, a store fault."""
    import psycopg
    from eventsourcing.persistence import OperationalError

    env = config.env
    try:
        return psycopg.connect(
            host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"], dbname=env["POSTGRES_DBNAME"],
            user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None,
            connect_timeout=int(env["POSTGRES_CONNECT_TIMEOUT"]), autocommit=True,
        )
    except psycopg.OperationalError as e:
        raise OperationalError(e) from None
