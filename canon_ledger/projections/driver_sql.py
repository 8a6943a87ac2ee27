"""SQL on the latency path, on each store's own driver.

A statement through SQLAlchemy costs Python time the same SQL on the driver does not, and
psycopg sends a transaction's ``BEGIN`` as a round trip of its own unless it is pipelined with
the first statement (docs/benchmarks.md, "The reader runs the driver's SQL").

A named statement is written once, in PostgreSQL's words, with bind parameters as ``:name``
(``prepared``). On PostgreSQL it becomes a statement with typed parameters, compiled here once
to the driver's SQL; rows come back as the driver's tuples, or read by column name (``named``).
On SQLite it stays text that sqlite3 runs as it is, named parameters and all, after the
rewrites SQLite needs (``for_sqlite``: a list is an IN list of one parameter per item, and false
is ``0``; ``sqlite_params`` spells the list out).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from sqlalchemy import String, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


def json_column(value: Any) -> Any:
    """A JSON column's value: psycopg decodes it, sqlite3 gives its text."""
    return orjson.loads(value) if isinstance(value, str) else value


def for_sqlite(sql: str) -> str:
    """What SQLite says differently: a list is an IN list (``sqlite_params`` spells it out),
    and false is 0."""
    sql = re.sub(r"(\w+) = ANY\(:(\w+)\)", r"\1 IN (:\2)", sql)
    return sql.replace("= false", "= 0")


_EXPANDED: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}


def sqlite_params(sql: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``for_sqlite``'s SQL and ``params`` as sqlite3 takes them: each list's ``(:name)`` spelled
    out as one parameter per item (SQLite plans an IN list of values on the index; a JSON
    array read through ``json_each`` made the keys' read slower: docs/benchmarks.md)."""
    lists = tuple((k, len(v)) for k, v in params.items() if isinstance(v, list))
    if not lists:
        return sql, params
    expanded = _EXPANDED.get((sql, lists))
    if expanded is None:
        expanded = sql
        for k, n in lists:
            expanded = expanded.replace(f"(:{k})", "(" + ", ".join(f":{k}_{i}" for i in range(n)) + ")")
        if len(_EXPANDED) > 512:
            _EXPANDED.clear()
        _EXPANDED[(sql, lists)] = expanded
    flat = {k: v for k, v in params.items() if not isinstance(v, list)}
    for k, _ in lists:
        flat.update((f"{k}_{i}", item) for i, item in enumerate(params[k]))
    return expanded, flat


_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")


def prepared(sql: str, dialect: str, types: dict[str, Any], lists: dict[str, Any], fixed: dict[str, str]) -> Any:
    """The named statement ``sql`` as ``dialect`` runs it. ``types``: each parameter's type;
    ``lists``: each list parameter's item type; ``fixed``: parameters with one value for every
    run (a literal on SQLite). PostgreSQL gets typed bind parameters, a list as one array, so it
    plans each statement once, whatever the values and the lists' lengths."""
    if dialect != "postgresql":
        sql = for_sqlite(sql)
        for name, value in fixed.items():
            sql = sql.replace(f":{name}", "'" + value.replace("'", "''") + "'")
        return sql
    binds: list[Any] = []
    for name in sorted(set(_PARAMETER.findall(sql))):
        if name in fixed:
            binds.append(bindparam(name, fixed[name], type_=String))
        elif name in lists:
            binds.append(bindparam(name, type_=ARRAY(lists[name])))
        else:
            binds.append(bindparam(name, type_=types[name]))
    return text(sql).bindparams(*binds)


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
                rows: list[Any] = cursor.fetchall()
                return rows
        execute(cursor, conn, stmt, params)
        rows = cursor.fetchall()
        return rows


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


class Statements:
    """Named SQL run as each driver takes it, each text made into a statement once: SQLite on
    sqlite3's own connection (``for_sqlite``, a list parameter spelled out item by item), where
    SQLAlchemy's execution costs more than a small read itself; PostgreSQL through SQLAlchemy,
    a list as one array (``= ANY(:name)``)."""

    def __init__(self) -> None:
        self._made: dict[tuple[bool, str], Any] = {}  # (PostgreSQL?, SQL) -> what that driver runs

    def rows(self, conn: Connection, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
        """The rows of ``sql`` (``= ANY(:name)`` for a list), as tuples, in ``conn``'s transaction."""
        params = params or {}
        postgres = conn.dialect.name == "postgresql"
        made: Any = self._made.get((postgres, sql))
        if made is None:
            made = self._made[(postgres, sql)] = text(sql) if postgres else for_sqlite(sql)
        if postgres:
            return list(conn.execute(made, params).all())
        raw = conn.connection.driver_connection
        rows: list[Any] = raw.execute(*sqlite_params(made, params)).fetchall()  # type: ignore[union-attr]
        return rows
