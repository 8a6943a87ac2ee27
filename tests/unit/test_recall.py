"""Recall rules (``domain.recall``) from each source of settings, and the story's mention matcher
(``projections.lore_index``) over them: keys, secondary logic, case, whole words, regex keys."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from canon_ledger.domain.errors import RuleViolated
from canon_ledger.domain.recall import LOGICS, Rule, check, regex_key, rule
from canon_ledger.projections.lore_index import LoreIndex


def test_an_entry_without_settings_has_the_default_rule() -> None:
    assert rule("Queequeg", ["the harpooneer"], {"mood": "calm"}) is None


def test_sillytavern_settings_are_read_as_the_format_writes_them() -> None:
    entry = {"key": ["Eldoria", "forest"], "keysecondary": ["night"], "selective": True, "selectiveLogic": 3,
             "caseSensitive": True, "matchWholeWords": False, "constant": True}
    r = rule("eldoria", [], {"lorebook": {"format": "sillytavern", "entry": entry}})
    assert r == Rule(("Eldoria", "forest"), ("night",), "and_all", True, False, True, False, "P1", gated=True)
    entry |= {"order": 250, "ignoreBudget": True}  # its place in a budget, and SillyTavern's "ignore budget"
    r = rule("eldoria", [], {"lorebook": {"format": "sillytavern", "entry": entry}})
    assert r is not None and (r.gated, r.order, r.ignore_budget) == (True, 250.0, True)


def test_a_sillytavern_entry_with_a_zero_trigger_chance_is_never_included() -> None:
    entry = {"key": ["x"], "useProbability": True, "probability": 0}
    assert rule("x", [], {"lorebook": {"format": "sillytavern", "entry": entry}}).never  # type: ignore[union-attr]
    entry["probability"] = 40  # a chance: recalled when mentioned (no dice in a packet: packets are deterministic)
    assert not rule("x", [], {"lorebook": {"format": "sillytavern", "entry": entry}}).never  # type: ignore[union-attr]


def test_ccv3_settings_and_their_sillytavern_extensions() -> None:
    entry = {"keys": ["Seraphina"], "secondary_keys": ["glade", "forest"], "selective": True, "use_regex": True,
             "extensions": {"selectiveLogic": 2, "match_whole_words": False, "case_sensitive": True}}
    r = rule("seraphina", [], {"lorebook": {"format": "lorebook_v3", "entry": entry}})
    assert r == Rule(("/Seraphina/",), ("glade", "forest"), "not_any", True, False, False, False, "P1", gated=True)
    entry["selective"] = False  # not selective: secondary keys do not count
    assert rule("s", [], {"lorebook": {"format": "chara_card_v2", "entry": entry}}).secondary == ()  # type: ignore[union-attr]


def test_novelai_force_activation_is_always_on() -> None:
    entry = {"keys": ["Kingdom"], "forceActivation": True}
    r = rule("kingdom", [], {"lorebook": {"format": "novelai", "entry": entry}})
    assert r is not None and r.constant and r.keys == ("Kingdom",)


def test_malformed_imported_settings_fall_back_to_defaults() -> None:
    entry = {"key": "a, b ,", "selectiveLogic": 9, "caseSensitive": "yes", "constant": 1}
    r = rule("x", [], {"lorebook": {"format": "sillytavern", "entry": entry}})
    assert r == Rule(("a", "b"), gated=True)


def test_the_author_s_settings_override_an_import_s() -> None:
    lore = {"format": "sillytavern", "entry": {"key": ["forest"], "constant": True}}
    r = rule("eldoria", ["wood"], {"lorebook": lore, "recall": {"constant": False, "tier": "P3"}})
    assert r == Rule(("forest",), tier="P3", gated=True)  # imported: gated (issue 41) unless the author says
    r = rule("eldoria", ["wood"], {"lorebook": lore, "recall": {"gated": False, "order": 7}})
    assert r is not None and (r.gated, r.order) == (False, 7.0)
    r = rule("eldoria", ["wood"], {"recall": {"secondary_keys": ["night"], "logic": "not_all"}})
    assert r == Rule(("eldoria", "wood"), ("night",), "not_all")
    assert rule("eldoria", [], {"recall": {"gated": True}}) == Rule(("eldoria",), gated=True)  # any entry may be gated
    for bad in ({"gated": "yes"}, {"order": "high"}, {"order": 1e12}, {"ignore_budget": 1}):
        with pytest.raises(RuleViolated):
            check(bad)


@pytest.mark.parametrize(("logic", "found", "selected"), [
    ("and_any", 0, False), ("and_any", 1, True), ("not_all", 1, True), ("not_all", 2, False),
    ("not_any", 0, True), ("not_any", 1, False), ("and_all", 1, False), ("and_all", 2, True)])
def test_secondary_logic(logic: str, found: int, selected: bool) -> None:
    assert Rule(("k",), ("a", "b"), logic).selected(found) is selected
    assert Rule(("k",), (), logic).selected(0)  # no secondary keys: a primary match is enough


def test_regex_keys() -> None:
    assert regex_key("plain", False) is None
    pattern = regex_key("/ahab('s)?/", False)
    assert pattern is not None and pattern.search("AHAB'S leg")
    case = regex_key("/Ahab/", True)
    assert case is not None and not case.search("ahab")
    assert regex_key("/(unclosed/", False) is None  # matched as written instead


@pytest.mark.parametrize("recall", [
    "always", {"keys": "Ahab"}, {"keys": [""]}, {"keys": ["x" * 401]}, {"logic": "or"}, {"tier": "P0"},
    {"constant": "yes"}, {"colour": "red"}, {"keys": ["k"] * 201}])
def test_bad_author_settings_are_named(recall: Any) -> None:
    with pytest.raises(RuleViolated) as e:
        check(recall)
    assert e.value.code == "recall_settings_invalid" and e.value.field == "fields.recall"


def test_good_author_settings_pass() -> None:
    check({"keys": ["Ahab"], "secondary_keys": ["leg"], "logic": LOGICS[2], "tier": "P4", "never": False})


def _row(kind: str, key: str, name: str, aliases: list[str], recall: Rule | None, step: int = 1,
         valid_from: int = 1) -> Any:
    return SimpleNamespace(kind=kind, key=key, step=step, valid_from=valid_from, name=name, aliases=aliases,
                           recall=recall.as_dict() if recall else None)


def test_the_matcher_finds_whole_words_in_any_case_and_names_the_first_text() -> None:
    index = LoreIndex([_row("character", "ahab", "Ahab", ["the captain"], None),
                       _row("item", "leg", "Ivory leg", ["leg"], None),
                       _row("location", "pequod", "Pequod", [], None)])
    found = index.match([("the chapter goals", "Meet THE CAPTAIN."), ("scene 1a", "Ahab's ivory leg; legacy")])
    assert [(m.key, m.where, m.said) for m in found] == [
        ("ahab", "the chapter goals", "the captain"), ("leg", "scene 1a", "Ivory leg")]


def test_the_steps_of_an_entry_sharing_a_rule_are_matched_once_and_each_step_mentioned() -> None:
    """Revisions that keep an entry's name and aliases share one rule in the matcher; ``mentions``
    names the entries mentioned and builds a step's mention when asked, as ``match`` lists it."""
    rows = [_row("character", "ahab", "Ahab", ["the captain"], None, step, 5 * step) for step in (1, 2, 3)]
    rows += [_row("character", "ahab", "Captain Ahab", [], None, 4, 20), _row("item", "leg", "Ivory leg", [], None)]
    index = LoreIndex(rows)
    [part] = index._parts
    assert len(part.rules) == 3  # ahab's first name and aliases, its later name, the leg
    texts = [("the chapter goals", "The captain waits."), ("scene 1a", "Captain Ahab and his ivory leg.")]
    mentions = index.mentions(texts)
    assert mentions.entries == {("character", "ahab"), ("item", "leg")}
    assert [mentions.of(m.kind, m.key, m.step) for m in index.match(texts)] == index.match(texts)
    assert [(m.step, m.where, m.said) for m in index.match(texts) if m.key == "ahab"] == [
        (1, "the chapter goals", "the captain"), (2, "the chapter goals", "the captain"),
        (3, "the chapter goals", "the captain"), (4, "scene 1a", "Captain Ahab")]
    assert mentions.of("character", "ahab", 9) is None and mentions.of("item", "leg", 2) is None
    # by a chapter: the entries with a mentioned step in effect then (ahab's first step: chapter 5)
    assert mentions.by(4) == {("item", "leg")} and mentions.by(5) == mentions.entries
    assert index.mentions(list(texts)) is mentions  # the same texts: the search is kept
    assert index.mentions(texts[:1]).entries == {("character", "ahab")}


def test_the_matcher_applies_case_part_words_regexes_and_secondary_logic() -> None:
    index = LoreIndex([
        _row("a", "exact", "x", [], Rule(("Moby",), case_sensitive=True)),
        _row("a", "part", "x", [], Rule(("whal",), whole_words=False)),
        _row("a", "regex", "x", [], Rule(("/ship(s|wreck)/",))),
        _row("a", "both", "x", [], Rule(("sea",), ("storm", "night"), "and_all")),
        _row("a", "none", "x", [], Rule(("sea",), ("storm",), "not_any")),
        _row("a", "never", "x", [], Rule(("sea",), never=True)),
        _row("a", "always", "x", [], Rule(("zzz",), constant=True, tier="P2"))])
    said = {m.key: m.said for m in index.match([("scene 1a", "moby whales; the shipwreck at sea, a storm by night")])}
    assert said == {"part": "whal", "regex": "/ship(s|wreck)/", "both": "sea"}
    assert {m.key for m in index.match([("scene 1a", "Moby at sea")])} == {"exact", "none"}
    assert index.never == {("a", "never", 1)}
    assert [(a.key, a.tier) for a in index.constant] == [("always", "P2")]
