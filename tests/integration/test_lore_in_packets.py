"""Issue 41 on both stores: imported lorebooks behave like lorebooks in packets (compiler 7).

An imported entry joins a packet only as its rule brings it in (a key mentioned, its secondary
logic satisfied, or always-on), never through P3's wholesale world rules; keys in Chinese and
Japanese are found inside text without spaces; mentioned and always-on entries share the
budget in their source's order, under the story's lore cap (``set_lore_cap``), and every one of
them is itemized; an "ignore budget" entry stays outside the cap. Compiler 6's packets replay as
they were issued."""

from __future__ import annotations

import json
from typing import Any

import pytest

from canon_ledger.application.lorebook_import import import_lorebook
from canon_ledger.application.packets import replay
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.commands import parse_command
from canon_ledger.domain.lorebook import read
from canon_ledger.infrastructure.bootstrap import bootstrap
from tests.helpers import applied

STORY = "lore"
FILLER = "The old words are long and the lore of the land is deep. " * 40  # ~500 tokens


def _st(uid: int, keys: list[str], content: str, **extra: Any) -> dict[str, Any]:
    return {"uid": uid, "key": keys, "keysecondary": [], "comment": keys[0] if keys else f"entry {uid}",
            "content": content, "constant": False, "selective": False, "selectiveLogic": 0, "order": 100,
            "disable": False, **extra}


def _import(s: Any, entries: list[dict[str, Any]]) -> None:
    book = read(json.dumps({"entries": {str(e["uid"]): e for e in entries}}).encode())
    report = import_lorebook(s.ledger, book, STORY, confirm=True, new_story=True, title="Lore")
    assert report.failed is None and not report.refused


def _plan(s: Any, chapter: int, goals: list[str], scene: str = "") -> None:
    applied(s, {"type": "plan_chapter", "command_id": f"plan-{chapter}", "story_id": STORY, "chapter": chapter,
               "volume": 1, "goals": goals},
           *([{"type": "add_scene_card", "command_id": f"card-{chapter}", "story_id": STORY, "chapter": chapter,
               "scene_id": f"{chapter}a", "summary": scene, "characters": [], "locations": [], "threads": [],
               "callbacks": [], "items": []}] if scene else []))


@pytest.fixture
def s(store_url: str) -> Any:
    services = bootstrap(store_url, embedder="hashing")
    yield services
    services.close()


def _packet(s: Any, chapter: int, budget: int | None = None) -> Any:
    packet = s.packets.packet(Request(STORY, "writer", chapter, budget=budget))
    assert s.auditor.audit(packet.packet_id).ok
    return packet


def _lore(packet: Any) -> dict[str, Any]:
    return {i.key: i for i in packet.items if i.kind == "world_rule"}


def test_only_what_its_rule_brings_in_enters_a_packet(s: Any) -> None:
    _import(s, [_st(0, ["gryphon"], "Gryphons nest on cliffs."), _st(1, ["kraken"], "Krakens sleep deep."),
                _st(2, ["harbor"], "The harbor never freezes.", keysecondary=["winter"], selective=True),
                _st(3, ["sky"], "The sky is green.", constant=True),
                *(_st(10 + n, [f"beast{n}"], f"Beast {n}.") for n in range(20))])
    _plan(s, 1, ["A gryphon over the harbor"], "The harbor in spring.")
    lore = _lore(_packet(s, 1))
    assert set(lore) == {"gryphon", "sky"}, sorted(lore)  # not the harbor: its AND-ANY "winter" is absent
    assert lore["gryphon"].reason == 'mentioned in the chapter goals as "gryphon"' and lore["sky"].reason == "always on"
    _plan(s, 2, ["The harbor in winter"])
    assert set(_lore(_packet(s, 2))) == {"harbor", "sky"}
    # A world rule written by hand keeps today's behaviour: P3 lists it wholesale.
    applied(s, {"type": "propose_canon", "command_id": "own", "story_id": STORY, "proposal_id": "own", "kind": "world_rule",
               "key": "tides", "name": "Tides", "aliases": [], "text": "Two tides a day.", "fields": {}, "valid_from": 1},
           {"type": "confirm_canon", "command_id": "own-c", "story_id": STORY, "proposal_id": "own"})
    assert _lore(_packet(s, 2))["tides"].tier == "P3"
    # Compiler 6 listed every imported entry as a world rule: a packet it issued replays so.
    with s.packets.reader.snapshot() as snap:
        six = replay.compile_packet(snap, Request(STORY, "writer", 1), s.packets.tokens, None, compiler=6)
    assert {"kraken", "beast0", "harbor"} <= set(_lore(six))


def test_chinese_and_japanese_keys_are_found_inside_their_text(s: Any) -> None:
    _import(s, [_st(0, ["先灵之镜"], "镜湖之镜。"), _st(1, ["圣光"], "圣光之力。"), _st(2, ["守护者法杖"], "法杖。"),
                _st(3, ["腐化"], "黑暗的腐化。"), _st(4, ["魔王"], "不在场。"), _st(5, ["月の剣"], "月の力。")])
    _plan(s, 1, ["艾莉娅在镜湖边找到了先灵之镜，圣光开始闪烁。"], "她举起守护者法杖，腐化正在蔓延。月の剣が光った。")
    lore = _lore(_packet(s, 1))
    assert set(lore) == {"先灵之镜", "圣光", "守护者法杖", "腐化", "月の剣"}, sorted(lore)
    assert lore["圣光"].reason == 'mentioned in the chapter goals as "圣光"'
    with s.packets.reader.snapshot() as snap:  # compiler 6 found none of them: whole words only
        six = replay.compile_packet(snap, Request(STORY, "writer", 1), s.packets.tokens, None, compiler=6)
    assert not [i for i in six.items if i.reason.startswith("mentioned")]


def test_lore_shares_the_budget_in_its_order_under_the_story_s_cap(s: Any) -> None:
    _import(s, [*(_st(n, [f"law{n}"], f"Law {n}. {FILLER}", constant=True, order=10 * (n + 1)) for n in range(8)),
                _st(20, ["dragon"], f"Dragons. {FILLER}", order=55),
                _st(21, ["oath"], "The oath binds.", constant=True, order=1, ignoreBudget=True)])
    _plan(s, 1, ["The dragon wakes"])
    before = s.ledger.event_log.position()
    applied(s, {"type": "set_lore_cap", "command_id": "cap", "story_id": STORY, "share": 25})
    assert s.ledger.event_log.position() > before
    packet = _packet(s, 1, budget=4000)  # the cap: 1,000 tokens, two entries of ~500
    lore = [i for i in packet.items if i.kind == "world_rule"]
    # higher order first: law7 (80), law6 (70), law5 (60), the dragon (55), law4 (50) ... law0 (10), the oath (1)
    assert [i.key for i in lore] == ["law7", "law6", "law5", "dragon", "law4", "law3", "law2", "law1", "law0", "oath"]
    kept = [i for i in lore if i.status != "dropped"]
    assert sum(i.tokens for i in kept if i.key != "oath") <= 1000 and [i.key for i in kept][:2] == ["law7", "law6"]
    dragon = next(i for i in lore if i.key == "dragon")
    assert dragon.status in ("dropped", "trimmed") and "lore cap 1000" in dragon.reason, dragon.reason
    assert dragon.reason.endswith('(mentioned in the chapter goals as "dragon")')
    oath = next(i for i in lore if i.key == "oath")  # ignore budget: kept outside the cap
    assert oath.status == "included" and "outside the lore cap" in oath.reason
    assert packet.used_tokens < 0.5 * packet.budget  # the cap left the rest for the scene
    # No cap: the same entries fill the budget in the same order.
    applied(s, {"type": "set_lore_cap", "command_id": "uncap", "story_id": STORY, "share": None})
    uncapped = [i for i in _packet(s, 1, budget=4000).items if i.kind == "world_rule" and i.status != "dropped"]
    assert [i.key for i in uncapped][:4] == ["law7", "law6", "law5", "dragon"] and len(uncapped) >= 6


def test_a_lore_cap_out_of_bounds_is_refused_and_changes_nothing(s: Any) -> None:
    from canon_ledger.domain.errors import InvalidCommand

    _import(s, [_st(0, ["gryphon"], "Gryphons.")])
    before = s.ledger.event_log.position()
    for share in (0, 101, 10**30, -5, "25", 2.5, True):
        with pytest.raises(InvalidCommand) as refused:
            parse_command({"type": "set_lore_cap", "command_id": "bad", "story_id": STORY, "share": share})
        assert refused.value.field == "share", share
    [unknown] = s.ledger.apply([parse_command({"type": "set_lore_cap", "command_id": "u", "story_id": "nope",
                                               "share": 10})])
    assert unknown.status == "rejected" and unknown.as_dict()["error"]["code"] == "unknown_story"
    assert s.ledger.event_log.position() == before


def test_at_equal_order_the_scene_s_own_lore_comes_before_the_always_on(s: Any) -> None:
    """The 947-entry world info of issue 41: large always-on entries of the default order must
    not push out, under a cap, the entries the scene names."""
    _import(s, [*(_st(n, [f"law{n}"], f"Law {n}. {FILLER}", constant=True) for n in range(4)),
                _st(9, ["dragon"], f"Dragons. {FILLER}")])
    _plan(s, 1, ["The dragon wakes"])
    applied(s, {"type": "set_lore_cap", "command_id": "cap", "story_id": STORY, "share": 15})
    lore = [i for i in _packet(s, 1, budget=4000).items if i.kind == "world_rule"]
    assert [i.key for i in lore] == ["dragon", "law0", "law1", "law2", "law3"]
    assert lore[0].status in ("included", "trimmed") and all(i.status == "dropped" for i in lore[2:])
