"""Each rule of ``domain.canon_rules`` has one Python form and one SQL form, side by side there;
here each SQL form, evaluated in a real store, is held equal to its Python form.

The as-of rule: over random timelines, as the domain builds them (revisions from any chapter,
ties, retirements where the domain allows one), ``NEXT_FROM`` gives every step the ``valid_to``
``valid_to`` gives it, the stored ``valid_to`` selects (``IN_FORCE``, its alias form, its two
index ranges) the step ``CanonEntry.as_of`` returns at every chapter, and both agree with the
rule's plain statement: the last step with ``valid_from <= K``, the later confirmation winning
a tie; ``SUPERSEDED_BY`` selects the steps ``InForce.superseded_by`` names. Active: over random
states, ``ACTIVE`` (in each store's words) selects the steps ``active`` names.
"""

from __future__ import annotations

import itertools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, select, text, update

from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.canon_rules import (ACTIVE, IN_FORCE, IN_FORCE_CURRENT, IN_FORCE_SUPERSEDED_LATER, SUPERSEDED_BY,
                                             active, in_force, in_force_sql, valid_to)
from canon_ledger.domain.errors import RuleViolated
from canon_ledger.projections.canon_tables import canon_tables, valid_to_update, valid_to_update_many
from canon_ledger.projections.driver_sql import for_sqlite
from tests.helpers import examples

CHAPTERS = st.integers(min_value=1, max_value=8)  # few chapters: ties are common
STEP = st.tuples(st.sampled_from(["revise", "revise", "retire"]), CHAPTERS)
TIMELINE = st.tuples(CHAPTERS, st.lists(STEP, max_size=8))
_serial = itertools.count()


def _entry(key: str, first: int, steps: list[tuple[str, int]]) -> CanonEntry:
    """The entry the domain builds from these commands (refused retirements are skipped)."""
    entry = CanonEntry(story_id="s", kind="character", key=key, version=_version(first))
    for what, chapter in steps:
        if what == "revise":
            entry.revise(_version(chapter))
        else:
            try:
                entry.retire(chapter, "gone")
            except RuleViolated:
                pass
    return entry


def _version(chapter: int) -> dict:
    return {"proposal_id": f"p{next(_serial)}", "valid_from": chapter, "name": "n", "aliases": [],
            "text": "t", "fields": {}, "tags": []}


def _plain_as_of(timeline: list[dict], chapter: int) -> int | None:
    """The index of the step in force: the last with valid_from <= chapter, ties to the later."""
    started = [i for i, s in enumerate(timeline) if s["valid_from"] <= chapter]
    return max(started, key=lambda i: (timeline[i]["valid_from"], i)) if started else None


@pytest.fixture
def store(store_url):
    engine = create_engine(store_url)
    tables = canon_tables(f"asof{uuid.uuid4().hex[:8]}")
    tables.canon.create(engine)
    try:
        yield engine, tables.canon
    finally:
        tables.canon.drop(engine)
        engine.dispose()


@settings(max_examples=examples(50, 150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(timelines=st.lists(TIMELINE, min_size=1, max_size=3))
def test_the_sql_rule_and_the_python_rule_agree(store, timelines) -> None:
    engine, cn = store
    story = f"s{next(_serial)}"
    entries = {f"k{i}": _entry(f"k{i}", first, steps) for i, (first, steps) in enumerate(timelines)}
    rows = [{"story_id": story, "kind": "character", "key": key, "step": i + 1, "valid_from": s["valid_from"],
             "retired": bool(s.get("retired")), "name": key, "text": "t", "tokens": 1, "source": 1,
             "valid_to": -1}  # not the rule's value for any step: every row must be rewritten
            for key, entry in entries.items() for i, s in enumerate(entry.timeline)]
    expected = {(key, i + 1): end for key, entry in entries.items()
                for i, end in enumerate(valid_to([s["valid_from"] for s in entry.timeline]))}
    params = [{"b_story": story, "b_kind": "character", "b_key": key} for key in entries]
    mine = cn.c.story_id == story
    statements = [lambda conn: conn.execute(valid_to_update(cn.name), params)]
    if engine.dialect.name == "postgresql":
        statements.append(lambda conn: conn.execute(valid_to_update_many(cn.name), {
            "stories": [story] * len(entries), "kinds": ["character"] * len(entries), "keys": list(entries)}))
    with engine.begin() as conn:
        conn.execute(cn.insert(), rows)
        for run in statements:
            conn.execute(update(cn).where(mine).values(valid_to=-1))
            run(conn)
            stored = {(k, s): v for k, s, v in conn.execute(select(cn.c.key, cn.c.step, cn.c.valid_to).where(mine))}
            assert stored == expected
        for chapter in range(0, 10):
            by_or = text(f'SELECT "key", step FROM "{cn.name}" WHERE story_id = :story AND '
                         + IN_FORCE)
            by_union = text(f'SELECT "key", step FROM "{cn.name}" WHERE story_id = :story AND '
                            f'{IN_FORCE_CURRENT} UNION ALL '
                            f'SELECT "key", step FROM "{cn.name}" WHERE story_id = :story AND '
                            f'{IN_FORCE_SUPERSEDED_LATER}')
            want = {}
            for key, entry in entries.items():
                step = entry.as_of(chapter)
                plain = _plain_as_of(entry.timeline, chapter)
                assert (step is None) == (plain is None) and (step is None or step is entry.timeline[plain])
                if plain is not None:
                    want[key] = plain + 1
            by_alias = text(f'SELECT c."key", c.step FROM "{cn.name}" AS c WHERE c.story_id = :story AND '
                            + in_force_sql("c"))
            superseded = text(f'SELECT "key", step FROM "{cn.name}" WHERE story_id = :story AND {SUPERSEDED_BY}')
            gone = {(key, i + 1) for key, entry in entries.items()
                    for i, span in enumerate(in_force([(s["valid_from"], False) for s in entry.timeline]))
                    if span.superseded_by(chapter)}
            at = {"story": story, "chapter": chapter}
            assert sorted(conn.execute(by_or, at).all()) == sorted(want.items())
            assert sorted(conn.execute(by_union, at).all()) == sorted(want.items())
            assert sorted(conn.execute(by_alias, at).all()) == sorted(want.items())
            assert set(conn.execute(superseded, at).all()) == gone


STATES = st.one_of(st.none(), st.sampled_from(["resolved", "Resolved", "RESOLVED", "resolved ", "open", "advanced",
                                                "unresolved", "", "r\u00e9solved"]),
                   st.text(alphabet="resolvdRESOLVD ", max_size=9))


@settings(max_examples=examples(50, 150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.booleans(), STATES), min_size=1, max_size=12))
def test_the_sql_and_the_python_active_rule_agree(store, steps) -> None:
    engine, cn = store
    story = f"s{next(_serial)}"
    rows = [{"story_id": story, "kind": "thread", "key": f"t{i}", "step": 1, "valid_from": 1, "retired": retired,
             "name": "n", "state": state, "text": "t", "tokens": 1, "source": 1}
            for i, (retired, state) in enumerate(steps)]
    said = ACTIVE if engine.dialect.name == "postgresql" else for_sqlite(ACTIVE)  # as the readers say it
    with engine.begin() as conn:
        conn.execute(cn.insert(), rows)
        found = {k for (k,) in conn.execute(text(f'SELECT "key" FROM "{cn.name}" WHERE story_id = :s AND {said}'),
                                            {"s": story})}
    assert found == {r["key"] for r in rows if active(r["retired"], r["state"])}
