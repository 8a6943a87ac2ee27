"""Volume: holds the layer-1 summary of a run of chapters (~every 100)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.chapter import require_positive


class Volume(Aggregate):
    class Opened(Aggregate.Created):
        story_id: str
        number: int

    class SummaryRecorded(Aggregate.Event):
        story_id: str
        volume: int
        text: str

    @staticmethod
    def create_id(story_id: str, number: int, **_: Any) -> UUID:
        return ids.volume_id(story_id, number)

    @event(Opened)
    def __init__(self, story_id: str, number: int) -> None:
        self.story_id = story_id
        self.number = number
        self.summary: str | None = None

    @classmethod
    def open(cls, story_id: str, number: int) -> Volume:
        require_positive(number, "volume")
        return cls(story_id=story_id, number=number)

    def record_summary(self, text: str) -> None:
        if text == self.summary:
            return  # the summary it has: nothing changes
        self._record_summary(story_id=self.story_id, volume=self.number, text=text)

    @event(SummaryRecorded)
    def _record_summary(self, story_id: str, volume: int, text: str) -> None:
        self.summary = text
