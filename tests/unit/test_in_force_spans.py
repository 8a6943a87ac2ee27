"""Which chapters each step of an entry's history holds at (``domain.canon.in_force``): the
rule of ``CanonEntry.as_of`` as one span per step, and the words the entry page shows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from canon_ledger.domain.canon import CanonEntry
from canon_ledger.domain.canon_rules import InForce, in_force
from canon_ledger.domain.errors import RuleViolated
from tests.helpers import examples

CHAPTERS = st.integers(min_value=1, max_value=8)
STEPS = st.lists(st.tuples(st.sampled_from(["revise", "revise", "retire"]), CHAPTERS), max_size=8)


def _version(chapter: int, n: int) -> dict:
    return {"proposal_id": f"p{n}", "valid_from": chapter, "name": "n", "aliases": [], "text": "t", "fields": {},
            "tags": []}


def test_each_version_says_which_chapters_it_holds_at() -> None:
    # v1 from 3, v2 from 8, a revision of chapter 5 confirmed later, a tie at 8, a retirement at 12
    spans = in_force([(3, False), (8, False), (5, False), (8, False), (12, True)])
    assert [s.label for s in spans] == [
        "in force ch. 3\u20134", "superseded before it took effect", "in force ch. 5\u20137",
        "in force ch. 8\u201311", "retired at ch. 12"]
    assert [s.holds_at(8) for s in spans] == [False, False, False, True, False]
    assert not spans[1].effective and spans[1].end == 8


def test_a_single_chapter_an_open_end_and_a_retirement_undone() -> None:
    spans = in_force([(1, False), (2, False), (4, True), (7, False)])
    assert [s.label for s in spans] == ["in force at ch. 1", "in force ch. 2\u20133", "retired ch. 4\u20136",
                                        "in force from ch. 7"]
    assert InForce(9, None).label == "in force from ch. 9" and InForce(9, 9, True).label.startswith("superseded")
    assert in_force([]) == []


@settings(max_examples=examples(100, 300), deadline=None)
@given(CHAPTERS, STEPS)
def test_the_spans_are_the_domain_s_as_of_rule(first: int, steps: list[tuple[str, int]]) -> None:
    entry = CanonEntry(story_id="s", kind="character", key="k", version=_version(first, 0))
    for n, (what, chapter) in enumerate(steps, 1):
        if what == "revise":
            entry.revise(_version(chapter, n))
        else:
            try:
                entry.retire(chapter, "gone")
            except RuleViolated:
                pass
    spans = in_force([(s["valid_from"], bool(s.get("retired"))) for s in entry.timeline])
    for chapter in range(1, 11):
        holding = [i for i, span in enumerate(spans) if span.holds_at(chapter)]
        step = entry.as_of(chapter)
        assert holding == ([] if step is None else [next(i for i, s in enumerate(entry.timeline) if s is step)])
        if step is not None:
            assert spans[holding[0]].label.startswith("retired" if step.get("retired") else "in force")
