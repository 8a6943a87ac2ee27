"""Row operations a projection emits, and their batched execution.

Handlers return ops instead of executing SQL, so a page of events becomes a few
``executemany`` calls (consecutive ops of one shape are grouped; order is kept). Every op
is idempotent: an upsert keyed by the row's natural key, or an update by primary key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, and_, bindparam, delete, update
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class Upsert:
    table: Table
    values: dict[str, Any]


@dataclass(frozen=True)
class Update:
    table: Table
    key: dict[str, Any]
    values: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    table: Table
    key: dict[str, Any]


@dataclass(frozen=True)
class Run:
    """A prepared statement (with bind parameters) a projection needs beyond upserts.

    ``deferred``: the statement depends only on the rows' final state and is idempotent, so it
    may run once, after the page's other ops (runs with equal params are merged).
    """

    name: str
    statement: Any
    params: dict[str, Any]
    deferred: bool = False


Op = Upsert | Update | Delete | Run


def _upsert_statement(conn: Connection, table: Table, columns: tuple[str, ...]) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    stmt = insert(table)
    keys = [c.name for c in table.primary_key.columns]
    changing = {c: stmt.excluded[c] for c in columns if c not in keys}
    if not changing:
        return stmt.on_conflict_do_nothing(index_elements=keys)
    return stmt.on_conflict_do_update(index_elements=keys, set_=changing)


def _update_statement(table: Table, key_cols: tuple[str, ...], columns: tuple[str, ...]) -> Any:
    where = and_(*(table.c[k] == bindparam(f"k_{k}") for k in key_cols))
    return update(table).where(where).values({c: bindparam(f"v_{c}") for c in columns})


def _shape(op: Op) -> tuple[Any, ...]:
    if isinstance(op, Upsert):
        return ("upsert", op.table.name, tuple(sorted(op.values)))
    if isinstance(op, Update):
        return ("update", op.table.name, tuple(sorted(op.key)), tuple(sorted(op.values)))
    if isinstance(op, Delete):
        return ("delete", op.table.name, tuple(sorted(op.key)))
    return ("run", op.name)


def _params(op: Op) -> dict[str, Any]:
    if isinstance(op, Upsert):
        return op.values
    if isinstance(op, Update):
        return {**{f"k_{k}": v for k, v in op.key.items()}, **{f"v_{c}": v for c, v in op.values.items()}}
    if isinstance(op, Delete):
        return {f"k_{k}": v for k, v in op.key.items()}
    return op.params


_statements: dict[tuple[Any, ...], Any] = {}


def _statement(conn: Connection, op: Op, shape: tuple[Any, ...]) -> Any:
    if isinstance(op, Run):
        return op.statement
    key = (conn.dialect.name, id(op.table), shape)
    stmt = _statements.get(key)
    if stmt is None:  # building statements costs more than running them: build each shape once
        if isinstance(op, Upsert):
            stmt = _upsert_statement(conn, op.table, shape[2])
        elif isinstance(op, Update):
            stmt = _update_statement(op.table, shape[2], shape[3])
        else:
            stmt = delete(op.table).where(and_(*(op.table.c[k] == bindparam(f"k_{k}") for k in shape[2])))
        _statements[key] = stmt
    return stmt


def _grouped(ops: list[Op]) -> list[Op]:
    """Order ops so that one shape runs as one executemany. Rows of one table keep their
    order; a non-deferred Run is a barrier (it reads what came before it); deferred Runs go
    last, once each."""
    out: list[Op] = []
    segment: list[Op] = []
    deferred: dict[tuple[Any, ...], Run] = {}
    for op in ops:
        if isinstance(op, Run) and op.deferred:
            deferred[(op.name, tuple(sorted(op.params.items())))] = op
        elif isinstance(op, Run):
            out += sorted(segment, key=lambda o: o.table.name)  # type: ignore[union-attr]
            segment = []
            out.append(op)
        else:
            segment.append(op)
    out += sorted(segment, key=lambda o: o.table.name)  # type: ignore[union-attr]
    return out + list(deferred.values())


def execute(conn: Connection, ops: Iterable[Op]) -> int:
    """Run ops, grouped by shape (see ``_grouped``). Returns the statements run."""
    statements = 0
    batch: list[dict[str, Any]] = []
    shape: tuple[Any, ...] | None = None
    stmt: Any = None
    for op in _grouped(list(ops)):
        new_shape = _shape(op)
        if new_shape != shape:
            if batch:
                conn.execute(stmt, batch)
                statements += 1
                batch = []
            shape = new_shape
            stmt = _statement(conn, op, new_shape)
        batch.append(_params(op))
    if batch:
        conn.execute(stmt, batch)
        statements += 1
    return statements
