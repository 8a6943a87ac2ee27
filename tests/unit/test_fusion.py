"""Reciprocal-rank fusion: the arithmetic, and the edge cases fusion code gets wrong upstream
(empty lists, one list, ties, duplicates within a list, None and NaN scores)."""

from __future__ import annotations

import math

import pytest

from application.retrieval.fusion import rrf, wide
from application.retrieval.ports import Hit


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
