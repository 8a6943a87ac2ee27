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
    """A prepared statement (with bind parameters) a projection needs beyond upserts."""

    name: str
    statement: Any
    params: dict[str, Any]


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


def execute(conn: Connection, ops: Iterable[Op]) -> int:
    """Run ops in order, grouping consecutive ops of the same shape. Returns statements run."""
    statements = 0
    batch: list[dict[str, Any]] = []
    shape: tuple[Any, ...] | None = None
    stmt: Any = None

    def flush() -> None:
        nonlocal statements
        if batch:
            conn.execute(stmt, batch)
            statements += 1
            batch.clear()

    for op in ops:
        if isinstance(op, Upsert):
            cols = tuple(sorted(op.values))
            new_shape: tuple[Any, ...] = ("upsert", op.table.name, cols)
            params = op.values
        elif isinstance(op, Update):
            kcols, vcols = tuple(sorted(op.key)), tuple(sorted(op.values))
            new_shape = ("update", op.table.name, kcols, vcols)
            params = {**{f"k_{k}": v for k, v in op.key.items()}, **{f"v_{c}": v for c, v in op.values.items()}}
        elif isinstance(op, Delete):
            new_shape = ("delete", op.table.name, tuple(sorted(op.key)))
            params = {f"k_{k}": v for k, v in op.key.items()}
        else:
            new_shape = ("run", op.name)
            params = op.params
        if new_shape != shape:
            flush()
            shape = new_shape
            if isinstance(op, Upsert):
                stmt = _upsert_statement(conn, op.table, new_shape[2])
            elif isinstance(op, Update):
                stmt = _update_statement(op.table, new_shape[2], new_shape[3])
            elif isinstance(op, Delete):
                stmt = delete(op.table).where(and_(*(op.table.c[k] == bindparam(f"k_{k}") for k in new_shape[2])))
            else:
                stmt = op.statement
        batch.append(params)
    flush()
    return statements
