"""The no-cost default: an extractive page writer and a deterministic hashing embedder.
No network, no quota, the same output for the same input."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

from canon_ledger.application.knowledge.compile import chunk_bodies
from canon_ledger.application.knowledge.ports import ChunkView, Embedder, PageDraft, PageWriter, TopicView

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
STOPWORDS = frozenset(
    "the a an and or but of to in on at by for with from as is are was were be been being it its this that these "
    "those he she they them his her their we you i not no so if then than there here what which who whom when where "
    "why how all any some such into over under about after before again also only very can could would should will "
    "shall may might must do does did done have has had having one two said say says upon out up down more most "
    "other own same too just".split()
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if s.strip()]


def _words(text: str, limit: int) -> str:
    words = text.split()
    return " ".join(words[:limit]) + (" …" if len(words) > limit else "")


class ExtractiveWriter(PageWriter):
    name = "extractive"
    uses_quota = False

    def __init__(self, tldr_words: int = 40, body_words: int = 220, tags: int = 5) -> None:
        self.tldr_words = tldr_words
        self.body_words = body_words
        self.tags = tags

    def write(self, topic: TopicView, chunks: list[ChunkView], neighbours: list[TopicView]) -> PageDraft:
        bodies = chunk_bodies(chunks)
        leads = [s for body in bodies for s in _sentences(body)[:1]]
        first = _sentences(bodies[0])[:2] if bodies else []
        counts = Counter(w.casefold() for body in bodies for w in _WORD.findall(body)
                         if len(w) > 3 and w.casefold() not in STOPWORDS)
        tags = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: self.tags]]
        return PageDraft(
            title=topic.title.split(" > ")[-1],
            tldr=_words(" ".join(first), self.tldr_words),
            body=_words(" ".join(leads), self.body_words),
            tags=tags,
            wikilinks=[n.topic_id for n in neighbours],
        )


class HashingEmbedder(Embedder):
    """Feature hashing of words into a fixed-size unit vector: deterministic, labelled as such."""

    uses_quota = False

    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions
        self.name = f"hashing-{dimensions}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dimensions
            for w in _WORD.findall(text.casefold()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                vec[h % self.dimensions] += 1.0 if (h >> 63) & 1 else -1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([round(v / norm, 6) for v in vec])
        return out
