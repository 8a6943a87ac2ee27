"""The continuity check's read of the canon (issue 42), on both stores: ``CanonSnapshot.steps``
gives every step of the entries asked for (versions and retirements, at any chapter), with the
facts the canon projection stored for each version (canon read model v8), the stored
``valid_to``, and the plain keys recall matches; the audit's scratch build reads the same."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.domain.continuity import Step
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.scratch import scratch_canon
from canon_ledger.projections import canon_view
from tests.helpers import applied

STORY = "harrow"
LONG = "a" * 201  # a string field longer than a fact (MAX_FACT): prose


_n = iter(range(10**6))


def _version(s: Any, kind: str, key: str, name: str, valid_from: int, fields: dict[str, Any],
             aliases: tuple[str, ...] = ()) -> None:
    n = next(_n)
    applied(s, {"type": "propose_canon", "command_id": f"p{n}", "story_id": STORY, "proposal_id": f"prop-{n}",
               "kind": kind, "key": key, "name": name, "aliases": list(aliases), "text": f"{name}, as of {valid_from}.",
               "fields": fields, "valid_from": valid_from},
           {"type": "confirm_canon", "command_id": f"c{n}", "story_id": STORY, "proposal_id": f"prop-{n}"})


def _retire(s: Any, kind: str, key: str, valid_from: int) -> None:
    applied(s, {"type": "retire_canon", "command_id": f"r{next(_n)}", "story_id": STORY, "kind": kind, "key": key,
               "valid_from": valid_from, "reason": "drowned in the mere"})


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    applied(services, {"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Harrow",
                      "style_guardrails": [], "output_contract": ""})
    # Ilse: three versions and a retirement, one version confirmed last but in force earlier;
    # caught up between them, so valid_to comes from both of the projection's ways (in Python
    # for a whole timeline in one page, else the SQL re-derivation).
    _version(services, "character", "ilse", "Ilse", 1,
             {"eyes": "grey", "age": 17, "alive": True, "height": 1.62, "home": "Harrowgate", "state": "apprentice",
              "hidden_until": 2, "recall": {"keys": ["the grey witch", "/wit+ch/i", "Ilsa"]}, "history": LONG,
              "nodes": [], "lorebook": {"entry": {}}, "secret": True, "titles": ["a", "b"], "kin": {"mother": "Ada"}},
             aliases=("the apprentice",))
    services.canon.catch_up_serving()
    _version(services, "character", "ilse", "Ilse", 5, {"eyes": "grey", "age": 18, "state": "witch"},
             aliases=("the grey witch",))
    _retire(services, "character", "ilse", 9)
    services.canon.catch_up_serving()
    _version(services, "character", "ilse", "Ilse", 3, {"eyes": "grey", "age": 17, "state": "journeywoman"})
    # The mere: superseded before it took effect (a second version from the same chapter).
    _version(services, "location", "mere", "The Mere", 4, {"depth": 40})
    _version(services, "location", "mere", "The Mere", 4, {"depth": 41})
    # Another kind with the same key, never asked for: the pairs are exact.
    _version(services, "item", "ilse", "Ilse's ring", 1, {"metal": "gold"})
    services.canon.catch_up_serving()
    yield services
    services.close()


def _steps(s: Any, entries: tuple[tuple[str, str], ...]) -> list[Step]:
    with s.packets.reader.snapshot(STORY) as snap:
        return snap.steps(STORY, entries)


def test_every_step_of_an_entry_with_its_facts_valid_to_and_recall_keys(s: Any) -> None:
    steps = _steps(s, (("character", "ilse"),))
    assert [(t.step, t.valid_from, t.valid_to, t.retired) for t in steps] == [
        (1, 1, 3, False), (2, 5, 9, False), (3, 9, None, True), (4, 3, 5, False)]
    first, second, retirement, late = steps
    # Facts: scalars under a field that is no control field; prose, lists and objects left out.
    assert first.facts == {"age": 17, "alive": True, "eyes": "grey", "height": 1.62, "home": "Harrowgate",
                           "state": "apprentice"}
    assert second.facts == {"age": 18, "eyes": "grey", "state": "witch"}
    assert late.facts == {"age": 17, "eyes": "grey", "state": "journeywoman"}
    # Keys: a fields.recall rule's plain keys (its /regex/ key left out); else name and aliases.
    assert first.keys == ("the grey witch", "Ilsa")
    assert first.aliases == ("the apprentice",) and first.hidden_until == 2 and first.state == "apprentice"
    assert second.keys == ("Ilse", "the grey witch") and second.aliases == ("the grey witch",)
    # A retirement: no facts, no keys, its rendered notice as text.
    assert retirement.retired and retirement.facts == {} and retirement.keys == () and retirement.aliases == ()
    assert retirement.name == "ilse" and "drowned in the mere" in retirement.text
    assert retirement.holds_at(9) and not second.holds_at(9) and late.holds_at(4) and not first.holds_at(3)
    # Text and source are the stored rendered text and the event's log position.
    with s.packets.reader.snapshot(STORY) as snap:
        texts = snap.texts([("canon", STORY, "character", "ilse", t.step) for t in steps])
    assert [t.text for t in steps] == [texts[("canon", STORY, "character", "ilse", t.step)] for t in steps]
    assert len({t.source for t in steps}) == 4 and all(t.source > 0 for t in steps)


def test_steps_of_several_entries_in_order_exact_pairs_and_none_for_unknown_ones(s: Any) -> None:
    steps = _steps(s, (("location", "mere"), ("character", "ilse"), ("location", "nowhere"), ("location", "mere")))
    assert [(t.kind, t.key, t.step) for t in steps] == [
        ("character", "ilse", 1), ("character", "ilse", 2), ("character", "ilse", 3), ("character", "ilse", 4),
        ("location", "mere", 1), ("location", "mere", 2)]
    superseded, mere = steps[4:]
    assert (superseded.valid_from, superseded.valid_to, superseded.facts) == (4, 4, {"depth": 40})
    assert not any(superseded.holds_at(k) for k in range(1, 10))  # never in force
    assert (mere.valid_to, mere.facts, mere.keys) == (None, {"depth": 41}, ("The Mere",))
    assert _steps(s, ()) == []
    assert [(t.kind, t.key) for t in _steps(s, (("item", "ilse"),))] == [("item", "ilse")]


def test_thousands_of_entries_in_one_call_and_in_small_chunks(s: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = (("character", "ilse"), ("location", "mere"),
             *((kind, f"k{i:04d}") for i in range(2_000) for kind in ("character", "location")))
    whole = _steps(s, asked)
    assert [(t.kind, t.key, t.step) for t in whole] == [("character", "ilse", n) for n in range(1, 5)] + [
        ("location", "mere", 1), ("location", "mere", 2)]
    monkeypatch.setattr(canon_view, "STEPS_CHUNK", 1)
    assert _steps(s, asked[:7]) == whole


def test_a_stored_null_reads_as_no_facts(s: Any) -> None:
    tables = s.canon.tables(s.canon.active())
    with s.canon.write_engine.begin() as conn:
        conn.execute(tables.canon.update().where(tables.canon.c.key == "mere").values(facts=None))
    assert [t.facts for t in _steps(s, (("location", "mere"),))] == [{}, {}]


def test_the_audit_s_scratch_build_reads_the_same_steps(s: Any) -> None:
    asked = (("character", "ilse"), ("location", "mere"), ("item", "ilse"))
    scratch = scratch_canon(s.ledger, s.packets.tokens, STORY, s.ledger.event_log.position())
    try:
        with scratch.snapshot(STORY) as snap:
            assert snap.steps(STORY, asked) == _steps(s, asked)
    finally:
        scratch.close()
