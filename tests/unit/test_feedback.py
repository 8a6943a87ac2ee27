"""RM3 pseudo-relevance feedback: the relevance model, the mix with the query, and the step
that never raises (application/retrieval/feedback.py)."""

from __future__ import annotations

import math

import pytest

from canon_ledger.application.retrieval.feedback import FEEDBACK_DOCS, expand, relevance_model, rm3
from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.ports import KeywordResult, TermStats

N = 100  # documents: a term in more than 10 of them is no evidence
RARE = {t: 1 for t in "ab cd ef gh ij kl mn op qr st uv wx yz".split()}


def test_no_feedback_document_gives_no_model_and_the_query_alone() -> None:
    assert relevance_model([], RARE, N) == {}
    assert rm3(["lamp", "oil"], {}) == {"lamp": 0.5, "oil": 0.5}


def test_one_document_gives_its_term_distribution() -> None:
    model = relevance_model([(["ab", "ab", "cd", "ab"], 7.5)], RARE, N)
    assert model == pytest.approx({"ab": 0.75, "cd": 0.25})  # the score scales, the norm cancels it


def test_documents_weigh_by_their_score() -> None:
    model = relevance_model([(["ab"], 3.0), (["cd"], 1.0)], RARE, N)
    assert model == pytest.approx({"ab": 0.75, "cd": 0.25})


def test_common_short_and_long_terms_are_no_evidence() -> None:
    df = {**RARE, "common": 11, "x": 1, "y" * 21: 1, "edge": 10}  # 10 of 100 is still usable
    model = relevance_model([(["common", "x", "y" * 21, "edge", "ab"], 1.0)], df, N)
    assert model == pytest.approx({"edge": 0.5, "ab": 0.5})
    assert relevance_model([(["common", "x"], 1.0)], df, N) == {}
    assert relevance_model([(["ab"], 1.0)], RARE, 0) == {}  # no statistics: nothing is usable


def test_each_document_and_the_model_keep_their_heaviest_terms() -> None:
    doc = [t for i, t in enumerate(RARE) for _ in range(i + 1)]  # yz most often, ab once
    model = relevance_model([(doc, 1.0)], RARE, N, size=3)
    assert list(model) == ["yz", "wx", "uv"] and math.isclose(sum(model.values()), 1.0)
    tied = relevance_model([(["cd", "ab", "ef"], 1.0)], RARE, N, size=2)
    assert set(tied) == {"ab", "cd"}  # equal weights: cut by term, not by order


def test_documents_with_no_score_add_nothing() -> None:
    assert relevance_model([(["ab"], 0.0), (["cd"], -1.0)], RARE, N) == {}


def test_terms_already_in_the_query_get_both_shares() -> None:
    weights = rm3(["lamp", "oil"], {"oil": 0.6, "wick": 0.4})
    assert weights == pytest.approx({"lamp": 0.25, "oil": 0.25 + 0.3, "wick": 0.2})
    assert math.isclose(sum(weights.values()), 1.0)


def test_a_model_of_query_terms_only_adds_nothing_new() -> None:
    weights = rm3(["lamp", "oil"], {"oil": 1.0})
    assert set(weights) == {"lamp", "oil"} and weights["oil"] > weights["lamp"]


class _Snapshot:
    def __init__(self, terms: dict[str, list[str]], df: dict[str, int] = RARE, fail: bool = False) -> None:
        self.terms, self.df, self.fail = terms, df, fail
        self.asked: list[dict[str, float]] = []

    def term_stats(self, doc_ids, collection_ids) -> TermStats:
        return TermStats({i: self.terms[i] for i in doc_ids if i in self.terms}, N, self.df)

    def keyword_weighted(self, weights, collection_ids, limit):
        if self.fail:
            raise RuntimeError("index gone")
        self.asked.append(dict(weights))
        return [Hit("c/new#s/0", 9.0)]


FIRST = KeywordResult([Hit("c/d#a/0", 5.0), Hit("page:c/d#a", 4.0), Hit("c/d#b/0", 3.0)], ["lamp"], "bm25")


def test_expand_learns_from_chunks_and_replaces_the_list() -> None:
    snap = _Snapshot({"c/d#a/0": ["lamp", "ab", "ab"], "c/d#b/0": ["cd"]})
    out = expand(snap, ["c"], FIRST, 100)
    assert out.hits == [Hit("c/new#s/0", 9.0)]
    [weights] = snap.asked
    assert set(weights) == {"lamp", "ab", "cd"} and math.isclose(sum(weights.values()), 1.0)
    assert out.detail.startswith("prf done: rm3 from the top 2 chunk(s)") and "+2 term(s) [ab cd]" in out.detail
    assert out.detail.endswith("1 hit(s)")


def test_expand_reads_at_most_the_feedback_depth() -> None:
    hits = [Hit(f"c/d#s{i}/0", 100.0 - i) for i in range(FEEDBACK_DOCS + 5)]
    snap = _Snapshot({h.id: ["ab" if i < FEEDBACK_DOCS else "cd"] for i, h in enumerate(hits)})
    expand(snap, ["c"], KeywordResult(hits, ["lamp"], "bm25"), 100)
    assert "cd" not in snap.asked[0]


@pytest.mark.parametrize(("first", "terms", "why"), [
    (KeywordResult([], ["lamp"], "bm25"), {}, "prf skipped (no keyword hit to learn from)"),
    (KeywordResult([Hit("page:c/d#a", 4.0)], ["lamp"], "bm25"), {}, "prf skipped (no chunk among the keyword hits)"),
    (KeywordResult([Hit("c/d#a/0", 4.0)], ["lamp"], "bm25"), {"c/d#a/0": ["lamp", "x"]}, "prf skipped (no usable term"),
])
def test_nothing_to_learn_from_keeps_the_plain_list(first, terms, why) -> None:
    snap = _Snapshot(terms, df={"lamp": 50, "x": 1})
    out = expand(snap, ["c"], first, 100)
    assert out.hits == first.hits and out.detail.startswith(why) and not snap.asked
    assert out.detail.endswith(f"the plain list, {len(first.hits)} hit(s)")


def test_a_failure_degrades_to_the_plain_list() -> None:
    out = expand(_Snapshot({"c/d#a/0": ["ab"]}, fail=True), ["c"], FIRST, 100)
    assert out.hits == FIRST.hits
    assert out.detail == "prf error (RuntimeError: index gone): the plain list, 3 hit(s)"
    assert expand(object(), ["c"], FIRST, 100).detail.startswith("prf error (AttributeError")


def test_expand_learns_from_a_given_feedback_set_not_the_keyword_list() -> None:
    # The hybrid's first pass: a chunk the keyword list did not rank, each counting equally.
    snap = _Snapshot({"c/d#a/0": ["lamp", "ab"], "c/x#z/0": ["yz", "yz"]})
    out = expand(snap, ["c"], FIRST, 100, feedback=[Hit("c/x#z/0", 1.0), Hit("page:c/x#z", 1.0)])
    [weights] = snap.asked
    assert set(weights) == {"lamp", "yz"} and out.detail.startswith("prf done: rm3 from the top 1 chunk(s)")


@pytest.mark.parametrize(("feedback", "why"), [
    ([], "prf skipped (no feedback hit to learn from)"),
    ([Hit("page:c/d#a", 1.0)], "prf skipped (no chunk among the feedback hits)"),
])
def test_an_empty_feedback_set_keeps_the_plain_list(feedback, why) -> None:
    snap = _Snapshot({"c/d#a/0": ["ab"]})
    out = expand(snap, ["c"], FIRST, 100, feedback=feedback)
    assert out.hits == FIRST.hits and out.status == "skipped" and out.detail.startswith(why) and not snap.asked
