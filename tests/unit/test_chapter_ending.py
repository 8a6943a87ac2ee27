"""The end of the previous chapter a packet carries (compiler 7's P2): ``render.ending``."""

from __future__ import annotations

import pytest

from canon_ledger.application.packets.compiler import L1_MAX_HITS, L1_MIN_HITS, l1_hits
from canon_ledger.application.packets.render import ending
from canon_ledger.infrastructure.tokenizer import token_counter

TOKENS = token_counter()
PROSE = " ".join(f"Sentence {n} is here, and it says a little more than the last one did." for n in range(400))


def test_a_short_chapter_comes_whole() -> None:
    assert ending(4, "Short. Two.", 800, TOKENS) == "Chapter 4 ending:\nShort. Two."


@pytest.mark.parametrize("room", [24, 33, 100, 401, 800])
def test_a_long_chapter_ends_with_whole_sentences_within_the_room(room: int) -> None:
    text = ending(9, PROSE, room, TOKENS)
    assert TOKENS.count(text) <= room
    head, _, tail = text.partition("\n… ")
    assert head == "Chapter 9 ending:" and PROSE.endswith(tail) and tail.startswith("Sentence ")
    longer = PROSE[:-len(tail)].rstrip().rpartition(". ")[2]  # the sentence before it did not fit
    assert TOKENS.count(f"{head}\n… {longer}. {tail}") > room


def test_one_sentence_longer_than_the_room_is_cut_at_a_space_or_a_character() -> None:
    words = ending(2, " ".join(["word"] * 5000), 100, TOKENS)
    assert TOKENS.count(words) <= 100 and words.endswith("word word") and "… word" in words
    han = ending(2, "他走了很远很远" * 800, 60, TOKENS)
    assert TOKENS.count(han) <= 60 and han.endswith("很远很远") and len(han) > 30


def test_chinese_sentences_end_at_their_own_punctuation() -> None:
    text = ending(3, "黛玉笑道：你来了。" * 300 + "宝玉不答。", 50, TOKENS)
    assert TOKENS.count(text) <= 50 and text.partition("… ")[2].startswith("黛玉笑道") and text.endswith("宝玉不答。")


def test_no_room_gives_nothing() -> None:
    assert ending(2, PROSE, 3, TOKENS) == ""


def test_l1_asks_for_what_the_room_can_hold_within_its_bounds() -> None:
    assert l1_hits(0) == l1_hits(500) == L1_MIN_HITS
    assert l1_hits(9_000) == min(L1_MAX_HITS, 71)
    assert l1_hits(2_000) == 16 and l1_hits(10**9) == L1_MAX_HITS


def test_an_ending_starts_where_the_summarizer_s_sentences_do() -> None:
    """One sentence rule (``domain.summary.sentence_starts``): "Mr. Darcy" and a lowercase word
    after "!" are no sentence start, a wrapped line is none either; a blank line is one."""
    text = ('Elizabeth laughed. "Oh!" said she, and Mr.\nDarcy smiled at her sister.\n\nThe end came '
            'with the carriage.')
    tails = {ending(1, text, room, TOKENS).partition("… ")[2] for room in range(13, 31)}
    assert tails == {'"Oh!" said she, and Mr.\nDarcy smiled at her sister.\n\nThe end came with the carriage.',
                     "The end came with the carriage."}
