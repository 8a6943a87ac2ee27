"""Hybrid pseudo-relevance feedback in HybridSearch (``feedback="hybrid"``), on a fake snapshot:
what feeds it, which stages say so, and that each side falls back to its plain list."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.search import FIRST_PASS, HybridSearch
from canon_ledger.application.retrieval.ports import Doc, KeywordResult, TermStats
from tests.helpers import stage_of

# Two chunks of section a (a cut in two by the token limit), then one chunk per section.
RANKED = ["c/d#a/0", "c/d#a/1", *[f"c/d#s{i:02d}/0" for i in range(15)]]
EXPANDED = ["c/d#x/0", "c/d#y/0"]  # what each second-pass retriever answers


class Embedder:
    name = "fake"
    uses_quota = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class Snapshot:
    vector_model = "fake"

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.learned: list[str] = []  # chunk ids RM3 read
        self.refined: list[list[float]] = []  # Rocchio's query vectors

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int) -> KeywordResult:
        return KeywordResult([Hit(c, float(100 - i)) for i, c in enumerate(RANKED)], ["lamp"], "fake bm25")

    def keyword_weighted(self, weights, collection_ids, limit) -> list[Hit]:
        return [Hit(EXPANDED[0], 50.0), Hit(RANKED[-1], 40.0)]

    def term_stats(self, doc_ids, collection_ids) -> TermStats:
        self.learned = list(doc_ids)
        return TermStats({i: ["wick"] for i in doc_ids}, 1000, {"wick": 3})

    def vector(self, query_vector, collection_ids, limit) -> list[Hit]:
        if list(query_vector) == [1.0, 0.0]:  # the first pass: the same order as the keyword list
            return [Hit(c, 1.0 - i / 100) for i, c in enumerate(RANKED)]
        self.refined.append(list(query_vector))
        return [Hit(EXPANDED[1], 0.9), Hit(RANKED[-1], 0.8)]

    def vectors(self, ids, collection_ids) -> dict[str, list[float]]:
        if self.fail == "vectors":
            raise RuntimeError("matrix gone")
        return {i: [0.0, 1.0] for i in ids}

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        return {i: Doc(i, "chunk", "c", f"text of {i}") for i in ids}

    def overview(self, collection_id: str) -> Doc | None:
        return None


def test_the_fused_first_pass_feeds_both_sides_and_a_second_pass_fuses_the_expanded_lists() -> None:
    snap = Snapshot()
    result = HybridSearch(Embedder(), feedback="hybrid").search(snap, ["c"], "lamp", 3)
    assert [s.step for s in result.stages] == ["step-back", "embed", "keyword", "vector", "feedback", "fuse",
                                               "rerank", "overview", "select"]
    # One place per section: the first pass's top chunks skip a's second chunk, as select does.
    first_pass = [c for c in RANKED if c != "c/d#a/1"][:FIRST_PASS]
    assert snap.learned == first_pass  # RM3 reads the first pass's top 10 (all usable here)
    assert len(snap.refined) == 1 and snap.refined[0] != [1.0, 0.0]
    feedback = stage_of(result, "feedback")
    assert feedback.status == "done" and feedback.detail.startswith(
        f"hybrid prf from the first pass's top {FIRST_PASS} chunk(s)")
    assert "keyword prf done: rm3 from the top 10 chunk(s)" in feedback.detail
    assert "vector rocchio done: alpha 0.4, beta 0.6, the mean of 5 of the top 5" in feedback.detail
    assert "hybrid: the fused first pass feeds it" in stage_of(result, "keyword").detail
    # The second pass's lists, fused the default way: every candidate, summed z-score.
    assert stage_of(result, "fuse").detail == ("zscore over keyword 2, vector 2 -> 3 candidate(s), every one "
                                             "(summed in rerank)")
    assert {h.id for h in result.hits} == {*EXPANDED, RANKED[-1]}


def test_alone_off_and_always_run_no_hybrid_feedback_and_the_default_does() -> None:
    for mode in ("alone", "off", "always"):
        snap = Snapshot()
        result = HybridSearch(Embedder(), feedback=mode).search(snap, ["c"], "lamp", 3)
        assert "feedback" not in [s.step for s in result.stages] and not snap.refined
    assert HybridSearch(Embedder()).feedback == "hybrid"
    snap = Snapshot()
    result = HybridSearch(Embedder()).search(snap, ["c"], "lamp", 3)
    assert stage_of(result, "feedback").status == "done" and len(snap.refined) == 1


def test_without_a_vector_list_hybrid_is_rm3_alone() -> None:
    snap = Snapshot()
    result = HybridSearch(None, feedback="hybrid").search(snap, ["c"], "lamp", 3)
    assert "feedback" not in [s.step for s in result.stages]
    assert "prf done: rm3 from the top 10 chunk(s)" in stage_of(result, "keyword").detail
    assert snap.learned[:2] == ["c/d#a/0", "c/d#a/1"]  # BM25's own top 10, as feedback="alone"


def test_a_failing_side_keeps_its_plain_list_and_the_other_still_expands() -> None:
    snap = Snapshot(fail="vectors")
    result = HybridSearch(Embedder(), feedback="hybrid").search(snap, ["c"], "lamp", 3)
    feedback = stage_of(result, "feedback")
    assert feedback.status == "done" and "vector rocchio error (RuntimeError: matrix gone)" in feedback.detail
    assert stage_of(result, "fuse").detail.startswith(f"zscore over keyword 2, vector {len(RANKED)} -> ")


@pytest.mark.parametrize("ranked", [[], ["page:c/d#a"]])
def test_no_chunk_in_the_first_pass_skips_feedback(ranked) -> None:
    snap = Snapshot()
    snap.keyword = lambda q, c, n: KeywordResult([Hit(i, 1.0) for i in ranked], ["lamp"], "fake bm25")
    snap.vector = lambda v, c, n: [Hit(i, 1.0) for i in ranked]
    snap.docs = lambda ids: {i: Doc(i, "page", "c", "tldr") for i in ids}
    result = HybridSearch(Embedder(), feedback="hybrid").search(snap, ["c"], "lamp", 3)
    stage = stage_of(result, "feedback")
    assert (stage.status, stage.detail) == ("skipped", "hybrid prf: no chunk in the first pass to learn from")
