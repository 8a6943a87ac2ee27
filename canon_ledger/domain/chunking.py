"""Markdown or plain text -> hierarchical chunks (pure).

Parents are the heading sections; children are runs of whole paragraphs that fit a token
limit (a paragraph longer than the limit is split on sentences, then on tokens). Every child
carries its breadcrumb ("Document > Heading > Subheading") as a prefix, so it reads on its own
and its hash changes when it moves under another heading. Ids are stable under edits
elsewhere: a section is named by its heading path, a child by its place in the section.
Time is linear in the text's length: a sentence longer than the limit is cut on tokens a window
at a time (``_cut``), giving the same parts a whole-sentence loop (quadratic) would give.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from canon_ledger.domain.tokens import TokenCounter

DEFAULT_MAX_TOKENS = 256
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _punctuation() -> str:
    """A character class of the punctuation (Unicode category P*) of the scripts that write it
    between words, except the apostrophe (``'s`` continues a word in some encodings)."""
    ranges = ((0x21, 0x2E7F), (0x3000, 0x303F), (0xFE10, 0xFE6F), (0xFF00, 0xFFEF))
    chars = (chr(c) for lo, hi in ranges for c in range(lo, hi + 1))
    return "".join(re.escape(c) for c in chars if c != "'" and unicodedata.category(c).startswith("P"))


# Where a prefix of a sentence tokenizes as the start of the sentence (``TokenCounter``): at a
# space after a non-space, and before punctuation that follows a letter or a digit.
_PUNCTUATION = _punctuation()
_CUT_POINT = re.compile(rf"[ {_PUNCTUATION}](?:(?<=\S )|(?<=[^\W_][{_PUNCTUATION}]))")
_CUT_HORIZON = 8192  # characters searched for a cut point past one head's worth
_COUNT_WHOLE = 16384  # characters of a paragraph or sentence counted in one piece


@dataclass(frozen=True)
class Section:
    section_id: str
    breadcrumb: tuple[str, ...]


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    section_id: str
    ordinal: int
    text: str  # breadcrumb prefix + body
    hash: str

    def as_dict(self) -> dict[str, object]:
        return {"chunk_id": self.chunk_id, "section_id": self.section_id, "ordinal": self.ordinal,
                "text": self.text, "hash": self.hash}


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def slug(text: str) -> str:
    s = re.sub(r"[^\w]+", "-", text.casefold(), flags=re.UNICODE).strip("-")
    return s[:60] or "section"


def chunk_document(doc_key: str, title: str, text: str, tokens: TokenCounter,
                   max_tokens: int = DEFAULT_MAX_TOKENS) -> tuple[list[Section], list[Chunk]]:
    """``doc_key`` prefixes every id (``collection/document``)."""
    sections: list[Section] = []
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for breadcrumb, body in _sections(title, text):
        path = "/".join(slug(b) for b in breadcrumb[1:]) or "_"
        seen[path] = seen.get(path, 0) + 1
        if seen[path] > 1:
            path = f"{path}~{seen[path]}"
        section_id = f"{doc_key}#{path}"
        sections.append(Section(section_id, breadcrumb))
        prefix = " > ".join(breadcrumb)
        budget = max(16, max_tokens - tokens.count(prefix) - 2)
        for n, piece in enumerate(_pack(_paragraphs(body), budget, tokens)):
            full = f"{prefix}\n\n{piece}"
            chunks.append(Chunk(f"{section_id}/{n}", section_id, n, full, content_hash(full)))
    return sections, chunks


STORY_COLLECTION = "story:"  # a story's own collection is story:<id>; a collection named otherwise is shared


def story_collection(story_id: str) -> str:
    """The collection a story's accepted chapter text is chunked into."""
    return f"{STORY_COLLECTION}{story_id}"


def collection_story(collection: str) -> str | None:
    """The story a knowledge collection belongs to (``story:<id>``: its accepted chapters and
    whatever is ingested there), or None for a shared collection (any other name)."""
    return collection[len(STORY_COLLECTION):] if collection.startswith(STORY_COLLECTION) else None


CHAPTER_DOCUMENT = "chapter-"


def chapter_document(chapter: int) -> str:
    """A chapter's document id: zero-padded, so ids of chapters below 100,000 sort in chapter
    order (``document_chapter`` reads the number back, whatever its width)."""
    return f"{CHAPTER_DOCUMENT}{chapter:05d}"


def document_chapter(document: str | None) -> int | None:
    """The chapter whose document ``document`` is (``chapter_document``), or None for another."""
    if document is None or not document.startswith(CHAPTER_DOCUMENT):
        return None
    number = document[len(CHAPTER_DOCUMENT):]
    return int(number) if number.isascii() and number.isdigit() else None


@dataclass(frozen=True)
class ChapterChunks:
    collection: str
    document_id: str
    title: str
    sections: list[Section]
    chunks: list[Chunk]


def chunk_chapter(story_id: str, chapter: int, text: str, tokens: TokenCounter) -> ChapterChunks:
    """An accepted chapter's text as chunks: the knowledge and retrieval projections and the
    audit's replay must agree on every id, so they all chunk through here."""
    collection, document_id, title = story_collection(story_id), chapter_document(chapter), f"Chapter {chapter}"
    sections, chunks = chunk_document(f"{collection}/{document_id}", title, text, tokens)
    return ChapterChunks(collection, document_id, title, sections, chunks)


def _sections(title: str, text: str) -> list[tuple[tuple[str, ...], str]]:
    out: list[tuple[tuple[str, ...], str]] = []
    trail: list[tuple[int, str]] = []
    lines: list[str] = []
    current: tuple[str, ...] = (title,)
    in_fence = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        found = None if in_fence else _heading(line)
        if found is None:
            lines.append(line)
            continue
        out.append((current, "\n".join(lines)))
        level, heading = found
        trail = [(lv, h) for lv, h in trail if lv < level] + [(level, heading)]
        current = (title, *(h for _, h in trail))
        lines = []
    out.append((current, "\n".join(lines)))
    return [(crumb, body) for crumb, body in out if body.strip()]


def _heading(line: str) -> tuple[int, str] | None:
    """A Markdown heading line's level and text: what ``^(#{1,6})\\s+(.+?)\\s*#*\\s*$`` matches
    (level = its first group's length, text = its second group), in one pass. That regex
    backtracks over a run of spaces inside the line in cubic time (2,000 spaces: 6 s)."""
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or level == len(line) or not line[level].isspace():
        return None
    start = len(line) - len(line[level:].lstrip())  # the text starts after all the spaces...
    if start == len(line):  # ...unless there is none: the last space is the text
        return (level, line[-1]) if len(line) - level >= 2 else None
    stop = len(line.rstrip().rstrip("#").rstrip())  # closing hashes and spaces are not the text
    return level, line[start:max(start + 1, stop)]


def normalize_body(body: str) -> str:
    """A chunk body as the chunker writes it: paragraphs with single spaces, blank-line separated."""
    return "\n\n".join(_paragraphs(body))


def _paragraphs(body: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", body) if p.strip()]


def _pack(paragraphs: list[str], budget: int, tokens: TokenCounter) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for para in paragraphs:
        for part, n in _fit(para, budget, tokens):
            if current and size + n > budget:
                pieces.append("\n\n".join(current))
                current, size = [], 0
            current.append(part)
            size += n
    if current:
        pieces.append("\n\n".join(current))
    return pieces


def _fit(paragraph: str, budget: int, tokens: TokenCounter) -> list[tuple[str, int]]:
    """The paragraph in parts within ``budget``, each with its token count (counted once)."""
    whole = _fits(paragraph, budget, tokens)
    if whole is not None:
        return [(paragraph, whole)]
    out: list[tuple[str, int]] = []
    current, current_n = "", 0
    for sentence in _SENTENCE.split(paragraph):
        n = _fits(sentence, budget, tokens)
        if n is None:  # one enormous sentence: cut on tokens
            sentence, n = _cut(sentence, budget, tokens, out)
        candidate = f"{current} {sentence}".strip()
        candidate_n = tokens.count(candidate) if current else n if candidate == sentence else tokens.count(candidate)
        if current and candidate_n > budget:
            out.append((current, current_n))
            current, current_n = sentence, n
        else:
            current, current_n = candidate, candidate_n
    if current:
        out.append((current, current_n))
    return out


def _fits(text: str, budget: int, tokens: TokenCounter) -> int | None:
    """``count(text)`` if it is at most ``budget``, else None. A text longer than
    ``_COUNT_WHOLE`` characters is first read a window at a time (``_head``): counting it whole
    costs more than linear time when it is one long pre-tokenizer piece."""
    if len(text) > _COUNT_WHOLE and _head(text, 0, 4 * (budget + 1), budget, tokens) is not None:
        return None
    n = tokens.count(text)
    return n if n <= budget else None


def _cut(sentence: str, budget: int, tokens: TokenCounter, out: list[tuple[str, int]]) -> tuple[str, int]:
    """Cuts heads of ``budget`` tokens off a sentence of more than ``budget`` tokens into ``out``
    and returns what is left with its count. The parts are those of the loop

        while count(sentence) > budget:
            head = truncate(sentence, budget)
            if not head: break
            out.append((head, count(head)))
            sentence = sentence[len(head):].lstrip()

    but each step reads a window of the rest a little longer than one head, not the whole rest
    (which made that loop quadratic in the sentence's length); see ``_head``."""
    pos, end = 0, len(sentence)
    span = 4 * (budget + 1)  # characters for more than ``budget`` tokens; then learnt from each head
    while True:
        head = _head(sentence, pos, span, budget, tokens)
        if not head:  # the rest fits (None), or not even one character of it does ("")
            rest = sentence[pos:]
            return rest, tokens.count(rest)
        out.append((head, tokens.count(head)))
        pos += len(head)
        while pos < end and sentence[pos].isspace():  # str.lstrip()
            pos += 1
        span = len(head) + len(head) // 4 + 16


def _head(sentence: str, pos: int, span: int, budget: int, tokens: TokenCounter) -> str | None:
    """``truncate(sentence[pos:], budget)``, None if that is the whole rest, read from a window
    of about ``span`` characters. The window ends at a cut point (``_CUT_POINT``), where its
    tokens are the first tokens of the rest (``TokenCounter``), so it truncates as the rest
    does; a window whose ``budget`` tokens are all of it grows. Where no cut point follows
    within ``_CUT_HORIZON`` characters (one pre-tokenizer piece: a 100 KB "word"), see
    ``_stable_head``."""
    end = len(sentence)
    while True:
        stop = pos + span
        if stop >= end:
            return _truncated(sentence[pos:], budget, tokens)
        m = _CUT_POINT.search(sentence, stop, min(end, stop + _CUT_HORIZON))
        if m is None:
            return _stable_head(sentence, pos, span, budget, tokens)
        head = _truncated(sentence[pos:m.start()], budget, tokens)
        if head is not None:
            return head
        span = 2 * (m.start() - pos)


def _stable_head(sentence: str, pos: int, span: int, budget: int, tokens: TokenCounter) -> str | None:
    """No cut point near: the head of the first window (``span`` characters, doubling) that has
    more than ``budget`` tokens and truncates as the window twice its length does; the rest's
    own head once a window reaches the end. Exact as long as the tokens of a piece do not
    depend on characters more than one window away (BPE merges are local)."""
    end = len(sentence)
    head = _truncated(sentence[pos:pos + span], budget, tokens)
    while True:
        if pos + 2 * span >= end:
            return _truncated(sentence[pos:], budget, tokens)
        longer = _truncated(sentence[pos:pos + 2 * span], budget, tokens)
        if head is not None and head == longer:
            return head
        head, span = longer, 2 * span


def _truncated(text: str, budget: int, tokens: TokenCounter) -> str | None:
    """``text``'s first ``budget`` tokens, or None if that is all of it."""
    head = tokens.truncate(text, budget)
    return None if head == text else head
