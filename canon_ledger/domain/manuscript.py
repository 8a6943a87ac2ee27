"""A manuscript's structure: volumes and chapters found from their heading lines (pure).

A heading is a line of its own (Markdown ``#`` marks allowed). Chapter headings: ``Chapter 3``,
``CHAPTER 3. Title``, ``Chapter III``, ``Chapter Three: Title``, ``# Chapter 3 - Title``.
Volume headings: ``BOOK ONE``, ``BOOK ONE: 1805``, ``Part 2``, ``VOLUME I``, ``# Book 1``, and
epilogues (``FIRST EPILOGUE``, ``Epilogue``). Either kind can be overridden with a regular
expression matched against the whole stripped line (its first group, if any, is the title).

Invariants: chapters are numbered 1, 2, 3, ... in reading order whatever their headings say
(War and Peace restarts ``CHAPTER I`` in every book); a volume holds the chapters after its
heading; text before the first chapter heading is front matter, never a chapter; every
character of a chapter's body is kept (trailing blank lines aside).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
          "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth").split()
_WORD = "|".join(sorted({*_UNITS[1:], *_TENS, "hundred"}, key=len, reverse=True))
_NUMBER = rf"(?:\d{{1,7}}|[IVXLCDM]+|(?:{_WORD})(?:[-\s](?:{_WORD}))*)"
_SEP = r"(?:\s*[.:\-\u2013\u2014]\s*|\s+)"
MAX_HEADING = 120  # characters: a longer line is prose, whatever it starts with

CHAPTER = re.compile(rf"#{{0,6}}\s*chapter\s+(?P<n>{_NUMBER})(?:{_SEP}(?P<title>.*?))?\s*[.:]?", re.I)
_ORDINAL = "|".join(_ORDINALS)
VOLUME = re.compile(
    rf"#{{0,6}}\s*(?:(?:book|part|volume)\s+(?:{_NUMBER}|{_ORDINAL})|(?:(?:{_ORDINAL})\s+)?epilogue)"
    rf"(?:{_SEP}(?P<title>.*?))?\s*[.:]?", re.I)


class ManuscriptError(ValueError):
    """The manuscript cannot be split as asked (no chapter found, a pattern that does not compile)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Chapter:
    number: int  # 1, 2, 3, ... in reading order
    volume: int
    heading: str  # the heading line as written
    title: str
    text: str

    @property
    def words(self) -> int:
        return len(self.text.split())


@dataclass(frozen=True)
class Volume:
    number: int
    heading: str
    title: str


@dataclass
class Manuscript:
    front_matter: str
    volumes: list[Volume] = field(default_factory=list)
    chapters: list[Chapter] = field(default_factory=list)

    def structure(self) -> dict[str, object]:
        """What ``--dry-run`` prints: volumes with their chapters, titles and word counts."""
        return {
            "front_matter_words": len(self.front_matter.split()),
            "volumes": [{"volume": v.number, "heading": v.heading, "title": v.title,
                         "chapters": [c.number for c in self.chapters if c.volume == v.number]}
                        for v in self.volumes],
            "chapters": [{"chapter": c.number, "volume": c.volume, "heading": c.heading, "title": c.title,
                          "words": c.words} for c in self.chapters],
            "words": sum(c.words for c in self.chapters),
        }


def pattern(text: str | None, default: re.Pattern[str], what: str) -> re.Pattern[str]:
    """A user's heading pattern, compiled (case-insensitive), or ``default``."""
    if text is None:
        return default
    try:
        return re.compile(text, re.I)
    except re.error as e:
        raise ManuscriptError("invalid_pattern", f"the {what} pattern does not compile: {e}") from None


def split(text: str, *, chapter: re.Pattern[str] = CHAPTER, volume: re.Pattern[str] = VOLUME) -> Manuscript:
    """The manuscript's volumes and chapters (``ManuscriptError`` if it has no chapter heading)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out = Manuscript(front_matter="")
    body: list[str] = []
    current: tuple[str, str] | None = None  # the open chapter's heading and title
    volume_no = 0
    pending_volume = False  # a volume heading seen, no chapter yet in it

    def close() -> None:
        nonlocal body
        chunk = "\n".join(body).strip("\n")
        if current is None:
            out.front_matter = (out.front_matter + "\n" + chunk).strip("\n") if chunk else out.front_matter
        else:
            out.chapters.append(Chapter(len(out.chapters) + 1, max(volume_no, 1), current[0], current[1], chunk))
        body = []

    previous = ""
    for line in lines:
        stripped, after = line.strip(), previous
        previous = stripped
        # A heading stands apart: after a blank line (or first); a line inside a paragraph that
        # happens to begin "Chapter 3 ..." is prose.
        if stripped and not after and len(stripped) <= MAX_HEADING:
            if (m := chapter.fullmatch(stripped)) is not None:
                close()
                if volume_no == 0:
                    volume_no = 1
                    out.volumes.append(Volume(1, "", ""))
                pending_volume = False
                current = (stripped, _title(m))
                continue
            if (m := volume.fullmatch(stripped)) is not None:
                close()
                if pending_volume and out.volumes:  # two volume headings in a row: the later names it
                    out.volumes[-1] = Volume(out.volumes[-1].number, stripped, _title(m))
                else:
                    volume_no += 1
                    out.volumes.append(Volume(volume_no, stripped, _title(m)))
                pending_volume = True
                current = None
                continue
        body.append(line)
    close()
    if not out.chapters:
        raise ManuscriptError("no_chapters", "no chapter heading found (expected lines such as `Chapter 1`, "
                              "`CHAPTER I.`, `# Chapter Three: Title`; or pass --chapter-pattern)")
    out.volumes = [v for v in out.volumes if any(c.volume == v.number for c in out.chapters)]
    return out


def _title(m: re.Match[str]) -> str:
    groups = m.groupdict()
    if "title" in groups:
        return (groups["title"] or "").strip().rstrip(".:").strip()
    return (m.group(1) or "").strip() if m.re.groups else ""
