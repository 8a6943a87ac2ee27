"""Reciprocal-rank fusion of several retrievers' ranked lists (Cormack et al., 2009), and the
fusion methods the search pipeline offers.

Each candidate scores sum(1 / (k + rank)) over the lists it appears in. Only ranks count, so a
BM25 score of 25.9 and a cosine of 0.43 never meet; the raw scores ride along on the candidate
for the z-score (``rerank.zscore_order``). The pipeline's default, ``ZSCORE``, uses ``rrf`` only
to gather every candidate of the lists (its order breaks the z-score's ties); ``RRF_ZSCORE``
and ``RRF`` also cut them to the ``wide`` pool. Which is the default, and why:
docs/benchmarks.md (retrieval defaults chosen by 5-fold cross-validation on Cranfield).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from canon_ledger.application.retrieval.ports import Candidate, Hit

RRF_K = 60  # the constant of the original paper; it damps the head of each list
WIDE_FACTOR, WIDE_FLOOR = 3, 20

# Fusion methods (``search.HybridSearch.fusion``): ZSCORE keeps every candidate of the lists and
# orders them by summed z-score (``rerank.zscore_order``); RRF_ZSCORE keeps the ``wide`` pool by
# RRF, then orders that pool by summed z-score; RRF keeps the ``wide`` pool in RRF order.
ZSCORE, RRF_ZSCORE, RRF = "zscore", "rrf+zscore", "rrf"
FUSIONS = (ZSCORE, RRF_ZSCORE, RRF)


def wide(final_count: int, factor: int = WIDE_FACTOR) -> int:
    """How many candidates to fuse for a final count: ``factor`` times it, at least ``WIDE_FLOOR``
    (a reranker after fusion can only promote what fusion kept)."""
    return max(factor * final_count, WIDE_FLOOR)


def rrf(lists: Mapping[str, Sequence[Hit]], *, k: int = RRF_K, limit: int | None = None) -> list[Candidate]:
    """Fuse ``lists`` (retriever name -> hits, best first) into candidates, best first.

    A hit repeated within one list keeps its first (best) rank and that occurrence's score, and
    the ranks after it close up, as if the retriever had not repeated itself. Equal fused scores
    are ordered by id, so the output does not depend on the order of ``lists``. Empty or missing
    lists contribute nothing.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, not {k}")
    scores: dict[str, dict[str, float | None]] = {}
    ranks: dict[str, dict[str, int]] = {}
    # Names in sorted order: the float sums then add up in the same order whatever the mapping's.
    for name in sorted(lists):
        rank = 0
        for hit in lists[name] or ():
            if name in ranks.get(hit.id, {}):  # a repeat: the first occurrence was the best rank
                continue
            rank += 1
            ranks.setdefault(hit.id, {})[name] = rank
            scores.setdefault(hit.id, {})[name] = hit.score
    fused = {cid: sum(1.0 / (k + r) for _, r in sorted(per.items())) for cid, per in ranks.items()}
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))
    if limit is not None:
        order = order[: max(0, limit)]
    return [Candidate(id=cid, scores=scores[cid], ranks=ranks[cid], fused=fused[cid]) for cid in order]
