"""Reciprocal-rank fusion: the arithmetic, and the edge cases fusion code gets wrong upstream
(empty lists, one list, ties, duplicates within a list, None and NaN scores)."""

from __future__ import annotations

import math

import pytest

from canon_ledger.application.retrieval.fusion import rrf, wide
from canon_ledger.application.retrieval.ports import Hit


def hits(*pairs: tuple[str, float | None]) -> list[Hit]:
    return [Hit(i, s) for i, s in pairs]


def test_the_fused_score_is_the_sum_of_reciprocal_ranks() -> None:
    fused = rrf({"keyword": hits(("a", 9.0), ("b", 5.0)), "vector": hits(("b", 0.8), ("c", 0.7))}, k=60)

    assert [c.id for c in fused] == ["b", "a", "c"]
    b, a, c = fused
    assert b.fused == pytest.approx(1 / 62 + 1 / 61)
    assert a.fused == pytest.approx(1 / 61)
    assert c.fused == pytest.approx(1 / 62)
    assert b.ranks == {"keyword": 2, "vector": 1} and b.scores == {"keyword": 5.0, "vector": 0.8}
    assert a.ranks == {"keyword": 1} and "vector" not in a.scores  # absent, not None


def test_k_changes_the_weights_not_the_rules() -> None:
    [only] = rrf({"keyword": hits(("a", 1.0))}, k=0)
    assert only.fused == 1.0
    with pytest.raises(ValueError):
        rrf({"keyword": hits(("a", 1.0))}, k=-1)


@pytest.mark.parametrize("lists", [{}, {"keyword": []}, {"keyword": [], "vector": []}, {"keyword": None}])
def test_no_hits_fuse_to_no_candidates(lists) -> None:
    assert rrf(lists) == []


def test_one_list_keeps_its_order_and_ranks() -> None:
    fused = rrf({"vector": hits(("z", 0.9), ("a", 0.5), ("m", 0.1))})
    assert [c.id for c in fused] == ["z", "a", "m"]
    assert [c.ranks["vector"] for c in fused] == [1, 2, 3]


def test_one_list_next_to_an_empty_one_is_the_same_fusion() -> None:
    alone = rrf({"vector": hits(("z", 0.9), ("a", 0.5))})
    assert rrf({"vector": hits(("z", 0.9), ("a", 0.5)), "keyword": []}) == alone


def test_ties_break_by_id_whatever_order_the_lists_come_in() -> None:
    # a and b each lead one list: equal fused scores.
    one = rrf({"keyword": hits(("b", 3.0), ("a", 2.0)), "vector": hits(("a", 0.9), ("b", 0.8))})
    other = rrf({"vector": hits(("a", 0.9), ("b", 0.8)), "keyword": hits(("b", 3.0), ("a", 2.0))})
    assert one[0].fused == one[1].fused
    assert [c.id for c in one] == ["a", "b"] == [c.id for c in other]
    assert one == other


def test_a_duplicate_within_a_list_keeps_its_best_rank_and_the_ranks_close_up() -> None:
    fused = rrf({"keyword": hits(("a", 5.0), ("b", 4.0), ("a", 3.0), ("c", 2.0))})

    assert [c.id for c in fused] == ["a", "b", "c"]
    a, b, c = fused
    assert a.ranks == {"keyword": 1} and a.scores == {"keyword": 5.0}  # the first occurrence's score
    assert a.fused == pytest.approx(1 / 61)  # counted once, not twice
    assert c.ranks == {"keyword": 3}


def test_none_and_nan_scores_ride_along_untouched_and_do_not_change_the_ranks() -> None:
    fused = rrf({"keyword": hits(("a", None), ("b", float("nan"))), "vector": hits(("b", 0.2))})

    by_id = {c.id: c for c in fused}
    assert by_id["a"].scores == {"keyword": None}
    assert math.isnan(by_id["b"].scores["keyword"])
    assert [c.id for c in fused] == ["b", "a"]  # ranks alone decide


def test_limit_cuts_after_ordering() -> None:
    lists = {"keyword": hits(*[(f"d{i:02}", float(-i)) for i in range(30)])}
    assert [c.id for c in rrf(lists, limit=5)] == ["d00", "d01", "d02", "d03", "d04"]
    assert rrf(lists, limit=0) == []
    assert len(rrf(lists, limit=None)) == 30


@pytest.mark.parametrize(("final", "fused"), [(0, 20), (1, 20), (6, 20), (7, 21), (12, 36), (100, 300)])
def test_fusion_is_wide_three_times_the_final_count_and_at_least_twenty(final: int, fused: int) -> None:
    assert wide(final) == fused


# -- the fusion methods of HybridSearch -------------------------------------------------------------
class _Embedder:
    name = "fake"
    uses_quota = False

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class _TwoLists:
    """keyword: a far ahead, then b, c, d; vector: b barely ahead of e and a, then f (only there).
    RRF puts b first (second and first); the z-score puts a first (its keyword lead is large)."""

    vector_model = "fake"
    KEYWORD = [("c/a#_/0", 30.0), ("c/b#_/0", 2.0), ("c/c#_/0", 1.5), ("c/d#_/0", 1.0)]
    VECTOR = [("c/b#_/0", 0.81), ("c/e#_/0", 0.805), ("c/a#_/0", 0.80), ("c/f#_/0", 0.10)]

    def keyword(self, query, collection_ids, limit):
        from canon_ledger.application.retrieval.ports import KeywordResult

        return KeywordResult([Hit(i, s) for i, s in self.KEYWORD[:limit]], ["q"], "fake bm25")

    def vector(self, query_vector, collection_ids, limit):
        return [Hit(i, s) for i, s in self.VECTOR[:limit]]

    def docs(self, ids):
        from canon_ledger.application.retrieval.ports import Doc

        return {i: Doc(i, "chunk", "c", f"text of {i}") for i in ids}

    def overview(self, collection_id):
        return None


def _run(**options):
    from canon_ledger.application.retrieval.search import HybridSearch

    result = HybridSearch(_Embedder(), feedback="off", **options).search(_TwoLists(), ["c"], "q", 2)
    return [h.id for h in result.hits], {s.step: s for s in result.stages}


def test_the_default_fusion_is_the_zscore_of_every_candidate_and_its_stages_say_so() -> None:
    from canon_ledger.application.retrieval.fusion import ZSCORE
    from canon_ledger.application.retrieval.rerank import MISSING_PENALTY
    from canon_ledger.application.retrieval.search import HybridSearch

    assert HybridSearch(None).fusion == ZSCORE and HybridSearch(None).missing_penalty == MISSING_PENALTY
    hits, stages = _run()
    assert hits == ["c/a#_/0", "c/b#_/0"]  # a's lead in keyword outweighs b's hair in vector
    assert stages["fuse"].detail == "zscore over keyword 4, vector 4 -> 6 candidate(s), every one (summed in rerank)"
    assert stages["rerank"].detail == ("method=zscore (scaled by the full lists: keyword 4, vector 4; a missing hit "
                                       f"at the list's lowest z - {MISSING_PENALTY:g} sd), 6 in, 6 out")


def test_rrf_then_zscore_keeps_the_pool_and_plain_rrf_keeps_its_order() -> None:
    hits, stages = _run(fusion="rrf+zscore", missing_penalty=None)
    assert hits == ["c/a#_/0", "c/e#_/0"]  # the mean rule: e, absent from keyword, passes b, weak in it
    assert _run(fusion="rrf+zscore")[0] == ["c/a#_/0", "c/b#_/0"]  # below the lowest: b stays ahead
    assert stages["fuse"].detail == "rrf k=60 over keyword 4, vector 4 -> 6 candidate(s) (wide 20; zscore in rerank)"
    assert "a missing hit at the list's mean" in stages["rerank"].detail
    hits, stages = _run(fusion="rrf", rrf_k=60)
    assert hits == ["c/b#_/0", "c/a#_/0"]  # b: 1/62 + 1/61 against a: 1/61 + 1/63
    assert stages["fuse"].detail == "rrf k=60 over keyword 4, vector 4 -> 6 candidate(s) (wide 20)"
    assert (stages["rerank"].status, stages["rerank"].detail) == ("skipped", "fusion rrf: its order stands (no "
                                                                            "reranker plug-in)")


@pytest.mark.parametrize("options", [{"fusion": "combmnz"}, {"pool_factor": 0}, {"depth": 0}, {"rrf_k": -1}])
def test_a_pipeline_with_an_unknown_fusion_or_an_impossible_size_is_refused(options) -> None:
    from canon_ledger.application.retrieval.search import HybridSearch

    with pytest.raises(ValueError):
        HybridSearch(None, **options)
