"""Draft: submitted -> accepted | rejected. Drafts are never canon; only acceptance
copies the text onto the Chapter.

While submitted, a person may dismiss a continuity finding of the draft as intentional
(``FindingDismissed``), and an acceptance may carry the reason it overrode the
check's findings (``FindingsOverridden``, just before ``Accepted``)."""

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

    class FindingDismissed(Aggregate.Event):
        story_id: str
        draft_id: str
        chapter: int
        finding_id: str
        reason: str

    class FindingsOverridden(Aggregate.Event):
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
        self.dismissed: dict[str, str] = {}  # finding id -> why it was dismissed as intentional
        self.override_reason: str | None = None

    def accept(self, override_reason: str | None = None) -> None:
        """``override_reason``: why the author accepts over the continuity check's findings,
        recorded as ``FindingsOverridden`` just before ``Accepted``."""
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
        if override_reason is not None:
            self._override(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter,
                           reason=override_reason)
        self._accept(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter)

    @event(FindingsOverridden)
    def _override(self, story_id: str, draft_id: str, chapter: int, reason: str) -> None:
        self.override_reason = reason

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

    def dismiss_finding(self, finding_id: str, reason: str) -> None:
        """Mark one of the check's findings on this submitted draft as intentional."""
        dismissed = self.dismissed.get(finding_id)
        if dismissed == reason:
            return  # dismissed already, for this reason: nothing changes
        if self.status != SUBMITTED:
            raise RuleViolated(
                f"{self.status}_draft_findings_cannot_be_dismissed",
                f"draft {self.draft_id!r} is already {self.status}; only a submitted draft's findings can be "
                "dismissed",
                "draft_id",
            )
        if dismissed is not None:
            raise RuleViolated(
                "finding_already_dismissed",
                f"finding {finding_id!r} of draft {self.draft_id!r} is already dismissed ({dismissed}); a dismissal "
                "is kept as it was made",
                "finding_id",
            )
        self._dismiss(story_id=self.story_id, draft_id=self.draft_id, chapter=self.chapter, finding_id=finding_id,
                      reason=reason)

    @event(FindingDismissed)
    def _dismiss(self, story_id: str, draft_id: str, chapter: int, finding_id: str, reason: str) -> None:
        self.dismissed[finding_id] = reason


def accept_into(draft: Draft, chapter: Chapter, override_reason: str | None = None) -> None:
    """Accept ``draft``: its text becomes ``chapter``'s canon text (a later acceptance replaces
    it). Accepting the draft whose text the chapter has changes nothing, unless it names an
    override reason other than the one recorded (``draft_already_accepted``: the acceptance is
    kept as it was made)."""
    if draft.status == ACCEPTED and chapter.accepted_draft_id == draft.draft_id:
        if override_reason is None or override_reason == draft.override_reason:
            return
        raise RuleViolated(
            "draft_already_accepted",
            f"draft {draft.draft_id!r} is already accepted"
            + (f" (override reason: {draft.override_reason})" if draft.override_reason is not None else
               ", with no override reason")
            + "; an acceptance is kept as it was made, so its override reason cannot be given or changed afterwards",
            "draft_id",
        )
    draft.accept(override_reason)
    chapter.accept_text(draft.draft_id, draft.text)
