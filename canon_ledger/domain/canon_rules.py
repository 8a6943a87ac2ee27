"""The rules a read of canon applies at a chapter, each in its Python form and, where a statement
applies it, its SQL form, side by side: the one home of each.

- In force (the as-of rule): of an entry's steps with ``valid_from <= K``, the latest by
  (valid_from, confirmation) holds at K (``valid_to``, ``InForce``, ``in_force``). The canon
  read model stores each step's ``valid_to``, written by ``NEXT_FROM``; every read tests the
  stored column (``IN_FORCE``, or its two index ranges ``IN_FORCE_CURRENT`` and
  ``IN_FORCE_SUPERSEDED_LATER``; ``SUPERSEDED_BY`` for the steps a later one replaced).
- Active: a step neither retired nor resolved (``active``, ``ACTIVE``), an open thread.
- Hidden: a step's text may not be shown before its ``hidden_until`` (``hidden_at``).

The SQL forms are text over the columns of the canon read model's steps, which carry the names
of ``domain.continuity.Step``'s fields, with the chapter bound as ``:chapter``; they are pure
data (the projections run them). tests/property/test_as_of_rule.py holds each SQL form equal
to its Python form over random timelines in a real store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RESOLVED = "resolved"  # the thread state that closes a thread, compared case-insensitively


# -- in force ----------------------------------------------------------------------------------

def valid_to(valid_froms: Sequence[int]) -> list[int | None]:
    """Each timeline step's end, for an entry's steps in confirmation order (their
    ``valid_from`` chapters): the chapter from which a later step takes over, None while the
    step is still in force. Steps are ordered by (valid_from, confirmation); each one ends where
    the next in that order begins, so a step tied with a later one ends where it begins and is
    never in force. Step ``i`` is in force at chapter K iff ``valid_from <= K < valid_to``
    (``valid_to`` None: no upper bound). Its SQL form is ``NEXT_FROM``."""
    order = sorted(range(len(valid_froms)), key=lambda i: (valid_froms[i], i))
    ends: list[int | None] = [None] * len(valid_froms)
    for step, following in zip(order, order[1:]):
        ends[step] = valid_froms[following]
    return ends


@dataclass(frozen=True)
class InForce:
    """The chapters at which one timeline step holds (``valid_to``'s rule): from ``start``
    (its ``valid_from``) up to, not including, ``end`` (None: no later step takes over). A step
    whose ``end`` is its ``start`` was superseded before it took effect (a later confirmation
    with the same ``valid_from``) and is never in force."""

    start: int
    end: int | None
    retired: bool = False

    @property
    def effective(self) -> bool:
        return self.end is None or self.end > self.start

    def holds_at(self, chapter: int) -> bool:
        return holds_at(self.start, self.end, chapter)

    def superseded_by(self, chapter: int) -> bool:
        """A later step has taken over by ``chapter``; in SQL: ``SUPERSEDED_BY``."""
        return self.end is not None and self.end <= chapter

    @property
    def label(self) -> str:
        """For people: "in force ch. 3–7", "in force from ch. 8", "in force at ch. 5",
        "retired at ch. 9", "retired ch. 9–11", "superseded before it took effect"."""
        if not self.effective:
            return "superseded before it took effect"
        if self.retired:
            if self.end is None:
                return f"retired at ch. {self.start}"
            return f"retired ch. {_chapters(self.start, self.end)}"
        if self.end is None:
            return f"in force from ch. {self.start}"
        return (f"in force at ch. {self.start}" if self.end == self.start + 1
                else f"in force ch. {_chapters(self.start, self.end)}")


def holds_at(valid_from: int, valid_to: int | None, chapter: int) -> bool:
    """Is a step from ``valid_from`` to ``valid_to`` (``valid_to``'s; None: no end) in force at
    ``chapter``? In SQL, on the stored ``valid_to``: ``IN_FORCE``."""
    return valid_from <= chapter and (valid_to is None or chapter < valid_to)


def _chapters(start: int, end: int) -> str:
    return str(start) if end == start + 1 else f"{start}\u2013{end - 1}"


def in_force(steps: Sequence[tuple[int, bool]]) -> list[InForce]:
    """When each step of an entry's timeline holds, for its steps in confirmation order as
    (``valid_from``, retired) pairs: the rule of ``CanonEntry.as_of`` (of the steps with
    ``valid_from <= K``, the latest by (valid_from, confirmation) holds at K, and a retirement
    holds as "not in canon"), one span per step."""
    ends = valid_to([valid_from for valid_from, _ in steps])
    return [InForce(valid_from, end, retired) for (valid_from, retired), end in zip(steps, ends, strict=True)]


# The valid_to of row ``cn`` of table ``{table}`` (``valid_to`` in SQL): the least valid_from of
# the entry's steps after it in (valid_from, step) order.
NEXT_FROM = (
    '(SELECT min(l.valid_from) FROM "{table}" AS l '
    'WHERE l.story_id = cn.story_id AND l.kind = cn.kind AND l."key" = cn."key" '
    'AND (l.valid_from > cn.valid_from OR (l.valid_from = cn.valid_from AND l.step > cn.step)))'
)


def in_force_sql(alias: str = "") -> str:
    """``holds_at(valid_from, valid_to, :chapter)`` on the stored ``valid_to`` of the steps of ``alias`` (a
    table's alias in a join, "c": ``c.valid_from <= ...``; none: the one table read)."""
    at = f"{alias}." if alias else ""
    return f"{at}valid_from <= :chapter AND ({at}valid_to IS NULL OR {at}valid_to > :chapter)"


IN_FORCE = in_force_sql()
# The same test as the union of two disjoint index ranges: the steps still current, and the
# steps superseded after the chapter (an OR of the two made both stores walk every step of a kind).
IN_FORCE_CURRENT = "valid_to IS NULL AND valid_from <= :chapter"
IN_FORCE_SUPERSEDED_LATER = "valid_to > :chapter AND valid_from <= :chapter"
# ``InForce.superseded_by(:chapter)``: the steps a later one has replaced by the chapter.
SUPERSEDED_BY = "valid_to <= :chapter"


# -- active ------------------------------------------------------------------------------------

def active(retired: bool, state: str | None) -> bool:
    """A step that is neither retired nor resolved (its ``state``, in any case): an open thread."""
    return not retired and (state or "").lower() != RESOLVED


# ``active`` in SQL, in the words of the canon table's partial index
# (``projections.canon_tables.is_active``): a planner takes a partial index only for a query
# that states its condition in the same words, literals and all (a bind parameter loses it).
# SQLite says false as 0 (``projections.driver_sql.for_sqlite``).
ACTIVE = f"retired = false AND coalesce(lower(state), '') != '{RESOLVED}'"


# -- hidden ------------------------------------------------------------------------------------

def hidden_at(hidden_until: int | None, chapter: int) -> bool:
    """May an entry's (or a chain node's) text not be shown at ``chapter``? Only when its
    ``hidden_until`` (a chapter number, checked by ``canon.require_control_fields``) is later.
    No statement applies it: a reader lists a hidden step without its text, so it is read."""
    return hidden_until is not None and hidden_until > chapter


