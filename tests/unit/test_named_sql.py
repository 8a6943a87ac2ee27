"""The packet reader's named SQL: every statement is filled in for both dialects, and SQLite's
list parameters are spelled out one per item."""

from __future__ import annotations

import sqlite3

from canon_ledger.projections import canon_view, driver_sql
from canon_ledger.projections.canon_tables import canon_tables


def test_every_statement_names_real_tables_and_only_known_parameters() -> None:
    tables = canon_tables("v9_1")
    for dialect in ("sqlite", "postgresql"):
        statements = canon_view.statements(tables, dialect)
        assert set(statements) == set(canon_view.STATEMENTS)
        assert len({s.name for s in statements}) == len(statements)  # each names its own row type
        for statement, stmt in statements.items():
            sql = str(stmt)
            assert "{" not in sql and "_v9_1" in sql, (dialect, statement.name)
            assert "ANY(" not in sql if dialect == "sqlite" else "IN (:" not in sql, (dialect, statement.name)


def test_sqlite_lists_are_one_parameter_per_item_and_select_what_they_name() -> None:
    sql = driver_sql.for_sqlite("SELECT x FROM t WHERE k = ANY(:keys) AND s = :story AND f = false ORDER BY x")
    assert sql == "SELECT x FROM t WHERE k IN (:keys) AND s = :story AND f = 0 ORDER BY x"
    expanded, params = driver_sql.sqlite_params(sql, {"keys": ["a", "c"], "story": "s"})
    assert expanded == "SELECT x FROM t WHERE k IN (:keys_0, :keys_1) AND s = :story AND f = 0 ORDER BY x"
    assert params == {"story": "s", "keys_0": "a", "keys_1": "c"}
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x INTEGER, k TEXT, s TEXT, f BOOLEAN)")
    db.executemany("INSERT INTO t VALUES (?, ?, ?, 0)", [(1, "a", "s"), (2, "b", "s"), (3, "c", "s"), (4, "a", "o")])
    assert db.execute(expanded, params).fetchall() == [(1,), (3,)]
    assert driver_sql.sqlite_params(sql, {"keys": ["b"], "story": "s"})[1] == {"story": "s", "keys_0": "b"}


def test_each_reads_first_statements_are_its_namesake_with_its_parameters() -> None:
    """``prefetch`` finds a call's statements by the port method's name: every read of
    ``FirstStatements`` is a read of the port, with the port method's parameters."""
    import inspect

    from canon_ledger.application.packets.ports import CanonSnapshot

    firsts = {name: f for name, f in vars(canon_view.FirstStatements).items() if isinstance(f, staticmethod)}
    assert {"story", "chapter", "scenes", "entries_by_key", "active_entries", "knowledge", "lore"} <= set(firsts)
    for name, first in firsts.items():
        port = inspect.signature(getattr(CanonSnapshot, name))
        assert list(port.parameters)[1:] == list(inspect.signature(first.__func__).parameters), name
    assert {read.__name__ for read in canon_view.KEPT} <= set(firsts)
