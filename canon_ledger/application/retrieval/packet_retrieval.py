"""L1 for packets: hybrid search over the story's own accepted chapters, before the chapter.

Only the story collection (``story:<id>``) is searched: its chunks come from accepted
chapter text, which is canon, so nothing unconfirmed can enter a packet through retrieval.
Only chapters before the packet's chapter count: a writer at chapter 5 must not be shown
chapter 8. Wiki pages of the collection enter only while its lint is green, and the ``wiki``
stage says which way it went. Nothing here raises: a failure is an ``error`` stage and the
packet is built from L0 alone.
"""

from __future__ import annotations

from typing import Any

from canon_ledger.application.knowledge.lint import lint
from canon_ledger.application.packets.packet import Stage
from canon_ledger.application.packets.ports import Recall, Recalled, Retriever
from canon_ledger.application.retrieval.earlier_chapters import EarlierChapters
from canon_ledger.application.retrieval.feedback import OFF
from canon_ledger.application.retrieval.search import SearchService
from canon_ledger.domain.chunking import story_collection

TOP_K = 8


class StoryRetriever(Retriever):
    """The packet compiler's Retriever port: a search (``SearchService``, which keeps the
    indexes current the way the store's searches do) through ``EarlierChapters``, and the
    wiki's lint from ``knowledge_reader``."""

    def __init__(self, search: SearchService, knowledge_reader: Any, top_k: int = TOP_K, feedback: str = OFF) -> None:
        self.search = search
        self.knowledge_reader = knowledge_reader
        self.top_k = top_k
        # RM3 on the keyword list: off for packets, even when keyword search answers alone. It
        # adds index reads to every packet, and its gain is measured on Cranfield queries
        # (docs/benchmarks.md), not on packet queries; a packet's L1 stays what it was.
        self.feedback = feedback

    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        collection = story_collection(story_id)
        try:
            result = self.search.search([collection], query, top_k or self.top_k, feedback=self.feedback,
                                        within=lambda snap: EarlierChapters(snap, chapter))
            hits = [h for h in result.hits if h.kind in ("chunk", "page")]
            pages = [h for h in hits if h.kind == "page"]
            wiki = Stage("wiki", "skipped", "no wiki page of the story ranked")
            if pages:
                with self.knowledge_reader.snapshot() as k:
                    report = lint(k, collection)
                if report.green:
                    wiki = Stage("wiki", "done", f"lint green: {len(pages)} page TLDR(s) offered")
                else:
                    codes = sorted({i.code for i in report.issues})
                    wiki = Stage("wiki", "skipped", f"lint not green ({len(report.issues)} issue(s): {', '.join(codes)}): "
                                                    f"{len(pages)} page(s) left out, chunks still offered")
                    hits = [h for h in hits if h.kind != "page"]
            recalled = [Recalled(h.id, "wiki_page" if h.kind == "page" else "chunk", h.text, tuple(h.sources))
                        for h in hits]
            return Recall(query, recalled, [*result.stages, wiki])
        except Exception as e:  # noqa: BLE001 - L1 is supplementary: the packet stands on L0
            return Recall(query, [], [Stage("l1-retrieval", "error",
                                            f"{type(e).__name__}: {str(e)[:160]}; L0 structured recall only")])
