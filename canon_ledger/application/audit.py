"""Audit a packet by replaying history: rebuild the story's canon from the log up to the
packet's recorded position, recompile with the recorded parameters, compare hashes, and
name the events (and commands) behind every item.

When the story's canon has not changed since, the live read model is checked too: a row
edited by hand shows up as a live packet that no longer matches its replay.

A replay depends only on the story, the position and the log up to that position, which never
changes once the log has reached it: the auditor keeps its last few replays (``KEPT_REPLAYS``),
so that auditing many packets issued at one position of a story replays it once. A kept replay
is used by one audit at a time (a lock each).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from canon_ledger.application.ledger import CanonLedger
from canon_ledger.application.packets.inherited import story_view
from canon_ledger.application.packets.packet import Item, Packet, Stage
from canon_ledger.application.packets.ports import CanonReader, CanonSnapshot, DraftView, Recall
from canon_ledger.application.packets.recipes import Request
from canon_ledger.application.packets.compiler import COMPILER
from canon_ledger.application.packets.replay import RecordedRecall, compile_packet
from canon_ledger.application.ports import Scratch, ScratchFactory
from canon_ledger.domain.draft import Draft
from canon_ledger.domain.errors import CanonError, InvalidCommand, NotFound
from canon_ledger.domain.packet_log import PacketRecord, dropped_summary
from canon_ledger.domain.receipt import CommandReceipt, event_ref
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.topics import stored_topics


KEPT_REPLAYS = 2  # replays (story, position) an auditor keeps, the most recently used


class _Kept:
    """One kept replay, built on first use; used under ``lock``, closed once evicted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.scratch: Scratch | None = None
        self.closed = False

    def discard(self) -> None:
        with self.lock:  # waits for an audit still reading it
            self.closed = True
            if self.scratch is not None:
                self.scratch.close()
                self.scratch = None


@dataclass
class Lineage:
    position: int
    type: str
    command_id: str | None
    command_type: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "type": self.type, "command_id": self.command_id,
                "command_type": self.command_type}


@dataclass
class AuditReport:
    packet_id: str
    story_id: str
    position: int
    recorded_hash: str
    replayed_hash: str
    replayed_events: int
    live: str  # "ok" | "mismatch" | "skipped: ..."
    items: list[tuple[Item, list[Lineage]]]
    differences: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.recorded_hash == self.replayed_hash and not self.live.startswith("mismatch")

    def as_dict(self) -> dict[str, Any]:
        return {
            "packet_id": self.packet_id, "story_id": self.story_id, "position": self.position,
            "verdict": "ok" if self.ok else "mismatch", "recorded_hash": self.recorded_hash,
            "replayed_hash": self.replayed_hash, "replayed_events": self.replayed_events, "live": self.live,
            "differences": self.differences,
            "items": [{"tier": i.tier, "kind": i.kind, "key": i.key, "status": i.status,
                       "sources": [s.as_dict() for s in lineage]} for i, lineage in self.items],
        }


def request_of(record: PacketRecord) -> Request:
    return Request(record.story_id, record.role, record.chapter, record.scene, record.budget,
                   record.draft["draft_id"] if record.draft else None)


def recorded_draft(record: PacketRecord, event_at: Callable[[int], Any]) -> DraftView | None:
    """The draft a packet recorded under review (``PacketIssued.draft``), its text read again
    from its submission's event. An event that is not that draft's submission gives no text,
    so the replayed packet cannot match its hash."""
    if record.draft is None:
        return None
    draft_id, position = record.draft["draft_id"], record.draft["position"]
    event = event_at(position)
    submitted = isinstance(event, Draft.Submitted) and (event.story_id, event.draft_id) == (record.story_id, draft_id)
    dismissed = []
    for finding_id, at in record.draft.get("dismissed", ()):
        was = event_at(at)  # a dismissal that is not one of this draft's reads as none
        if isinstance(was, Draft.FindingDismissed) and (was.story_id, was.draft_id, was.finding_id) == (
                record.story_id, draft_id, finding_id):
            dismissed.append((finding_id, was.reason, at))
    return DraftView(draft_id, record.chapter, "submitted", event.text if submitted else "", position,
                     dismissed=tuple(dismissed))


class Auditor:
    def __init__(self, ledger: CanonLedger, scratch: ScratchFactory, live: CanonReader,
                 live_catch_up: Callable[[int], int], tokens: TokenCounter) -> None:
        self.ledger = ledger
        self.scratch = scratch
        self.live = live
        self.live_catch_up = live_catch_up
        self.tokens = tokens
        self._kept: OrderedDict[tuple[str, int], _Kept] = OrderedDict()
        self._kept_lock = threading.Lock()

    @contextmanager
    def _replay(self, story_id: str, position: int) -> Iterator[Scratch]:
        """The story's canon replayed up to ``position``: a kept replay (the caller holds it
        alone until the block ends), or for a position the log has not reached yet (events may
        still land at or before it) a replay of the caller's own."""
        if position > self.ledger.event_log.position():
            with self.scratch_for(story_id, position) as replay:
                yield replay
            return
        key = (story_id, position)
        with self._kept_lock:
            kept = self._kept.pop(key, None) or _Kept()
            self._kept[key] = kept  # the most recently used last
            evicted = [self._kept.popitem(last=False)[1] for _ in range(len(self._kept) - KEPT_REPLAYS)]
        for old in evicted:
            old.discard()
        with kept.lock:
            if kept.closed:  # evicted by another audit between the two locks
                with self.scratch_for(story_id, position) as replay:
                    yield replay
                return
            if kept.scratch is None:
                kept.scratch = self.scratch(story_id, position)
            try:
                yield kept.scratch
            except CanonError:
                raise  # a refusal (NotFound: not planned yet at this position): the replay is sound
            except BaseException:  # anything else may have left it mid-read: not kept
                kept.closed = True
                kept.scratch.close()
                kept.scratch = None
                raise

    def close(self) -> None:
        """Close the kept replays."""
        with self._kept_lock:
            kept, self._kept = list(self._kept.values()), OrderedDict()
        for old in kept:
            old.discard()

    def packet_at(self, request: Request, position: int) -> Packet:
        """The packet as it would have been compiled at ``position`` (time travel).

        L0 is rebuilt from the log. Retrieval indexes are not kept per position, so L1 is the
        selection recorded by a packet issued for the same request at the same story position,
        if there was one; otherwise the packet says L1 was not replayed. A draft under review is
        checked against canon as it stands, not replayed: a request naming one is refused.
        Something the request names that did not exist yet (a story, a chapter, a scene) is
        refused as ``NotFound`` saying the position ("... as of position N"): every door asking
        at a position (the API's and the CLI's ``at``, the viewer's ``at``/``from``/``to``) says so.
        """
        if request.draft is not None:
            raise InvalidCommand("draft_not_replayed", "a packet at a past position replays canon only; a draft under "
                                 "review is checked against the canon of now: ask without `at`", "at")
        try:
            with self._replay(request.story_id, position) as replay, replay.snapshot() as snap:
                story = story_view(snap, request.story_id)
                issued = self._issued_like(request, story.position, story.budgets) if story else None
                retriever: Any = _NoReplay()
                if issued is not None and issued.recall is not None:
                    retriever = RecordedRecall(issued.recall, self.event_at, dict(replay.events), self.tokens)
                return compile_packet(snap, request, self.tokens, retriever)
        except NotFound as e:  # "chapter 5 ... has not been planned": at this position, maybe later
            raise NotFound(e.code, f"{e.message} as of position {position}", e.field) from None

    @contextmanager
    def scratch_for(self, story_id: str, position: int) -> Iterator[Scratch]:
        """A replay of ``story_id`` up to ``position`` of its own, not kept: closed on the way out."""
        replay = self.scratch(story_id, position)
        try:
            yield replay
        finally:
            replay.close()

    def _issued_like(self, request: Request, position: int, budgets: dict[str, int]) -> PacketRecord | None:
        budget = request.budget if request.budget is not None else budgets.get(request.role, 0)
        topics = stored_topics(PacketRecord.PacketIssued)
        # A packet reflecting ``position`` was issued after the log reached it: no need to
        # decode the PacketIssued events of the story's earlier history.
        start, end, found = position + 1, self.ledger.event_log.position(), None
        while start <= end:
            page = self.ledger.event_log.read(start, 5000, end, topics)
            for _, e in page:
                # The current compiler's packets say 7 when they are compiler 7's bytes (``stamped``).
                if (e.story_id, e.role, e.chapter, e.scene, e.budget, e.position) == (
                        request.story_id, request.role, request.chapter, request.scene, budget, position) and (
                        e.compiler in (7, COMPILER)):
                    found = e
            if len(page) < 5000:
                break
            start = page[-1][0] + 1
        return self.ledger.packet_records.get(found.packet_id) if found is not None else None

    def event_at(self, position: int) -> Any:
        """The event at one log position (None if there is none)."""
        page = self.ledger.event_log.read(position, 1, position)
        return page[0][1] if page and page[0][0] == position else None

    def audit(self, packet_id: str) -> AuditReport:
        record = self.ledger.packet_records.get(packet_id)
        if record is None:
            raise NotFound("unknown_packet", f"no packet {packet_id!r} was issued", "packet_id")
        request = request_of(record)
        draft = recorded_draft(record, self.event_at)
        with self._replay(record.story_id, record.position) as replay:
            events = dict(replay.events)  # the audit's own copy: the replay may be kept
            retriever = (RecordedRecall(record.recall, self.event_at, events, self.tokens)
                         if record.recall is not None else None)
            with replay.snapshot() as snap:
                replayed = self._recompile(snap, request, retriever, record.compiler, draft)
        differences = _differences(record, replayed)
        live = self._live_check(request, replayed, record.compiler, retriever, draft)
        lineage = self._lineage(record, replayed, events)
        return AuditReport(packet_id, record.story_id, record.position, record.hash, replayed.hash, len(events),
                           live, [(i, lineage.get(i.sources, [])) for i in replayed.items], differences)

    def _recompile(self, snap: CanonSnapshot, request: Request, retriever: Any, compiler: int,
                   draft: DraftView | None) -> Packet:
        """The packet again. A record with no recall was issued without L1 hits: either L1 had
        nothing to search with (the compiler says so only when a retriever is there), or no
        retriever was configured. Which of the two, the compile itself tells."""
        if retriever is not None:
            return compile_packet(snap, request, self.tokens, retriever, compiler=compiler, draft=draft)
        try:
            return compile_packet(snap, request, self.tokens, _NothingRecorded(), compiler=compiler, draft=draft)
        except _RecallNotRecorded:
            return compile_packet(snap, request, self.tokens, None, compiler=compiler, draft=draft)

    def _live_check(self, request: Request, replayed: Packet, compiler: int, retriever: Any,
                    draft: DraftView | None) -> str:
        try:
            self.live_catch_up(self.ledger.event_log.position())
            with self.live.snapshot() as snap:
                story = story_view(snap, request.story_id)
                if story is None or story.position != replayed.position:
                    moved = story.position if story else None
                    return f"skipped: the story's canon has moved on to position {moved}"
                live = self._recompile(snap, request, retriever, compiler, draft)
        except CanonError as e:
            # After an upgrade the live read model may be a build this code no longer reads: the
            # replay above needs none (it is made from the log), so the audit stands on it alone.
            if e.code != "read_model_outdated":
                raise
            return f"skipped: {e.message}"
        if live.hash == replayed.hash:
            return "ok"
        changed = [f"{a.tier} {a.kind} {a.key}" for a, b in zip(live.items, replayed.items) if a != b]
        if len(live.items) != len(replayed.items):
            changed.append(f"{len(live.items)} live items vs {len(replayed.items)} replayed")
        return "mismatch: the live read model differs from the log at " + "; ".join(changed)

    def _lineage(self, record: PacketRecord, packet: Packet, events: dict[int, Any]) -> dict[tuple[int, ...], list[Lineage]]:
        """Every item's sources with the command behind each."""
        by_position = self.lineage(record.story_id, {p for i in packet.items for p in i.sources}, events)
        return {item.sources: [by_position[p] for p in item.sources] for item in packet.items}

    def lineage(self, story: str, positions: Iterable[int], events: dict[int, Any] | None = None) -> dict[int, Lineage]:
        """The event at each position (its type; "unknown" if there is none) and the command
        behind it. ``events``: events already decoded, by position (the rest are read).

        A command's receipt is saved with its events, after them, so the receipt naming the
        event at p is among the first receipts after p (the next one, in practice): read forward
        from each source in small, growing windows instead of every receipt in the log. A v1
        receipt (no event list) closes its save: an event with no receipt naming it belongs to
        the first v1 receipt of the story after it."""
        events = events or {}
        topic = stored_topics(CommandReceipt.Recorded)
        end = self.ledger.event_log.position()
        by_ref: dict[str, tuple[str, str]] = {}
        closing: list[tuple[int, str, str]] = []  # v1 receipts of the story read so far, by position
        frontier = 0  # receipts are read contiguously from some start up to here

        def read(start: int, limit: int) -> int:
            """Receipts from ``start`` on; returns the last position read (``end`` at the log's end)."""
            page = self.ledger.event_log.read(start, limit, end, topic)
            for position, receipt in page:
                for ref in receipt.events:  # refs are unique across stories
                    by_ref[ref] = (receipt.command_id, receipt.command_type)
                if receipt.closes_its_save and receipt.story_id == story:
                    closing.append((position, receipt.command_id, receipt.command_type))
            return page[-1][0] if len(page) == limit else end

        def first_closing(p: int) -> tuple[str | None, str | None]:
            return next(((c, t) for q, c, t in closing if q > p), (None, None))

        found: dict[int, tuple[str | None, str | None]] = {}
        other: dict[int, Any] = {}  # sources outside the replayed canon events (L1 items'), read here
        for p in sorted(set(positions)):
            e = events.get(p)
            if e is None:
                e = other[p] = self.event_at(p)
            ref = event_ref(e.originator_id, e.originator_version) if e is not None else None
            if frontier < p:
                frontier = p
            window = 4
            while True:
                if ref is not None and ref in by_ref:
                    found[p] = by_ref[ref]
                    break
                command = first_closing(p)
                if command[0] is not None or frontier >= end:
                    found[p] = command
                    break
                frontier = read(frontier + 1, window)
                window = min(window * 4, 4096)
        out: dict[int, Lineage] = {}
        for p, command in found.items():
            e = events[p] if p in events else other.get(p)
            out[p] = Lineage(p, type(e).__qualname__ if e is not None else "unknown", *command)
        return out


class _NoReplay:
    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        return Recall(query, [], [Stage("l1-retrieval", "skipped",
                                        "time travel: no packet was issued for this request at this position, and "
                                        "retrieval indexes are not kept per position; L0 only")])


class _RecallNotRecorded(Exception):
    """The compile asked for L1 hits that the packet's record does not hold."""


class _NothingRecorded:
    """A retriever for a record with no recall: asking it means no retriever was configured."""

    def recall(self, story_id: str, chapter: int, query: str, top_k: int | None = None) -> Recall:
        raise _RecallNotRecorded


def _differences(record: PacketRecord, replayed: Packet) -> list[str]:
    """What differs, as far as the record tells: its kept items in full, its dropped ones summed up."""
    if record.hash == replayed.hash:
        return []
    recorded = {(i["tier"], i["kind"], i["key"]): i for i in record.items}
    now = {(i.tier, i.kind, i.key): i for i in replayed.items if i.status != "dropped"}
    out = []
    for key in recorded.keys() - now.keys():
        out.append(f"recorded item {' '.join(key)} is not kept in the replay")
    for key in now.keys() - recorded.keys():
        out.append(f"the replay keeps an item the record did not: {' '.join(key)}")
    for key in recorded.keys() & now.keys():
        r, n = recorded[key], now[key]
        if r["status"] != n.status or list(r["sources"]) != list(n.sources):
            out.append(f"{' '.join(key)}: recorded {r['status']} from {r['sources']}, replayed {n.status} "
                       f"from {list(n.sources)}")
    dropped = dropped_summary((i.tier, i.kind, i.key, i.sources) for i in replayed.items if i.status == "dropped")
    if dropped != record.dropped:
        out.append(f"dropped items differ: {record.dropped['count']} recorded, {dropped['count']} replayed")
    if not out:
        out.append("same items, statuses and sources; item texts or reasons differ (the record keeps hashes, not texts)")
    return sorted(out)
