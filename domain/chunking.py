"""Markdown or plain text -> hierarchical chunks (pure).

Parents are the heading sections; children are runs of whole paragraphs that fit a token
limit (a paragraph longer than the limit is split on sentences, then on tokens). Every child
carries its breadcrumb ("Document > Heading > Subheading") as a prefix, so it reads on its own
and its hash changes when it moves under another heading. Ids are stable under edits
elsewhere: a section is named by its heading path, a child by its place in the section.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from domain.tokens import TokenCounter

DEFAULT_MAX_TOKENS = 256
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


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


def story_collection(story_id: str) -> str:
    """The collection a story's accepted chapter text is chunked into."""
    return f"story:{story_id}"


def chapter_document(chapter: int) -> str:
    """A chapter's document id: zero-padded, so ids sort in chapter order."""
    return f"chapter-{chapter:05d}"


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
        m = None if in_fence else _HEADING.match(line)
        if m is None:
            lines.append(line)
            continue
        out.append((current, "\n".join(lines)))
        level, heading = len(m.group(1)), m.group(2)
        trail = [(lv, h) for lv, h in trail if lv < level] + [(level, heading)]
        current = (title, *(h for _, h in trail))
        lines = []
    out.append((current, "\n".join(lines)))
    return [(crumb, body) for crumb, body in out if body.strip()]


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
    whole = tokens.count(paragraph)
    if whole <= budget:
        return [(paragraph, whole)]
    out: list[tuple[str, int]] = []
    current, current_n = "", 0
    for sentence in _SENTENCE.split(paragraph):
        n = tokens.count(sentence)
        while n > budget:  # one enormous sentence: cut on tokens
            head = tokens.truncate(sentence, budget)
            if not head:
                break
            out.append((head, tokens.count(head)))
            sentence = sentence[len(head):].lstrip()
            n = tokens.count(sentence)
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
