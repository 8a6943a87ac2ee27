"""L1 as it was: a retriever that serves a packet's recorded hits again, rebuilt from the log.

Retrieval ranks with models, indexes and caches that are not events, so an audit does not
re-rank. It takes the hits PacketIssued recorded and rebuilds each one's text from the event
its source names: a chunk from the chapter text accepted there (chunked again, the same pure
function the projections use), a wiki page from the compile recorded there. A hit whose
event is not what it claims, or whose chapter text was replaced before the packet's position,
comes back with no text, so the replayed packet cannot match its hash.

``compile_packet`` is the one entry that compiles with a given version: the current one
(``compiler``), or an earlier one, frozen in its own module (``frozen``), for the packets it
issued. Nothing else imports the frozen versions (but a later frozen version, the one before it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from canon_ledger.application.packets import compiler
from canon_ledger.application.packets.compiler import COMPILER
from canon_ledger.application.packets.frozen import v1, v2, v3, v4, v5, v6, v7
from canon_ledger.application.packets.packet import Packet, Stage
from canon_ledger.application.packets.ports import CanonSnapshot, DraftView, Recall, Recalled, Retriever
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.chunking import chunk_chapter, story_collection
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.wiki import WikiPage, page_doc_id, page_summary

# Compilers 1-4 took no draft under review; 5, 6, 7 and the current one do.
_VERSIONS: dict[int, Callable[[CanonSnapshot, Request, TokenCounter, Retriever | None], Packet]] = {
    1: v1.compile_packet, 2: v2.compile_packet, 3: v3.compile_packet, 4: v4.compile_packet}
_WITH_DRAFT: dict[int, Callable[..., Packet]] = {5: v5.compile_packet, 6: v6.compile_packet, 7: v7.compile_packet,
                                                 COMPILER: compiler.compile_packet}


def compile_packet(snap: CanonSnapshot, req: Request, tokens: TokenCounter, retriever: Retriever | None = None,
                   *, compiler: int = COMPILER, draft: DraftView | None = None) -> Packet:
    """The packet compiler ``compiler`` (as PacketIssued recorded it) builds for ``req``
    (``draft``: the draft under review it recorded; only 5, 6 and the current compiler show one)."""
    if compiler in _WITH_DRAFT:
        return _WITH_DRAFT[compiler](snap, req, tokens, retriever, draft=draft)
    return _VERSIONS[compiler](snap, req, tokens, retriever)


class RecordedRecall:
    """A Retriever that answers with ``record`` (PacketIssued.recall), texts rebuilt from events.

    ``event_at(position)`` reads one event from the log; ``canon_events`` are the story's
    canon events up to the packet's position (the audit's replay holds them).
    """

    def __init__(self, record: Mapping[str, Any], event_at: Callable[[int], Any], canon_events: Mapping[int, Any],
                 tokens: TokenCounter) -> None:
        self.record = record
        self.event_at = event_at
        self.canon_events = canon_events
        self.tokens = tokens

    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        hits = [Recalled(h["id"], h["kind"], self._text(story_id, h, h["sources"]), tuple(h["sources"]))
                for h in self.record.get("hits", [])]
        stages = [Stage(s["step"], s["status"], s["detail"]) for s in self.record.get("stages", [])]
        return Recall(self.record.get("query", query), hits, stages)

    def _text(self, story_id: str, hit: Mapping[str, Any], sources: list[int]) -> str:
        if len(sources) != 1:
            return ""
        event = self.event_at(sources[0])
        if hit["kind"] == "chunk" and isinstance(event, Chapter.TextAccepted) and event.story_id == story_id:
            latest = max((p for p, e in self.canon_events.items() if isinstance(e, Chapter.TextAccepted)
                          and e.chapter == event.chapter), default=None)
            if latest != sources[0]:
                return ""  # replaced by a later acceptance before the packet: not canon then
            chunks = chunk_chapter(story_id, event.chapter, event.text, self.tokens).chunks
            return next((c.text for c in chunks if c.chunk_id == hit["id"]), "")
        if (hit["kind"] == "wiki_page" and isinstance(event, WikiPage.PageCompiled)
                and event.collection_id == story_collection(story_id)
                and page_doc_id(event.topic_id) == hit["id"]):
            return page_summary(event.page["title"], event.page["tldr"])
        return ""
