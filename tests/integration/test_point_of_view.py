"""Who knows what (issue 43), through the read models on both stores: a scene's point of view
labels a secret its character does not know as of the chapter, and says since when of one it
knows; a packet with no point of view is compiler 7's, unchanged; the packets audit and travel in
time; the continuity check finds a character speaking a secret it does not know."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canon_ledger.application.packets.recipes import Request
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

STORY = "osk"
SECRET = "Harl is a spy paid by the Duke of Osk."
LABEL = "SECRET: the reader knows; Mira does not, as of chapter 12."


def _entry(story: str, key: str, name: str, valid_from: int, text: str, fields: dict[str, Any],
           n: int = 1) -> list[dict[str, Any]]:
    pid = f"{key}-{n}"
    return [{"type": "propose_canon", "command_id": f"p-{pid}", "story_id": story, "proposal_id": pid,
             "kind": "character", "key": key, "name": name, "aliases": [], "text": text, "fields": fields,
             "valid_from": valid_from},
            {"type": "confirm_canon", "command_id": f"c-{pid}", "story_id": story, "proposal_id": pid}]


def _card(story: str, chapter: int, scene: str, pov: str | None) -> dict[str, Any]:
    card = {"type": "add_scene_card", "command_id": f"card-{chapter}-{scene}", "story_id": story,
            "chapter": chapter, "scene_id": scene, "summary": "Mira and Harl count the harbour dues.",
            "characters": ["mira", "harl"], "locations": [], "threads": [], "callbacks": [], "items": []}
    return {**card, "pov": pov} if pov else card


def _story(story: str, secret_from: int, chapters: int) -> list[dict[str, Any]]:
    return [{"type": "start_story", "command_id": "start", "story_id": story, "title": "Osk",
             "style_guardrails": ["Past tense."], "output_contract": "Prose only."},
            *({"type": "plan_chapter", "command_id": f"plan-{n}", "story_id": story, "chapter": n, "volume": 1,
               "goals": [f"Chapter {n} at the harbour"]} for n in range(1, chapters + 1)),
            *_entry(story, "mira", "Mira", 1, "A harbour scout.", {}),
            *_entry(story, "orrin", "Orrin", 1, "A clerk.", {}),
            *_entry(story, "harl", "Harl", 1, "The steward.", {}),
            *_entry(story, "harl", "Harl", secret_from, SECRET, {"secret": True}, n=2)]


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    applied(services, *_story(STORY, 5, 12), _card(STORY, 12, "a", "mira"), _card(STORY, 12, "b", None),
           _card(STORY, 12, "c", "orrin"))
    yield services
    services.close()


def _harl(packet: Any) -> Any:
    (item,) = [i for i in packet.items if i.kind == "character" and i.key == "harl" and i.tier == "P1" and i.text]
    return item


def test_a_secret_the_point_of_view_does_not_know_is_labelled_and_one_it_knows_says_since_when(s: Any) -> None:
    for role in ("writer", "planner"):
        packet = s.packets.packet(Request(STORY, role, 12, scene="a"))
        harl = _harl(packet)
        assert harl.text.startswith(LABEL) and SECRET in harl.text and packet.compiler == 8
        assert "secret: the reader knows, Mira does not as of chapter 12" in harl.reason
        assert harl.tokens == s.packets.tokens.count(harl.text)
        assert s.auditor.audit(packet.packet_id).ok
    before = s.packets.packet(Request(STORY, "writer", 12, scene="a"))
    applied(s, {"type": "record_knowledge", "command_id": "knows", "story_id": STORY, "character": "mira",
               "kind": "character", "key": "harl", "chapter": 9, "how": "told by Orrin"})
    after = s.packets.packet(Request(STORY, "writer", 12, scene="a"))
    harl = _harl(after)
    assert not harl.text.startswith("SECRET") and SECRET in harl.text
    assert harl.reason.endswith("known to Mira since chapter 9 (told by Orrin)")
    assert s.auditor.audit(after.packet_id).ok and s.auditor.audit(before.packet_id).ok
    # Time travel: as of the packet before the knowledge, she did not know.
    travelled = s.auditor.packet_at(Request(STORY, "writer", 12, scene="a", budget=before.budget), before.position)
    assert travelled.to_json() == before.to_json()
    # Before chapter 9 she did not know it yet.
    applied(s, _card(STORY, 8, "a", "mira"))
    early = s.packets.packet(Request(STORY, "writer", 8, scene="a"))
    assert _harl(early).text.startswith("SECRET: the reader knows; Mira does not, as of chapter 8.")


def test_a_packet_without_a_point_of_view_is_unchanged(s: Any) -> None:
    for scene in ("b", None):  # no pov; the chapter's cards share none
        packet = s.packets.packet(Request(STORY, "writer", 12, scene=scene))
        assert packet.compiler == 7 and _harl(packet).text.startswith("Harl (character harl")
        assert "secret" not in _harl(packet).reason
    other = s.packets.packet(Request(STORY, "writer", 12, scene="c"))
    assert _harl(other).text.startswith("SECRET: the reader knows; Orrin does not")


def test_the_check_finds_a_character_speaking_a_secret_it_does_not_know(s: Any) -> None:
    text = 'Mira counted the coins. "Harl is a spy for the Duke of Osk," said Mira.'
    applied(s, {"type": "submit_draft", "command_id": "d", "story_id": STORY, "chapter": 12, "draft_id": "d12",
               "text": text})
    report = s.continuity().check(STORY, "d12").as_dict()
    (leak,) = [f for f in report["findings"] if f["type"] == "knowledge_leak"]
    assert leak["entry"]["key"] == "harl" and leak["span"]["text"] == '"Harl is a spy for the Duke of Osk,"'
    assert leak["evidence"][0]["text"].endswith(SECRET) or SECRET in leak["evidence"][0]["text"]
    applied(s, {"type": "record_knowledge", "command_id": "knows", "story_id": STORY, "character": "mira",
               "kind": "character", "key": "harl", "chapter": 9, "how": "told by Orrin"})
    assert not [f for f in s.continuity().check(STORY, "d12").as_dict()["findings"] if f["type"] == "knowledge_leak"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret_from=st.integers(1, 6), knows_from=st.one_of(st.none(), st.integers(1, 6)),
       chapter=st.integers(1, 6), role=st.sampled_from(["writer", "planner", "qa"]))
def test_no_packet_of_a_point_of_view_carries_unlabelled_a_secret_it_does_not_know(
        tmp_path_factory: pytest.TempPathFactory, secret_from: int, knows_from: int | None, chapter: int,
        role: str) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('pov')}/canon.db"
    services = bootstrap(url, embedder="hashing")
    try:
        commands = [*_story(STORY, secret_from, 6), _card(STORY, chapter, "a", "mira")]
        if knows_from is not None and knows_from >= secret_from:
            commands.append({"type": "record_knowledge", "command_id": "knows", "story_id": STORY,
                             "character": "mira", "kind": "character", "key": "harl", "chapter": knows_from,
                             "how": "overheard"})
        applied(services, *commands)
        packet = services.packets.packet(Request(STORY, role, chapter, scene="a"))
        knows = knows_from is not None and secret_from <= knows_from <= chapter
        for item in packet.items:
            if SECRET in item.text and item.status != "dropped":
                assert knows or item.text.startswith("SECRET: the reader knows; Mira does not"), item
                assert not knows or not item.text.startswith("SECRET"), item
        assert services.auditor.audit(packet.packet_id).ok
    finally:
        services.close()
