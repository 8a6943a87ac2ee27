"""How a frozen version states its recipes: the version before it's, edited (``changed``,
``inserted``, ``replaced``). Each edit returns a new table and leaves the one it is given as it
was, so an earlier version's recipes are never changed by a later one's edits."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from canon_ledger.application.packets.reading import Read, Recipe

Table = dict[str, Recipe]
SCENE_ROLES = ("planner", "writer", "qa")  # the roles whose recipes read a scene


def _each(table: Table, name: str, becomes: Callable[[Read], Recipe], roles: Iterable[str] | None) -> Table:
    """``table`` with every read named ``name`` (in ``roles``, or every role) made ``becomes(read)``."""
    edited = set(table if roles is None else roles)
    return {role: tuple(new for read in recipe
                        for new in (becomes(read) if role in edited and read.read == name else (read,)))
            for role, recipe in table.items()}


def changed(table: Table, names: Iterable[str] | None = None, **fields: Any) -> Table:
    """``table`` with ``fields`` set on the reads named ``names`` (every read when None)."""
    wanted = None if names is None else set(names)
    return {role: tuple(replace(read, **fields) if wanted is None or read.read in wanted else read
                        for read in recipe)
            for role, recipe in table.items()}


def inserted(table: Table, after: str, new: Recipe, roles: Iterable[str] | None = None) -> Table:
    """``table`` with ``new`` read right after the read named ``after`` (in ``roles``, or every role)."""
    return _each(table, after, lambda read: (read, *new), roles)


def replaced(table: Table, name: str, new: Recipe, roles: Iterable[str] | None = None) -> Table:
    """``table`` with ``new`` read in place of the read named ``name`` (``()``: not read)."""
    return _each(table, name, lambda read: new, roles)
