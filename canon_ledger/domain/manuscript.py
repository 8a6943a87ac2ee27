"""A manuscript's structure: volumes and chapters found from their heading lines (pure).

A heading is a line of its own (Markdown ``#`` marks allowed) that stands apart: a blank line
(or the start) before it, and after it a blank line or the end, unless it is short (at most
60 characters) and its text follows at once. A longer line that begins like a heading but
runs on into its paragraph (``BOOK I. (Folio), CHAPTER I. (Sperm Whale).-This whale, among
the`` wrapped at 70 columns) is prose. Chapter headings: ``Chapter 3``, ``CHAPTER 3. Title``, ``Chapter III``,
``Chapter Three: Title``, ``# Chapter 3 - Title``. Volume headings: ``BOOK ONE``, ``BOOK ONE:
1805``, ``Part 2``, ``VOLUME I``, ``# Book 1``. Either kind can be overridden with a regular
expression matched against the whole stripped line (its first group, if any, is the title).

A volume heading counts only when a chapter heading comes after it before the next volume
heading; otherwise it is prose, kept where it stands. ``Prologue``, ``Epilogue``,
``Afterword``, ``Postscript`` and ``Interlude`` (``FIRST EPILOGUE``, ``Epilogue: Title``) head
a volume when a chapter heading follows at once (War and Peace's epilogues hold chapters), are
the title of a chapter whose heading comes just before (Moby-Dick's ``CHAPTER 25`` /
``Postscript``), and are a chapter of their own otherwise (Moby-Dick's ``Epilogue``), numbered
in reading order like any other.

Invariants: chapters are numbered 1, 2, 3, ... in reading order whatever their headings say
(War and Peace restarts ``CHAPTER I`` in every book); a volume holds the chapters after its
heading; text before the first heading that counts is front matter, never a chapter, and
only that; the text between a volume heading and its first chapter opens that chapter; so
every line of the file that is not a heading is in the front matter or in exactly one chapter
(``body_lines`` says which lines those are; leading and trailing blank lines of a part aside).
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
    rf"#{{0,6}}\s*(?:book|part|volume)\s+(?:{_NUMBER}|{_ORDINAL})(?:{_SEP}(?P<title>.*?))?\s*[.:]?", re.I)
# A part that heads a volume when chapters follow it at once, and is a chapter of its own otherwise.
FLEXIBLE = re.compile(
    rf"#{{0,6}}\s*(?:(?:{_ORDINAL})\s+)?(?:prologue|epilogue|afterword|postscript|interlude)"
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


def _stands_apart(lines: list[str], i: int) -> bool:
    """Line ``i`` (a blank line before it, or the first) is set apart as a heading is: a blank
    line or the end after it, or it is short enough (at most half of ``MAX_HEADING``) to be a
    heading that its text follows at once (``## Chapter 1`` then the prose). A longer line that
    runs on into the next is the first line of a wrapped paragraph."""
    after = lines[i + 1] if i + 1 < len(lines) else ""
    return not after.strip() or len(lines[i].strip()) <= MAX_HEADING // 2


def _headings(lines: list[str], chapter: re.Pattern[str], volume: re.Pattern[str]) -> dict[int, tuple[str, str]]:
    """Line index -> ("chapter" | "volume", title) for each heading that counts."""
    found: list[tuple[int, str, str]] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or len(stripped) > MAX_HEADING or (i > 0 and lines[i - 1].strip()):
            continue
        for kind, heading in (("chapter", chapter), ("volume", volume), ("flexible", FLEXIBLE)):
            if (m := heading.fullmatch(stripped)) is not None:
                # A user's own pattern is taken as written; the built-in ones want the line apart.
                if heading not in (CHAPTER, VOLUME, FLEXIBLE) or _stands_apart(lines, i):
                    found.append((i, kind, _title(m)))
                break
    # A prologue or epilogue heads a volume when a chapter heading follows with only blank lines
    # between; otherwise it is a chapter.
    kinds: list[tuple[int, str, str]] = []
    for n, (i, kind, title) in enumerate(found):
        if kind == "flexible":
            before = found[n - 1] if n else None
            if before is not None and before[1] == "chapter" and not any(l.strip() for l in lines[before[0] + 1:i]):
                continue  # the title of the chapter just opened (``CHAPTER 25`` then ``Postscript``): its text
            nxt = found[n + 1] if n + 1 < len(found) else None
            at_once = nxt is not None and nxt[1] == "chapter" and not any(l.strip() for l in lines[i + 1:nxt[0]])
            kind = "volume" if at_once else "chapter"
        kinds.append((i, kind, title))
    # A volume heading counts only when a chapter comes after it before the next volume heading.
    counted: dict[int, tuple[str, str]] = {}
    for n, (i, kind, title) in enumerate(kinds):
        if kind == "volume":
            following = next((k for _, k, _ in kinds[n + 1:] if k in ("chapter", "volume")), None)
            if following != "chapter":
                continue
        counted[i] = (kind, title)
    return counted


def split(text: str, *, chapter: re.Pattern[str] = CHAPTER, volume: re.Pattern[str] = VOLUME) -> Manuscript:
    """The manuscript's volumes and chapters (``ManuscriptError`` if it has no chapter heading)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headings = _headings(lines, chapter, volume)
    out = Manuscript(front_matter="")
    body: list[str] = []
    current: tuple[str, str] | None = None  # the open chapter's heading and title
    preface: list[str] = []  # text after a volume heading, before its first chapter: opens that chapter
    volume_no = 0
    pending_volume = False  # a volume heading seen, no chapter yet in it

    def close() -> None:
        nonlocal body
        chunk = "\n".join(body).strip("\n")
        if current is None:
            if pending_volume:
                preface.extend(body)
            elif chunk:
                out.front_matter = (out.front_matter + "\n" + chunk).strip("\n")
        else:
            out.chapters.append(Chapter(len(out.chapters) + 1, max(volume_no, 1), current[0], current[1], chunk))
        body = []

    for i, line in enumerate(lines):
        heading = headings.get(i)
        if heading is None:
            body.append(line)
            continue
        kind, title = heading
        close()
        stripped = line.strip()
        if kind == "chapter":
            if volume_no == 0:
                volume_no = 1
                out.volumes.append(Volume(1, "", ""))
            pending_volume = False
            current = (stripped, title)
            body, preface[:] = list(preface), []
            while body and not body[0].strip():
                body.pop(0)
        else:
            if pending_volume and out.volumes:  # two volume headings in a row: the later names it
                out.volumes[-1] = Volume(out.volumes[-1].number, stripped, title)
            else:
                volume_no += 1
                out.volumes.append(Volume(volume_no, stripped, title))
            pending_volume = True
            current = None
    close()
    if not out.chapters:
        raise ManuscriptError("no_chapters", "no chapter heading found (expected lines such as `Chapter 1`, "
                              "`CHAPTER I.`, `# Chapter Three: Title`; or pass --chapter-pattern)")
    out.volumes = [v for v in out.volumes if any(c.volume == v.number for c in out.chapters)]
    return out


def body_lines(text: str, *, chapter: re.Pattern[str] = CHAPTER, volume: re.Pattern[str] = VOLUME) -> list[str]:
    """Every line of ``text`` that is not a heading that counts, in order: what the front matter
    and the chapters of ``split(text)`` hold between them."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headings = _headings(lines, chapter, volume)
    return [line for i, line in enumerate(lines) if i not in headings]


def _title(m: re.Match[str]) -> str:
    groups = m.groupdict()
    if "title" in groups:
        return (groups["title"] or "").strip().rstrip(".:").strip()
    return (m.group(1) or "").strip() if m.re.groups else ""
