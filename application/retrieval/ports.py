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
    """An optional plug-in that scores (query, text) pairs: a local cross-encoder, or a cloud reranker."""

    name: str

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...
