"""rerank never raises, whatever the scores, the lists (and the lists' scores it is scaled by), the
count or the plug-in does; and what it returns is always some of the candidates it was given,
each once, at most ``top_n`` of them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from canon_ledger.application.retrieval.fusion import rrf
from canon_ledger.application.retrieval.ports import Candidate, Hit
from canon_ledger.application.retrieval.rerank import rerank
from tests.helpers import examples

RETRIEVERS = ("keyword", "vector", "pages")
ids = st.sampled_from([f"c{i}" for i in range(12)])
scores = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e308, -1e308, 5e-324, 25.9, 0.43]),
    st.integers(min_value=-(10**30), max_value=10**30),
)
hit_lists = st.dictionaries(st.sampled_from(RETRIEVERS),
                            st.lists(st.builds(Hit, ids, scores), max_size=15), max_size=3)


@st.composite
def raw_candidates(draw: st.DrawFn) -> list[Candidate]:
    """Candidates built by hand, not by rrf: inconsistent ranks, duplicate ids, odd fused values."""
    out = []
    for _ in range(draw(st.integers(0, 10))):
        names = draw(st.lists(st.sampled_from(RETRIEVERS), unique=True, max_size=3))
        out.append(Candidate(
            draw(ids),
            {n: draw(scores) for n in names},
            {n: draw(st.integers(-3, 50)) for n in names if draw(st.booleans())},
            draw(st.floats(allow_nan=True, allow_infinity=True)),
        ))
    return out


class HypothesisScorer:
    name = "fuzzed-scorer"

    def __init__(self, mode: str, values: list[object]) -> None:
        self.mode, self.values = mode, values

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]:
        if self.mode == "raise":
            raise RuntimeError("boom")
        if self.mode == "values":
            return self.values  # type: ignore[return-value]  # wrong length, NaN, strings, ...
        return [float(len(t)) for t in texts]


scorers = st.one_of(
    st.none(),
    st.builds(HypothesisScorer, st.sampled_from(["raise", "values", "ok"]),
              st.lists(st.one_of(scores, st.text(max_size=3)), max_size=12)),
)
texts = st.one_of(st.none(), st.dictionaries(ids, st.text(max_size=20)))
# Each retriever's whole list of scores (the z-score's scale), or junk in its place.
list_scores = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(RETRIEVERS), st.one_of(st.lists(scores, max_size=20), st.none(), st.text(max_size=3)),
                    max_size=3),
    st.integers(),
)


@settings(max_examples=examples(100, 200), deadline=None)
@given(
    pool=st.one_of(hit_lists.map(rrf), raw_candidates()),
    top_n=st.integers(-5, 40),
    query=st.text(max_size=30),
    scorer=scorers,
    passages=texts,
    scales=list_scores,
)
def test_rerank_never_raises_and_returns_at_most_top_n_of_its_candidates(pool, top_n, query, scorer, passages,
                                                                         scales) -> None:
    result = rerank(query, pool, top_n, scorer=scorer, texts=passages, list_scores=scales)

    assert result.stage.step == "rerank"
    assert result.stage.status in ("done", "skipped", "error")
    assert result.stage.detail
    assert len(result.candidates) == min(max(top_n, 0), len(pool))
    # Each returned candidate is one given (same id, scores and ranks), and none comes back twice.
    given_ = [(c.id, repr(c.scores), repr(c.ranks)) for c in pool]
    returned = [(c.id, repr(c.scores), repr(c.ranks)) for c in result.candidates]
    for item in returned:
        assert returned.count(item) <= given_.count(item)
    if result.stage.status == "done" and scorer is None:
        fused = [c.fused for c in result.candidates]
        assert all(not math.isnan(f) for f in fused)
        assert fused == sorted(fused, reverse=True) or any(math.isinf(f) for f in fused)
