"""SQLAlchemy engines for the read models, in the same database as the events.

SQLite: the write engine begins IMMEDIATE (one catch-up at a time, no upgrade deadlocks);
the read engine begins a deferred transaction so every packet reads one WAL snapshot.
PostgreSQL: reads run REPEATABLE READ, for the same reason.
"""

from __future__ import annotations

from urllib.parse import quote

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from infrastructure.stores import StoreConfig


def _sqlite_engine(path: str, begin: str) -> Engine:
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 60})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection, _record):  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
        dbapi_connection.execute("PRAGMA busy_timeout = 60000")

    @event.listens_for(engine, "begin")
    def _begin(conn):  # type: ignore[no-untyped-def]
        conn.exec_driver_sql(begin)

    return engine


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
    write = create_engine(url, pool_size=2, max_overflow=4, pool_pre_ping=True, hide_parameters=True)
    read = write.execution_options(isolation_level="REPEATABLE READ")
    return read, write
