"""PostgreSQL reads on the latency path, as the driver's SQL on psycopg's own cursor.

A statement through SQLAlchemy cost ~0.1 ms of Python more than the same SQL on the driver,
and psycopg sends a transaction's ``BEGIN`` as a round trip of its own (~0.15-0.3 ms here)
unless it is pipelined with the first statement. Statements are built once by their owners
and compiled here once each; rows come back as the driver's tuples (read by position).
"""

from __future__ import annotations

from typing import Any

import psycopg
from sqlalchemy.engine import Connection

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


def driver_rows(conn: Connection, stmt: Any, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of ``stmt`` run in ``conn``'s transaction (PostgreSQL only). A transaction's
    first statement goes in a pipeline, with the ``BEGIN`` psycopg sends before it."""
    driver = conn.connection.driver_connection
    with driver.cursor() as cursor:
        if driver.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with driver.pipeline():
                execute(cursor, conn, stmt, params)
                return cursor.fetchall()
        execute(cursor, conn, stmt, params)
        return cursor.fetchall()
