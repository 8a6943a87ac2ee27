"""Draft: submitted -> accepted | rejected. Drafts are never canon; only acceptance
copies the text onto the Chapter."""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate, event

from domain import ids
from domain.errors import RuleViolated

SUBMITTED, ACCEPTED, REJECTED = "submitted", "accepted", "rejected"


class Draft(Aggregate):
    @staticmethod
    def create_id(story_id: str, draft_id: str, **_: Any):  # type: ignore[override]
        return ids.draft_id(story_id, draft_id)

    @event("Submitted")
    def __init__(self, story_id: str, draft_id: str, chapter: int, text: str) -> None:
        self.story_id = story_id
        self.draft_id = draft_id
        self.chapter = chapter
        self.text = text
        self.status = SUBMITTED
        self.reason: str | None = None

    def accept(self) -> None:
        if self.status == REJECTED:
            raise RuleViolated(
                "rejected_draft_cannot_be_accepted",
                f"draft {self.draft_id!r} was rejected ({self.reason}); a rejected draft cannot be accepted",
                "draft_id",
            )
        if self.status == ACCEPTED:
            raise RuleViolated(
                "draft_already_accepted", f"draft {self.draft_id!r} is already accepted", "draft_id"
            )
        self._accept(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter)

    @event("Accepted")
    def _accept(self, story_id: str, draft_id: str, chapter: int) -> None:
        self.status = ACCEPTED

    def reject(self, reason: str) -> None:
        if self.status != SUBMITTED:
            raise RuleViolated(
                f"{self.status}_draft_cannot_be_rejected",
                f"draft {self.draft_id!r} is already {self.status}; only a submitted draft can be rejected",
                "draft_id",
            )
        self._reject(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter, reason=reason)

    @event("Rejected")
    def _reject(self, story_id: str, draft_id: str, chapter: int, reason: str) -> None:
        self.status = REJECTED
        self.reason = reason
