"""Packet requests: read your writes, compile from one snapshot, record what was issued."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, TypeVar

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.packets.compiler import compile_packet, l1_query
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import (CanonReader, CanonSnapshot, DraftView, Drafts, Freshness,
                                                    Retriever)
from canon_ledger.application.packets.reading import Reading
from canon_ledger.application.packets.request import Request
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.packet_log import PacketRecord, dropped_summary, kept_items
from canon_ledger.domain.tokens import TokenCounter


T = TypeVar("T")


class Issued(NamedTuple):
    """A packet and whether the log holds its record (``PacketIssued``): True when this
    request recorded it or it was recorded before, False when it was not recorded."""

    packet: Packet
    recorded: bool


class PacketService:
    def __init__(self, ledger: CanonLedger, canon: Freshness, reader: CanonReader,
                 tokens: TokenCounter, retriever: Retriever | None = None, drafts: Drafts | None = None) -> None:
        self.ledger = ledger
        self.drafts = drafts  # where a qa packet's draft under review is read (``Request.draft``)
        self.retriever = retriever
        self.canon = canon
        self.reader = reader
        self.tokens = tokens
        self._end_seen = 0  # the largest log end this service has read
        self._recorded: dict[str, None] = {}  # ids this process has recorded: skip the doomed insert

    def l1_queries(self, story_id: str, chapter: int) -> list[str]:
        """What L1 would search with for ``chapter``'s packets as canon stands: the whole
        chapter's query and each scene card's (``compiler.l1_query``), once each, blank ones
        left out; none for an unknown story or chapter. A worker embeds them ahead of a request."""
        with self.reader.snapshot(story_id) as snap:
            story = snap.story(story_id)
            if story is None or snap.chapter(story_id, chapter) is None:
                return []
            whole = Reading(snap, Request(story_id, "writer", chapter), story, self.tokens)
            requests = [Request(story_id, "writer", chapter, scene=s.scene_id) for s in whole.cards(False)]
            queries = [l1_query(Reading(snap, r, story, self.tokens), []) for r in [whole.req, *requests]]
        return [q for q in dict.fromkeys(queries) if q.strip()]

    def packet(self, request: Request, *, after: int | None = None, record: bool = True) -> Packet:
        """Compile once the read models reflect ``after`` (default: everything applied so far).

        The packet's ``position`` is the last position that changed this story's canon, so
        asking again with no canon change in between gives the same bytes and packet_id.
        """
        return self.issue(request, after=after, record=record).packet

    def issue(self, request: Request, *, after: int | None = None, record: bool = True,
              may_record: Callable[[], bool] | None = None) -> Issued:
        """``packet``, saying whether the log holds its record. ``may_record`` (a caller's
        recording budget) is asked only when a record would be appended; when it answers
        False the packet (the same bytes and id) is answered unrecorded. A packet recorded
        before (by this process, another one or before a restart) counts as recorded and takes
        nothing from the budget."""
        target = self.within_log(after)
        draft = self.draft(request, target)
        packet = self.read_at(request.story_id, target,
                              lambda snap: compile_packet(snap, request, self.tokens, self.retriever, draft=draft))
        if packet.homes and not self.canon.known_to_reflect(target):
            # Workers split the build by story: the book's share reflects ``target``, its homes'
            # may not yet. Once each does, compile again.
            for home in packet.homes:
                self.canon.ensure_reflects(target, home)
            packet = self.read_at(request.story_id, target,
                                  lambda snap: compile_packet(snap, request, self.tokens, self.retriever, draft=draft))
        if not record:
            return Issued(packet, False)
        if packet.packet_id in self._recorded:
            return Issued(packet, True)
        if may_record is not None and not may_record():
            # Past the budget: recorded only if it was before (one read, never a write).
            if self.ledger.packet_records.get(packet.packet_id) is None:
                return Issued(packet, False)
        else:
            self.ledger.packet_records.record(issued(packet))
        self._remember(packet.packet_id)
        return Issued(packet, True)

    def read_at(self, story: str, target: int, read: Callable[[CanonSnapshot], T]) -> T:
        """``read`` of a snapshot of ``story``'s canon that reflects ``target`` (read your writes):
        the read model is caught up first, and read again if a rebuild switched builds in between."""
        self.canon.ensure_reflects(target, story)  # before the snapshot: a request after a write finds it behind
        for _ in range(5):
            with self.reader.snapshot(story) as snap:
                if self.canon.snapshot_reflects(snap.position, target):
                    return read(snap)
            # Behind all the same (a rebuild switched builds in between): catch up, read again.
            self.canon.catch_up_serving(target)
        raise CanonError("read_model_behind", f"the read model did not reach position {target}; retry")

    def _remember(self, packet_id: str) -> None:
        self._recorded[packet_id] = None
        if len(self._recorded) > 10_000:
            self._recorded.pop(next(iter(self._recorded)))

    def draft(self, request: Request, target: int) -> DraftView | None:
        """The draft ``request`` names, as of ``target`` (the compiler decides whether it may
        be shown); None when it names none or there is no such draft."""
        if request.draft is None or self.drafts is None:
            return None
        return self.drafts.draft(request.story_id, request.draft, target)

    def within_log(self, after: int | None, field: str = "after") -> int:
        """The position to reflect: ``after``, refused unless the log reaches it (a position
        beyond the log must never reach a tracking row), or the log's end. The log only
        grows, so an end seen once needs no second look for positions below it."""
        if after is not None and 0 <= after <= self._end_seen:
            return after
        end = self._end_seen = max(self._end_seen, self.ledger.event_log.position())
        if after is None:
            return end
        if not 0 <= after <= end:
            raise CanonError("position_beyond_log", f"position {after} is beyond the log, which ends at {end}", field)
        return after


def recorded(draft: DraftView) -> dict[str, object]:
    """What PacketIssued records of a draft under review: its id and submission's position, and
    (when a person dismissed some of its continuity findings, compiler 8) each dismissal's
    finding id and position, so an audit reads them again from the log."""
    out: dict[str, object] = {"draft_id": draft.draft_id, "position": draft.position}
    if draft.dismissed:
        out["dismissed"] = [[finding_id, position] for finding_id, _, position in draft.dismissed]
    return out


def issued(packet: Packet) -> PacketRecord:
    return PacketRecord(
        packet_id=packet.packet_id, story_id=packet.story_id, role=packet.role, chapter=packet.chapter,
        scene=packet.scene, budget=packet.budget, position=packet.position, hash=packet.hash,
        tokenizer=packet.tokenizer, compiler=packet.compiler,
        recall=packet.recall.record() if packet.recall is not None else None,
        draft=None if packet.draft is None else recorded(packet.draft),
        items=kept_items((i.tier, i.kind, i.key, i.status, i.sources) for i in packet.items if i.status != "dropped"),
        dropped=dropped_summary((i.tier, i.kind, i.key, i.sources) for i in packet.items if i.status == "dropped"),
    )
