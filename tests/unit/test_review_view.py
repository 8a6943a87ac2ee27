"""The review card's arithmetic (``application.review_view``): the whole proposal beside the
confirmed version in force at its ``valid_from``, every attribute's change, a word-level text
diff, when the proposal would hold, and the competing proposals for one entry."""

from __future__ import annotations

from typing import Any

from canon_ledger.application import review_view as rv
from canon_ledger.application.review_view import ADDED, CHANGED, REMOVED, SAME, card, cards, competing, text_diff


def proposal(pid: str, key: str = "ilse", valid_from: int = 4, **more: Any) -> dict[str, Any]:
    return {"proposal_id": pid, "kind": "character", "key": key, "name": "Ilse Marrow", "aliases": [], "text": "t",
            "fields": {}, "tags": [], "valid_from": valid_from, "source": 100, **more}


def step(n: int, valid_from: int, retired: bool = False, key: str = "ilse", **version: Any) -> dict[str, Any]:
    """A row of ``StoryViews.review``: the canon step and the version its confirmation made."""
    row = {"kind": "character", "key": key, "step": n, "valid_from": valid_from, "retired": retired,
           "name": key if retired else "Ilse Marrow", "hidden_until": None, "rendered": f"rendered {n}", "source": 10 * n,
           "proposal_id": None, "aliases": None, "text": None, "fields": None, "tags": None}
    if not retired:
        row |= {"proposal_id": f"p{n}", "aliases": [], "text": f"text {n}", "fields": {}, "tags": []} | version
    return row


def rows(c: rv.Card) -> dict[str, tuple[str, list, list]]:
    return {r.name: (r.change, r.before, r.after) for r in c.rows}


def test_a_text_diff_marks_words_and_gives_both_texts_back() -> None:
    before = "Licensed lamplighter of the Quay ward since the winter exam."
    after = "Licensed lamplighter of the Quay ward; now keeps two ledgers."
    old, new = text_diff(before, after)
    assert "".join(t for _, t in old) == before and "".join(t for _, t in new) == after
    assert {m for m, _ in old} == {SAME, REMOVED} and {m for m, _ in new} == {SAME, ADDED}
    assert (REMOVED, "since the winter exam") in old  # the kept spaces between removed words join them
    assert (ADDED, "; now keeps two ledgers") in new and (SAME, "Licensed lamplighter of the Quay ward") in new
    assert text_diff("same", "same") == ([(SAME, "same")], [(SAME, "same")])


def test_a_long_text_is_compared_by_lines_then_whole() -> None:
    lines = [f"line {i} of the long entry" for i in range(1200)]  # 12,000 tokens: more than a word diff takes
    before, after = "\n".join(lines), "\n".join(lines[:600] + ["a new line"] + lines[601:])
    old, new = text_diff(before, after)
    assert [t for m, t in old if m == REMOVED] == ["line 600 of the long entry\n"]
    assert [t for m, t in new if m == ADDED] == ["a new line\n"]
    huge = "\n".join(["x y"] * (rv.LINE_DIFF_LINES + 1))
    assert text_diff(huge, huge + "!") == ([(REMOVED, huge)], [(ADDED, huge + "!")])


def test_the_card_compares_with_the_version_in_force_at_the_proposal_s_chapter() -> None:
    steps = [step(1, 1, aliases=["the Marrow girl"], fields={"status": "apprentice"}),
             step(2, 4, text="Licensed lamplighter.", aliases=["the Marrow girl", "Lamplighter Marrow"],
                  fields={"status": "licensed", "licence": "Quay"}, tags=["lead"]),
             step(3, 9, text="Warden of the Quay.")]
    p = proposal("p-new", valid_from=6, text="Licensed lamplighter; keeps two ledgers.",
                 aliases=["the Marrow girl", "Warden Marrow"], fields={"status": "warden", "licence": "Quay",
                                                                       "hidden_until": 7, "debt": 40}, tags=["lead"])
    c = card(p, steps)
    assert c.current is not None and c.current["step"] == 2  # in force at chapter 6: step 2, not the latest (step 3)
    assert c.current_span is not None and c.current_span.label == "in force ch. 4\u20138"
    assert c.would.label == "in force ch. 6\u20138" and c.overridden_by is not None and c.overridden_by["step"] == 3
    got = rows(c)
    assert list(got) == ["name", "valid_from", "aliases", "hidden_until", "text", "fields.debt", "fields.licence",
                         "fields.status", "tags"]
    assert got["name"][0] == SAME and got["valid_from"] == (CHANGED, [(REMOVED, "ch. 4")], [(ADDED, "ch. 6")])
    assert got["aliases"] == (CHANGED, [(SAME, "the Marrow girl"), (REMOVED, "Lamplighter Marrow")],
                              [(SAME, "the Marrow girl"), (ADDED, "Warden Marrow")])
    assert got["hidden_until"] == (ADDED, [], [(ADDED, "ch. 7")])
    assert got["text"][0] == CHANGED and (ADDED, "; keeps two ledgers") in got["text"][2]
    assert got["fields.debt"] == (ADDED, [], [(ADDED, "40")])
    assert got["fields.licence"][0] == SAME and got["fields.status"][0] == CHANGED and got["tags"][0] == SAME
    assert c.changes == 6 and not c.new_entry and c.competing == []


def test_removed_fields_and_hidden_until_and_a_proposal_before_the_first_version() -> None:
    steps = [step(1, 3, fields={"hidden_until": 12, "cost": "a night"}, aliases=["x"])]
    c = card(proposal("p", valid_from=3, fields={}, aliases=[]), steps)
    got = rows(c)
    assert got["hidden_until"] == (REMOVED, [(REMOVED, "ch. 12")], [])
    assert got["fields.cost"][0] == REMOVED and got["aliases"][0] == REMOVED
    early = card(proposal("p", valid_from=1), steps)  # nothing in force at chapter 1: the entry begins at 3
    assert early.current is None and not early.new_entry and early.first_from == 3
    assert early.would.label == "in force ch. 1\u20132" and early.overridden_by is not None
    assert {r.change for r in early.rows} <= {ADDED, SAME}


def test_a_retired_entry_and_a_new_entry_have_nothing_to_compare() -> None:
    retired = card(proposal("p", valid_from=9), [step(1, 1), step(2, 5, retired=True)])
    assert retired.current is not None and retired.current["retired"]
    assert retired.current_span is not None and retired.current_span.label == "retired at ch. 5"
    assert retired.would.label == "in force from ch. 9"
    assert {r.change for r in retired.rows} <= {ADDED, SAME} and rows(retired)["name"][0] == ADDED
    new = card(proposal("p", key="ferry", valid_from=5), [])
    assert new.new_entry and new.current is None and new.would.label == "in force from ch. 5"


def test_proposals_for_one_entry_name_each_other() -> None:
    pending = [proposal("a", key="ferry"), proposal("b", key="ilse"), proposal("c", key="ferry"),
               proposal("d", key="ferry"), {**proposal("e", key="ferry"), "kind": "location"}]
    assert competing(pending) == {"a": ["c", "d"], "b": [], "c": ["a", "d"], "d": ["a", "c"], "e": []}
    made = cards(pending, [step(1, 1)])
    assert [c.proposal["proposal_id"] for c in made] == ["a", "b", "c", "d", "e"]
    assert made[0].competing == ["c", "d"] and made[0].new_entry and not made[1].new_entry
    assert made[1].current is not None and made[1].current["step"] == 1


def test_a_step_without_its_version_shows_the_rendered_text() -> None:
    bare = step(1, 1) | {"proposal_id": None, "aliases": None, "text": None, "fields": None, "tags": None}
    c = card(proposal("p", valid_from=2), [bare])
    assert c.rendered and c.current is not None and c.current["text"] == "rendered 1"
    assert rows(c)["text"][1] == [(REMOVED, "rendered 1")]


def _f(fid: str, start: int, end: int, severity: str = "error") -> dict[str, Any]:
    return {"id": fid, "severity": severity, "span": {"start": start, "end": end}}


def test_highlighted_cuts_the_text_at_every_span_and_gives_it_back() -> None:
    text = "Harl walked in; Mara too."
    found = rv.highlighted(text, [_f("a", 0, 11), _f("b", 5, 15, "warning"), _f("c", 16, 16), _f("d", 20, 99)])
    assert "".join(s.text for s in found) == text
    assert [(s.text, s.findings, s.severity, s.anchors, s.mark_id) for s in found] == [
        ("Harl ", ("a",), "error", ("a",), "a"),
        ("walked", ("a", "b"), "error", ("b",), "b"),
        (" in;", ("b",), "warning", (), None),
        (" ", (), "", (), None),
        ("Mara", (), "", ("c",), None),  # an empty span anchors where it stands, marking nothing
        (" too.", ("d",), "error", ("d",), "d"),  # an end past the text is clamped
    ]
    assert rv.highlighted("", []) == [] and rv.highlighted("x", []) == [rv.Segment("x")]
