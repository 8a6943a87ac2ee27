"""Rocchio vector feedback: the mix, its edge cases (the original query stands, nothing raises),
and the step over a snapshot (application/retrieval/rocchio.py)."""

from __future__ import annotations

import math

import pytest

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.rocchio import ALPHA, BETA, ROCCHIO_DOCS, expand_vector, rocchio


def _unit(v: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def test_the_literature_setting() -> None:
    assert (ROCCHIO_DOCS, ALPHA, BETA) == (5, 0.4, 0.6)  # Li et al. 2023: Rocchio PRF 5 A0.4 B0.6


def test_the_mix_is_alpha_query_plus_beta_mean_of_the_feedback_normalised() -> None:
    out = rocchio([1.0, 0.0], [[0.0, 1.0]])
    assert out.used == 1 and out.why == ""
    assert out.vector == pytest.approx(_unit([0.4, 0.6]))
    two = rocchio([1.0, 0.0, 0.0], [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert two.used == 2 and two.vector == pytest.approx(_unit([0.4, 0.3, 0.3]))


def test_lengths_do_not_weigh_only_directions_do() -> None:
    scaled = rocchio([5.0, 0.0], [[0.0, 0.1], [0.0, 9.0]])
    assert scaled.vector == pytest.approx(rocchio([1.0, 0.0], [[0.0, 1.0]]).vector)


@pytest.mark.parametrize(("query", "feedback", "why"), [
    ([1.0, 2.0], [], "no usable feedback vector"),
    ([1.0, 2.0], [None, None], "no usable feedback vector"),  # ids the index does not hold
    ([1.0, 2.0], [[0.0, 0.0]], "no usable feedback vector"),  # a zero vector has no direction
    ([1.0, 2.0], [[1.0, 2.0, 3.0]], "no usable feedback vector"),  # another model's length
    ([1.0, 2.0], [[float("nan"), 1.0], [1.0, float("inf")]], "no usable feedback vector"),
    ([1.0, 2.0], [["a", "b"]], "no usable feedback vector"),
    ([0.0, 0.0], [[1.0, 0.0]], "the query vector is zero or not finite"),
    ([], [[1.0, 0.0]], "the query vector is zero or not finite"),
    ([float("nan"), 1.0], [[1.0, 0.0]], "the query vector is zero or not finite"),
])
def test_nothing_usable_leaves_the_original_query(query, feedback, why) -> None:
    out = rocchio(query, feedback)
    assert out.used == 0 and out.why == why
    assert len(out.vector) == len(query) and out.vector[-1:] == query[-1:]


def test_unusable_feedback_vectors_are_left_out_of_the_mean() -> None:
    out = rocchio([1.0, 0.0], [None, [0.0, 1.0], [0.0, 0.0], [1.0, 1.0, 1.0]])
    assert out.used == 1 and out.vector == pytest.approx(_unit([0.4, 0.6]))


def test_a_mix_that_cancels_leaves_the_original() -> None:
    out = rocchio([1.0, 0.0], [[-1.0, 0.0]], alpha=0.5, beta=0.5)
    assert out == type(out)([1.0, 0.0], 0, "the mixed vector is zero")


def test_never_raises_on_nonsense() -> None:
    assert rocchio(None, [[1.0]]).used == 0  # type: ignore[arg-type]
    assert rocchio(["x"], [[1.0]]).vector == []  # type: ignore[list-item]
    assert rocchio([1.0, 0.0], None).used == 0  # type: ignore[arg-type]
    assert rocchio([1.0, 0.0], 7).used == 0  # type: ignore[arg-type]


class _Snapshot:
    def __init__(self, stored: dict[str, list[float]], fail: str | None = None) -> None:
        self.stored, self.fail = stored, fail
        self.asked: list[list[float]] = []
        self.read: list[str] = []

    def vectors(self, ids, collection_ids):
        if self.fail == "vectors":
            raise RuntimeError("matrix gone")
        self.read = list(ids)
        return {i: self.stored[i] for i in ids if i in self.stored}

    def vector(self, query_vector, collection_ids, limit):
        if self.fail == "vector":
            raise RuntimeError("index gone")
        self.asked.append(list(query_vector))
        return [Hit("c/new#s/0", 0.9)]


FIRST = [Hit("c/d#a/0", 0.8), Hit("page:c/d#a", 0.7), Hit("c/d#b/0", 0.6)]


def test_expand_vector_learns_from_chunks_and_replaces_the_list() -> None:
    snap = _Snapshot({"c/d#a/0": [0.0, 1.0], "c/d#b/0": [0.0, 1.0], "page:c/d#a": [5.0, 5.0]})
    out = expand_vector(snap, ["c"], [1.0, 0.0], FIRST, FIRST, 100)
    assert out.status == "done" and out.hits == [Hit("c/new#s/0", 0.9)]
    assert snap.read == ["c/d#a/0", "c/d#b/0"]  # a wiki page is a summary, not source text
    assert snap.asked == [pytest.approx(_unit([0.4, 0.6]))]
    assert out.detail == "rocchio done: alpha 0.4, beta 0.6, the mean of 2 of the top 2 chunk vector(s), 1 hit(s)"


def test_expand_vector_reads_at_most_the_feedback_depth() -> None:
    feedback = [Hit(f"c/d#s{i}/0", 1.0) for i in range(ROCCHIO_DOCS + 3)]
    snap = _Snapshot({h.id: [0.0, 1.0] for h in feedback})
    expand_vector(snap, ["c"], [1.0, 0.0], FIRST, feedback, 100)
    assert snap.read == [h.id for h in feedback[:ROCCHIO_DOCS]]


@pytest.mark.parametrize(("snap", "feedback", "start"), [
    (_Snapshot({}), [], "rocchio skipped (no chunk to learn from)"),
    (_Snapshot({}), [Hit("page:c/d#a", 1.0)], "rocchio skipped (no chunk to learn from)"),
    (_Snapshot({}), FIRST, "rocchio skipped (no usable feedback vector among the top 2 chunk(s))"),
    (_Snapshot({"c/d#a/0": [0.0, 1.0]}, fail="vectors"), FIRST, "rocchio error (RuntimeError: matrix gone)"),
    (_Snapshot({"c/d#a/0": [0.0, 1.0]}, fail="vector"), FIRST, "rocchio error (RuntimeError: index gone)"),
    (object(), FIRST, "rocchio error (AttributeError"),  # a snapshot with no stored vectors to read
])
def test_expand_vector_falls_back_to_the_plain_list(snap, feedback, start) -> None:
    out = expand_vector(snap, ["c"], [1.0, 0.0], FIRST, feedback, 100)
    assert out.hits == FIRST and out.status in ("skipped", "error")
    assert out.detail.startswith(start) and out.detail.endswith("the plain list, 3 hit(s)")


def test_a_zero_query_vector_keeps_the_plain_list() -> None:
    out = expand_vector(_Snapshot({"c/d#a/0": [0.0, 1.0]}), ["c"], [0.0, 0.0], FIRST, FIRST, 100)
    assert out.hits == FIRST and out.detail.startswith("rocchio skipped (the query vector is zero or not finite)")
