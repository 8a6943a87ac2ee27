"""A packet's retrieval snapshot (EarlierChapters) implements the whole RetrievalSnapshot port:
vector feedback reads stored vectors through it, and sees earlier chapters only."""

from __future__ import annotations

from canon_ledger.application.retrieval.ports import Hit
from canon_ledger.application.retrieval.rocchio import expand_vector
from canon_ledger.application.retrieval.ports import RetrievalSnapshot
from canon_ledger.application.retrieval.earlier_chapters import EarlierChapters

STORY = "s"
COLLECTION = f"story:{STORY}"


def _chunk(chapter: int) -> str:
    return f"{COLLECTION}/chapter-{chapter:05d}#x/0"


class Inner:
    vector_model = "m"

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.below: list[str | None] = []

    def vectors(self, ids, collection_ids):
        self.asked = list(ids)
        return {i: [1.0, 0.0] for i in ids}

    def vector(self, query_vector, collection_ids, limit, below=None):
        self.below.append(below)
        return [Hit(_chunk(c), 1.0) for c in (1, 2, 4)]


def test_it_declares_the_port() -> None:
    assert RetrievalSnapshot in EarlierChapters.__mro__


def test_stored_vectors_are_read_for_earlier_chapters_only() -> None:
    inner = Inner()
    got = EarlierChapters(inner, 3).vectors([_chunk(c) for c in (1, 2, 3, 4)], [COLLECTION])
    assert inner.asked == [_chunk(1), _chunk(2)]
    assert set(got) == {_chunk(1), _chunk(2)}


def test_rocchio_feedback_runs_through_it_and_stays_before_the_chapter() -> None:
    inner = Inner()
    snap = EarlierChapters(inner, 3)
    first = [Hit(_chunk(1), 1.0)]
    expansion = expand_vector(snap, [COLLECTION], [1.0, 0.0], first, first, 5)
    assert expansion.detail.startswith("rocchio done"), expansion.detail
    assert [h.id for h in expansion.hits] == [_chunk(1), _chunk(2)]
    assert inner.below == [f"{COLLECTION}/chapter-00003"]


def test_a_caller_bound_tightens_the_chapter_bound_never_loosens_it() -> None:
    inner = Inner()
    snap = EarlierChapters(inner, 3)
    snap.vector([1.0, 0.0], [COLLECTION], 5, below=f"{COLLECTION}/chapter-00002")
    snap.vector([1.0, 0.0], [COLLECTION], 5, below=f"{COLLECTION}/chapter-00009")
    assert inner.below == [f"{COLLECTION}/chapter-00002", f"{COLLECTION}/chapter-00003"]


def test_chapters_are_compared_by_number_past_the_ids_padding() -> None:
    # chapter-100000 sorts before chapter-20000 as text: a reader of chapter 20,000 must still
    # not see it, and a reader of chapter 100,001 must see chapter 20,000.
    inner = Inner()
    wide = [f"{COLLECTION}/chapter-{c:05d}#x/0" for c in (20_000, 100_000)]
    assert list(EarlierChapters(inner, 20_001).vectors(wide, [COLLECTION])) == [wide[0]]
    assert list(EarlierChapters(inner, 100_001).vectors(wide, [COLLECTION])) == wide
    assert EarlierChapters(inner, 3).vectors(["story:s/notes.md#x/0", "story:s/chapter-x#y/0"], [COLLECTION]) == {}
