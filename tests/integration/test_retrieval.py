"""The retrieval read models and hybrid search on both stores (hashing embedder: fast and
deterministic; the packaged MiniLM has its own tests in test_retrieval_minilm.py)."""

from __future__ import annotations

import math
import uuid
from collections import Counter

import pytest

from canon_ledger.application.knowledge.ports import ProviderError
from canon_ledger.domain.commands import parse_command
from canon_ledger.application.retrieval.search import HybridSearch
from canon_ledger.infrastructure.bootstrap import bootstrap
from canon_ledger.projections.checksum import table_checksum
from canon_ledger.projections.retrieval import catch_up_vectors
from canon_ledger.projections.retrieval_text import terms
from canon_ledger.projections.runner import page_ops
from canon_ledger.projections.sql_ops import execute
from tests.helpers import apply_demo

GUIDE = """# Lamplighting

How the Guild trims lamps.

## Wicks

Trim the wick once a night. A trimmed wick burns clean and shows its memory.

## Oil

Colza oil only. Whale oil smokes and clouds the glass.

## Curfew

After the ninth bell only licensed lamplighters walk the Quay.
"""
OIL = "guild/guide.md#lamplighting/oil/0"
CURFEW = "guild/guide.md#lamplighting/curfew/0"
# The default search beside a vector list: hybrid feedback between the first pass and the second fusion.
STEPS = ["step-back", "embed", "keyword", "vector", "feedback", "fuse", "rerank", "overview", "select"]




def _apply(services, command: dict) -> None:
    [result] = services.ledger.apply([parse_command({"command_id": uuid.uuid4().hex, **command})])
    assert result.ok, result.as_dict()


def _ingest(services, text: str = GUIDE, document: str = "guide.md", collection: str = "guild") -> None:
    _apply(services, {"type": "ingest_document", "collection_id": collection, "document_id": document,
                      "title": "Guild Guide", "text": text})


def _keyword(services, query: str, collections=("guild",), limit: int = 20) -> list[str]:
    services.catch_up_retrieval()
    with services.retrieval_reader.snapshot() as snap:
        result = snap.keyword(query, list(collections), limit)
    return [h.id for h in result.hits]


def _search(services, query: str, top_k: int = 8, collections=("guild",), provider: str = "offline", **options):
    return services.search_service(provider, **options).search(list(collections), query, top_k)


def _checksums(services) -> tuple[str, str]:
    out = []
    for models in (services.retrieval, services.vectors):
        with models.read_engine.begin() as conn:
            out.append(table_checksum(conn, models.tables(models.active(conn))))
    return out[0], out[1]


def test_same_events_twice_change_nothing_and_a_rebuild_gives_the_same_tables(rs) -> None:
    apply_demo(rs)
    _ingest(rs)
    rs.catch_up_retrieval()
    before = _checksums(rs)
    hits_before = _keyword(rs, "lamp oil wick quay", ("guild", "story:lamplight"))
    for models in (rs.retrieval, rs.vectors):
        projection = models.runner(models.active()).projection
        events = rs.ledger.event_log.read(1, 100_000, None, projection.topics)
        with models.write_engine.begin() as conn:
            execute(conn, page_ops(conn, projection, events))
        with models.write_engine.begin() as conn:
            for one in events:
                execute(conn, page_ops(conn, projection, [one]))
                execute(conn, page_ops(conn, projection, [one]))
    assert _checksums(rs) == before
    assert _keyword(rs, "lamp oil wick quay", ("guild", "story:lamplight")) == hits_before  # the FTS index too
    rs.retrieval.rebuild()
    rs.vectors.rebuild()
    assert rs.retrieval.active().tag == "v1_2" and _checksums(rs) == before
    assert _keyword(rs, "lamp oil wick quay", ("guild", "story:lamplight")) == hits_before


def test_edits_and_removals_move_the_index(rs) -> None:
    _ingest(rs)
    assert _keyword(rs, "whale") == [OIL]
    _apply(rs, {"type": "edit_chunk", "chunk_id": OIL, "text": "Rapeseed oil, pressed cold."})
    assert _keyword(rs, "whale") == []
    assert _keyword(rs, "rapeseed") == [OIL]
    _ingest(rs, GUIDE.replace("## Curfew\n\nAfter the ninth bell only licensed lamplighters walk the Quay.\n", ""))
    assert _keyword(rs, "bell quay") == []
    result = _search(rs, "ninth bell on the quay")
    assert CURFEW not in [h.id for h in result.hits] and result.hits  # vectors dropped it too
    with rs.retrieval_reader.snapshot() as snap:
        [vector] = rs.embedder.embed(["Rapeseed oil, pressed cold."])
        assert CURFEW not in [h.id for h in snap.vector(vector, ["guild"], 50)]


def test_chapter_text_is_indexed_drafts_never_and_a_replaced_chapter_drops_its_old_chunks(rs) -> None:
    apply_demo(rs)
    assert _keyword(rs, "fog quay", ["story:lamplight"])
    assert _keyword(rs, "DRAFT-REJECTED-MARKER knife ledgers", ["story:lamplight"]) == []
    assert _keyword(rs, "DRAFT-PENDING-MARKER", ["story:lamplight"]) == []
    old = _keyword(rs, "porridge silt", ["story:lamplight"])
    assert old and all("chapter-00003" in i for i in old)
    _apply(rs, {"type": "submit_draft", "story_id": "lamplight", "chapter": 3, "draft_id": "d3-again",
                "text": "A second take: the gulls stole every lantern wick."})
    _apply(rs, {"type": "accept_draft", "story_id": "lamplight", "draft_id": "d3-again"})
    assert _keyword(rs, "porridge silt", ["story:lamplight"]) == []
    assert [i for i in _keyword(rs, "gulls", ["story:lamplight"])] == ["story:lamplight/chapter-00003#_/0"]


@pytest.fixture(scope="module")
def guide_rs(module_store_url: str):
    """``rs`` with the guild guide ingested, one per module and store: for the queries below,
    which only search it."""
    s = bootstrap(module_store_url, embedder="hashing")
    try:
        _ingest(s)
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("query", [
    'whale "', '"whale', "whale AND", "OR whale NOT", "NEAR(whale", "whale*", "coll:whale", "terms : whale",
    "whale's", "whale^2", "(whale", "whale)", "{whale}", "whale -oil", "whale + oil", "whale\x00", "wh'ale",
])
def test_query_syntax_is_never_read_as_fts_syntax(guide_rs, query: str) -> None:
    rs = guide_rs
    result = _search(rs, query)
    keyword = next(s for s in result.stages if s.step == "keyword")
    assert keyword.status == "done", keyword.detail
    assert OIL in _keyword(rs, query) or "whale" not in terms(query)


def test_an_unknown_word_does_not_empty_the_result(rs) -> None:
    _ingest(rs)
    assert _keyword(rs, "zyzzogeton whale") == [OIL]
    assert _keyword(rs, "zyzzogeton") == []
    assert _keyword(rs, "Whales!") == [OIL]  # stemmed and case-folded on both sides


def test_collections_scope_the_search(rs) -> None:
    _ingest(rs)
    _ingest(rs, "Whale oil is sold here.\n", "other.md", "market")
    assert _keyword(rs, "whale") == [OIL]
    assert _keyword(rs, "whale", ["market"]) == ["market/other.md#_/0"]
    assert sorted(_keyword(rs, "whale", ["guild", "market"])) == sorted([OIL, "market/other.md#_/0"])
    assert all(h.collection == "market" for h in _search(rs, "whale", collections=["market"]).hits)


def _bm25(docs: dict[str, str], query: list[str], k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    counts = {d: Counter(terms(t)) for d, t in docs.items()}
    n, avgdl = len(docs), sum(sum(c.values()) for c in counts.values()) / len(docs)
    out = {}
    for d, c in counts.items():
        dl = sum(c.values())
        score = 0.0
        for t in query:
            df = sum(1 for other in counts.values() if t in other)
            if c[t]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * dl / avgdl))
        if score:
            out[d] = score
    return out


def test_bm25_ranks_a_rarer_term_higher(rs) -> None:
    # "lamp" is in every document, "quay" in one. A document with lamp twice would win without IDF.
    texts = {f"d{i}.md": f"The lamp and the lamp post{' and the lamp' * (i % 2)}." for i in range(6)}
    texts["rare.md"] = "The lamp by the quay."
    for name, text in texts.items():
        _ingest(rs, text, name, "idf")
    hits = _keyword(rs, "lamp quay", ["idf"])
    assert hits[0] == "idf/rare.md#_/0" and len(hits) == 7
    if rs.config.is_postgres:  # the SQL computes exactly the textbook formula, IDF included
        with rs.retrieval_reader.snapshot() as snap:
            result = snap.keyword("lamp quay", ["idf"], 10)
        chunk_texts = {}
        with rs.knowledge_reader.snapshot() as ksnap:
            for t in ksnap.topics("idf"):
                chunk_texts.update({c.chunk_id: c.text for c in ksnap.topic_chunks("idf", t.topic_id)})
        expected = _bm25(chunk_texts, ["lamp", "quay"])
        assert result.method.startswith("postgres bm25")
        assert {h.id: round(h.score, 9) for h in result.hits} == {d: round(s, 9) for d, s in expected.items()}


def test_stages_with_the_llm_off_say_so_and_every_stage_has_a_detail(rs) -> None:
    _ingest(rs)
    result = _search(rs, "what is this guide about overall")
    assert [s.step for s in result.stages] == STEPS
    assert all(s.status in ("done", "skipped", "error") and s.detail for s in result.stages)
    stage = {s.step: s for s in result.stages}
    assert stage["step-back"].status == "skipped" and stage["step-back"].detail.startswith("offline:")
    assert stage["embed"].status == "done" and "not semantic" in stage["embed"].detail  # hashing, labelled
    assert stage["overview"].status == "done"
    assert result.hits[0].kind == "overview" and "Wicks" in result.hits[0].text
    assert [h.kind for h in result.hits[1:]] == ["chunk"] * 4
    narrow = _search(rs, "colza whale oil", top_k=2)
    assert [s.status for s in narrow.stages if s.step in ("step-back", "overview")] == ["skipped", "skipped"]
    assert narrow.hits[0].id == OIL and len(narrow.hits) == 2 and narrow.position == rs.ledger.event_log.position()


def test_quota_spent_still_answers_and_says_quota(rs) -> None:
    _ingest(rs)
    rs.quota.exhaust("gemini", "daily quota exhausted (test)")
    result = _search(rs, "what is this guide about overall", provider="gemini", api_key="test-key",
                     base_url="http://127.0.0.1:9")  # never called: the ledger says the day is spent
    stage = {s.step: s for s in result.stages}
    assert stage["step-back"].status == "skipped" and stage["step-back"].detail.startswith("quota:")
    assert stage["overview"].status == "done" and result.hits[0].kind == "overview"
    assert any(h.kind == "chunk" for h in result.hits)


class _Broken:
    """An embedder whose every call fails: the vector side must fall away, not the search."""

    uses_quota = False

    def __init__(self, name: str) -> None:
        self.name = name

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model file is corrupt")


def test_a_failing_embedder_leaves_keyword_search_standing(rs) -> None:
    _ingest(rs)
    rs.catch_up_retrieval()
    with rs.retrieval_reader.snapshot() as snap:
        result = HybridSearch(_Broken(rs.embedder.name)).search(snap, ["guild"], "whale oil", 3)
    stage = {s.step: s for s in result.stages}
    assert stage["embed"].status == "error" and "corrupt" in stage["embed"].detail
    assert stage["vector"].status == "skipped" and stage["keyword"].status == "done"
    assert [h.id for h in result.hits] == [OIL]


def test_a_failing_vector_catch_up_is_an_error_stage(store_url) -> None:
    services = bootstrap(store_url, embedder=_Broken("broken-1"))
    try:
        _ingest(services)
        result = _search(services, "whale oil")
        stage = {s.step: s for s in result.stages}
        assert stage["embed"].status == "error" and "not current" in stage["embed"].detail
        assert [h.id for h in result.hits] == [OIL]
        with pytest.raises(ProviderError, match="model file is corrupt"):  # the provider's fault, not the events'
            catch_up_vectors(services.vectors)
        assert services.quarantined() == []
    finally:
        services.close()


def test_pages_never_gate_recall_and_a_stale_page_serves_its_last_good_tldr(rs) -> None:
    _ingest(rs)
    assert rs.compiler("offline").nightly().compiled == 4
    fresh = _search(rs, "colza whale oil smokes glass", top_k=4)
    pages = [h for h in fresh.hits if h.kind == "page"]
    assert [h.kind for h in fresh.hits].count("chunk") == 4  # top_k chunks, whatever the pages do
    assert pages and not any(p.stale for p in pages)
    oil_page = next(h for h in pages if h.id == "page:guild/guide.md#lamplighting/oil")
    assert "Colza" in oil_page.text
    _apply(rs, {"type": "edit_chunk", "chunk_id": OIL, "text": "Whale oil is allowed now."})
    after = _search(rs, "colza whale oil smokes glass", top_k=4)
    oil_page = next(h for h in after.hits if h.id == "page:guild/guide.md#lamplighting/oil")
    assert oil_page.stale and "Colza" in oil_page.text  # the last good TLDR, flagged
    assert "stale" in next(s for s in after.stages if s.step == "select").detail
    assert next(h for h in after.hits if h.id == OIL).text.endswith("Whale oil is allowed now.")
