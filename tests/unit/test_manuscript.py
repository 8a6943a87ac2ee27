"""Splitting a manuscript into volumes and chapters (``domain.manuscript``): pure, no store."""

from __future__ import annotations


import pytest

from canon_ledger.domain.manuscript import CHAPTER, VOLUME, ManuscriptError, pattern, split

from tests.shared_data import WAR_AND_PEACE


def test_war_and_peace_has_365_chapters_in_17_volumes() -> None:
    book = split(WAR_AND_PEACE.read_text(encoding="utf-8"))
    assert len(book.chapters) == 365
    assert [v.number for v in book.volumes] == list(range(1, 18))
    assert book.volumes[0].heading == "BOOK ONE: 1805" and book.volumes[0].title == "1805"
    assert [v.heading for v in book.volumes[-2:]] == ["FIRST EPILOGUE: 1813 - 20", "SECOND EPILOGUE"]
    assert [c.number for c in book.chapters] == list(range(1, 366))  # numbered in reading order
    assert book.chapters[0].heading == "CHAPTER I" and book.chapters[0].text.startswith('"Well, Prince, so Genoa')
    first_of_book_two = next(c for c in book.chapters if c.volume == 2)
    assert first_of_book_two.heading == "CHAPTER I" and first_of_book_two.number == 29  # headings restart per book
    assert all(c.words > 100 for c in book.chapters)


def test_numbered_and_titled_headings_split_right() -> None:
    text = ("My Book\n\nA dedication, not a chapter.\n\nCHAPTER 1. The Harbour\n\nIlse saw the ship.\n\n"
            "CHAPTER 2. Lamps\n\nThe lamps went out.\nChapter 3 was never written, she said.\n\n"
            "CHAPTER 3. Dawn\n\nMorning.\n")
    book = split(text)
    assert [(c.number, c.title) for c in book.chapters] == [(1, "The Harbour"), (2, "Lamps"), (3, "Dawn")]
    assert book.front_matter == "My Book\n\nA dedication, not a chapter."
    assert "Chapter 3 was never written" in book.chapters[1].text  # inside a paragraph: prose, not a heading
    assert book.chapters[0].text == "Ilse saw the ship."


def test_plain_chapter_n_headings_and_markdown_volumes() -> None:
    text = "# Book 1\n\n## Chapter 1\n\none two\n\n## Chapter 2\n\nthree\n\n# Book 2\n\nChapter 1\n\nfour five six\n"
    book = split(text)
    assert [(c.number, c.volume, c.words) for c in book.chapters] == [(1, 1, 2), (2, 1, 1), (3, 2, 3)]
    assert [v.heading for v in book.volumes] == ["# Book 1", "# Book 2"]


@pytest.mark.parametrize("line", ["# Chapter 3", "CHAPTER 3. Title", "Chapter III", "Chapter Three",
                                  "Chapter Twenty-One: The End", "chapter 12 - Rain"])
def test_chapter_headings(line: str) -> None:
    assert CHAPTER.fullmatch(line) and not VOLUME.fullmatch(line)


@pytest.mark.parametrize("line", ["BOOK ONE", "BOOK ONE: 1805", "Part 2", "VOLUME I", "# Book 1", "FIRST EPILOGUE",
                                  "Epilogue"])
def test_volume_headings(line: str) -> None:
    assert VOLUME.fullmatch(line) and not CHAPTER.fullmatch(line)


@pytest.mark.parametrize("line", ["Chapter and verse", "Part of the problem was the rain.", "Booking a room"])
def test_prose_is_not_a_heading(line: str) -> None:
    assert not CHAPTER.fullmatch(line) and not VOLUME.fullmatch(line)


def test_a_pattern_of_ones_own() -> None:
    book = split("* 1 *\nalpha\n\n* 2 *\nbeta\n", chapter=pattern(r"\* (\d+) \*", CHAPTER, "chapter"))
    assert [c.text for c in book.chapters] == ["alpha", "beta"]


def test_refusals_name_the_problem() -> None:
    with pytest.raises(ManuscriptError) as e:
        split("Just some prose.\n\nMore prose.\n")
    assert e.value.code == "no_chapters"
    with pytest.raises(ManuscriptError) as e:
        pattern("(unclosed", CHAPTER, "chapter")
    assert e.value.code == "invalid_pattern"
