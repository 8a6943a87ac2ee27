"""Who knows what (issue 43) in the canon read model, on both stores: a version's ``fields.secret``
reaches every entry read (``EntryView.secret``), a scene card carries its point-of-view character
(``SceneView.pov``), and ``CanonSnapshot.knowledge`` answers what characters know as of a chapter
from ``rm_knowledge`` (one row per character and entry: a correction replaces it), the same after a
rebuild and in the audit's scratch build."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.packets.ports import Call, CanonSnapshot, Known
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.infrastructure.scratch import scratch_canon

STORY = "marrow"
_n = iter(range(10**6))


def _apply(s: Any, *commands: dict[str, Any]) -> int:
    results = s.ledger.apply([parse_command({"command_id": f"c{next(_n)}", "story_id": STORY, **c}) for c in commands],
                             atomic=True)
    assert all(r.ok for r in results), [r.as_dict() for r in results]
    return int(results[-1].position)


def _version(kind: str, key: str, valid_from: int, fields: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    n = next(_n)
    return [{"type": "propose_canon", "proposal_id": f"p{n}", "kind": kind, "key": key, "name": key.title(),
             "aliases": [], "text": f"{key}, as of {valid_from}.", "fields": fields or {}, "valid_from": valid_from},
            {"type": "confirm_canon", "proposal_id": f"p{n}"}]


def know(character: str, key: str, chapter: int, how: str, kind: str = "character") -> dict[str, Any]:
    return {"type": "record_knowledge", "character": character, "kind": kind, "key": key, "chapter": chapter,
            "how": how}


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    _apply(services, {"type": "start_story", "title": "Marrow", "style_guardrails": [], "output_contract": ""})
    _apply(services, *_version("character", "mira", 1), *_version("character", "harl", 1),
           # The steward is a spy: a secret from chapter 3, revealed (no longer a secret) from 30.
           *_version("character", "steward", 3, {"secret": True, "allegiance": "the Marrow"}),
           *_version("character", "steward", 30, {"secret": False, "allegiance": "the Marrow"}),
           *_version("location", "vault", 2, {"secret": True}),
           *_version("thread", "plot", 1, {"secret": True, "state": "open"}),
           {"type": "plan_chapter", "chapter": 12, "volume": 1, "goals": ["the feast"]},
           {"type": "add_scene_card", "chapter": 12, "scene_id": "a", "summary": "Mira at the feast.",
            "characters": ["mira", "steward"], "locations": [], "threads": [], "callbacks": [], "items": [],
            "pov": "mira"},
           {"type": "add_scene_card", "chapter": 12, "scene_id": "b", "summary": "The steward alone.",
            "characters": ["steward"], "locations": [], "threads": [], "callbacks": [], "items": []})
    services.canon.catch_up_serving()
    yield services
    services.close()


def test_the_secret_flag_reaches_every_entry_read(s: Any) -> None:
    with s.packets.reader.snapshot(STORY) as snap:
        at12 = {e.key: e.secret for e in snap.entries_by_key(STORY, 12, ("mira", "steward", "vault"))}
        assert at12 == {"mira": False, "steward": True, "vault": True}
        assert {e.key: e.secret for e in snap.entries_by_key(STORY, 30, ("steward",))} == {"steward": False}
        assert [(e.key, e.secret) for e in snap.active_entries(STORY, 12, "thread")] == [("plot", True)]
        assert [(e.key, e.secret) for e in snap.entries_since(STORY, 12, "location", 1)] == [("vault", True)]
        assert [(e.key, e.secret) for e in snap.entries_page(STORY, 12, "character", "", 10)] == [
            ("harl", False), ("mira", False), ("steward", True)]
        earlier = snap.superseded_steps(STORY, 30, "character", ("steward",), 3)
        assert [(e.step, e.secret) for e in earlier["steward"]] == [(1, True)]


def test_scene_cards_carry_their_pov(s: Any) -> None:
    with s.packets.reader.snapshot(STORY) as snap:
        assert [(c.scene_id, c.pov) for c in snap.scenes(STORY, 12)] == [("a", "mira"), ("b", None)]


def _at(s: Any, character: str, key: str, chapter: int, how: str) -> int:
    """The log position of the (latest) ``KnowledgeRecorded`` of this record: a row's source."""
    return max(e.position for e in s.ledger.event_log.history(story_id=STORY) if e.type == "CanonEntry.KnowledgeRecorded"
               and (e.data["character"], e.data["key"], e.data["chapter"], e.data["how"]) == (character, key, chapter,
                                                                                           how))


def _known(s: Any, chapter: int, characters: tuple[str, ...] = ()) -> list[Known]:
    with s.packets.reader.snapshot(STORY) as snap:
        return snap.knowledge(STORY, chapter, characters)


def test_what_characters_know_as_of_a_chapter(s: Any) -> None:
    _apply(s, know("mira", "steward", 12, "told by Harl"))
    _apply(s, know("harl", "steward", 3, "deduced"), know("mira", "vault", 2, "overheard", kind="location"),
           know("steward", "steward", 3, "his own secret"))
    s.canon.catch_up_serving()
    vault = Known("mira", "location", "vault", 2, "overheard", _at(s, "mira", "vault", 2, "overheard"))
    assert _known(s, 1) == []
    harl = Known("harl", "character", "steward", 3, "deduced", _at(s, "harl", "steward", 3, "deduced"))
    assert _known(s, 11) == [harl, vault,
                             Known("steward", "character", "steward", 3, "his own secret",
                                   _at(s, "steward", "steward", 3, "his own secret"))]
    assert len({k.source for k in _known(s, 11)}) == 3
    assert _known(s, 12, ("mira",)) == [
        Known("mira", "character", "steward", 12, "told by Harl", _at(s, "mira", "steward", 12, "told by Harl")), vault]
    assert [k.character for k in _known(s, 12, ("mira", "harl"))] == ["harl", "mira", "mira"]
    assert _known(s, 12, ("nobody",)) == []
    assert len(_known(s, 1_000_000)) == 4
    # A recipe may prefetch the read (PostgreSQL: in the pipeline); it answers the same.
    calls = [Call(CanonSnapshot.knowledge, (STORY, 12, ("mira",))), Call(CanonSnapshot.knowledge, (STORY, 11, ()))]
    with s.packets.reader.snapshot(STORY) as snap:
        snap.prefetch(calls)
        assert [call.of(snap) for call in calls] == [_known(s, 12, ("mira",)), _known(s, 11)]
        assert snap.unused_prefetch == 0


def test_a_correction_replaces_the_record(s: Any) -> None:
    _apply(s, know("mira", "steward", 12, "told by Harl"))
    s.canon.catch_up_serving()
    _apply(s, know("mira", "steward", 9, "overheard"))
    s.canon.catch_up_serving()
    assert _known(s, 9) == [Known("mira", "character", "steward", 9, "overheard", _at(s, "mira", "steward", 9,
                                                                                    "overheard"))]
    # Two corrections in one page (one atomic batch): the later holds.
    _apply(s, know("mira", "steward", 20, "read it"), know("mira", "steward", 15, "told by Harl"))
    s.canon.catch_up_serving()
    later = _at(s, "mira", "steward", 15, "told by Harl")
    assert later > _at(s, "mira", "steward", 20, "read it")
    assert _known(s, 14) == []
    assert _known(s, 15) == [Known("mira", "character", "steward", 15, "told by Harl", later)]
    # The same record again is unchanged: nothing moves.
    result = s.ledger.apply([parse_command({"command_id": "again", "story_id": STORY,
                                            **know("mira", "steward", 15, "told by Harl")})])
    assert result[0].status == "unchanged"
    s.canon.catch_up_serving()
    assert _known(s, 15)[0].source == later


def test_a_rebuild_and_the_audit_s_scratch_build_read_the_same(s: Any) -> None:
    _apply(s, know("mira", "steward", 12, "told by Harl"), know("harl", "steward", 3, "deduced"))
    _apply(s, know("mira", "steward", 9, "overheard"))
    s.canon.catch_up_serving()
    with s.packets.reader.snapshot(STORY) as snap:
        before = (snap.knowledge(STORY, 50), snap.scenes(STORY, 12), snap.entries_by_key(STORY, 12, ("steward",)))
    assert len(before[0]) == 2 and before[1][0].pov == "mira" and before[2][0].secret
    scratch = scratch_canon(s.ledger, s.packets.tokens, STORY, s.ledger.event_log.position())
    try:
        with scratch.snapshot(STORY) as snap:
            assert (snap.knowledge(STORY, 50), snap.scenes(STORY, 12),
                    snap.entries_by_key(STORY, 12, ("steward",))) == before
    finally:
        scratch.close()
    s.canon.rebuild()
    with s.packets.reader.snapshot(STORY) as snap:
        assert (snap.knowledge(STORY, 50), snap.scenes(STORY, 12),
                snap.entries_by_key(STORY, 12, ("steward",))) == before
