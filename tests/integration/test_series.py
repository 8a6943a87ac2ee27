"""A series bible and its books, through the read models on both stores: a book's packet sees,
for each (kind, key), its own canon in force at the chapter, else the bible's, else the canon at
the end of the latest earlier book that has it; each inherited item says where it comes from and
cites the other story's events; the packets audit and travel in time; a bible step hidden until a
later book is not seen before it."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

_n = iter(range(1, 10_000))


def _entry(story: str, kind: str, key: str, text: str, valid_from: int = 1, **fields: Any) -> list[dict[str, Any]]:
    pid = f"{story}-{key}-{next(_n)}"
    return [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": story, "proposal_id": pid, "kind": kind,
             "key": key, "name": key.title(), "aliases": [], "text": text, "fields": fields, "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": story, "proposal_id": pid}]


def _book(story: str, title: str, chapters: int) -> list[dict[str, Any]]:
    return [{"type": "start_story", "command_id": f"start-{story}", "story_id": story, "title": title,
             "style_guardrails": [], "output_contract": ""},
            *({"type": "plan_chapter", "command_id": f"plan-{story}-{n}", "story_id": story, "chapter": n,
               "volume": 1, "goals": [f"Chapter {n}"]} for n in range(1, chapters + 1)),
            {"type": "add_book", "command_id": f"join-{story}", "story_id": story, "series_id": "saga"}]


def _card(story: str, chapter: int, *characters: str, threads: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "add_scene_card", "command_id": f"card-{story}-{chapter}", "story_id": story, "chapter": chapter,
            "scene_id": "a", "summary": "They meet at the ford.", "characters": list(characters), "locations": [],
            "threads": list(threads), "callbacks": [], "items": []}


def _saga() -> list[dict[str, Any]]:
    return [{"type": "start_series", "command_id": "series", "story_id": "saga", "title": "The Saga"},
            *_entry("saga", "character", "mage", "The mage of the bible."),
            *_entry("saga", "world_rule", "magic", "Magic costs memory."),
            *_entry("saga", "character", "twist", "The mage is the hero's father.", hidden_until=3,
                    hidden_until_book="b2"),
            *_book("b1", "The First", 10),
            *_entry("b1", "character", "hero", "The hero, young."),
            *_entry("b1", "character", "ally", "The ally, unscarred."),
            *_entry("b1", "character", "ally", "The ally, scarred at the ford.", valid_from=5),
            *_entry("b1", "character", "mage", "The mage as book 1 tells it.", valid_from=3),
            *_entry("b1", "thread", "quest", "Find the lost crown.", state="open"),
            {"type": "retire_canon", "command_id": "hero-dies", "story_id": "b1", "kind": "character",
             "key": "hero", "valid_from": 9, "reason": "Dies at the ford."},
            *_book("b2", "The Second", 6),
            *_entry("b2", "character", "ally", "The ally, now a queen.", valid_from=4)]


@pytest.fixture(scope="module")
def s(module_store_url: str) -> Any:
    services = bootstrap(module_store_url, embedder="hashing")
    applied(services, *_saga(), _card("b2", 2, "hero", "ally", "mage", "twist", threads=("quest",)),
            _card("b2", 3, "twist"), _card("b2", 5, "ally"), _card("b1", 2, "twist", "mage"))
    yield services
    services.close()


def _item(packet: Any, key: str, tier: str = "P1") -> Any:
    """The entry's first item in ``tier`` (a thread both tagged and active is listed twice, packed once)."""
    return [i for i in packet.items if i.key == key and i.tier == tier and i.kind != "scene_card"][0]


def test_a_book_inherits_each_entry_from_the_first_home_that_has_it(s: Any) -> None:
    packet = s.packets.packet(Request("b2", "writer", 2, scene="a"))
    ally, mage, hero = _item(packet, "ally"), _item(packet, "mage"), _item(packet, "hero")
    assert "The ally, scarred at the ford." in ally.text  # book 1 as of its last chapter
    assert ally.reason.endswith('from book 1, "The First" (b1), as of its last chapter')
    assert "The mage of the bible." in mage.text  # the bible before an earlier book
    assert mage.reason.endswith('from the series bible "The Saga" (saga)')
    assert "(retired)" in hero.reason and "Dies at the ford." in hero.text  # dead in book 1, dead in book 2
    quest = _item(packet, "quest")  # book 1's open thread is open in book 2
    assert "Find the lost crown." in quest.text and "from book 1" in quest.reason
    magic = _item(packet, "magic", "P3")
    assert "Magic costs memory." in magic.text and "series bible" in magic.reason
    # Items cite the other story's events.
    b1_positions = {p for p, e in s.ledger.event_log.read(1, 10_000) if getattr(e, "story_id", None) == "b1"}
    assert set(ally.sources) <= b1_positions and ally.sources
    assert s.auditor.audit(packet.packet_id).ok


def test_a_books_own_later_canon_overrides_for_that_book_only(s: Any) -> None:
    later = s.packets.packet(Request("b2", "writer", 5, scene="a"))
    ally = _item(later, "ally")
    assert "The ally, now a queen." in ally.text and "from" not in ally.reason
    first = s.packets.packet(Request("b1", "writer", 2, scene="a"))
    assert "The mage of the bible." in _item(first, "mage").text  # book 1's own mage starts at its chapter 3
    assert s.auditor.audit(later.packet_id).ok and s.auditor.audit(first.packet_id).ok


def test_a_bible_step_hidden_until_a_later_book_is_not_seen_before_it(s: Any) -> None:
    first = s.packets.packet(Request("b1", "writer", 2, scene="a"))
    twist = _item(first, "twist")
    assert twist.status == "dropped" and not twist.text and "not in canon" in twist.reason
    early = _item(s.packets.packet(Request("b2", "writer", 2, scene="a")), "twist")
    assert early.status == "dropped" and not early.text and "hidden until chapter 3" in early.reason
    shown = _item(s.packets.packet(Request("b2", "writer", 3, scene="a")), "twist")
    assert "The mage is the hero's father." in shown.text


def test_inherited_canon_moves_the_books_packets_and_both_audit(s: Any) -> None:
    before = s.packets.packet(Request("b2", "writer", 2, scene="a"))
    applied(s, *_entry("saga", "character", "mage", "The mage, older now."))
    after = s.packets.packet(Request("b2", "writer", 2, scene="a"))
    assert after.position > before.position and after.packet_id != before.packet_id
    assert "The mage, older now." in _item(after, "mage").text
    assert s.auditor.audit(before.packet_id).ok and s.auditor.audit(after.packet_id).ok
    travelled = s.auditor.packet_at(Request("b2", "writer", 2, scene="a", budget=before.budget), before.position)
    assert travelled.to_json() == before.to_json()


def test_the_continuity_check_uses_inherited_canon(s: Any) -> None:
    applied(s, {"type": "submit_draft", "command_id": "d-b2-3", "story_id": "b2", "chapter": 3, "draft_id": "d3",
                "text": "The Hero drew his sword and laughed at the ford."})
    report = s.continuity().check("b2", "d3").as_dict()
    (dead,) = [f for f in report["findings"] if f["entry"]["key"] == "hero"]
    assert dead["type"] == "retired" and "Dies at the ford." in dead["evidence"][0]["text"]
    b1_positions = {p for p, e in s.ledger.event_log.read(1, 10_000) if getattr(e, "story_id", None) == "b1"}
    assert dead["evidence"][0]["source"] in b1_positions
