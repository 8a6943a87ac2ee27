"""The authoring app's read model: drafts and proposals in every state.

Nothing on the packet path imports this module or reads these tables; a test holds that.

Version history (a store whose active build is older refuses to serve until ``canon rebuild``,
``read_models.Outdated``):
- v1: the first shape.
- v2: a proposal's whole version: ``aliases``, ``fields`` and ``tags`` (JSON, as proposed),
  and ``step``, the canon entry's timeline step its confirmation made (set from the
  ``CanonEntry.Established``/``Revised`` event naming it; NULL until then). The canon model
  keeps a step's rendered text and no fields, so a reviewer's "the version in force" beside a
  proposal is this row, found by (story, kind, key, step).
- v3: ``authoring_dismissed``, one row per continuity finding a person dismissed as
  intentional (``Draft.FindingDismissed``: story, draft, finding id, reason, source position),
  and the drafts' ``override_reason``, why an accept overrode the check's findings
  (``Draft.FindingsOverridden``; NULL: none given).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import singledispatchmethod
from typing import Any

from canon_ledger.domain.topics import stored_topics
from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, Text

from canon_ledger.domain.canon import CanonEntry, CanonProposal
from canon_ledger.domain.draft import Draft
from canon_ledger.projections.partitioning import BY_STORY
from canon_ledger.projections.sql_ops import Op, Update, Upsert, no_ops, ops_of

VERSION = 3


@dataclass(frozen=True)
class AuthoringTables:
    tag: str
    version: int
    metadata: MetaData
    drafts: Table
    proposals: Table
    dismissed: Table

    def all(self) -> list[Table]:
        return [self.drafts, self.proposals, self.dismissed]


def authoring_tables(tag: str, version: int = VERSION) -> AuthoringTables:
    md = MetaData()
    drafts = Table(
        f"authoring_drafts_{tag}", md,
        Column("story_id", String(200), primary_key=True),
        Column("draft_id", String(200), primary_key=True),
        Column("chapter", Integer, nullable=False),
        Column("status", String(20), nullable=False),
        Column("text", Text, nullable=False),
        Column("reason", Text),
        Column("source", Integer, nullable=False),
        Column("override_reason", Text),  # v3: why its accept overrode the continuity findings (NULL: none)
    )
    proposals = Table(
        f"authoring_proposals_{tag}", md,
        Column("story_id", String(200), primary_key=True),
        Column("proposal_id", String(200), primary_key=True),
        Column("kind", String(40), nullable=False),
        Column("key", String(200), nullable=False),
        Column("name", Text, nullable=False),
        Column("text", Text, nullable=False),
        Column("valid_from", Integer, nullable=False),
        Column("status", String(20), nullable=False),
        Column("reason", Text),
        Column("source", Integer, nullable=False),
        Column("aliases", JSON),  # v2: the proposal's version as proposed
        Column("fields", JSON),
        Column("tags", JSON),
        Column("step", Integer),  # v2: the entry's timeline step its confirmation made (NULL: none yet)
    )
    dismissed = Table(  # v3: continuity findings dismissed as intentional, per draft
        f"authoring_dismissed_{tag}", md,
        Column("story_id", String(200), primary_key=True),
        Column("draft_id", String(200), primary_key=True),
        Column("finding_id", String(40), primary_key=True),
        Column("reason", Text, nullable=False),
        Column("source", Integer, nullable=False),
    )
    return AuthoringTables(tag, version, md, drafts, proposals, dismissed)


class AuthoringProjection:
    """One row per draft and per proposal, with its latest status and the position that set it.

    ``on`` gives one event's ops, dispatched on the event's type: one ``on.register`` per
    handled type, and ``HANDLED`` (hence ``topics``) is read from that registry."""

    name = "authoring"
    partitioning = BY_STORY  # every event names its story; workers may split a build by it

    def __init__(self, tables: AuthoringTables) -> None:
        self.tables = tables
        self.topics = stored_topics(*self.HANDLED)

    def ops(self, events: list[tuple[int, Any]]) -> list[Op]:
        return ops_of(self.on, events)

    on = singledispatchmethod(no_ops)

    @on.register
    def _(self, event: Draft.Submitted, position: int) -> list[Op]:
        return [Upsert(self.tables.drafts, {"story_id": event.story_id, "draft_id": event.draft_id, "chapter": event.chapter,
                                       "status": "submitted", "text": event.text, "reason": None, "source": position,
                                       "override_reason": None})]

    @on.register
    def _(self, event: Draft.Accepted | Draft.Rejected, position: int) -> list[Op]:
        return [Update(self.tables.drafts, {"story_id": event.story_id, "draft_id": event.draft_id},
                       {"status": _status(event), "reason": getattr(event, "reason", None), "source": position})]

    @on.register
    def _(self, event: Draft.FindingsOverridden, position: int) -> list[Op]:
        return [Update(self.tables.drafts, {"story_id": event.story_id, "draft_id": event.draft_id},
                       {"override_reason": event.reason})]

    @on.register
    def _(self, event: Draft.FindingDismissed, position: int) -> list[Op]:
        return [Upsert(self.tables.dismissed, {"story_id": event.story_id, "draft_id": event.draft_id,
                                          "finding_id": event.finding_id, "reason": event.reason,
                                          "source": position})]

    @on.register
    def _(self, event: CanonProposal.Proposed, position: int) -> list[Op]:
        return [Upsert(self.tables.proposals, {"story_id": event.story_id, "proposal_id": event.proposal_id,
                                          "kind": event.kind, "key": event.key, "name": event.name, "text": event.text,
                                          "valid_from": event.valid_from, "status": "proposed", "reason": None,
                                          "source": position, "aliases": list(event.aliases),
                                          "fields": dict(event.fields),
                                          "tags": list(getattr(event, "tags", None) or [])})]

    @on.register
    def _(self, event: CanonProposal.Confirmed | CanonProposal.Rejected, position: int) -> list[Op]:
        return [Update(self.tables.proposals, {"story_id": event.story_id, "proposal_id": event.proposal_id},
                       {"status": _status(event), "reason": getattr(event, "reason", None), "source": position})]

    @on.register
    def _(self, event: CanonEntry.Established | CanonEntry.Revised, position: int) -> list[Op]:
        proposal = event.version.get("proposal_id")
        if not isinstance(proposal, str):
            return []
        return [Update(self.tables.proposals, {"story_id": event.story_id, "proposal_id": proposal},
                       {"step": event.originator_version})]

    HANDLED = tuple(t for t in on.dispatcher.registry if t is not object)


def _status(event: Any) -> str:
    """A draft's or proposal's status after ``event``: its name (``Draft.Accepted`` -> accepted)."""
    return type(event).__qualname__.split(".")[1].lower()
