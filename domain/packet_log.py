"""PacketRecord: one per distinct packet. ``PacketIssued`` records what a worker was given:
the position it reflects, the parameters it was compiled with, its items and its hash, so
it can be audited later by replaying history to that position."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate, event

from domain import ids


class PacketRecord(Aggregate):
    @staticmethod
    def create_id(packet_id: str, **_: Any):  # type: ignore[override]
        return ids.packet_id(packet_id)

    @event("PacketIssued")
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
        items: list[dict[str, Any]],
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
        self.items = items
