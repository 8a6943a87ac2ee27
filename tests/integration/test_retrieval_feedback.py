"""RM3 feedback on the keyword list, on both stores: the keyword stage says what it did, its
terms come only from the searched collection and, for a packet, only from chapters before the
packet's, the weighted BM25 ranks as the plain one when every weight is 1, and a failure
leaves the plain list standing."""

from __future__ import annotations

import re
import uuid

import pytest

from canon_ledger.domain.commands import parse_command
from canon_ledger.application.retrieval.search import HybridSearch
from canon_ledger.application.retrieval.earlier_chapters import EarlierChapters
from canon_ledger.projections.retrieval_text import query_terms, terms

STORY = "harbour"
QUERY = "lantern harbour"
FILLER = ["rope and tar on the pier", "gulls above the fish market", "a clerk counts coins at noon",
          "rain on the slate roofs", "the ferry bell at dawn", "bread from the baker on Hill Street",
          "a cart with a broken axle", "children chase a dog by the well", "the tailor mends a coat"]


def stem(word: str) -> str:
    [t] = terms(word)
    return t




def _apply(services, *commands: dict) -> None:
    results = services.ledger.apply([parse_command({"command_id": uuid.uuid4().hex, **c}) for c in commands])
    assert all(r.ok for r in results), [r.as_dict() for r in results]


def _ingest(services, collection: str, document: str, text: str) -> None:
    _apply(services, {"type": "ingest_document", "collection_id": collection, "document_id": document,
                      "title": document, "text": text})


def _expansion(stage) -> list[str]:
    """The terms the keyword stage says feedback added."""
    assert stage.step == "keyword" and stage.status == "done", stage
    found = re.search(r"prf done: .*?\+\d+ term\(s\) \[([^\]]*)\]", stage.detail)
    assert found, stage.detail
    return found.group(1).split()


def _keyword_stage(result):
    return next(s for s in result.stages if s.step == "keyword")


def test_feedback_terms_come_only_from_the_searched_collection(rs) -> None:
    # Eleven documents per collection, so a word in one of them is under the 10% df cut.
    for collection, rare in (("alpha", "cinnabar"), ("beta", "quixote")):
        _ingest(rs, collection, "lamps.md", f"The {QUERY} lantern harbour night, the {rare} wick {rare}.")
        for i, filler in enumerate(FILLER + ["mist over the water"]):
            _ingest(rs, collection, f"filler-{i}.md", filler)
    service = rs.search_service()
    service.pipeline.feedback = "always"  # the hashing vectors would otherwise be fused with it
    alpha = _expansion(_keyword_stage(service.search(["alpha"], QUERY, 3)))
    beta = _expansion(_keyword_stage(service.search(["beta"], QUERY, 3)))
    assert stem("cinnabar") in alpha and stem("quixote") not in alpha
    assert stem("quixote") in beta and stem("cinnabar") not in beta


def _chapter(chapter: int, text: str) -> list[dict]:
    return [{"type": "plan_chapter", "story_id": STORY, "chapter": chapter, "volume": 1, "goals": ["go on"]},
            {"type": "submit_draft", "story_id": STORY, "chapter": chapter, "draft_id": f"d{chapter}", "text": text},
            {"type": "accept_draft", "story_id": STORY, "draft_id": f"d{chapter}"}]


def test_a_packet_learns_only_from_chapters_before_its_own(rs) -> None:
    _apply(rs, {"type": "start_story", "story_id": STORY, "title": "Harbour", "style_guardrails": ["plain"],
                "output_contract": "prose", "budgets": {"writer": 3000}})
    texts = {2: f"Ilse lit the {QUERY} lamps; the cinnabar wick smoked.",
             9: f"The {QUERY}, the {QUERY} again: obsidian glass, obsidian light."}
    for chapter in range(1, 12):
        _apply(rs, *_chapter(chapter, texts.get(chapter, FILLER[chapter % len(FILLER)] + f" in chapter {chapter}")))

    assert "prf skipped (off)" in next(s.detail for s in rs.packets.retriever.recall(STORY, 5, QUERY).stages
                                       if s.step == "keyword")  # packets leave feedback off by default
    rs.packets.retriever.feedback = "always"
    early = rs.packets.retriever.recall(STORY, 5, QUERY)  # the packet path: StoryRetriever
    early_terms = _expansion(next(s for s in early.stages if s.step == "keyword"))
    assert stem("cinnabar") in early_terms and stem("obsidian") not in early_terms
    assert all("chapter-0000" in h.id and int(h.id.split("chapter-")[1][:5]) < 5 for h in early.hits)

    late = rs.packets.retriever.recall(STORY, 10, QUERY)  # the control: chapter 9 is visible now
    assert stem("obsidian") in _expansion(next(s for s in late.stages if s.step == "keyword"))


def test_weighted_bm25_with_unit_weights_ranks_as_the_plain_query(rs) -> None:
    for i, text in enumerate([f"{QUERY} {QUERY} lantern", "harbour lights", "a lantern", *FILLER]):
        _ingest(rs, "alpha", f"doc-{i}.md", text)
    rs.search_service().search(["alpha"], QUERY, 1)  # catch the indexes up
    with rs.retrieval_reader.snapshot() as snap:
        plain = snap.keyword(QUERY, ["alpha"], 10).hits
        weighted = snap.keyword_weighted(dict.fromkeys(query_terms(QUERY), 1.0), ["alpha"], 10)
        halved = snap.keyword_weighted(dict.fromkeys(query_terms(QUERY), 0.5), ["alpha"], 10)
        below = snap.keyword_weighted(dict.fromkeys(query_terms(QUERY), 1.0), ["alpha"], 10, below="alpha/doc-1")
    assert [h.id for h in weighted] == [h.id for h in plain] and len(plain) == 3
    assert [h.score for h in weighted] == pytest.approx([h.score for h in plain])
    assert [h.score for h in halved] == pytest.approx([h.score / 2 for h in plain])
    assert [h.id for h in below] == ["alpha/doc-0.md#_/0"]


class Broken:
    """A snapshot whose ``method`` raises ``RuntimeError(message)``; the rest is the real one."""

    def __init__(self, inner, method: str, message: str) -> None:
        self.inner, self.method, self.message = inner, method, message
        self.vector_model = inner.vector_model

    def __getattr__(self, name):
        if name == self.method:
            def fail(*args, **kwargs):
                raise RuntimeError(self.message)
            return fail
        return getattr(self.inner, name)


def test_a_failing_feedback_step_leaves_the_plain_keyword_list(rs) -> None:
    _ingest(rs, "alpha", "lamps.md", f"The {QUERY}, the cinnabar wick.")
    for i, filler in enumerate(FILLER + ["mist over the water"]):
        _ingest(rs, "alpha", f"filler-{i}.md", filler)
    rs.search_service().search(["alpha"], QUERY, 1)
    with rs.retrieval_reader.snapshot() as snap:
        broken = HybridSearch(None).search(Broken(snap, "keyword_weighted", "postings gone"), ["alpha"], QUERY, 3)
        off = HybridSearch(None, feedback="off").search(snap, ["alpha"], QUERY, 3)
    stage = _keyword_stage(broken)
    assert stage.status == "done" and "prf error (RuntimeError: postings gone): the plain list" in stage.detail
    assert [h.id for h in broken.hits] == [h.id for h in off.hits]
    assert _keyword_stage(off).detail.endswith("prf skipped (off): the plain list, 1 hit(s)")


def test_the_packet_snapshot_hides_later_chapters_from_feedback_statistics_reads(rs) -> None:
    """EarlierChapters passes only earlier chapters' chunks to ``term_stats``."""

    class Inner:
        vector_model = None

        def term_stats(self, doc_ids, collection_ids):
            self.asked = list(doc_ids)
            return None

    inner = Inner()
    EarlierChapters(inner, 3).term_stats([f"story:{STORY}/chapter-0000{c}#x/0" for c in (1, 2, 3, 4)] +
                                         [f"page:story:{STORY}/chapter-00001#x"], [f"story:{STORY}"])
    assert inner.asked == [f"story:{STORY}/chapter-00001#x/0", f"story:{STORY}/chapter-00002#x/0",
                           f"page:story:{STORY}/chapter-00001#x"]


def test_by_default_the_fused_first_pass_feeds_rm3_and_alone_runs_it_only_when_keyword_answers_alone(rs) -> None:
    _ingest(rs, "alpha", "lamps.md", f"The {QUERY}, the cinnabar wick.")
    for i, filler in enumerate(FILLER + ["mist over the water"]):
        _ingest(rs, "alpha", f"filler-{i}.md", filler)
    hybrid = rs.search_service().search(["alpha"], QUERY, 3)  # hashing vectors: a vector list is fused
    assert "prf skipped (hybrid: the fused first pass feeds it" in _keyword_stage(hybrid).detail
    assert next(s for s in hybrid.stages if s.step == "feedback").status == "done"
    alone_beside = rs.search_service().search(["alpha"], QUERY, 3, feedback="alone")
    assert "prf skipped (a vector list is fused with it" in _keyword_stage(alone_beside).detail
    assert "feedback" not in [s.step for s in alone_beside.stages]
    with rs.retrieval_reader.snapshot() as snap:
        alone = HybridSearch(None).search(snap, ["alpha"], QUERY, 3)  # no embedder: keyword answers alone
        with pytest.raises(ValueError):
            HybridSearch(None, feedback="sometimes").search(snap, ["alpha"], QUERY, 3)
    assert stem("cinnabar") in _expansion(_keyword_stage(alone))
