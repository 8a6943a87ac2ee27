"""Drafts by id, from the authoring read model: the port a qa packet reads its draft through.

Only ``PacketService.draft`` calls this, and only for a request that names a draft; the
compiler never reads the authoring tables (tests/integration/test_projections.py holds it).
"""

from __future__ import annotations

from sqlalchemy import text

from canon_ledger.application.packets.ports import DraftView, Drafts
from canon_ledger.projections.read_models import ReadModels


class SqlDrafts(Drafts):
    """Reads a draft from the serving authoring build, once it reflects the target (read your writes)."""

    def __init__(self, authoring: ReadModels) -> None:
        self.authoring = authoring

    def draft(self, story_id: str, draft_id: str, target: int) -> DraftView | None:
        self.authoring.ensure_reflects(target)
        with self.authoring.read_engine.begin() as conn:
            tables = self.authoring.tables(self.authoring.active(conn))
            key = {"story": story_id, "draft": draft_id}
            row = conn.execute(text(f"""
                SELECT draft_id, chapter, status, text, source, reason
                  FROM {tables.drafts.name} WHERE story_id = :story AND draft_id = :draft"""), key).first()
            if row is None:
                return None
            dismissed = tuple((d.finding_id, d.reason, d.source) for d in conn.execute(text(f"""
                SELECT finding_id, reason, source
                  FROM {tables.dismissed.name} WHERE story_id = :story AND draft_id = :draft
                 ORDER BY finding_id"""), key))
        return DraftView(row.draft_id, row.chapter, row.status, row.text, row.source, row.reason, dismissed)
