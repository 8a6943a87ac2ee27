"""Where events live: a database URL turned into an eventsourcing persistence setup.

Accepted forms (SQLAlchemy URL syntax): ``sqlite:///relative.db``,
``sqlite:////absolute/path.db`` and ``postgresql://user[:password]@host[:port]/db``
(``postgresql+psycopg://`` too). The default is ``sqlite:///canon.db``.

The URL is honoured whole or refused (``invalid_database_url``) before anything connects:

- PostgreSQL: the query string carries libpq connection parameters (``LIBPQ_PARAMETERS``,
  e.g. ``?sslmode=verify-full&sslrootcert=/etc/ssl/ca.pem&application_name=canon``), percent
  decoded as libpq does (``%20`` is a space, ``+`` is a plus). They reach every connection
  the project opens: the event store's pool, the read models' engines and the connections of
  their own (``pg_connect``: locks, LISTEN). An unknown parameter, a parameter given twice, a
  value outside its choices or range, a file parameter naming no file, and ``host``, ``port``,
  ``user``, ``password``, ``dbname`` or ``service`` in the query string (they belong in the
  URL itself) are refused. ``connect_timeout`` (seconds, default 5) also bounds the wait for
  a pooled connection.
- SQLite: no query string, except in an SQLite URI filename, whose parameters SQLite reads:
  ``sqlite:///file:PATH?mode=ro&uri=true`` (``SQLITE_URI_PARAMETERS``; ``uri=true`` is
  required, so that every connection reads the name as a URI).

A password need not be in the URL (where ``ps`` shows ``--db``): without one, libpq takes
``PGPASSWORD`` or, failing that, the password file (``passfile=``, ``PGPASSFILE`` or
``~/.pgpass``, mode 0600). ``display`` masks the password and ``sslpassword``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from urllib.parse import quote, unquote, urlsplit

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.repository import LIBPQ_PARAMS
from canon_ledger.domain.errors import CanonError

DEFAULT_URL = "sqlite:///canon.db"
URL_ENV = "CANON_DATABASE_URL"
_SCHEMA_LOCK_KEY = 0x63616E6F6E  # "canon": one advisory lock id for schema creation


@dataclass(frozen=True)
class StoreConfig:
    url: str
    env: dict[str, str]
    display: str  # the URL with any password (and sslpassword) masked: safe for logs and errors

    @property
    def is_postgres(self) -> bool:
        return self.env["PERSISTENCE_MODULE"] == "eventsourcing.postgres"

    @property
    def libpq(self) -> dict[str, str]:
        """The libpq parameters of the URL's query string, validated (PostgreSQL; else empty).
        Carried in ``env`` so that every ledger built from it gets them too."""
        return dict(json.loads(self.env.get(LIBPQ_PARAMS) or "{}"))


def resolve_url(explicit: str | None) -> str:
    return explicit or os.environ.get(URL_ENV) or DEFAULT_URL


# -- the URL's query string ----------------------------------------------------------------------
# libpq parameters honoured in a PostgreSQL URL's query string, each with its check.
_CHOICES: dict[str, tuple[str, ...]] = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "channel_binding": ("disable", "prefer", "require"),
    "gssencmode": ("disable", "prefer", "require"),
    "target_session_attrs": ("any", "read-write", "read-only", "primary", "standby", "prefer-standby"),
    "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
    "sslsni": ("0", "1"),
    "keepalives": ("0", "1"),
}
_FILES = ("sslrootcert", "sslcert", "sslkey", "sslcrl", "passfile")  # each names an existing file
_FOLDERS = ("sslcrldir",)
_INTEGERS: dict[str, tuple[int, int]] = {
    "connect_timeout": (1, 3600),  # seconds
    "keepalives_idle": (1, 32767),  # seconds
    "keepalives_interval": (1, 32767),  # seconds
    "keepalives_count": (1, 127),
    "tcp_user_timeout": (0, 2_147_483_647),  # milliseconds
}
_TEXTS = ("application_name", "options", "sslpassword", "require_auth")
_SECRETS = ("sslpassword",)  # never shown: masked in ``display`` and never named with its value
_REQUIRE_AUTH = ("password", "md5", "gss", "sspi", "scram-sha-256", "none")
LIBPQ_PARAMETERS = tuple(sorted({*_CHOICES, *_FILES, *_FOLDERS, *_INTEGERS, *_TEXTS}))
_IN_THE_URL = {"host": "host", "hostaddr": "host", "port": "port", "user": "user name", "dbname": "database",
               "service": "host, port, user and database"}
# An SQLite URI filename's parameters (sqlite:///file:PATH?...&uri=true), each with its choices.
_SQLITE_BOOL = ("0", "1", "yes", "no", "true", "false", "on", "off")
SQLITE_URI_PARAMETERS: dict[str, tuple[str, ...]] = {
    "mode": ("ro", "rw", "rwc"),
    "cache": ("shared", "private"),
    "immutable": _SQLITE_BOOL,
    "nolock": _SQLITE_BOOL,
    "uri": ("true",),
}


def _refuse(message: str) -> CanonError:
    return CanonError("invalid_database_url", message, "db")


def _shown(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:40] + "...")


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """``name=value`` pairs, percent-decoded as libpq and SQLite do (``+`` stays a plus)."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for item in query.split("&"):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = unquote(name), unquote(value)
        if not sep or not value:
            raise _refuse(f"database URL parameter {_shown(name)} needs a value (name=value)")
        if name in seen:
            raise _refuse(f"database URL parameter {_shown(name)} is given twice")
        seen.add(name)
        pairs.append((name, value))
    return pairs


def _checked_libpq(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The query string's libpq parameters, each checked; anything else refused."""
    params: dict[str, str] = {}
    for name, value in pairs:
        if name == "password":
            raise _refuse("database URL parameter 'password': a password goes before the host "
                          "(postgresql://user:password@host/db) or, kept out of `ps`, in PGPASSWORD or a "
                          "password file (PGPASSFILE, ~/.pgpass)")
        if name in _IN_THE_URL:
            raise _refuse(f"database URL parameter {name!r}: give the {_IN_THE_URL[name]} in the URL itself "
                          "(postgresql://user@host:port/db)")
        if name in _CHOICES:
            if value not in _CHOICES[name]:
                raise _refuse(f"database URL parameter {name}={value!r} is not one of {', '.join(_CHOICES[name])}")
        elif name in _INTEGERS:
            low, high = _INTEGERS[name]
            if not (value.isascii() and value.isdigit() and low <= int(value) <= high):
                raise _refuse(f"database URL parameter {name}={value!r} is not a whole number from {low} to {high}")
        elif name in _FILES:
            if not (name == "sslrootcert" and value == "system") and not Path(value).is_file():
                also = " (or the word system)" if name == "sslrootcert" else ""
                raise _refuse(f"database URL parameter {name}={value!r} names no file{also}")
        elif name in _FOLDERS:
            if not Path(value).is_dir():
                raise _refuse(f"database URL parameter {name}={value!r} names no folder")
        elif name == "require_auth":
            methods = [m.removeprefix("!") for m in value.split(",")]
            negated = {m.startswith("!") for m in value.split(",")}
            if len(negated) > 1 or not all(m in _REQUIRE_AUTH for m in methods):
                raise _refuse(f"database URL parameter require_auth={value!r}: a comma-separated list of "
                              f"{', '.join(_REQUIRE_AUTH)}, each prefixed with ! or none of them")
        elif name not in _TEXTS:
            raise _refuse(f"unknown database URL parameter {_shown(name)} (honoured: {', '.join(LIBPQ_PARAMETERS)})")
        params[name] = value
    if params.get("sslrootcert") == "system" and params.get("sslmode", "verify-full") != "verify-full":
        raise _refuse("database URL parameter sslrootcert=system needs sslmode=verify-full")
    _linked_libpq_knows(params)
    return params


def _linked_libpq_knows(params: dict[str, str]) -> None:
    """Refuse a parameter the libpq that psycopg links is too old to know (``require_auth``
    needs 16): it would otherwise fail every connection, as a store fault."""
    if not params:
        return  # psycopg is imported only for a URL with parameters (a CLI start-up cost)
    try:
        from psycopg import pq
    except ImportError:  # pragma: no cover - a dependency of the PostgreSQL store
        return
    known = {option.keyword.decode() for option in pq.Conninfo.get_defaults()}
    for name in params:
        if name not in known:
            raise _refuse(f"database URL parameter {name!r} needs a newer libpq than this one ({pq.version()})")


def _checked_sqlite(database: str) -> None:
    """An SQLite path takes no query string; an SQLite URI filename (``file:``) takes SQLite's
    own parameters, and ``uri=true`` so that SQLAlchemy's engines read it as a URI, as the
    event store does."""
    if not database.startswith("file:"):
        if "?" in database:
            raise _refuse("a sqlite URL takes no query string (for SQLite URI parameters use "
                          "sqlite:///file:PATH?mode=ro&uri=true)")
        return
    _, _, query = database.partition("?")
    pairs = dict(_query_pairs(query))
    for name, value in pairs.items():
        if name not in SQLITE_URI_PARAMETERS:
            raise _refuse(f"unknown SQLite URI parameter {_shown(name)} (honoured: {', '.join(SQLITE_URI_PARAMETERS)})")
        if value not in SQLITE_URI_PARAMETERS[name]:
            raise _refuse(f"SQLite URI parameter {name}={value!r} is not one of "
                          f"{', '.join(SQLITE_URI_PARAMETERS[name])}")
    if pairs.get("uri") != "true":
        raise _refuse("an SQLite URI filename needs uri=true: sqlite:///file:PATH?mode=ro&uri=true")


@dataclass(frozen=True)
class _ParsedURL:
    backend: str
    username: str | None
    password: str | None
    host: str | None
    port: int | None
    database: str | None
    query: str = ""

    def display(self) -> str:
        if self.backend == "sqlite":
            return f"sqlite:///{self.database}"
        auth = quote(self.username or "", safe="") + (":***" if self.password else "")
        where = (self.host or "") + (f":{self.port}" if self.port else "")
        shown = f"{self.backend}://{auth + '@' if auth else ''}{where}/{self.database or ''}"
        if self.query:
            shown += "?" + "&".join(
                item if unquote(item.partition("=")[0]) not in _SECRETS else item.partition("=")[0] + "=***"
                for item in self.query.split("&") if item)
        return shown

    def secrets(self) -> list[str]:
        """The password and every secret parameter's value, as given."""
        found = [self.password] if self.password else []
        for item in self.query.split("&"):
            name, _, value = item.partition("=")
            if unquote(name) in _SECRETS and value:
                found += [unquote(value), value]
        return found


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
    if parts.fragment or rest.endswith("#"):
        raise ValueError(url)  # a '#' in a password must be percent-encoded (%23)
    return _ParsedURL(
        backend,
        unquote(parts.username) if parts.username else None,
        unquote(parts.password) if parts.password else None,
        parts.hostname,
        parts.port,
        unquote(parts.path.lstrip("/")) or None,
        parts.query,
    )


def secrets_of(url: str) -> list[str]:
    """Every secret the URL holds (its password, ``sslpassword``): to mask in messages."""
    try:
        return _parse(url).secrets()
    except ValueError:
        return []


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
                         "or postgresql://user@host:port/db; percent-encode @ : / ? # in a password)", "db") from None
    display = parsed.display()
    backend = parsed.backend
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise CanonError("invalid_database_url", f"{display}: the embedded store needs a file path", "db")
        _checked_sqlite(parsed.database)
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
        libpq = _checked_libpq(_query_pairs(parsed.query))
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": parsed.database,
            "POSTGRES_HOST": parsed.host or "127.0.0.1",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": parsed.username or os.environ.get("PGUSER", "postgres"),
            # Empty is no password: libpq then reads the password file (passfile=, PGPASSFILE, ~/.pgpass).
            "POSTGRES_PASSWORD": parsed.password or os.environ.get("PGPASSWORD", ""),
            "POSTGRES_CONNECT_TIMEOUT": libpq.get("connect_timeout", "5"),
            # Inserts wait for the table lock that keeps commit order = position order.
            "POSTGRES_LOCK_TIMEOUT": str(min(lock_timeout(), 30)),
            "POSTGRES_POOL_SIZE": "4",
            "POSTGRES_MAX_OVERFLOW": "4",
            # Never the lock-free DB-function insert path: it breaks commit-order positions.
            "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
        }
        if libpq:
            env[LIBPQ_PARAMS] = json.dumps(libpq)  # the ledger's pool takes them from here
        return StoreConfig(url, env, display)
    raise CanonError("invalid_database_url", f"{display}: unsupported backend {backend!r} (use sqlite or postgresql)", "db")


def require_store(url: str | None) -> None:
    """Refuse a SQLite store whose file does not exist (``store_not_found``): opening it would
    create an empty store, and a mistyped path would then take commands into the wrong file.
    ``canon init`` (and the demo) create stores; a PostgreSQL URL is checked when connected."""
    config = store_config(resolve_url(url))
    path = sqlite_path(config)
    if path is None:
        return
    if not path.is_file():
        where = "there is no such file" if not path.exists() else "it is not a file"
        raise CanonError("store_not_found", f"no store at {config.display}: {where} (run `canon init --db "
                         f"{config.display}` to create one, or check the path)", "db")


def sqlite_path(config: StoreConfig) -> Path | None:
    """The SQLite store's file (None on PostgreSQL)."""
    if config.is_postgres:
        return None
    name = config.env["SQLITE_DBNAME"]
    if name.startswith("file:"):  # an SQLite URI filename (file:PATH?mode=ro&uri=true): its path
        name = unquote(name[len("file:"):].split("?", 1)[0])
    return Path(name)


def open_ledger(url: str | None = None) -> CanonLedger:
    """Open (creating tables if needed) the ledger at ``url`` or the configured default: the
    log alone, with nothing of the read side (a door opens a store through ``bootstrap``)."""
    config = store_config(resolve_url(url))
    with schema_lock(config):
        return ledger_of(config)


def ledger_of(config: StoreConfig) -> CanonLedger:
    """The ledger of the store ``config`` names, its tables created if new: call it holding
    ``schema_lock(config)``."""
    from canon_ledger.infrastructure.tokenizer import token_counter

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


def server_conninfo(url: str, database: str | None = None) -> str:
    """A libpq connection string for a PostgreSQL server URL as an operator writes one (the
    SQLAlchemy form: ``postgresql[+psycopg]://user:pw@host:port/db?sslmode=...``), to ``database``
    instead of the URL's own when given (the tests' and benchmarks' scratch databases). Defaults:
    127.0.0.1, 5432, user postgres, database postgres; the query string's parameters are kept."""
    from psycopg.conninfo import make_conninfo
    from sqlalchemy.engine import make_url

    u = make_url(url)
    parts: dict[str, str | int | None] = {name: value for name, value in u.query.items() if isinstance(value, str)}
    parts.update({"host": u.host or "127.0.0.1", "port": u.port or 5432, "user": u.username or "postgres",
                  "dbname": database or u.database or "postgres"})
    if u.password:
        parts["password"] = u.password
    return make_conninfo("", **parts)


def pg_connect(config: StoreConfig) -> Any:
    """A connection of its own to the PostgreSQL store (autocommit), outside every pool: for
    session-long work such as an advisory lock or LISTEN. A refused connection is the
    library's OperationalError, a store fault."""
    import psycopg
    from eventsourcing.persistence import OperationalError

    env = config.env
    params: dict[str, Any] = {
        **config.libpq,  # the URL's own parameters (sslmode, application_name, ...)
        "host": env["POSTGRES_HOST"], "port": env["POSTGRES_PORT"], "dbname": env["POSTGRES_DBNAME"],
        "user": env["POSTGRES_USER"], "password": env["POSTGRES_PASSWORD"] or None,  # None: libpq reads a passfile
        "connect_timeout": int(env["POSTGRES_CONNECT_TIMEOUT"]),
    }
    try:
        return psycopg.connect(autocommit=True, **params)
    except psycopg.OperationalError as e:
        raise OperationalError(e) from None
