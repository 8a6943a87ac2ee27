"""Mention-activated recall on both stores: an entry in force whose name, alias or key the
chapter's goals or a scene summary mention joins P1 with the mention in its reason; secondary
keys follow SillyTavern's four logics; always-on entries join every packet; a "never" entry
joins none; a tag wins over a mention; and every such packet audits."""

from __future__ import annotations

from typing import Any

import pytest

from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

STORY = "moby"


_n = iter(range(10**6))


def _entry(s: Any, key: str, name: str, *, aliases: tuple[str, ...] = (), kind: str = "character",
           valid_from: int = 1, fields: dict[str, Any] | None = None, text: str = "") -> None:
    n = next(_n)
    applied(s, {"type": "propose_canon", "command_id": f"p{n}", "story_id": STORY, "proposal_id": f"prop-{n}",
               "kind": kind, "key": key, "name": name, "aliases": list(aliases), "text": text or f"{name} is here.",
               "fields": fields or {}, "valid_from": valid_from},
           {"type": "confirm_canon", "command_id": f"c{n}", "story_id": STORY, "proposal_id": f"prop-{n}"})


def _chapter(s: Any, number: int, goals: list[str], scenes: dict[str, str], **tags: list[str]) -> None:
    applied(s, {"type": "plan_chapter", "command_id": f"plan-{number}-{next(_n)}", "story_id": STORY,
               "chapter": number, "volume": 1, "goals": goals},
           *({"type": "add_scene_card", "command_id": f"card-{number}-{sid}-{next(_n)}", "story_id": STORY,
              "chapter": number, "scene_id": sid, "summary": summary,
              **{t: tags.get(t, []) for t in ("characters", "locations", "threads", "callbacks", "items")}}
             for sid, summary in scenes.items()))


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    applied(services, {"type": "start_story", "command_id": "start", "story_id": STORY, "title": "Moby",
                      "style_guardrails": [], "output_contract": ""})
    yield services
    services.close()


def _items(s: Any, chapter: int, role: str = "writer") -> dict[tuple[str, str], Any]:
    packet = s.packets.packet(Request(STORY, role, chapter))
    assert s.auditor.audit(packet.packet_id).ok
    items: dict[tuple[str, str], Any] = {}
    for i in packet.items:  # the first of each: a later read's copy is listed dropped, as a duplicate
        items.setdefault((i.kind, i.key), i)
    return items


def test_a_mentioned_alias_brings_the_entry_in_with_the_mention_in_its_reason(s: Any) -> None:
    _entry(s, "queequeg", "Queequeg", aliases=("the harpooneer",))
    _entry(s, "ahab", "Captain Ahab")
    _entry(s, "starbuck", "Starbuck")
    _chapter(s, 5, ["Meet the harpooneer at the inn"], {"5a": "Ishmael shares a bed; Queequeg's tomahawk pipe."})
    items = _items(s, 5)
    queequeg = items[("character", "queequeg")]
    assert queequeg.tier == "P1" and queequeg.status == "included"
    assert queequeg.reason == 'mentioned in the chapter goals as "the harpooneer"'
    assert ("character", "ahab") not in items and ("character", "starbuck") not in items
    # whole words only: "Starbucks" is no mention of Starbuck
    _chapter(s, 6, ["Coffee at Starbucks"], {"6a": "Nobody named."})
    assert ("character", "starbuck") not in _items(s, 6)


def test_a_tag_wins_and_a_mention_never_duplicates_it(s: Any) -> None:
    _entry(s, "queequeg", "Queequeg")
    _chapter(s, 2, ["Queequeg again"], {"2a": "Queequeg carves."}, characters=["queequeg"])
    items = [i for i in s.packets.packet(Request(STORY, "writer", 2)).items if i.key == "queequeg"]
    assert [i.reason for i in items] == ["tagged characters in scene 2a"]


def test_a_mention_before_the_entry_is_in_force_or_while_it_is_hidden_brings_nothing(s: Any) -> None:
    _entry(s, "pequod", "Pequod", kind="location", valid_from=10)
    _entry(s, "white-whale", "Moby Dick", fields={"hidden_until": 20})
    _chapter(s, 3, ["Sign on to the Pequod"], {"3a": "Talk of Moby Dick."})
    assert ("location", "pequod") not in _items(s, 3)
    _chapter(s, 12, ["Aboard the Pequod"], {"12a": "Talk of Moby Dick."})
    items = _items(s, 12)
    assert items[("location", "pequod")].reason == 'mentioned in the chapter goals as "Pequod"'
    assert ("character", "white-whale") not in items  # hidden until 20: not even listed
    _chapter(s, 21, ["Chase"], {"21a": "Moby Dick breaches."})
    assert _items(s, 21)[("character", "white-whale")].reason == 'mentioned in scene 21a as "Moby Dick"'


@pytest.mark.parametrize("compiler", [5, 6, 7, 8])
def test_the_reads_by_key_fetched_together_give_the_packet_read_one_by_one(s: Any, compiler: int) -> None:
    """The tagged entries and the entries read by rule are fetched together (one round trip on
    PostgreSQL), a tagged entry's key among the mentioned ones; every prefetched result is used,
    and the packet is the bytes of one compiled read by read."""
    from canon_ledger.application.packets.replay import compile_packet

    _entry(s, "queequeg", "Queequeg")
    _entry(s, "queequeg", "Queequeg", aliases=("the harpooneer",), valid_from=3)
    _entry(s, "ahab", "Ahab")
    _entry(s, "law", "Fast-Fish", kind="world_rule", fields={"recall": {"constant": True, "tier": "P2"}})
    _chapter(s, 4, ["The harpooneer and Ahab"], {"4a": "Queequeg carves."}, characters=["queequeg"])
    request = Request(STORY, "writer", 4)
    s.packets.packet(request, record=False)  # the read models caught up
    packets = []
    for by_key in (False, True):
        s.packets.reader._kept.clear()  # read again, not answered from the reads the reader keeps
        with s.packets.reader.snapshot(STORY) as snap:
            if not by_key:
                snap.prefetch = lambda calls: None  # read by read
            packets.append(compile_packet(snap, request, s.packets.tokens, compiler=compiler))
            assert snap.unused_prefetch == 0
    plain, prefetched = packets
    assert prefetched.hash == plain.hash
    reasons = {i.key: i.reason for i in prefetched.items if i.status == "included"}
    assert reasons["queequeg"] == "tagged characters in scene 4a"
    assert reasons["ahab"] == 'mentioned in the chapter goals as "Ahab"' and reasons["law"] == "always on"


def test_a_repeated_request_reads_the_entries_it_keeps_until_the_story_moves(s: Any) -> None:
    """The reader keeps a story's reads by key at one position: the same request again runs no
    statement for them, and any event of the story (a revision here) is read at once."""
    from canon_ledger.projections import canon_view

    _entry(s, "queequeg", "Queequeg", text="Queequeg carves his idol.")
    _chapter(s, 4, ["Queequeg and the idol"], {"4a": "Yojo."})
    first = _items(s, 4)[("character", "queequeg")]
    kept = dict(s.packets.reader._kept)
    assert any(key[2] is canon_view.FirstStatements.entries_by_key for key in kept)
    again = s.packets.packet(Request(STORY, "writer", 4), record=False)
    assert s.packets.reader._kept.keys() >= kept.keys()
    assert next(i for i in again.items if i.key == "queequeg").text == first.text
    _entry(s, "queequeg", "Queequeg", text="Queequeg has burned his idol.")
    revised = _items(s, 4)[("character", "queequeg")]
    assert revised.text != first.text and "burned" in revised.text


def test_a_revised_entry_is_matched_by_the_names_of_the_step_in_force(s: Any) -> None:
    _entry(s, "ishmael", "Ishmael")
    _entry(s, "ishmael", "Ishmael", aliases=("the castaway",), valid_from=8)
    _chapter(s, 4, ["The castaway dreams"], {"4a": "Nobody named."})
    assert ("character", "ishmael") not in _items(s, 4)  # the alias is the later step's
    _chapter(s, 9, ["The castaway dreams"], {"9a": "Nobody named."})
    assert _items(s, 9)[("character", "ishmael")].reason == 'mentioned in the chapter goals as "the castaway"'


@pytest.mark.parametrize(("logic", "secondaries_found", "joins"), [
    ("and_any", 0, False), ("and_any", 1, True),
    ("and_all", 1, False), ("and_all", 2, True),
    ("not_any", 0, True), ("not_any", 1, False),
    ("not_all", 1, True), ("not_all", 2, False),
])
def test_secondary_keys_follow_the_selective_logic(s: Any, logic: str, secondaries_found: int, joins: bool) -> None:
    _entry(s, "doubloon", "Doubloon", kind="item",
           fields={"recall": {"keys": ["doubloon"], "secondary_keys": ["mast", "nail"], "logic": logic}})
    words = ["mast", "nail"][:secondaries_found]
    _chapter(s, 7, [f"The doubloon {' and '.join(words) or 'glints'}"], {"7a": "Ahab speaks."})
    assert (("item", "doubloon") in _items(s, 7)) is joins


def test_case_sensitive_and_regex_keys_from_the_rule(s: Any) -> None:
    _entry(s, "fedallah", "Fedallah",
           fields={"recall": {"keys": ["Parsee"], "case_sensitive": True}})
    _entry(s, "gam", "Gam", kind="world_rule", fields={"recall": {"keys": ["/ga+m(s)?\\b/i"]}})
    _chapter(s, 2, ["a parsee in lower case", "Two ships GAAMS"], {"2a": "Quiet."})
    items = _items(s, 2)
    assert ("character", "fedallah") not in items
    assert items[("world_rule", "gam")].reason == 'mentioned in the chapter goals as "/ga+m(s)?\\b/i"'
    _chapter(s, 3, ["The Parsee watches"], {"3a": "Quiet."})
    assert ("character", "fedallah") in _items(s, 3)


def test_an_always_on_entry_joins_every_packet_and_a_never_entry_none(s: Any) -> None:
    _entry(s, "whaling-law", "Fast-Fish and Loose-Fish", kind="world_rule",
           fields={"recall": {"constant": True, "tier": "P2"}})
    _entry(s, "secret", "Secret", fields={"recall": {"never": True}})
    _chapter(s, 1, ["The Secret is told"], {"1a": "Secret again."}, characters=["secret"])
    for role in ("writer", "planner", "qa", "chat"):
        items = _items(s, 1, role)
        assert items[("world_rule", "whaling-law")].tier == "P2", role
        assert items[("world_rule", "whaling-law")].reason == "always on", role
        assert ("character", "secret") not in items, role  # not mentioned, not tagged, not anywhere


def test_a_bad_recall_setting_is_refused_and_changes_nothing(s: Any) -> None:
    before = s.ledger.event_log.position()
    for recall in ({"logic": "maybe"}, {"keys": "x"}, {"tier": "P0"}, {"constant": "yes"}, {"colour": 1}, []):
        [r] = s.ledger.apply([parse_command({
            "type": "propose_canon", "command_id": f"bad-{next(_n)}", "story_id": STORY, "proposal_id": f"b{next(_n)}",
            "kind": "character", "key": "x", "name": "X", "aliases": [], "text": "x", "fields": {"recall": recall},
            "valid_from": 1})])
        error = r.as_dict()["error"]
        assert r.status == "rejected" and error["code"] == "recall_settings_invalid", recall
        assert error["field"] == "fields.recall"
    assert s.ledger.event_log.position() == before


def test_an_imported_lorebook_entry_is_recalled_by_its_keys(s: Any) -> None:
    from canon_ledger.application.lorebook_import import import_lorebook
    from canon_ledger.domain.lorebook import read
    from tests.shared_data import LOREBOOKS

    book = read((LOREBOOKS / "sillytavern-world-info-eldoria.json").read_bytes())
    assert import_lorebook(s.ledger, book, STORY, confirm=True).failed is None
    _chapter(s, 2, ["Into the magical forest"], {"2a": "Beasts stalk the travellers."})
    items = _items(s, 2)
    assert items[("world_rule", "eldoria")].reason == 'mentioned in the chapter goals as "magical forest"'
    assert items[("world_rule", "shadowfang")].reason == 'mentioned in scene 2a as "beasts"'
    # no key of it is mentioned: an imported entry is gated (issue 41), so not even P3's world rules list it
    assert ("world_rule", "glade") not in items
    assert "lorebook" not in items[("world_rule", "eldoria")].text  # activation settings are not canon text


@pytest.mark.parametrize("newer", [512, 0], ids=["kept-apart", "built-whole"])
def test_entries_added_after_the_matcher_was_built_are_matched(s: Any, newer: int,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader keeps a built matcher and adds the steps confirmed since as a second part (or,
    past ``LORE_NEWER`` of them, builds it whole): either way the packet is the one a fresh
    reader compiles."""
    from canon_ledger.projections import canon_view

    monkeypatch.setattr(canon_view, "LORE_NEWER", newer)
    _entry(s, "ahab", "Ahab")
    _chapter(s, 1, ["Ahab and the white whale"], {"1a": "Starbuck speaks to Fedallah."})
    assert [k for k in _items(s, 1) if k[1] in ("ahab", "starbuck", "fedallah", "law")] == [("character", "ahab")]
    _entry(s, "starbuck", "Starbuck", aliases=("the mate",))
    _entry(s, "fedallah", "Fedallah", fields={"recall": {"never": True}})
    _entry(s, "law", "Fast-Fish", kind="world_rule", fields={"recall": {"constant": True, "tier": "P2"}})
    items = _items(s, 1)
    assert items[("character", "starbuck")].reason == 'mentioned in scene 1a as "Starbuck"'
    assert ("character", "fedallah") not in items
    assert items[("world_rule", "law")].reason == "always on" and items[("world_rule", "law")].tier == "P2"
    [(_, index)] = s.packets.reader._lore.values()
    assert len(index._parts) == (2 if newer else 1)  # the path this case is about was taken
    fresh = bootstrap(s.config.url, embedder="hashing")
    try:
        request = Request(STORY, "writer", 1)
        assert fresh.packets.packet(request, record=False).hash == s.packets.packet(request, record=False).hash
    finally:
        fresh.close()
