"""Hybrid search's last step: ``top_k`` chunks, one place per section first, on a fake snapshot."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.search import HybridSearch, section_of
from canon_ledger.application.retrieval.ports import Doc, KeywordResult


class Snapshot:
    """Keyword only: the hits come back in the order given, best first."""

    vector_model = None

    def __init__(self, ranked: Sequence[str], stale: Sequence[str] = ()) -> None:
        self.ranked = list(ranked)
        self.stale = set(stale)

    def keyword(self, query: str, collection_ids: Sequence[str], limit: int) -> KeywordResult:
        n = len(self.ranked)
        return KeywordResult([Hit(cid, float(n - i)) for i, cid in enumerate(self.ranked[:limit])], ["q"], "fake bm25")

    def vector(self, query_vector: Sequence[float], collection_ids: Sequence[str], limit: int) -> list[Hit]:
        return []

    def docs(self, ids: Sequence[str]) -> dict[str, Doc]:
        return {i: Doc(i, "page" if i.startswith("page:") else "chunk", "c", f"text of {i}", i in self.stale)
                for i in ids if i in self.ranked}

    def overview(self, collection_id: str) -> Doc | None:
        return None


def _search(ranked: Sequence[str], top_k: int) -> tuple[list[str], str]:
    result = HybridSearch(embedder=None).search(Snapshot(ranked), ["c"], "q", top_k)
    select = next(s for s in result.stages if s.step == "select")
    return [h.id for h in result.hits], select.detail


def test_section_of_a_chunk_id() -> None:
    assert section_of("c/doc.md#_/0") == "c/doc.md#_"
    assert section_of("c/doc.md#intro/setup/12") == "c/doc.md#intro/setup"
    assert section_of("story:s/chapter-00005#_/3") == "story:s/chapter-00005#_"
    assert section_of("page:c/doc.md#intro") == "page:c/doc.md#intro"  # not a chunk: its own group
    assert section_of("odd") == "odd"


def test_a_second_chunk_of_a_section_waits_until_every_section_has_a_place() -> None:
    ranked = ["c/a#_/0", "c/a#_/1", "c/b#_/0", "c/a#x/0", "c/c#_/0", "c/b#_/1"]
    hits, detail = _search(ranked, 3)
    assert hits == ["c/a#_/0", "c/b#_/0", "c/a#x/0"]  # another section of document a is another passage
    assert detail == "3 chunk(s) from 3 section(s), 0 page(s)"


def test_waiting_chunks_fill_the_places_left_in_rank_order() -> None:
    ranked = ["c/a#_/0", "c/a#_/1", "c/b#_/0", "c/a#_/2", "c/b#_/1"]
    hits, detail = _search(ranked, 4)
    assert hits == ["c/a#_/0", "c/b#_/0", "c/a#_/1", "c/a#_/2"]  # never fewer chunks than asked for
    assert detail == "4 chunk(s) from 2 section(s), 0 page(s)"
    assert _search(ranked, 10)[0] == ["c/a#_/0", "c/b#_/0", "c/a#_/1", "c/a#_/2", "c/b#_/1"]


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_pages_keep_their_rank_rule(top_k: int) -> None:
    ranked = ["c/a#_/0", "c/a#_/1", "page:c/t", "c/b#_/0"]
    hits, _ = _search(ranked, top_k)
    chunks = [h for h in hits if not h.startswith("page:")]
    assert len(chunks) == min(top_k, 3)
    assert ("page:c/t" in hits) == (top_k > 2)  # offered only when it ranks within the first top_k places
    assert hits.index(chunks[0]) == 0


def test_rank_order_selection_gives_the_first_top_k_chunks_and_says_so() -> None:
    ranked = ["c/a#_/0", "c/a#_/1", "c/b#_/0", "c/a#_/2"]
    result = HybridSearch(embedder=None, per_section=False).search(Snapshot(ranked), ["c"], "q", 3)
    select = next(s for s in result.stages if s.step == "select")
    assert [h.id for h in result.hits] == ["c/a#_/0", "c/a#_/1", "c/b#_/0"]
    assert select.detail == "3 chunk(s) from 2 section(s), 0 page(s), in rank order"


def test_without_an_embedder_the_embed_stage_ends_with_the_note() -> None:
    note = "semantic model unavailable (MiniLM needs onnxruntime)"
    result = HybridSearch(embedder=None, embedder_note=note).search(Snapshot(["c/a#_/0"]), ["c"], "q", 1)
    embed = next(s for s in result.stages if s.step == "embed")
    assert embed.status == "skipped" and "keyword search only" in embed.detail and embed.detail.endswith(f"; {note}")
    bare = HybridSearch(embedder=None).search(Snapshot(["c/a#_/0"]), ["c"], "q", 1)
    assert next(s for s in bare.stages if s.step == "embed").detail == "no vector index configured; keyword search only"
