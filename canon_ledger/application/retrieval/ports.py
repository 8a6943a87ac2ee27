"""Shared types of L1 retrieval: one retriever's hit, a fused candidate, the reranker plug-in.

The step record is `application.packets.packet.Stage`; it is not redefined here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Hit:
    """One retriever's result: a chunk id, or "page:<collection>/<topic>" for a wiki page."""

    id: str
    score: float | None  # raw retriever score, higher is better; None when the retriever gives none


@dataclass(frozen=True)
class Candidate:
    id: str
    scores: Mapping[str, float | None]  # raw score per retriever name; absent if not in that list
    ranks: Mapping[str, int]  # 1-based rank per retriever list it appeared in
    fused: float  # RRF score, or the reranker's score after rerank


class Reranker(Protocol):
    """An optional plug-in that scores (query, text) pairs, higher is more relevant: a local
    cross-encoder, or a cloud reranker (Cohere / Voyage shape: POST {model, query, documents} ->
    {results: [{index, relevance_score}]}). A cloud reranker is the quality ceiling, never the
    default: it spends a paid call per query and sends the candidates' text off the machine.
    ``score`` returns one finite float per text, in order, or raises; ``rerank`` then falls back."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...
