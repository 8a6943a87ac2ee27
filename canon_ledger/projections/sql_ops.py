"""Row operations a projection emits, and their batched execution.

Handlers return ops instead of executing SQL, so a page of events becomes a few bulk
statements. Every op is idempotent: an upsert keyed by the row's primary key, or an update
or delete by key.

Execution (``execute``), per run of ops between two barriers (a non-deferred ``Run``):

* ops of one table whose keys are all primary keys are **merged per row** in event order (an
  upsert then an update of the same row become one upsert), after which they touch distinct
  rows and commute, so each shape runs as **one bulk statement**: ``executemany`` of a
  driver-level statement on SQLite, one ``INSERT ... SELECT FROM unnest(arrays) ON CONFLICT``
  (or ``UPDATE ... FROM unnest``) per shape on PostgreSQL. Any other mix keeps its order
  (consecutive ops of one shape still share an ``executemany``).
* statements are built once per (dialect, table, shape) and values are bound without
  SQLAlchemy's per-row parameter processing; column types that need it (JSON, Boolean) go
  through the dialect's own bind processors, so the stored values are the same as before.
* deferred ``Run``s go last, once per distinct parameter set.

Every value is checked against its column before it is sent, the same way on both stores
(``Unstorable``): a string longer than its ``String(n)``, a NUL in text (PostgreSQL refuses
it), an integer outside its column's range (PostgreSQL ``integer`` is 32-bit, SQLite's is
64-bit), an integer beyond 64 bits or a NaN inside JSON. So an event one store cannot hold
is refused by both, and the runner's quarantine treats it alike everywhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from operator import contains, itemgetter
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Integer, String, Table, Text
from sqlalchemy.engine import Connection


@dataclass(frozen=True)
class Upsert:
    """Insert the row, or set ``values`` on the existing row with the same primary key.
    ``keep``: columns written only when the row is inserted (an existing row keeps them)."""

    table: Table
    values: dict[str, Any]
    keep: tuple[str, ...] = ()


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
    ``many``: optional ``(conn, [params, ...])`` that runs the page's runs of this name as one
    statement; it returns False to fall back to an ``executemany`` of ``statement``.
    """

    name: str
    statement: Any
    params: dict[str, Any]
    deferred: bool = False
    many: Callable[[Connection, list[dict[str, Any]]], bool] | None = None


@dataclass(frozen=True, slots=True)
class Counted:
    """``op`` once the tokens of ``texts`` are counted: each (column, text) pair sets ``column``
    to ``text``'s count. A projection emits it and stays free of I/O; the runner fills a page's
    counts in one batch (``token_memo.TokenCounts.fill``) before the page is written, and
    ``execute`` never sees one."""

    op: Upsert | Update
    texts: tuple[tuple[str, str], ...]


Op = Upsert | Update | Delete | Run


def ops_of(on: Callable[[Any, int], list[Op]], events: list[tuple[int, Any]]) -> list[Op]:
    """A page's ops, in event order: ``on(event, position)`` gives one event's."""
    ops: list[Op] = []
    for position, event in events:
        ops += on(event, position)
    return ops


def no_ops(projection: Any, event: object, position: int) -> list[Op]:
    """The ops of one event at ``position``: none for a type the projection does not handle. A
    projection's ``on`` is ``singledispatchmethod(no_ops)``, with one ``on.register`` per type
    it handles."""
    return []


# -- planning ---------------------------------------------------------------------------------
def _pk(table: Table) -> tuple[str, ...]:
    return tuple(c.name for c in table.primary_key.columns)


def _merge_rows(table: Table, ops: list[Op]) -> list[Op] | None:
    """One op per row, or None when the ops cannot be merged safely (keep their order)."""
    pk = _pk(table)
    pkset = set(pk)
    get = itemgetter(*pk) if len(pk) > 1 else (lambda d, c=pk[0]: (d[c],))
    rows: dict[Any, Op] = {}
    for op in ops:
        if type(op) is Upsert:
            try:
                k = get(op.values)
            except KeyError:
                return None
        elif type(op) is Update:
            if op.key.keys() != pkset:
                return None
            k = get(op.key)
        else:
            return None
        seen = rows.get(k)
        if seen is None:
            rows[k] = op
        elif type(seen) is Upsert and not op_keeps(op):
            # After the upsert the row exists: a later upsert or update only sets its columns.
            if seen.keep and any(c in seen.keep for c in op.values):
                return None
            rows[k] = Upsert(table, {**seen.values, **op.values}, seen.keep)
        elif type(seen) is Update and type(op) is Update:
            rows[k] = Update(table, seen.key, {**seen.values, **op.values})
        else:  # an update then an upsert of the same row: order matters
            return None
    return list(rows.values())


def op_keeps(op: Op) -> bool:
    return isinstance(op, Upsert) and bool(op.keep)


_shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _shape(op: Op) -> tuple[Any, ...]:
    """What makes ops share a statement: kind, table and the (sorted) columns they set."""
    if type(op) is Upsert:
        raw: tuple[Any, ...] = ("upsert", op.table.name, tuple(op.values), op.keep)
    elif type(op) is Update:
        raw = ("update", op.table.name, tuple(op.key), tuple(op.values))
    elif type(op) is Delete:
        raw = ("delete", op.table.name, tuple(op.key))
    else:
        return ("run", op.name)  # type: ignore[union-attr]
    shape = _shapes.get(raw)
    if shape is None:  # a handler builds its dicts in one order: sort each order once
        if raw[0] == "update":
            shape = (raw[0], raw[1], tuple(sorted(raw[2])), tuple(sorted(raw[3])))
        else:
            shape = (raw[0], raw[1], tuple(sorted(raw[2])), *raw[3:])
        _shapes[raw] = shape
    return shape


Group = tuple[tuple[Any, ...], list[Op], bool]  # (shape, ops, rows are distinct)


def _groups(segment: list[Op]) -> list[Group]:
    by_table: dict[str, list[Op]] = {}
    tables: dict[str, Table] = {}
    for op in segment:
        name = op.table.name  # type: ignore[union-attr]
        by_table.setdefault(name, []).append(op)
        tables[name] = op.table  # type: ignore[union-attr]
    out: list[Group] = []
    for name in sorted(by_table):
        ops = by_table[name]
        merged = _merge_rows(tables[name], ops)
        if merged is not None:
            shapes: dict[tuple[Any, ...], list[Op]] = {}
            for op in merged:
                shapes.setdefault(_shape(op), []).append(op)
            out += [(shape, group, True) for shape, group in shapes.items()]
            continue
        for op in ops:  # in order; consecutive ops of one shape share a statement
            shape = _shape(op)
            if out and out[-1][0] == shape and not out[-1][2]:
                out[-1][1].append(op)
            else:
                out.append((shape, [op], False))
    return out


def _plan(ops: list[Op]) -> list[Group]:
    """Groups in execution order. A non-deferred Run is a barrier (it reads what came before
    it); deferred Runs go last, once each."""
    out: list[Group] = []
    segment: list[Op] = []
    deferred: dict[tuple[Any, ...], Run] = {}
    for op in ops:
        if isinstance(op, Run):
            if op.deferred:
                deferred[(op.name, tuple(sorted(op.params.items())))] = op
                continue
            out += _groups(segment)
            segment = []
            out.append((_shape(op), [op], False))
        else:
            segment.append(op)
    out += _groups(segment)
    runs: dict[tuple[Any, ...], list[Op]] = {}
    for (name, _), op in deferred.items():
        runs.setdefault(("run", name), []).append(op)
    return out + [(shape, group, False) for shape, group in runs.items()]


# -- statements -------------------------------------------------------------------------------
_PG_ARRAY_TYPES = (String, Text, Integer, Boolean, JSON)


class Unstorable(ValueError):
    """A value its column cannot hold on one of the stores (see the module docstring)."""


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _json_problem(value: Any) -> str | None:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        elif isinstance(v, int):
            if not _INT64[0] <= v <= _INT64[1]:
                return "an integer beyond 64 bits inside JSON"
        elif isinstance(v, float) and not math.isfinite(v):
            return "a NaN or infinite number inside JSON"
    return None


Check = tuple[int, str, str, Any]  # (parameter index, column name, kind, limit)


def _checks(table: Table, columns: tuple[str, ...]) -> tuple[Check, ...]:
    out: list[Check] = []
    for i, c in enumerate(columns):
        type_ = table.c[c].type
        if isinstance(type_, BigInteger):
            out.append((i, c, "int", _INT64))
        elif isinstance(type_, Integer):
            out.append((i, c, "int", _INT32))
        elif isinstance(type_, String):  # Text is a String without a length
            out.append((i, c, "str", type_.length))
        elif isinstance(type_, JSON):
            out.append((i, c, "json", None))
    return tuple(out)


def check_rows(table: Table, checks: tuple[Check, ...], rows: list[tuple[Any, ...]]) -> None:
    """Raise ``Unstorable`` unless every value fits its column (column-wise, C-level loops)."""
    for i, column, kind, limit in checks:
        values = [v for v in map(itemgetter(i), rows) if v is not None]
        if not values:
            continue
        where = f"{table.name}.{column}"
        if kind == "str":
            if limit is not None and max(map(len, values)) > limit:
                raise Unstorable(f"{where}: a value longer than the column's {limit} characters")
            if any(map(contains, values, repeat("\x00"))):
                raise Unstorable(f"{where}: text with a NUL character")
        elif kind == "int":
            if min(values) < limit[0] or max(values) > limit[1]:
                raise Unstorable(f"{where}: an integer outside the column's range {limit[0]}..{limit[1]}")
        else:
            for v in values:
                why = _json_problem(v)
                if why is not None:
                    raise Unstorable(f"{where}: {why}")


@dataclass
class _Statement:
    sql: str
    columns: tuple[str, ...]  # parameter order: the op's values (and keys) by column name
    processors: tuple[Callable[[Any], Any] | None, ...]
    bulk: bool  # PostgreSQL: one statement with one array per column
    table: Table | None = None
    checks: tuple[Check, ...] = ()

    def __post_init__(self) -> None:
        if self.table is not None:
            self.checks = _checks(self.table, self.columns)


def _processors(conn: Connection, table: Table, columns: tuple[str, ...], for_arrays: bool) -> tuple[Any, ...]:
    out = []
    for c in columns:
        type_ = table.c[c].type
        if for_arrays:  # psycopg adapts str/int/bool/None itself; JSON goes as text, cast in SQL
            out.append((conn.dialect._json_serializer or json.dumps) if isinstance(type_, JSON) else None)
        else:
            out.append(type_._cached_bind_processor(conn.dialect))
    return tuple(out)


def _pg_type(conn: Connection, table: Table, column: str) -> str:
    type_ = table.c[column].type
    return "text" if isinstance(type_, JSON) else type_.compile(dialect=conn.dialect).lower()


def _build(conn: Connection, op: Op, shape: tuple[Any, ...], distinct: bool) -> _Statement:
    dialect = conn.dialect
    q = dialect.identifier_preparer.quote
    table: Table = op.table  # type: ignore[union-attr]
    t = dialect.identifier_preparer.format_table(table)
    pg = dialect.name == "postgresql"
    mark = "%s" if dialect.paramstyle in ("format", "pyformat") else "?"
    # Bulk (arrays) only for rows known distinct, on types psycopg maps to arrays unambiguously.
    cols_used = shape[2] if shape[0] != "update" else shape[2] + shape[3]
    bulk = pg and distinct and all(isinstance(table.c[c].type, _PG_ARRAY_TYPES) for c in cols_used)

    def arrays(columns: tuple[str, ...]) -> str:
        return ", ".join(f"{mark}::{_pg_type(conn, table, c)}[]" for c in columns)

    def cast(c: str) -> str:
        return f"v.{q(c)}::json" if isinstance(table.c[c].type, JSON) else f"v.{q(c)}"

    if shape[0] == "upsert":
        columns, keep = shape[2], shape[3]
        keys = _pk(table)
        names = ", ".join(q(c) for c in columns)
        if bulk:
            source = f"SELECT {', '.join(cast(c) for c in columns)} FROM unnest({arrays(columns)}) AS v({names})"
        else:
            source = f"VALUES ({', '.join(mark for _ in columns)})"
        changing = [c for c in columns if c not in keys and c not in keep]
        conflict = (f"DO UPDATE SET {', '.join(f'{q(c)} = excluded.{q(c)}' for c in changing)}" if changing
                    else "DO NOTHING")
        sql = f"INSERT INTO {t} ({names}) {source} ON CONFLICT ({', '.join(q(k) for k in keys)}) {conflict}"
        return _Statement(sql, columns, _processors(conn, table, columns, bulk), bulk, table)
    if shape[0] == "update":
        key_cols, columns = shape[2], shape[3]
        if bulk:
            allc = key_cols + columns
            sql = (f"UPDATE {t} SET {', '.join(f'{q(c)} = {cast(c)}' for c in columns)} "
                   f"FROM unnest({arrays(allc)}) AS v({', '.join(q(c) for c in allc)}) "
                   f"WHERE {' AND '.join(f'{t}.{q(k)} = v.{q(k)}' for k in key_cols)}")
            return _Statement(sql, allc, _processors(conn, table, allc, True), True, table)
        sql = (f"UPDATE {t} SET {', '.join(f'{q(c)} = {mark}' for c in columns)} "
               f"WHERE {' AND '.join(f'{q(k)} = {mark}' for k in key_cols)}")
        order = columns + key_cols
        return _Statement(sql, order, _processors(conn, table, order, False), False, table)
    key_cols = shape[2]
    sql = f"DELETE FROM {t} WHERE {' AND '.join(f'{q(k)} = {mark}' for k in key_cols)}"
    return _Statement(sql, key_cols, _processors(conn, table, key_cols, False), False)


_statements: dict[tuple[Any, ...], _Statement] = {}


def _statement(conn: Connection, op: Op, shape: tuple[Any, ...], distinct: bool) -> _Statement:
    # By name, not id(): scratch builds come and go, and a freed table's id is reused. Tables
    # of one name have one definition (the tag carries the schema version).
    key = (conn.dialect.name, shape, distinct)
    stmt = _statements.get(key)
    if stmt is None:  # building statements costs more than running them: build each shape once
        stmt = _statements[key] = _build(conn, op, shape, distinct)
    return stmt


def _values(op: Op) -> dict[str, Any]:
    if isinstance(op, Upsert):
        return op.values
    if isinstance(op, Update):
        return {**op.values, **op.key}
    return op.key  # type: ignore[union-attr]


def _rows(stmt: _Statement, ops: list[Op]) -> list[tuple[Any, ...]]:
    columns, processors = stmt.columns, stmt.processors
    if len(columns) > 1:
        get = itemgetter(*columns)
        rows = [get(v) for v in map(_values, ops)]
    else:
        rows = [(v[columns[0]],) for v in map(_values, ops)]
    if stmt.checks:
        check_rows(stmt.table, stmt.checks, rows)  # type: ignore[arg-type]
    if any(processors):
        conv = [(i, p) for i, p in enumerate(processors) if p is not None]
        out = []
        for row in rows:
            r = list(row)
            for i, p in conv:
                r[i] = p(r[i])  # as SQLAlchemy does: JSON None is stored as JSON null
            out.append(tuple(r))
        rows = out
    return rows


def execute(conn: Connection, ops: Iterable[Op]) -> int:
    """Run ops (see the module docstring). Returns the statements run."""
    statements = 0
    for shape, group, distinct in _plan(list(ops)):
        first = group[0]
        if isinstance(first, Run):
            params = [op.params for op in group]  # type: ignore[union-attr]
            if first.many is None or not first.many(conn, params):
                conn.execute(first.statement, params)
            statements += 1
            continue
        stmt = _statement(conn, first, shape, distinct)
        rows = _rows(stmt, group)
        if stmt.bulk:
            conn.exec_driver_sql(stmt.sql, tuple(list(col) for col in zip(*rows)))
        else:
            conn.exec_driver_sql(stmt.sql, rows)
        statements += 1
    return statements
