"""The as-of rule in SQL: which step of a canon entry is in force at chapter K.

The rule is ``canon_ledger.domain.canon.valid_to``: an entry's steps are ordered by
(valid_from, step), and each one ends (``valid_to``) where the next in that order begins;
NULL while it is still in force. A step is in force at K iff ``valid_from <= K`` and
(``valid_to`` IS NULL or ``valid_to > K``).

``NEXT_FROM`` is that rule's one SQL form: the ``valid_to`` of row ``cn``, derived from the
entry's other rows. The projection writes it (``valid_to_update``, and on PostgreSQL
``valid_to_update_many``, the same rule for many entries bound as arrays); the reader only
tests the stored column (``IN_FORCE``, or its two ranges ``IN_FORCE_CURRENT`` and
``IN_FORCE_SUPERSEDED_LATER``).
"""

from __future__ import annotations

from sqlalchemy import TextClause, text

# The valid_to of row ``cn`` of table ``{table}``: the least valid_from of the entry's steps
# after it in (valid_from, step) order.
NEXT_FROM = (
    '(SELECT min(l.valid_from) FROM "{table}" AS l '
    'WHERE l.story_id = cn.story_id AND l.kind = cn.kind AND l."key" = cn."key" '
    'AND (l.valid_from > cn.valid_from OR (l.valid_from = cn.valid_from AND l.step > cn.step)))'
)


# "In force at chapter :chapter" on the stored column, and the same test as the union of two
# disjoint index ranges: the steps still current, and the steps superseded after the chapter.
IN_FORCE = "valid_from <= :chapter AND (valid_to IS NULL OR valid_to > :chapter)"
IN_FORCE_CURRENT = "valid_to IS NULL AND valid_from <= :chapter"
IN_FORCE_SUPERSEDED_LATER = "valid_to > :chapter AND valid_from <= :chapter"


def valid_to_update(table: str) -> TextClause:
    """Re-derive ``valid_to`` for every step of the entry (:b_story, :b_kind, :b_key); only
    rows whose value changes are written (usually the step before the new one)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'WHERE cn.story_id = :b_story AND cn.kind = :b_kind AND cn."key" = :b_key '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')


def valid_to_update_many(table: str) -> TextClause:
    """PostgreSQL: ``valid_to_update`` for many entries in one statement, the entries bound as
    three arrays (:stories, :kinds, :keys)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'FROM unnest(CAST(:stories AS varchar[]), CAST(:kinds AS varchar[]), CAST(:keys AS varchar[])) AS v(s, k, e) '
        'WHERE cn.story_id = v.s AND cn.kind = v.k AND cn."key" = v.e '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')
