"""Where events live: a database URL turned into an eventsourcing persistence setup.

Accepted forms (SQLAlchemy URL syntax, DESIGN §8): ``sqlite:///relative.db``,
``sqlite:////absolute/path.db`` and ``postgresql://user[:password]@host[:port]/db``
(``postgresql+psycopg://`` too). The default is ``sqlite:///canon.db``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from application.ledger import CanonLedger
from domain.errors import CanonError

DEFAULT_URL = "sqlite:///canon.db"
URL_ENV = "CANON_DATABASE_URL"


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


def store_config(url: str) -> StoreConfig:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CanonError("invalid_database_url", "cannot parse the database URL (expected sqlite:///file.db "
                         "or postgresql://user@host:port/db)", "db") from None
    display = parsed.render_as_string(hide_password=True)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise CanonError("invalid_database_url", f"{display}: the embedded store needs a file path", "db")
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": parsed.database,
            # Several writer processes may share one file: wait for the write lock, don't fail.
            "SQLITE_LOCK_TIMEOUT": "60",
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
            "POSTGRES_LOCK_TIMEOUT": "30",
            "POSTGRES_POOL_SIZE": "4",
            "POSTGRES_MAX_OVERFLOW": "4",
        }
        return StoreConfig(url, env, display)
    raise CanonError("invalid_database_url", f"{display}: unsupported backend {backend!r} (use sqlite or postgresql)", "db")


def open_ledger(url: str | None = None) -> CanonLedger:
    """Open (creating tables if needed) the ledger at ``url`` or the configured default."""
    config = store_config(resolve_url(url))
    return CanonLedger(env=config.env)
