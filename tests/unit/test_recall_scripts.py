"""Keys across scripts (issue 41): ``domain.recall``'s word boundaries and the story's matcher
(``projections.lore_index``) under both rules. ``spaceless=False`` is the rule packets 1-6 were
compiled with (kept for their replay); ``spaceless=True`` is SillyTavern's: a key with no ASCII
letter or digit (Chinese, Japanese, Thai, Korean) matches as a substring, and a neighbour in a
script without spaces is a word boundary."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canon_ledger.domain.recall import Rule, found, spaceless_key, unspaced, word_character
from canon_ledger.projections.lore_index import LoreIndex


def _row(key: str, *keys: str, rule: Rule | None = None) -> Any:
    recall = rule or Rule(keys or (key,))
    return SimpleNamespace(kind="world_rule", key=key, step=1, valid_from=1, name=key, aliases=[],
                           recall=recall.as_dict())


def _found(index: LoreIndex, text: str, spaceless: bool) -> dict[str, str]:
    return {m.key: m.said for m in index.match([("scene 1a", text)], spaceless=spaceless)}


# The Chinese world info: four entries the chapter goals and the scene name.
CHINESE = LoreIndex([_row("mirror", "先灵之镜"), _row("light", "圣光"), _row("staff", "守护者法杖"),
                     _row("corruption", "腐化"), _row("abyss", "深渊")])
GOALS = "艾莉娅在镜湖边找到了先灵之镜，圣光开始闪烁。"
SCENE = "她举起守护者法杖，腐化正在蔓延。"


def test_chinese_keys_are_found_inside_chinese_text_only_with_the_spaceless_rule() -> None:
    texts = [("the chapter goals", GOALS), ("scene 1a", SCENE)]
    assert CHINESE.match(texts) == []  # today's rule: no word boundary in Chinese, no match
    assert CHINESE.match(texts, spaceless=False) == []
    mentions = CHINESE.match(texts, spaceless=True)
    assert [(m.key, m.where, m.said) for m in mentions] == [
        ("corruption", "scene 1a", "腐化"), ("light", "the chapter goals", "圣光"),
        ("mirror", "the chapter goals", "先灵之镜"), ("staff", "scene 1a", "守护者法杖")]


def test_japanese_keys_in_kana_and_kanji() -> None:
    index = LoreIndex([_row("alice", "アリス"), _row("stone", "魔法石"), _row("tokyo", "東京")])
    text = "アリスは東京で魔法石を見つけた。"
    assert _found(index, text, False) == {}
    assert _found(index, text, True) == {"alice": "アリス", "stone": "魔法石", "tokyo": "東京"}


def test_korean_keys_match_with_their_particles_attached() -> None:
    """Korean spaces its words but attaches particles (이/가/을/를/은/는/의) to the noun:
    SillyTavern's ``\\W`` is ASCII-only, so it finds ``엘리아`` in ``엘리아가``; so does the
    spaceless rule. The old rule finds the key only when it stands alone."""
    index = LoreIndex([_row("elia", "엘리아"), _row("sword", "성검"), _row("lake", "거울 호수")])
    text = "엘리아가 성검을 들고 거울 호수의 물을 보았다."
    assert _found(index, text, True) == {"elia": "엘리아", "sword": "성검", "lake": "거울 호수"}
    assert _found(index, text, False) == {}  # every key has a particle after it: no whole word
    assert _found(index, "엘리아 왔다", False) == {"elia": "엘리아"}  # alone between spaces: both rules


def test_thai_keys() -> None:
    index = LoreIndex([_row("bangkok", "กรุงเทพ")])
    assert _found(index, "ฉันไปกรุงเทพเมื่อวาน", True) == {"bangkok": "กรุงเทพ"}
    assert _found(index, "ฉันไปกรุงเทพเมื่อวาน", False) == {}


def test_keys_with_ascii_letters_stay_whole_words() -> None:
    index = LoreIndex([_row("cat", "cat"), _row("gpt", "GPT"), _row("ai", "Ai酱")])
    for spaceless in (False, True):
        assert _found(index, "cats and a catégorie; concatenate", spaceless) == {}
        assert _found(index, "the cat, sat", spaceless) == {"cat": "cat"}
    # beside a script without spaces, a Latin key stands apart under the new rule only
    assert _found(index, "用GPT模型写了小Ai酱的故事", True) == {"gpt": "GPT", "ai": "Ai酱"}
    assert _found(index, "用GPT模型写了小Ai酱的故事", False) == {}
    assert _found(index, "GPT가 말했다", True) == {"gpt": "GPT"}
    assert _found(index, "ChatGPT模型", True) == {}  # an ASCII letter before it is still part of the word


def test_case_is_folded_by_unicode_rules() -> None:
    index = LoreIndex([_row("street", "STRASSE"), _row("sisyphus", "ΣΊΣΥΦΟΣ"),
                       _row("exact", rule=Rule(("Moby",), case_sensitive=True))])
    for spaceless in (False, True):
        assert _found(index, "die Straße und Σίσυφος, moby", spaceless) == {"street": "STRASSE",
                                                                            "sisyphus": "ΣΊΣΥΦΟΣ"}


def test_secondary_keys_and_part_words_in_cjk() -> None:
    index = LoreIndex([_row("both", rule=Rule(("圣光",), ("夜晚", "风暴"), "and_all")),
                       _row("none", rule=Rule(("圣光",), ("风暴",), "not_any")),
                       _row("part", rule=Rule(("光",), whole_words=False))])
    assert _found(index, "夜晚的风暴中，圣光闪烁", True) == {"both": "圣光", "part": "光"}
    assert _found(index, "圣光闪烁", True) == {"none": "圣光", "part": "光"}
    assert _found(index, "圣光闪烁", False) == {"part": "光"}  # a part-word key matched before too


def test_the_domain_s_word_rule() -> None:
    assert spaceless_key("圣光") and spaceless_key("엘리아") and spaceless_key("Наташа") and spaceless_key("１２")
    assert not spaceless_key("Ai酱") and not spaceless_key("2049年") and not spaceless_key("Pávlovna")
    assert unspaced("圣") and unspaced("ア") and unspaced("가") and unspaced("ก") and unspaced("𠀀")
    assert not unspaced("a") and not unspaced("é") and not unspaced("Ж")
    assert word_character("圣") and not word_character("圣", spaceless=True)
    assert word_character("é", spaceless=True) and word_character("_", spaceless=True)
    assert found("圣光", "开始圣光闪烁", 2, 4, spaceless=True) and not found("圣光", "开始圣光闪烁", 2, 4)
    assert found("光", "圣光闪", 1, 2, whole_words=False)


@given(st.characters())
def test_the_old_rule_s_word_characters_are_unchanged(ch: str) -> None:
    assert word_character(ch) == (ch.isalnum() or ch == "_")  # what packets 1-6 were matched with


_CJK = st.one_of(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK ideographs
                 st.characters(min_codepoint=0x3041, max_codepoint=0x3096),  # hiragana
                 st.characters(min_codepoint=0x30A1, max_codepoint=0x30FA),  # katakana
                 st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3))  # Hangul syllables


@settings(max_examples=150, deadline=None)
@given(key=st.text(_CJK, min_size=1, max_size=6), before=st.text(_CJK, max_size=12),
       after=st.text(_CJK, max_size=12))
def test_a_cjk_key_is_always_found_between_cjk_characters(key: str, before: str, after: str) -> None:
    index = LoreIndex([_row("entry", key)])
    assert [m.key for m in index.match([("scene 1a", before + key + after)], spaceless=True)] == ["entry"]
    assert found(key, before + key + after, len(before), len(before) + len(key), spaceless=True)


@pytest.mark.parametrize("text", ["the captain's log", "Captain Ahab", "captains", "sea-captain"])
def test_english_matches_the_same_under_both_rules(text: str) -> None:
    index = LoreIndex([_row("captain", "captain"), _row("ahab", "Ahab")])
    assert _found(index, text, True) == _found(index, text, False)
