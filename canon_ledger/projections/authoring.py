"""The authoring app's read model: drafts and proposals in every state.

Nothing on the packet path imports this module or reads these tables; a test holds that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from canon_ledger.domain.topics import stored_topics
from sqlalchemy import Column, Integer, MetaData, String, Table, Text

from canon_ledger.domain.canon import CanonProposal
from canon_ledger.domain.draft import Draft
from canon_ledger.projections.sql_ops import Op, Update, Upsert

VERSION = 1


@dataclass(frozen=True)
class AuthoringTables:
    tag: str
    version: int
    metadata: MetaData
    drafts: Table
    proposals: Table

    def all(self) -> list[Table]:
        return [self.drafts, self.proposals]


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
    )
    return AuthoringTables(tag, version, md, drafts, proposals)


HANDLED = (Draft.Submitted, Draft.Accepted, Draft.Rejected,
           CanonProposal.Proposed, CanonProposal.Confirmed, CanonProposal.Rejected)


class AuthoringProjection:
    name = "authoring"

    def __init__(self, tables: AuthoringTables) -> None:
        self.t = tables
        self.topics = stored_topics(*HANDLED)

    def ops(self, events: list[tuple[int, Any]], conn: Any = None) -> list[Op]:
        ops: list[Op] = []
        for p, e in events:
            kind = type(e).__qualname__
            if kind == "Draft.Submitted":
                ops.append(Upsert(self.t.drafts, {"story_id": e.story_id, "draft_id": e.draft_id, "chapter": e.chapter,
                                           "status": "submitted", "text": e.text, "reason": None, "source": p}))
            elif kind in ("Draft.Accepted", "Draft.Rejected"):
                ops.append(Update(self.t.drafts, {"story_id": e.story_id, "draft_id": e.draft_id},
                                  {"status": kind.split(".")[1].lower(), "reason": getattr(e, "reason", None), "source": p}))
            elif kind == "CanonProposal.Proposed":
                ops.append(Upsert(self.t.proposals, {"story_id": e.story_id, "proposal_id": e.proposal_id, "kind": e.kind,
                                              "key": e.key, "name": e.name, "text": e.text, "valid_from": e.valid_from,
                                              "status": "proposed", "reason": None, "source": p}))
            else:
                ops.append(Update(self.t.proposals, {"story_id": e.story_id, "proposal_id": e.proposal_id},
                                  {"status": kind.split(".")[1].lower(), "reason": getattr(e, "reason", None), "source": p}))
        return ops
