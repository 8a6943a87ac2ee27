"""Chapter: number, volume, goals, scene cards, summary and its accepted (canon) text.

Accepted text is copied onto the chapter as ``TextAccepted`` so that readers of canon
never need to read draft events at all: drafts stay in the Draft aggregate.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.errors import RuleViolated

def require_positive(number: int, field: str) -> None:
    if number < 1:
        raise RuleViolated(
            f"{field}_must_be_positive", f"{field} must be a positive number, got {number}", field
        )


def _card(summary: str, tags: dict[str, list[str]], pov: str | None = None) -> dict[str, Any]:
    """A scene card as the chapter keeps it (``pov`` only when it has one: a card without one
    is the card it always was, snapshots included)."""
    card: dict[str, Any] = {"summary": summary, **{k: list(v) for k, v in tags.items()}}
    if pov is not None:
        card["pov"] = pov
    return card


class Chapter(Aggregate):
    class Planned(Aggregate.Created):
        story_id: str
        number: int
        volume: int
        goals: list[str]

    # Events carry their story and natural key, so read models never look anything up.
    class SceneCardAdded(Aggregate.Event):
        story_id: str
        chapter: int
        scene_id: str
        summary: str
        tags: dict[str, list[str]]
        # The point-of-view character's key. Optional: a card stored before it was
        # added has no such key, and reads as None (this default) when loaded.
        pov: str | None = None

    class TextAccepted(Aggregate.Event):
        story_id: str
        chapter: int
        draft_id: str
        text: str

    class SummaryRecorded(Aggregate.Event):
        story_id: str
        chapter: int
        text: str

    @staticmethod
    def create_id(story_id: str, number: int, **_: Any) -> UUID:
        return ids.chapter_id(story_id, number)

    @event(Planned)
    def __init__(self, story_id: str, number: int, volume: int, goals: list[str]) -> None:
        self.story_id = story_id
        self.number = number
        self.volume = volume
        self.goals = list(goals)
        self.scene_cards: dict[str, dict[str, Any]] = {}
        self.summary: str | None = None
        self.accepted_draft_id: str | None = None
        self.text: str | None = None

    @classmethod
    def plan(cls, story_id: str, number: int, volume: int, goals: list[str]) -> Chapter:
        require_positive(number, "chapter")
        require_positive(volume, "volume")
        return cls(story_id=story_id, number=number, volume=volume, goals=list(goals))

    # -- scene cards -------------------------------------------------------------------
    def add_scene_card(self, scene_id: str, summary: str, tags: dict[str, list[str]],
                       pov: str | None = None) -> None:
        existing = self.scene_cards.get(scene_id)
        if existing == _card(summary, tags, pov):
            return  # this very card is there already: nothing changes
        if existing is not None:
            raise RuleViolated(
                "scene_id_must_be_unique_in_chapter",
                f"chapter {self.number} already has a different scene card {scene_id!r}",
                "scene_id",
            )
        self._add_scene_card(
            story_id=self.story_id, chapter=self.number, scene_id=scene_id, summary=summary, tags=tags, pov=pov
        )

    @event(SceneCardAdded)
    def _add_scene_card(
        self, story_id: str, chapter: int, scene_id: str, summary: str, tags: dict[str, list[str]],
        pov: str | None = None,
    ) -> None:
        self.scene_cards[scene_id] = _card(summary, tags, pov)

    # -- canon text and summary ----------------------------------------------------------
    def accept_text(self, draft_id: str, text: str) -> None:
        self._accept_text(story_id=self.story_id, chapter=self.number, draft_id=draft_id, text=text)

    @event(TextAccepted)
    def _accept_text(self, story_id: str, chapter: int, draft_id: str, text: str) -> None:
        self.accepted_draft_id = draft_id
        self.text = text

    def record_summary(self, text: str) -> None:
        if text == self.summary:
            return  # the summary it has: nothing changes
        self._record_summary(story_id=self.story_id, chapter=self.number, text=text)

    @event(SummaryRecorded)
    def _record_summary(self, story_id: str, chapter: int, text: str) -> None:
        self.summary = text
