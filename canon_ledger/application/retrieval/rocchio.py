"""Pseudo-relevance feedback on the vector side: Rocchio over dense vectors ("vector PRF").

The new query vector is ``ALPHA * q + BETA * mean(d_1 .. d_k)`` over the unit query vector and
the unit vectors of the ``ROCCHIO_DOCS`` feedback chunks, normalised (the index ranks by cosine,
so only its direction counts). It replaces the vector list, as RM3's expanded query replaces
the keyword list (``feedback.py``).

The parameters are the setting Li et al. report and ship for Rocchio vector PRF with dense
retrievers, SBERT among them: depth 5, alpha 0.4, beta 0.6 (H. Li, A. Mourad, S. Zhuang,
B. Koopman, G. Zuccon, "Pseudo Relevance Feedback with Deep Language Models and Dense
Retrievers: Successes and Pitfalls", ACM TOIS 41(3), 2023, arXiv 2108.11044; reproduced in
Pyserini's ``experiments-vector-prf.md``, "Rocchio PRF 5 A0.4 B0.6"). Chosen before measuring
on Cranfield and not tuned on it. Feedback chunks count equally (a mean, as in the paper);
Pyserini mixes raw inner-product vectors, here both sides are unit vectors because the index
is cosine: a long query vector must not outweigh the documents by its length alone.
Measured on Cranfield, fed by the dense list's own top 5: docs/benchmarks.md (hybrid search on
Cranfield).

Pure Python (a few vectors of a few hundred numbers). Never raises: with no usable feedback
vector (none given, unknown to the index, the wrong number of dimensions, not finite), a zero
query vector, or a mix that cancels to zero, the original query vector stands and the detail
says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from canon_ledger.application.retrieval.feedback import Expansion
from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.ports import RetrievalSnapshot
from canon_ledger.domain.wiki import PAGE_PREFIX

ROCCHIO_DOCS = 5
ALPHA, BETA = 0.4, 0.6


@dataclass(frozen=True)
class Refined:
    vector: list[float]  # the new query vector, or the original one (``used`` 0)
    used: int  # feedback vectors in the mean
    why: str = ""  # why the original stands, when it does


def rocchio(query: Sequence[float], feedback: Sequence[Sequence[float] | None], alpha: float = ALPHA,
            beta: float = BETA) -> Refined:
    """``alpha * q/|q| + beta * mean(d/|d|)``, normalised; the original ``query`` when nothing
    usable is left. A feedback vector that is None, zero, not finite or of another length is
    left out of the mean."""
    try:
        original = [float(v) for v in query]
    except (TypeError, ValueError):
        return Refined([], 0, "the query vector is not a list of numbers")
    try:
        return _rocchio(original, feedback, alpha, beta)
    except Exception as e:  # noqa: BLE001 - feedback only refines the query: the original stands
        return Refined(original, 0, f"{type(e).__name__}: {str(e)[:160]}")


def _rocchio(original: list[float], feedback: Sequence[Sequence[float] | None], alpha: float,
             beta: float) -> Refined:
    q = _unit(original)
    if q is None:
        return Refined(original, 0, "the query vector is zero or not finite")
    docs = [d for d in (_unit(v, len(q)) for v in feedback) if d is not None]
    if not docs:
        return Refined(original, 0, "no usable feedback vector")
    mixed = _unit([alpha * qi + beta * math.fsum(col) / len(docs) for qi, col in zip(q, zip(*docs))])
    if mixed is None:
        return Refined(original, 0, "the mixed vector is zero")
    return Refined(mixed, len(docs))


def expand_vector(snapshot: RetrievalSnapshot, collections: list[str], query_vector: Sequence[float],
                  first: list[Hit], feedback: Sequence[Hit], limit: int) -> Expansion:
    """The vector list of the Rocchio query from the first ``ROCCHIO_DOCS`` chunks of ``feedback``
    (best first), or ``first`` (the plain vector list) when it cannot be made. Never raises."""
    try:
        chunks = [h.id for h in feedback if not h.id.startswith(PAGE_PREFIX)][:ROCCHIO_DOCS]
        if not chunks:
            return _plain(first, "skipped", "no chunk to learn from")
        stored: Mapping[str, Sequence[float]] = snapshot.vectors(chunks, collections)
        refined = rocchio(query_vector, [stored.get(c) for c in chunks])
        if not refined.used:
            return _plain(first, "skipped", f"{refined.why} among the top {len(chunks)} chunk(s)"
                          if refined.why == "no usable feedback vector" else refined.why)
        hits = snapshot.vector(refined.vector, collections, limit)
        return Expansion(hits, f"rocchio done: alpha {ALPHA}, beta {BETA}, the mean of {refined.used} of the "
                               f"top {len(chunks)} chunk vector(s), {len(hits)} hit(s)")
    except Exception as e:  # noqa: BLE001 - feedback only refines the vector list
        return _plain(first, "error", f"{type(e).__name__}: {str(e)[:160]}")


def _plain(first: list[Hit], status: str, why: str) -> Expansion:
    return Expansion(first, f"rocchio {status} ({why}): the plain list, {len(first)} hit(s)", status)


def _unit(vector: Sequence[float] | None, dimensions: int | None = None) -> list[float] | None:
    """The vector over its length, or None when it has none (zero, not finite, not numbers, or
    not ``dimensions`` long)."""
    try:
        v = [float(x) for x in vector]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return None
    if not v or (dimensions is not None and len(v) != dimensions) or not all(math.isfinite(x) for x in v):
        return None
    norm = math.sqrt(math.fsum(x * x for x in v))
    return [x / norm for x in v] if norm > 0 and math.isfinite(norm) else None
