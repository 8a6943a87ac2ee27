"""Splitting a manuscript into volumes and chapters (``domain.manuscript``): pure, no store."""

from __future__ import annotations


import pytest

from canon_ledger.domain.manuscript import CHAPTER, FLEXIBLE, VOLUME, ManuscriptError, body_lines, pattern, split

from tests.shared_data import MOBY_DICK, PRIDE_AND_PREJUDICE, WAR_AND_PEACE, read_book


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


@pytest.mark.parametrize("line", ["BOOK ONE", "BOOK ONE: 1805", "Part 2", "VOLUME I", "# Book 1"])
def test_volume_headings(line: str) -> None:
    assert VOLUME.fullmatch(line) and not CHAPTER.fullmatch(line)


@pytest.mark.parametrize("line", ["FIRST EPILOGUE", "Epilogue", "PROLOGUE", "Afterword: Ten Years On", "Interlude",
                                  "# Postscript"])
def test_parts_that_head_a_volume_or_are_a_chapter(line: str) -> None:
    assert FLEXIBLE.fullmatch(line) and not CHAPTER.fullmatch(line) and not VOLUME.fullmatch(line)


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


def _kept_words(text: str) -> tuple[list[str], list[str]]:
    """The words ``split`` keeps (front matter, then each chapter) and the words of the file
    once its heading lines are taken out."""
    book = split(text)
    kept = book.front_matter.split() + [w for c in book.chapters for w in c.text.split()]
    return kept, " ".join(body_lines(text)).split()


@pytest.mark.parametrize("path", [WAR_AND_PEACE, MOBY_DICK, PRIDE_AND_PREJUDICE], ids=lambda p: p.name)
@pytest.mark.parametrize("ends", ["lf", "crlf"])
def test_a_real_book_loses_no_word(path, ends: str) -> None:
    text = read_book(path).replace("\r\n", "\n")
    if ends == "crlf":
        text = text.replace("\n", "\r\n")
    kept, wanted = _kept_words(text)
    assert kept == wanted
    # What was taken out are heading lines only, one per chapter and counted volume.
    book = split(text)
    lines = text.replace("\r\n", "\n").split("\n")
    removed = len(lines) - len(body_lines(text))
    assert removed == len(book.chapters) + sum(1 for v in book.volumes if v.heading)
    assert len(text.split()) - len(kept) == sum(len(c.heading.split()) for c in book.chapters) + sum(
        len(v.heading.split()) for v in book.volumes)


def test_moby_dick_keeps_its_epilogue_and_the_cetology_chapter_whole() -> None:
    book = split(read_book(MOBY_DICK))
    assert len(book.chapters) == 136 and [v.number for v in book.volumes] == [1]
    epilogue = book.chapters[-1]
    assert epilogue.heading == "Epilogue" and epilogue.number == 136 and "The drama's done" in epilogue.text
    cetology = book.chapters[31]
    assert cetology.heading == "CHAPTER 32" and cetology.words > 5000
    assert "BOOK I. (Folio), CHAPTER I. (Sperm Whale).—This whale" in cetology.text  # a wrapped paragraph: prose
    postscript = book.chapters[24]  # `CHAPTER 25` then its title line `Postscript`: one chapter
    assert postscript.heading == "CHAPTER 25" and postscript.text.startswith("Postscript") and postscript.words > 200
    assert len(book.front_matter.split()) < 200  # the Gutenberg header only: nothing after chapter 1


def test_pride_and_prejudice_is_61_chapters_with_no_front_matter() -> None:
    book = split(read_book(PRIDE_AND_PREJUDICE))
    assert len(book.chapters) == 61 and book.front_matter == ""
    assert book.chapters[0].text.startswith("It is a truth universally acknowledged")


def test_volume_headings_count_only_with_chapters_under_them_and_keep_their_preface() -> None:
    text = ("PROLOGUE\n\nThe lamps were older than the town.\n\n"
            "PART ONE: The River\n\nAn epigraph, kept.\n\nChapter 1\n\nIlse woke.\n\n"
            "Part Two\n\nNot a volume: no chapter comes before the next volume heading.\n\n"
            "PART THREE\n\nChapter 2\n\nOskar left.\n\n"
            "Epilogue\n\nYears later, the river ran clear.\n")
    book = split(text)
    assert [(c.number, c.heading, c.volume) for c in book.chapters] == [
        (1, "PROLOGUE", 1), (2, "Chapter 1", 2), (3, "Chapter 2", 3), (4, "Epilogue", 3)]
    assert [v.heading for v in book.volumes] == ["", "PART ONE: The River", "PART THREE"]
    assert book.chapters[1].text.startswith("An epigraph, kept.\n") and "\nIlse woke." in book.chapters[1].text
    assert "Part Two\n\nNot a volume" in book.chapters[1].text  # prose, where it stands
    assert book.chapters[3].text == "Years later, the river ran clear."
    assert book.front_matter == ""
    kept, wanted = _kept_words(text)
    assert kept == wanted


def test_a_heading_that_runs_on_into_its_paragraph_is_prose() -> None:
    text = ("Chapter 1\n\nIt began.\n\nBOOK I. (_Folio_), CHAPTER I. (_Sperm Whale_).—This whale, well known\n"
            "to the Southern mariner, is the largest.\n\nChapter 2\n\nIt ended.\n")
    book = split(text)
    assert [c.heading for c in book.chapters] == ["Chapter 1", "Chapter 2"] and len(book.volumes) == 1
    assert "This whale, well known" in book.chapters[0].text
