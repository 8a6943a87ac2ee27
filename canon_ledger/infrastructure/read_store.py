"""SQLAlchemy engines for the read models, in the same database as the events.

SQLite: the write engine begins IMMEDIATE (one catch-up at a time, no upgrade deadlocks);
the read engine begins a deferred transaction so every packet reads one WAL snapshot.
PostgreSQL: reads run REPEATABLE READ, for the same reason. A pooled connection is pinged
only after it sat idle (``IDLE_PING_SECONDS``): a ping on every checkout was a round trip in
every transaction, and a packet request runs one to four of them.

Commits through these engines do not wait for the disk (SQLite ``synchronous = NORMAL`` in
WAL mode, PostgreSQL ``synchronous_commit = off``). Everything written here is derived from
the event log (read models, with their tracking rows in the same transaction) or a cache
(token counts, step-back generations). Neither setting can corrupt the database or reorder
commits; a crash may only lose the last commits, and the next catch-up redoes them from the
log. The event store's own connections keep full durability, and each of its commits makes
every read-model commit before it durable too (one write-ahead log, flushed in order). The
fsync was most of a read-your-writes catch-up (docs/benchmarks.md, "commits without fsync").
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

from canon_ledger.infrastructure.stores import StoreConfig, lock_timeout


def _sqlite_engine(path: str, begin: str) -> Engine:
    timeout = lock_timeout()
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": timeout})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        dbapi_connection.execute(f"PRAGMA busy_timeout = {timeout * 1000}")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")  # see the module docstring

    @event.listens_for(engine, "begin")
    def _begin(conn):  # type: ignore[no-untyped-def]
        conn.exec_driver_sql(begin)

    return engine


IDLE_PING_SECONDS = 10.0  # far below the idle limits of servers and proxies (minutes)


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pre-ping, only for a connection that sat idle in the pool: the way a pooled
    connection dies is a server restart or an idle timeout while nobody used it. A connection
    lost while in use fails that one transaction and is replaced (the pool invalidates it)."""

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is None or time.monotonic() - since < IDLE_PING_SECONDS:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except engine.dialect.loaded_dbapi.Error as e:
            raise DisconnectionError("pooled connection lost while idle") from e  # the pool connects afresh


def engines(config: StoreConfig) -> tuple[Engine, Engine]:
    """(read engine, write engine)."""
    env = config.env
    if not config.is_postgres:
        path = env["SQLITE_DBNAME"]
        return _sqlite_engine(path, "BEGIN"), _sqlite_engine(path, "BEGIN IMMEDIATE")
    auth = quote(env["POSTGRES_USER"], safe="")
    if env["POSTGRES_PASSWORD"]:
        auth += ":" + quote(env["POSTGRES_PASSWORD"], safe="")
    url = f"postgresql+psycopg://{auth}@{env['POSTGRES_HOST']}:{env['POSTGRES_PORT']}/{env['POSTGRES_DBNAME']}"
    # The URL's libpq parameters (sslmode, application_name, ...), as on the event store's
    # connections; its ``options`` come first, so ours (see the module docstring) stand.
    connect_args: dict[str, Any] = config.libpq
    connect_args["options"] = " ".join(filter(None, [connect_args.get("options"), "-c synchronous_commit=off"]))
    # Up to 14 connections: a server lets 4 requests read at once, each with up to 3
    # (``infrastructure.http.context.READERS``), and leaves room for a rebuild.
    write = create_engine(url, pool_size=2, max_overflow=12, hide_parameters=True, connect_args=connect_args)
    _ping_when_idle(write)
    read = write.execution_options(isolation_level="REPEATABLE READ")
    return read, write


def upsert(table: Any, dialect: str) -> Any:
    """INSERT .. ON CONFLICT into one of the read store's plain tables (the caches): both stores
    speak it, each through its own SQLAlchemy dialect."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    raise NotImplementedError(f"no upsert into {table.name} for {dialect}")
