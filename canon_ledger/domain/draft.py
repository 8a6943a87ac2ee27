"""Draft: submitted -> accepted | rejected. Drafts are never canon; only acceptance
copies the text onto the Chapter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids
from canon_ledger.domain.errors import RuleViolated

if TYPE_CHECKING:
    from canon_ledger.domain.chapter import Chapter

SUBMITTED, ACCEPTED, REJECTED = "submitted", "accepted", "rejected"


class Draft(Aggregate):
    class Submitted(Aggregate.Created):
        story_id: str
        draft_id: str
        chapter: int
        text: str

    class Accepted(Aggregate.Event):
        story_id: str
        draft_id: str
        chapter: int

    class Rejected(Aggregate.Event):
        story_id: str
        draft_id: str
        chapter: int
        reason: str

    @staticmethod
    def create_id(story_id: str, draft_id: str, **_: Any) -> UUID:
        return ids.draft_id(story_id, draft_id)

    @event(Submitted)
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
                "draft_already_accepted",
                f"draft {self.draft_id!r} is already accepted, and a later draft's text has replaced it in chapter "
                f"{self.chapter}; submit its text again as a new draft to make it the chapter's text",
                "draft_id",
            )
        self._accept(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter)

    @event(Accepted)
    def _accept(self, story_id: str, draft_id: str, chapter: int) -> None:
        self.status = ACCEPTED

    def reject(self, reason: str) -> None:
        if self.status == REJECTED and reason == self.reason:
            return  # rejected already, for this reason: nothing changes
        if self.status != SUBMITTED:
            raise RuleViolated(
                f"{self.status}_draft_cannot_be_rejected",
                f"draft {self.draft_id!r} is already {self.status}"
                + (f" ({self.reason})" if self.status == REJECTED else "")
                + "; only a submitted draft can be rejected",
                "draft_id",
            )
        self._reject(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter, reason=reason)

    @event(Rejected)
    def _reject(self, story_id: str, draft_id: str, chapter: int, reason: str) -> None:
        self.status = REJECTED
        self.reason = reason


def accept_into(draft: Draft, chapter: Chapter) -> None:
    """Accept ``draft``: its text becomes ``chapter``'s canon text (a later acceptance replaces
    it). Accepting the draft whose text the chapter has changes nothing."""
    if draft.status == ACCEPTED and chapter.accepted_draft_id == draft.draft_id:
        return
    draft.accept()
    chapter.accept_text(draft.draft_id, draft.text)
