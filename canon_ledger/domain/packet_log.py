"""PacketRecord: one per distinct packet. ``PacketIssued`` records what a worker was given:
the position it reflects, the parameters it was compiled with, its items and its hash, so
it can be audited later by replaying history to that position.

Class version 2 adds ``compiler`` (which compiler built it: 1 = L0 only, 2 = L0 + L1
retrieval) and ``recall`` (what L1 retrieval selected: the query, each hit's id and kind, and
the retrieval stages). Retrieval ranks with models and caches that are not events, so an
audit does not re-rank: it checks that every recorded hit's text is canon at the packet's
position, rebuilt from the log, and that the rest of the packet replays to the same hash.

Class version 3 keeps only the kept (included or trimmed) items and sums up the dropped ones
(``dropped``: their count and a digest of their tier, kind, key and sources). A long story's
packet drops most of its candidates: each record was mostly dropped items, written on every
packet (the sizes: docs/benchmarks.md). The hash already pins every
byte of the packet; the items are there to say what differs when an audit fails.

Class version 4 writes the kept items compactly (``kept_items``): one group per tier, kind and
status, each row ``[key, *sources]``. The record is written on the command-to-packet path, and
field names repeated on every item were half its bytes (the sizes: docs/benchmarks.md). The
aggregate still holds ``items`` as one dict per kept item.

Class version 5 adds ``draft``: the draft a QA packet put under review (``{"draft_id",
"position"}``, its submission's position), None for every other packet. The draft is not
canon, so an audit cannot find it in the story's replayed canon: it reads its text again
from the event at that position. From compiler 8 the dict may hold ``dismissed``: ``[[finding_id,
position], ...]``, the continuity findings a person had dismissed (each read again from its
``Draft.FindingDismissed`` event), absent when none was.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids


class PacketRecord(Aggregate):
    @staticmethod
    def create_id(packet_id: str, **_: Any) -> UUID:
        return ids.packet_id(packet_id)

    class PacketIssued(Aggregate.Created):
        class_version = 5
        packet_id: str
        story_id: str
        role: str
        chapter: int
        scene: str | None
        budget: int
        position: int
        hash: str
        tokenizer: str
        items: list[list[Any]]  # kept_items()
        compiler: int
        recall: dict[str, Any] | None
        dropped: dict[str, Any]
        draft: dict[str, Any] | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Packets issued before L1 retrieval were compiled from L0 alone.
            state["compiler"] = 1
            state["recall"] = None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            items = state["items"]
            state["items"] = [i for i in items if i["status"] != "dropped"]
            state["dropped"] = dropped_summary(
                (i["tier"], i["kind"], i["key"], i["sources"]) for i in items if i["status"] == "dropped")

        @staticmethod
        def upcast_v3_v4(state: dict[str, Any]) -> None:
            state["items"] = kept_items((i["tier"], i["kind"], i["key"], i["status"], i["sources"])
                                        for i in state["items"])

        @staticmethod
        def upcast_v4_v5(state: dict[str, Any]) -> None:
            state["draft"] = None  # no packet held a draft before version 5

    @event(PacketIssued)
    def __init__(
        self,
        packet_id: str,
        story_id: str,
        role: str,
        chapter: int,
        scene: str | None,
        budget: int,
        position: int,
        hash: str,
        tokenizer: str,
        items: list[list[Any]],
        compiler: int = 1,
        recall: dict[str, Any] | None = None,
        dropped: dict[str, Any] | None = None,
        draft: dict[str, Any] | None = None,
    ) -> None:
        self.packet_id = packet_id
        self.story_id = story_id
        self.role = role
        self.chapter = chapter
        self.scene = scene
        self.budget = budget
        self.position = position
        self.hash = hash
        self.tokenizer = tokenizer
        self.items = [{"tier": tier, "kind": kind, "key": row[0], "status": status, "sources": row[1:]}
                      for tier, kind, status, rows in items for row in rows]
        self.compiler = compiler
        self.recall = recall
        self.dropped = dropped if dropped is not None else dropped_summary(())
        self.draft = draft


def dropped_summary(dropped: Iterable[tuple[str, str, str, Sequence[int]]]) -> dict[str, Any]:
    """``{"count", "digest"}`` of a packet's dropped items, each (tier, kind, key, sources), in order."""
    rows = [[tier, kind, key, list(sources)] for tier, kind, key, sources in dropped]
    body = json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode()
    return {"count": len(rows), "digest": hashlib.sha256(body).hexdigest()}


def kept_items(kept: Iterable[tuple[str, str, str, str, Sequence[int]]]) -> list[list[Any]]:
    """Kept items, each (tier, kind, key, status, sources), as ``[tier, kind, status, rows]``
    groups in order of first appearance, each row ``[key, *sources]``."""
    groups: dict[tuple[str, str, str], list[list[Any]]] = {}
    for tier, kind, key, status, sources in kept:
        groups.setdefault((tier, kind, status), []).append([key, *sources])
    return [[tier, kind, status, rows] for (tier, kind, status), rows in groups.items()]
