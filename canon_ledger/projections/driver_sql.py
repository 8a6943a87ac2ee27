"""PostgreSQL on the latency path: the driver's SQL on psycopg's own cursor, and pipelines.

A statement through SQLAlchemy costs Python time the same SQL on the driver does not, and
psycopg sends a transaction's ``BEGIN`` as a round trip of its own unless it is pipelined with
the first statement (docs/benchmarks.md, "The reader runs the driver's SQL"). Statements are built once by their owners
and compiled here once each; rows come back as the driver's tuples, or read by column name (``named``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

_compiled: dict[int, tuple[Any, str, dict[str, Any]]] = {}


def driver_sql(conn: Connection, stmt: Any) -> tuple[str, dict[str, Any]]:
    """``stmt`` as the driver's SQL (``%(name)s`` parameters) and the values of the literal
    parameters SQLAlchemy made of its constants."""
    found = _compiled.get(id(stmt))
    if found is None or found[0] is not stmt:  # the entry holds the statement: its id is not reused
        compiled = stmt.compile(dialect=conn.dialect)
        found = _compiled[id(stmt)] = (stmt, compiled.string,
                                       {k: v for k, v in compiled.params.items() if v is not None})
    return found[1], found[2]


def execute(cursor: Any, conn: Connection, stmt: Any, params: dict[str, Any]) -> None:
    sql, literals = driver_sql(conn, stmt)
    cursor.execute(sql, {**literals, **params} if literals else params)


def named(cursor: Any) -> Any:
    """psycopg's row factory of rows read by column name (``row.kind``)."""
    from psycopg.rows import namedtuple_row

    return namedtuple_row(cursor)


def driver_rows(conn: Connection, stmt: Any, params: dict[str, Any], *, named_rows: bool = False) -> list[Any]:
    """The rows of ``stmt`` run in ``conn``'s transaction (PostgreSQL only), as tuples or, with
    ``named_rows``, read by column name. A transaction's first statement goes in a pipeline,
    with the ``BEGIN`` psycopg sends before it."""
    from psycopg.pq import TransactionStatus  # imported here: SQLite-only processes never load the driver

    driver: Any = conn.connection.driver_connection  # psycopg's connection
    with driver.cursor(row_factory=named) if named_rows else driver.cursor() as cursor:
        if driver.info.transaction_status == TransactionStatus.IDLE:
            with driver.pipeline():
                execute(cursor, conn, stmt, params)
                return cursor.fetchall()
        execute(cursor, conn, stmt, params)
        return cursor.fetchall()


class PipelineFailed(Exception):
    """A statement of a pipeline failed; which one is not known (the transaction is aborted)."""


@contextmanager
def pipelined(conn: Connection) -> Iterator[Any]:
    """PostgreSQL: the statements run inside go to the server together when it ends (psycopg's
    pipeline mode), and the driver's connection is yielded; elsewhere None, and nothing
    changes. Writes only: a SQLAlchemy read inside would find no rows (its result is made
    before the server has answered). An error may surface at any later statement, so any
    database error inside is ``PipelineFailed``: roll back, and go statement by statement."""
    if conn.dialect.name != "postgresql":
        yield None
        return
    import psycopg

    driver: Any = conn.connection.driver_connection  # psycopg's connection
    try:
        with driver.pipeline():
            yield driver
    except (DBAPIError, psycopg.Error) as e:
        raise PipelineFailed(str(e)) from e
