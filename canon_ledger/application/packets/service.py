"""Packet requests: read your writes, compile from one snapshot, record what was issued."""

from __future__ import annotations

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.packets.compiler import compile_packet
from canon_ledger.application.packets.packet import Packet
from canon_ledger.application.packets.ports import CanonReader, DraftView, Drafts, Freshness, Retriever
from canon_ledger.application.packets.recipes import Request
from canon_ledger.domain.errors import CanonError
from canon_ledger.domain.packet_log import PacketRecord, dropped_summary, kept_items
from canon_ledger.domain.tokens import TokenCounter


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

    def packet(self, request: Request, *, after: int | None = None, record: bool = True) -> Packet:
        """Compile once the read models reflect ``after`` (default: everything applied so far).

        The packet's ``position`` is the last position that changed this story's canon, so
        asking again with no canon change in between gives the same bytes and packet_id.
        """
        target = self.within_log(after)
        story = request.story_id
        draft = self.draft(request, target)
        self.canon.reach(target, story)  # before the snapshot: a request after a write finds it behind
        for _ in range(5):
            with self.reader.snapshot(story) as snap:
                if self.canon.reflects(snap.position, target):
                    packet = compile_packet(snap, request, self.tokens, self.retriever, draft=draft)
                    break
            # Behind all the same (a rebuild switched builds in between): catch up, read again.
            self.canon.catch_up(target)
        else:
            raise CanonError("read_model_behind", f"the read model did not reach position {target}; retry")
        if record and packet.packet_id not in self._recorded:
            self.ledger.record_packet(issued(packet))
            self._recorded[packet.packet_id] = None
            if len(self._recorded) > 10_000:
                self._recorded.pop(next(iter(self._recorded)))
        return packet

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
        end = self._end_seen = max(self._end_seen, self.ledger.position())
        if after is None:
            return end
        if not 0 <= after <= end:
            raise CanonError("position_beyond_log", f"position {after} is beyond the log, which ends at {end}", field)
        return after


def issued(packet: Packet) -> PacketRecord:
    return PacketRecord(
        packet_id=packet.packet_id, story_id=packet.story_id, role=packet.role, chapter=packet.chapter,
        scene=packet.scene, budget=packet.budget, position=packet.position, hash=packet.hash,
        tokenizer=packet.tokenizer, compiler=packet.compiler,
        recall=packet.recall.record() if packet.recall is not None else None,
        draft=None if packet.draft is None else {"draft_id": packet.draft.draft_id, "position": packet.draft.position},
        items=kept_items((i.tier, i.kind, i.key, i.status, i.sources) for i in packet.items if i.status != "dropped"),
        dropped=dropped_summary((i.tier, i.kind, i.key, i.sources) for i in packet.items if i.status == "dropped"),
    )
