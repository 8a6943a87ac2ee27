"""Hybrid pseudo-relevance feedback (``feedback="hybrid"``) on both stores: the index hands back
its stored vectors, the feedback stage says what ran, the expansion learns only from the
searched collection, a failing side leaves its plain list, and neither the default search nor
a packet runs it."""

from __future__ import annotations

import math
import re

from canon_ledger.application.retrieval.search import HybridSearch
from tests.integration.test_retrieval_feedback import (FILLER, QUERY, STORY, Broken, _apply, _chapter, _ingest,
                                                       stem)


def _two_collections(rs) -> None:
    # Per collection 3 lamp documents and 36 fillers, each filler sentence 4 times: RM3's 10% df
    # cut keeps the lamp words (3 of 39 documents) and drops the fillers' (4 or more), so what
    # the expansion adds shows where its feedback came from.
    for collection, rare in (("alpha", "cinnabar"), ("beta", "quixote")):
        for i in range(3):
            _ingest(rs, collection, f"lamps-{i}.md", f"The {QUERY} at night, the {rare} wick {rare}.")
        for i in range(36):
            _ingest(rs, collection, f"filler-{i}.md", FILLER[i % len(FILLER)])
    rs.search_service().search(["alpha"], QUERY, 1)  # catch every index up


def _feedback(result):
    return next(s for s in result.stages if s.step == "feedback")


def _added(stage) -> list[str]:
    found = re.search(r"keyword prf done: .*?\+\d+ term\(s\) \[([^\]]*)\]", stage.detail)
    assert found, stage.detail
    return found.group(1).split()


def test_the_index_hands_back_unit_vectors_of_the_searched_collection_only(rs) -> None:
    _two_collections(rs)
    alpha, beta, unknown = "alpha/lamps-0.md#_/0", "beta/lamps-0.md#_/0", "alpha/nothing.md#_/0"
    with rs.retrieval_reader.snapshot() as snap:
        got = snap.vectors([alpha, beta, unknown], ["alpha"])
        assert snap.vectors([], ["alpha"]) == {}
    assert set(got) == {alpha}
    assert math.isclose(math.sqrt(sum(x * x for x in got[alpha])), 1.0, rel_tol=1e-5)


def test_hybrid_feedback_expands_both_lists_from_the_searched_collection(rs) -> None:
    _two_collections(rs)
    service = rs.search_service()
    service.pipeline.feedback = "hybrid"
    alpha = service.search(["alpha"], QUERY, 3)
    beta = service.search(["beta"], QUERY, 3)
    steps = [s.step for s in alpha.stages]
    assert steps.index("vector") < steps.index("feedback") < steps.index("fuse")
    for result in (alpha, beta):
        stage = _feedback(result)
        assert stage.status == "done" and "vector rocchio done: alpha 0.4, beta 0.6" in stage.detail
        assert len([h for h in result.hits if h.kind == "chunk"]) == 3
    assert stem("cinnabar") in _added(_feedback(alpha)) and stem("quixote") not in _added(_feedback(alpha))
    assert stem("quixote") in _added(_feedback(beta)) and stem("cinnabar") not in _added(_feedback(beta))


def test_the_default_search_runs_it_and_a_packet_does_not(rs) -> None:
    _two_collections(rs)
    default = rs.search_service().search(["alpha"], QUERY, 3)
    assert _feedback(default).status == "done"
    assert "feedback" not in [s.step for s in rs.search_service().search(["alpha"], QUERY, 3, feedback="alone").stages]
    _apply(rs, {"type": "start_story", "story_id": STORY, "title": "Harbour", "style_guardrails": ["plain"],
                "output_contract": "prose", "budgets": {"writer": 3000}})
    for chapter in (1, 2, 3):
        _apply(rs, *_chapter(chapter, f"The {QUERY} in chapter {chapter}."))
    rs.packets.retriever.search.pipeline.feedback = "hybrid"  # a packet passes its own mode, off, to the search
    recall = rs.packets.retriever.recall(STORY, 3, QUERY)
    assert recall.hits and "feedback" not in [s.step for s in recall.stages]


def test_a_failing_side_leaves_its_plain_list_and_the_search_answers(rs) -> None:
    _two_collections(rs)
    search = HybridSearch(rs.embedder, feedback="hybrid")
    with rs.retrieval_reader.snapshot() as snap:
        broken = search.search(Broken(snap, "vectors", "matrix gone"), ["alpha"], QUERY, 3)
    stage = _feedback(broken)
    assert stage.status == "done" and "vector rocchio error (RuntimeError: matrix gone): the plain list" in stage.detail
    assert "keyword prf done" in stage.detail and len(broken.hits) == 3
