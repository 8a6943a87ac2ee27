"""The extractive summariser (``domain.summary``): the text's own sentences, in order, within the
budget, never empty for a chapter with text; English, Chinese, one sentence, CRLF, a real book."""

from __future__ import annotations

import re

from canon_ledger.domain import summary as s
from canon_ledger.domain.manuscript import split
from canon_ledger.infrastructure.cli import summarize as cli_summarize
from tests.shared_data import PRIDE_AND_PREJUDICE, read_book

ENGLISH = """Mr. Darcy rode to Netherfield at dawn. The house was silent and the lamps were out.

"Where is Bingley?" he asked. Nobody answered him.

Mrs. Bennet had written three letters to Netherfield that week, each about the ball. Darcy read
them in the hall, one after another, and put them in his coat.

It rained. Darcy left Netherfield before noon, and the letters went with him to London."""

CHINESE = ("林黛玉进了荣国府。她步步留心，时时在意，不肯轻易多说一句话！贾母见了黛玉，一把搂入怀中，心肝儿肉叫着大哭起来。\n\n"
           "众人都哭了。王熙凤笑道：“天下真有这样标致的人物！”黛玉忙起身见礼。贾宝玉看见黛玉，笑道：“这个妹妹我曾见过的。”"
           "贾母笑道：“又胡说了。”宝玉又问黛玉：“可有玉没有？”黛玉答道：“我没有那个。”宝玉摘下那玉，就狠命摔去。")


def _in_order(summary: str, text: str) -> bool:
    """``summary`` is sentences of ``text``, in the text's order, joined."""
    found = s.sentences(text)
    rest, at = summary, 0
    while rest:
        nxt = next((i for i in range(at, len(found)) if rest.startswith(found[i])), None)
        if nxt is None:
            return False
        rest, at = rest[len(found[nxt]):].lstrip(), nxt + 1
    return True


def test_an_english_chapter_gives_its_own_sentences_in_order_within_the_budget() -> None:
    summary = s.summarise(ENGLISH, 40)
    assert summary and s.length(summary) <= 40
    assert _in_order(summary, ENGLISH)
    assert summary.startswith("Mr. Darcy rode to Netherfield at dawn.")  # the opening, its "Mr." no sentence end
    assert "Darcy" in summary and "Netherfield" in summary
    assert s.summarise(ENGLISH, 40) == summary  # the same text, the same summary
    assert s.summarise(ENGLISH) == s.summarise(ENGLISH, s.CHAPTER_WORDS)


def test_sentences_end_at_marks_not_at_abbreviations_initials_or_a_lowercase_word() -> None:
    assert s.sentences('Mr. Darcy met J. R. Smith at St. Paul\'s. "Stop!" he cried. Then it was over.') == [
        "Mr. Darcy met J. R. Smith at St. Paul's.", '"Stop!" he cried.', "Then it was over."]
    assert s.sentences("No end here") == ["No end here"]
    assert s.sentences("Wait... What? Yes!") == ["Wait...", "What?", "Yes!"]


def test_a_chinese_chapter_is_split_on_its_marks_and_counted_by_characters() -> None:
    found = s.sentences(CHINESE)
    assert found[:3] == ["林黛玉进了荣国府。", "她步步留心，时时在意，不肯轻易多说一句话！", "贾母见了黛玉，一把搂入怀中，心肝儿肉叫着大哭起来。"]
    assert "王熙凤笑道：“天下真有这样标致的人物！”" in found
    summary = s.summarise(CHINESE, 30)  # 30 words: 60 CJK characters
    assert summary and s.length(summary) <= 30 and len(summary) <= 60
    assert " " not in summary  # CJK sentences are joined with no space
    assert _in_order(summary, CHINESE)
    assert "黛玉" in summary
    assert s.length("林黛玉进了荣国府。") == 4.5  # nine CJK characters (the 。 included), half a word each


def test_a_one_sentence_chapter_is_its_own_summary_and_a_long_one_is_cut() -> None:
    assert s.summarise("Fog on the river.") == "Fog on the river."
    assert s.summarise("Fog") == "Fog"
    long = " ".join(f"word{n}" for n in range(500)) + "."
    cut = s.summarise(long, 20)
    assert cut == " ".join(f"word{n}" for n in range(20)) + "…"
    assert s.summarise("雾" * 100 + "。", 10) == "雾" * 20 + "…"
    assert len(s.summarise("x" * 100_000, 10)) <= 10 * s.CHARS_PER_WORD  # one enormous "word" is capped
    assert s.summarise("") == "" and s.summarise(" \r\n\t\u3000\n") == ""


def test_crlf_cr_and_lf_give_the_same_summary() -> None:
    lf = s.summarise(ENGLISH, 40)
    assert s.summarise(ENGLISH.replace("\n", "\r\n"), 40) == lf
    assert s.summarise(ENGLISH.replace("\n", "\r"), 40) == lf
    assert s.paragraphs("one\r\ntwo\r\n\r\nthree") == ["one two", "three"]
    assert s.paragraphs("林黛玉\r\n进了荣国府。") == ["林黛玉进了荣国府。"]  # no space where CJK meets CJK


def test_a_volume_summary_comes_from_its_chapters_summaries() -> None:
    chapters = ["Ilse woke at dawn. Oskar had gone.", "Oskar left the city by the river gate.",
                "Ilse followed the silt upriver to the old post."]
    volume = s.summarise_volume(chapters, 15)
    assert volume and s.length(volume) <= 15 and _in_order(volume, "\n\n".join(chapters))
    writer = s.ExtractiveSummariser()
    assert writer.summarise_volume("T", 1, list(enumerate(chapters, 1))) == s.summarise_volume(chapters)
    assert writer.summarise_chapter("T", 1, ENGLISH) == s.summarise(ENGLISH)
    assert (writer.name, writer.uses_quota) == (s.METHOD, False)


def test_every_chapter_of_a_real_book_gets_a_summary_within_the_budget() -> None:
    book = split(read_book(PRIDE_AND_PREJUDICE))
    for chapter in book.chapters:
        summary = s.summarise(chapter.text)
        assert summary, chapter.number
        assert s.length(summary) <= s.CHAPTER_WORDS, chapter.number
        assert _in_order(summary, chapter.text), chapter.number
    assert not re.search(r"\bMr\.$", s.summarise(book.chapters[0].text).split(" ", 1)[0])


def test_the_cli_help_states_the_method_and_budgets_of_the_module() -> None:
    assert (cli_summarize.METHOD, cli_summarize.CHAPTER_WORDS, cli_summarize.VOLUME_WORDS) == (
        s.METHOD, s.CHAPTER_WORDS, s.VOLUME_WORDS)
