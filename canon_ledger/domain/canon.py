"""Canon: proposals and the entries they make.

A CanonProposal is proposed -> confirmed | rejected. Confirming one establishes the
CanonEntry for (story, kind, key), or, when the entry already exists, revises it: a
progression effective from the proposal's ``valid_from`` chapter. Retiring appends a
retirement to the same timeline, so "the entry as of chapter K" is one rule for all:
the last timeline step with ``valid_from <= K`` (ties: the later confirmation wins).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from canon_ledger.domain import ids, recall
from canon_ledger.domain.bounds import MAX_CHAPTER, MAX_ID, MAX_NODE_KIND, MAX_STATE, MAX_STORY_ID
# The as-of rule's home is ``canon_rules``; ``in_force`` and ``hidden_at`` are imported from here too.
from canon_ledger.domain.canon_rules import hidden_at as hidden_at
from canon_ledger.domain.canon_rules import in_force as in_force
from canon_ledger.domain.canon_rules import valid_to
from canon_ledger.domain.chapter import require_positive
from canon_ledger.domain.errors import RuleViolated

KINDS = (
    "character",
    "location",
    "world_rule",
    "item",
    "faction",
    "thread",
    "timeline_event",
    "development_chain",
)
PROPOSED, CONFIRMED, REJECTED = "proposed", "confirmed", "rejected"
# A proposal's states, the one vocabulary of every door. "pending", the word some
# pages and docs once used for PROPOSED, is read as PROPOSED by the filters, never written.
PROPOSAL_STATES = (PROPOSED, CONFIRMED, REJECTED)
PROPOSAL_STATE_ALIASES = {"pending": PROPOSED}


def require_kind(kind: str) -> None:
    if kind not in KINDS:
        raise RuleViolated("unknown_canon_kind", f"kind {kind!r} is not one of {', '.join(KINDS)}", "kind")


def _chapter_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CHAPTER


def hidden_book(fields: dict[str, Any]) -> str | None:
    """A series bible step's ``fields.hidden_until_book``: the book (a story id) its
    ``hidden_until`` counts in (``series.bible_reveal``); None when absent or not a story id
    (a version stored before the field was checked reads as naming none)."""
    book = fields.get("hidden_until_book")
    if isinstance(book, str) and 1 <= len(book) <= MAX_STORY_ID and not any(c.isspace() for c in book):
        return book
    return None


def require_control_fields(fields: dict[str, Any]) -> None:
    """``fields`` is free-form, except the keys packets act on: a reveal must never leak early
    because a ``hidden_until`` was a string (or a ``secret`` was "yes"), and ``recall``
    (``domain.recall``) must say what it means."""
    if "hidden_until" in fields and fields["hidden_until"] is not None and not _chapter_number(fields["hidden_until"]):
        raise RuleViolated("hidden_until_must_be_a_chapter",
                           f"fields.hidden_until must be a chapter number, 1..{MAX_CHAPTER:,}", "fields.hidden_until")
    if hidden_book(fields) is None and fields.get("hidden_until_book") is not None:
        raise RuleViolated("hidden_until_book_must_be_a_story",
                           f"fields.hidden_until_book must be a book's story id, 1..{MAX_STORY_ID} characters with no "
                           "whitespace (a series bible's step: the book its hidden_until counts in)",
                           "fields.hidden_until_book")
    if "state" in fields and not (isinstance(fields["state"], str) and len(fields["state"]) <= MAX_STATE):
        raise RuleViolated("state_must_be_text",
                           f"fields.state must be a string of at most {MAX_STATE} characters (e.g. open, resolved)",
                           "fields.state")
    if "secret" in fields and not isinstance(fields["secret"], bool):
        raise RuleViolated("secret_must_be_true_or_false",
                           "fields.secret must be true (a secret: known only to the characters recorded as knowing "
                           "it, record_knowledge) or false", "fields.secret")
    if "recall" in fields:
        recall.check(fields["recall"])
    nodes = fields.get("nodes")
    if nodes is None:
        return
    ok = isinstance(nodes, list) and all(
        isinstance(n, dict)
        and isinstance(n.get("id"), str) and 0 < len(n["id"]) <= MAX_ID
        and isinstance(n.get("text"), str)
        and isinstance(n.get("kind", "node"), str) and len(n.get("kind", "node")) <= MAX_NODE_KIND
        and (n.get("hidden_until") is None or _chapter_number(n["hidden_until"]))
        for n in nodes
    )
    if not ok or len({n["id"] for n in nodes}) != len(nodes):
        raise RuleViolated(
            "chain_nodes_must_be_well_formed",
            f"fields.nodes must be a list of {{id, text, kind?, hidden_until?}} with unique ids (at most {MAX_ID} "
            f"characters), kinds of at most {MAX_NODE_KIND} characters and chapter numbers",
            "fields.nodes",
        )


class CanonProposal(Aggregate):
    class Proposed(Aggregate.Created):
        story_id: str
        proposal_id: str
        kind: str
        key: str
        name: str
        aliases: list[str]
        text: str
        fields: dict[str, Any]
        tags: list[str]
        valid_from: int

    class Confirmed(Aggregate.Event):
        story_id: str
        proposal_id: str

    class Rejected(Aggregate.Event):
        story_id: str
        proposal_id: str
        reason: str

    @staticmethod
    def create_id(story_id: str, proposal_id: str, **_: Any) -> UUID:
        return ids.proposal_id(story_id, proposal_id)

    @event(Proposed)
    def __init__(
        self,
        story_id: str,
        proposal_id: str,
        kind: str,
        key: str,
        name: str,
        aliases: list[str],
        text: str,
        fields: dict[str, Any],
        tags: list[str],
        valid_from: int,
    ) -> None:
        self.story_id = story_id
        self.proposal_id = proposal_id
        self.kind = kind
        self.key = key
        self.name = name
        self.aliases = list(aliases)
        self.text = text
        self.fields = dict(fields)
        self.tags = list(tags)
        self.valid_from = valid_from
        self.status = PROPOSED
        self.reason: str | None = None

    @classmethod
    def propose(cls, **kwargs: Any) -> CanonProposal:
        require_kind(kwargs["kind"])
        require_positive(kwargs["valid_from"], "valid_from")
        require_control_fields(kwargs["fields"])
        return cls(**kwargs)

    def confirm(self) -> bool:
        """Confirm a proposal still proposed; False when it is confirmed already (nothing changes)."""
        if self.status == REJECTED:
            raise RuleViolated(
                "rejected_proposal_cannot_be_confirmed",
                f"proposal {self.proposal_id!r} was rejected ({self.reason}); a rejected proposal cannot be confirmed",
                "proposal_id",
            )
        if self.status == CONFIRMED:
            return False
        self._confirm(story_id=self.story_id, proposal_id=self.proposal_id)
        return True

    @event(Confirmed)
    def _confirm(self, story_id: str, proposal_id: str) -> None:
        self.status = CONFIRMED

    def reject(self, reason: str) -> None:
        if self.status == REJECTED and reason == self.reason:
            return  # rejected already, for this reason: nothing changes
        if self.status != PROPOSED:
            raise RuleViolated(
                f"{self.status}_proposal_cannot_be_rejected",
                f"proposal {self.proposal_id!r} is already {self.status}"
                + (f" ({self.reason})" if self.status == REJECTED else "")
                + "; only a proposal still proposed can be rejected",
                "proposal_id",
            )
        self._reject(story_id=self.story_id, proposal_id=self.proposal_id, reason=reason)

    @event(Rejected)
    def _reject(self, story_id: str, proposal_id: str, reason: str) -> None:
        self.status = REJECTED
        self.reason = reason

    def as_version(self) -> dict[str, Any]:
        return {
            "proposal_id": self.proposal_id,
            "valid_from": self.valid_from,
            "name": self.name,
            "aliases": list(self.aliases),
            "text": self.text,
            "fields": dict(self.fields),
            "tags": list(self.tags),
        }


class CanonEntry(Aggregate):
    """Confirmed canon for one (story, kind, key): a timeline of versions and retirements."""

    class Established(Aggregate.Created):
        story_id: str
        kind: str
        key: str
        version: dict[str, Any]

    class Revised(Aggregate.Event):
        story_id: str
        kind: str
        key: str
        version: dict[str, Any]

    class Retired(Aggregate.Event):
        story_id: str
        kind: str
        key: str
        valid_from: int
        reason: str

    class KnowledgeRecorded(Aggregate.Event):
        """``character`` (a character's key) knows this entry from ``chapter`` on, ``how`` (told
        by, overheard, deduced). A later record for the same character is a correction: it holds."""

        story_id: str
        kind: str
        key: str
        character: str
        chapter: int
        how: str

    @staticmethod
    def create_id(story_id: str, kind: str, key: str, **_: Any) -> UUID:
        return ids.canon_entry_id(story_id, kind, key)

    @event(Established)
    def __init__(self, story_id: str, kind: str, key: str, version: dict[str, Any]) -> None:
        self.story_id = story_id
        self.kind = kind
        self.key = key
        self.timeline: list[dict[str, Any]] = [dict(version)]
        # character key -> (chapter, how): who knows this entry, from when (the latest record).
        self.known_by: dict[str, tuple[int, str]] = {}

    def revise(self, version: dict[str, Any]) -> None:
        self._revise(story_id=self.story_id, kind=self.kind, key=self.key, version=version)

    @event(Revised)
    def _revise(self, story_id: str, kind: str, key: str, version: dict[str, Any]) -> None:
        self.timeline.append(dict(version))

    def as_of(self, chapter: int) -> dict[str, Any] | None:
        """The step in force at ``chapter`` (see ``valid_to``), None before the first one; a
        retirement step means 'not in canon'."""
        ends = valid_to([step["valid_from"] for step in self.timeline])
        for step, end in zip(self.timeline, ends):
            if step["valid_from"] <= chapter and (end is None or chapter < end):
                return step
        return None

    def retire(self, valid_from: int, reason: str) -> None:
        require_positive(valid_from, "valid_from")
        step = self.as_of(valid_from)
        if step == _retirement(valid_from, reason):
            return  # retired from this chapter already, for this reason: nothing changes
        if step is None or step.get("retired"):
            raise RuleViolated(
                "only_confirmed_canon_can_be_retired",
                f"{self.kind} {self.key!r} is not in canon at chapter {valid_from}",
                "valid_from",
            )
        self._retire(story_id=self.story_id, kind=self.kind, key=self.key, valid_from=valid_from, reason=reason)

    @event(Retired)
    def _retire(self, story_id: str, kind: str, key: str, valid_from: int, reason: str) -> None:
        self.timeline.append(_retirement(valid_from, reason))

    def in_canon_at(self, chapter: int) -> bool:
        """Is the entry in canon at ``chapter``: a version (not a retirement) in force then?"""
        step = self.as_of(chapter)
        return step is not None and not step.get("retired")

    def known(self, character: str) -> tuple[int, str] | None:
        """(chapter, how) of ``character``'s latest knowledge record of this entry, None when
        there is none. A snapshot taken before knowledge was recorded has no ``known_by``; one
        read back from JSON holds lists."""
        found = vars(self).get("known_by", {}).get(character)
        return None if found is None else (int(found[0]), str(found[1]))

    def record_knowledge(self, character: str, chapter: int, how: str) -> None:
        """``character`` knows this entry from ``chapter`` on, ``how``. The caller has checked
        the character and that the entry is in canon at ``chapter`` (``require_knowable``). The
        same record again changes nothing; another chapter or how is a correction."""
        require_positive(chapter, "chapter")
        if self.known(character) == (chapter, how):
            return  # recorded already: nothing changes
        self._record_knowledge(story_id=self.story_id, kind=self.kind, key=self.key, character=character,
                               chapter=chapter, how=how)

    @event(KnowledgeRecorded)
    def _record_knowledge(self, story_id: str, kind: str, key: str, character: str, chapter: int, how: str) -> None:
        vars(self).setdefault("known_by", {})[character] = (chapter, how)


def require_knowable(entry: CanonEntry | None, kind: str, key: str, chapter: int) -> CanonEntry:
    """The entry a character may be recorded as knowing at ``chapter``: confirmed and in canon
    then. Before its first version: ``knowledge_before_entry_exists``; never confirmed, or
    retired then: ``entry_not_in_canon_at_chapter``."""
    if entry is None:
        raise RuleViolated("entry_not_in_canon_at_chapter",
                           f"no confirmed {kind} {key!r}: only confirmed canon can be known", "key")
    if entry.as_of(chapter) is None:
        first = min(step["valid_from"] for step in entry.timeline)
        raise RuleViolated("knowledge_before_entry_exists",
                           f"{kind} {key!r} is in canon from chapter {first}, not at chapter {chapter}: a character "
                           "cannot know it before it exists", "chapter")
    if not entry.in_canon_at(chapter):
        raise RuleViolated("entry_not_in_canon_at_chapter",
                           f"{kind} {key!r} is retired at chapter {chapter}: not in canon then", "chapter")
    return entry


def _retirement(valid_from: int, reason: str) -> dict[str, Any]:
    """A retirement step of an entry's timeline."""
    return {"valid_from": valid_from, "retired": True, "reason": reason}


def confirm_proposal(proposal: CanonProposal, entry: CanonEntry | None) -> CanonEntry | None:
    """Confirm ``proposal`` into ``entry``: establish it, or revise it from ``valid_from``.
    None when it was confirmed before: its version is in the entry's timeline already."""
    if not proposal.confirm():
        return None
    version = proposal.as_version()
    if entry is None:
        return CanonEntry(story_id=proposal.story_id, kind=proposal.kind, key=proposal.key, version=version)
    entry.revise(version=version)
    return entry
