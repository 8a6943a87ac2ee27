"""The reranker: z-score fusion by default, the missing rule, its guards, the scorer plug-in and
its fallbacks, and the stage each path reports."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from canon_ledger.application.retrieval.fusion import rrf
from canon_ledger.application.retrieval.ports import Candidate, Hit
from canon_ledger.application.retrieval.rerank import MISSING_PENALTY, at_mean, below_lowest, missing_rule, rerank, zscore_order


def cand(cid: str, fused: float = 0.0, **scores: float | None) -> Candidate:
    return Candidate(cid, scores, {name: 1 for name in scores}, fused)


def ids(candidates: Sequence[Candidate]) -> list[str]:
    return [c.id for c in candidates]


# -- z-score ---------------------------------------------------------------------------------
def test_zscore_keeps_the_margin_that_rank_fusion_throws_away() -> None:
    # keyword: a is far ahead; vector: b is barely ahead of a. RRF calls it a tie broken by id;
    # z-scores see that a's lead is large and b's small.
    keyword = [Hit("a", 30.0), Hit("b", 2.0), Hit("c", 1.0)]
    vector = [Hit("b", 0.81), Hit("a", 0.80), Hit("c", 0.10)]
    fused = rrf({"keyword": keyword, "vector": vector})
    assert ids(fused)[:2] == ["a", "b"] and fused[0].fused == fused[1].fused

    result = rerank("q", list(reversed(fused)), 3)

    assert ids(result.candidates) == ["a", "b", "c"]
    assert result.stage.status == "done" and result.stage.detail == "method=zscore, 3 in, 3 out"


def test_with_the_lists_scores_a_lead_is_measured_against_the_whole_list() -> None:
    # In the pool, a leads keyword by as much as b leads vector: a tie on the pool's scale.
    # The keyword list is spread wide (a gap of 1 is 0.26 sigma), the vector list is tight at
    # the tail (a gap of 0.1 is ~1.7 sigma): on the lists' scale b is clearly ahead.
    keyword_list = [10.0, 9.0, 1.0, 1.0, 1.0, 1.0]
    vector_list = [0.9, 0.8, 0.75, 0.75, 0.75, 0.75]
    pool = [cand("a", keyword=10.0, vector=0.8), cand("b", keyword=9.0, vector=0.9)]
    assert ids(zscore_order(pool)) == ["a", "b"]  # pool scale: a tie, given order

    lists = {"keyword": keyword_list, "vector": vector_list}
    ranked = zscore_order(pool, list_scores=lists)

    def z(values: list[float], v: float) -> float:
        mu = sum(values) / len(values)
        sigma = (sum((x - mu) ** 2 for x in values) / len(values)) ** 0.5
        return (v - mu) / sigma

    assert ids(ranked) == ["b", "a"]
    assert {c.id: c.fused for c in ranked} == pytest.approx({
        "a": z(keyword_list, 10.0) + z(vector_list, 0.8), "b": z(keyword_list, 9.0) + z(vector_list, 0.9)})
    result = rerank("q", pool, 2, list_scores=lists)
    assert ids(result.candidates) == ["b", "a"]
    assert result.stage.detail == "method=zscore (scaled by the full lists: keyword 6, vector 6), 2 in, 2 out"


def test_on_the_lists_scale_the_missing_rule_uses_the_lists_lowest() -> None:
    keyword_list = [4.0, 2.0, 0.0]  # mean 2, sigma sqrt(8/3); lowest z = -sqrt(1.5)
    pool = [cand("a", keyword=4.0), cand("c", vector=0.5)]
    z = {c.id: c.fused for c in zscore_order(pool, list_scores={"keyword": keyword_list})}
    assert z["c"] == pytest.approx(-(1.5 ** 0.5) - MISSING_PENALTY + 0.0)  # vector: one hit, z 0
    assert z["a"] == pytest.approx(2.0 / (8.0 / 3.0) ** 0.5 + (0.0 - MISSING_PENALTY))


@pytest.mark.parametrize("unusable", [
    [], [5.0], [3.0, 3.0, 3.0], [None, float("nan"), 2.0], [float("inf"), 1.0], "not a list", None,
])
def test_a_list_that_cannot_give_a_scale_falls_back_to_the_pools(unusable) -> None:
    pool = [cand("a", keyword=3.0, vector=0.2), cand("b", keyword=1.0, vector=0.9), cand("c", keyword=2.0)]
    expected = [(c.id, c.fused) for c in zscore_order(pool)]
    got = zscore_order(pool, list_scores={"keyword": unusable, "vector": unusable})
    assert [(c.id, c.fused) for c in got] == expected
    assert rerank("q", pool, 3, list_scores={"keyword": unusable}).stage.status == "done"


def test_raw_scales_do_not_leak_bm25_against_cosine() -> None:
    # Summing raw scores would let BM25's tens drown cosine's fractions; z-scores put them level.
    pool = [cand("k", keyword=25.9, vector=0.10), cand("v", keyword=1.0, vector=0.90), cand("x", keyword=13.45, vector=0.50)]
    z = {c.id: c.fused for c in zscore_order(pool)}
    assert z["k"] == pytest.approx(z["v"]) == pytest.approx(0.0, abs=1e-12)
    assert z["x"] == pytest.approx(0.0, abs=1e-12)


def test_the_missing_rule_puts_an_absent_candidate_half_a_sigma_below_the_lists_lowest() -> None:
    pool = [cand("a", keyword=3.0), cand("b", keyword=1.0), cand("c", vector=0.5)]
    # keyword: mean 2, sigma 1 -> a +1, b -1; c is missing -> -1 - 0.5 = -1.5.
    # vector: one hit, sigma 0 -> c gets 0 there; a and b are missing -> 0 - 0.5 = -0.5.
    z = {c.id: c.fused for c in zscore_order(pool)}
    assert MISSING_PENALTY == 0.5
    assert z == pytest.approx({"a": 1.0 - 0.5, "b": -1.0 - 0.5, "c": -1.5 + 0.0})
    assert ids(zscore_order(pool)) == ["a", "b", "c"]  # b and c tie at -1.5: fusion order (given order) keeps
    # Another penalty is a parameter: one sigma below the lowest.
    one = {c.id: c.fused for c in zscore_order(pool, missing_rule(1.0))}
    assert one == pytest.approx({"a": 1.0 - 1.0, "b": -1.0 - 1.0, "c": -2.0 + 0.0})
    assert missing_rule(None) is at_mean and missing_rule(0.5) == below_lowest() == below_lowest(MISSING_PENALTY)


def test_a_missing_rule_given_to_rerank_is_named_in_its_stage() -> None:
    pool = [cand("a", keyword=3.0), cand("b", keyword=1.0), cand("c", vector=0.5)]
    mean = rerank("q", pool, 3, missing=at_mean)
    assert ids(mean.candidates) == ["a", "c", "b"]  # c's absence from keyword costs nothing under the mean rule
    assert mean.stage.detail == "method=zscore (a missing hit at the list's mean), 3 in, 3 out"
    lowest = rerank("q", pool, 3, list_scores={"keyword": [3.0, 1.0]}, missing=missing_rule(1.0))
    assert lowest.stage.detail == ("method=zscore (scaled by the full lists: keyword 2; a missing hit at the "
                                   "list's lowest z - 1 sd), 3 in, 3 out")
    assert ids(lowest.candidates) == ["a", "b", "c"]


def test_present_but_weak_beats_absent_under_the_default_rule_but_not_under_the_mean_rule() -> None:
    # d is in both lists but last in each; e is only in keyword, top of it.
    pool = [cand("top", keyword=10.0, vector=0.9), cand("e", keyword=9.0),
            cand("mid", keyword=5.0, vector=0.5), cand("d", keyword=1.0, vector=0.1)]
    default = {c.id: c.fused for c in zscore_order(pool)}
    mean = {c.id: c.fused for c in zscore_order(pool, missing=at_mean)}
    assert default["e"] < default["mid"]  # absent from vector costs more than being in the middle of it
    assert mean["e"] > mean["mid"]  # the mean rule rewards the absence


def test_sigma_zero_lists_add_nothing_between_the_candidates_they_returned() -> None:
    pool = [cand("a", keyword=2.0, vector=0.3), cand("b", keyword=2.0, vector=0.9), cand("c", keyword=2.0, vector=0.6)]
    result = rerank("q", pool, 3)
    assert ids(result.candidates) == ["b", "c", "a"]  # vector alone decides
    assert result.stage.status == "done"


def test_all_scores_equal_everywhere_keeps_fusion_order() -> None:
    pool = [cand(c, keyword=1.0, vector=1.0) for c in "dcba"]
    assert ids(rerank("q", pool, 4).candidates) == ["d", "c", "b", "a"]


def test_none_nan_and_infinite_scores_count_as_missing_in_that_list() -> None:
    pool = [cand("a", keyword=3.0, vector=None), cand("b", keyword=1.0, vector=float("nan")),
            cand("c", keyword=2.0, vector=float("inf")), cand("d", keyword=float("-inf"), vector=0.5),
            cand("e", keyword=None, vector=0.7)]
    result = rerank("q", pool, 5)
    assert result.stage.status == "done", result.stage
    assert sorted(ids(result.candidates)) == list("abcde")
    z = {c.id: c.fused for c in result.candidates}
    # keyword over a, b, c (3, 1, 2): mean 2, sigma sqrt(2/3); its lowest z is -1.2247
    # vector over d, e (0.5, 0.7): z -1, +1
    low_k, low_v = -(1 / (2 / 3) ** 0.5), -1.0
    assert z["a"] == pytest.approx((1 / (2 / 3) ** 0.5) + low_v - MISSING_PENALTY)
    assert z["e"] == pytest.approx(low_k - MISSING_PENALTY + 1.0)
    assert z["d"] == pytest.approx(low_k - MISSING_PENALTY + -1.0)


def test_a_list_with_no_usable_score_is_scored_by_its_ranks() -> None:
    pool = [Candidate("a", {"pages": None}, {"pages": 3}, 0.0), Candidate("b", {"pages": None}, {"pages": 1}, 0.0),
            Candidate("c", {"pages": None}, {"pages": 2}, 0.0)]
    assert ids(rerank("q", pool, 3).candidates) == ["b", "c", "a"]


def test_the_fused_field_carries_the_rerank_score_and_the_rest_is_kept() -> None:
    pool = [cand("a", 0.5, keyword=1.0), cand("b", 0.4, keyword=3.0)]
    first = rerank("q", pool, 2).candidates[0]
    assert first.id == "b" and first.scores == {"keyword": 3.0} and first.ranks == {"keyword": 1}
    assert first.fused == pytest.approx(1.0)


def test_top_n_cuts_and_the_stage_counts_in_and_out() -> None:
    pool = [cand(f"c{i}", keyword=float(i)) for i in range(10)]
    result = rerank("q", pool, 3)
    assert ids(result.candidates) == ["c9", "c8", "c7"]
    assert result.stage.detail == "method=zscore, 10 in, 3 out"
    assert rerank("q", pool, 0).candidates == []
    assert rerank("q", pool, -4).candidates == []
    assert len(rerank("q", pool, 50).candidates) == 10


def test_no_candidates_is_a_skipped_stage_not_an_error() -> None:
    result = rerank("q", [], 5)
    assert result.candidates == [] and result.stage.status == "skipped"
    assert result.stage.step == "rerank"


def test_on_failure_the_fusion_order_comes_back_cut_to_top_n_with_an_error_stage() -> None:
    broken = Candidate("b", None, {}, 0.2)  # type: ignore[arg-type]  # scores is not a mapping
    pool = [cand("a", 0.3, keyword=1.0), broken, cand("c", 0.1, keyword=9.0)]
    result = rerank("q", pool, 2)
    assert result.candidates == pool[:2]
    assert result.stage.status == "error" and "kept fusion order" in result.stage.detail
    assert "TypeError" in result.stage.detail


def test_even_arguments_that_are_not_candidates_do_not_raise() -> None:
    for candidates, top_n in [(None, 3), (42, 1), ([1, 2, 3], 2), ([cand("a", keyword=1.0)], "two")]:
        result = rerank("q", candidates, top_n)  # type: ignore[arg-type]
        assert result.stage.status == "error"


# -- the scorer plug-in ----------------------------------------------------------------------
class LengthScorer:
    """A stand-in cross-encoder: longer text, more relevant. Records what it was asked."""

    name = "fake-cross-encoder"

    def __init__(self) -> None:
        self.asked: list[tuple[str, list[str]]] = []

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        self.asked.append((query, list(texts)))
        return [float(len(t)) for t in texts]


class Broken:
    name = "broken-cross-encoder"

    def __init__(self, answer: object = None, error: Exception | None = None) -> None:
        self.answer, self.error = answer, error

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        if self.error is not None:
            raise self.error
        return self.answer  # type: ignore[return-value]


POOL = [cand("short", 0.3, keyword=9.0), cand("longest", 0.2, keyword=1.0), cand("mid", 0.1, keyword=5.0)]
TEXTS = {"short": "a", "longest": "a much longer passage", "mid": "medium text"}


def test_a_scorer_orders_by_its_scores_against_the_original_query() -> None:
    scorer = LengthScorer()
    result = rerank("what is asked", POOL, 2, scorer=scorer, texts=TEXTS)
    assert ids(result.candidates) == ["longest", "mid"]
    assert result.candidates[0].fused == float(len(TEXTS["longest"]))
    assert scorer.asked == [("what is asked", [TEXTS["short"], TEXTS["longest"], TEXTS["mid"]])]
    assert result.stage.status == "done" and result.stage.detail == "method=fake-cross-encoder, 3 in, 2 out"


@pytest.mark.parametrize(("scorer", "texts", "why"), [
    (Broken(error=RuntimeError("model file missing")), TEXTS, "RuntimeError: model file missing"),
    (Broken(answer=[1.0]), TEXTS, "1 scores for 3 candidates"),
    (Broken(answer=[1.0, float("nan"), 2.0]), TEXTS, "not a finite number"),
    (Broken(answer=["high", "low", "mid"]), TEXTS, "ValueError"),
    (Broken(answer=None), TEXTS, "TypeError"),
    (LengthScorer(), {"short": "a"}, "no text for 2 candidate(s)"),
    (LengthScorer(), None, "needs the candidates' texts"),
])
def test_a_failing_scorer_falls_back_to_the_zscore_and_says_so(scorer, texts, why: str) -> None:
    result = rerank("q", POOL, 3, scorer=scorer, texts=texts)
    assert ids(result.candidates) == ids(zscore_order(POOL)) == ["short", "mid", "longest"]
    assert result.stage.status == "error"
    assert why in result.stage.detail and "fell back to zscore" in result.stage.detail
