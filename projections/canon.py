"""The canon projection: confirmed canon and accepted text -> the packet tables.

It subscribes only to the event types below. Draft and proposal events are not among
them: a draft or an unconfirmed proposal has no way into these tables. Canon arrives
only as CanonEntry events (confirmation), chapter text only as Chapter.TextAccepted.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.utils import get_topic
from sqlalchemy import and_, bindparam, func, or_, select, update

from domain.canon import CanonEntry
from domain.chapter import Chapter
from domain.story import DEFAULT_BUDGETS, Story
from domain.tokens import TokenCounter
from domain.volume import Volume
from projections import rendering as r
from projections.canon_tables import CanonTables
from projections.sql_ops import Op, Run, Update, Upsert

HANDLED = (
    Story.Started,
    Chapter.Planned,
    Chapter.SceneCardAdded,
    Chapter.TextAccepted,
    Chapter.SummaryRecorded,
    Volume.Opened,
    Volume.SummaryRecorded,
    CanonEntry.Established,
    CanonEntry.Revised,
    CanonEntry.Retired,
)


def _valid_to_statement(t: CanonTables) -> Any:
    cn = t.canon
    later = cn.alias("later")
    next_from = (
        select(func.min(later.c.valid_from))
        .where(later.c.story_id == cn.c.story_id, later.c.kind == cn.c.kind, later.c.key == cn.c.key,
               or_(later.c.valid_from > cn.c.valid_from,
                   and_(later.c.valid_from == cn.c.valid_from, later.c.step > cn.c.step)))
        .scalar_subquery()
    )
    return (update(cn)
            .where(cn.c.story_id == bindparam("b_story"), cn.c.kind == bindparam("b_kind"), cn.c.key == bindparam("b_key"))
            .values(valid_to=next_from))


class CanonProjection:
    name = "canon"

    def __init__(self, tables: CanonTables, tokens: TokenCounter) -> None:
        self.t = tables
        self.tokens = tokens
        self.topics = [get_topic(cls) for cls in HANDLED]
        self._valid_to = _valid_to_statement(tables) if tables.version >= 3 else None

    def _text(self, text: str) -> tuple[str, int]:
        return text, self.tokens.count(text)

    def ops(self, events: list[tuple[int, Any]]) -> list[Op]:
        """Ops for (position, event) pairs, in order, ending with each touched story's position."""
        ops: list[Op] = []
        touched: dict[str, int] = {}
        for position, e in events:
            handler = getattr(self, "_on_" + type(e).__qualname__.replace(".", "_"), None)
            if handler is None:
                continue
            ops.extend(handler(e, position))
            touched[e.story_id] = position
        ops.extend(Update(self.t.stories, {"story_id": s}, {"position": p}) for s, p in touched.items())
        return ops

    # -- story, chapters, volumes -----------------------------------------------------------------
    def _on_Story_Started(self, e: Any, p: int) -> list[Op]:
        g, gt = self._text(r.guardrails(e.style_guardrails))
        c, ct = self._text(r.output_contract(e.output_contract))
        return [Upsert(self.t.stories, {
            "story_id": e.story_id, "title": e.title, "guardrails_text": g, "guardrails_tokens": gt,
            "contract_text": c, "contract_tokens": ct, "budgets": {**DEFAULT_BUDGETS, **e.budgets},
            "source": p, "position": p,
        })]

    def _on_Chapter_Planned(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.goals(e.number, e.goals))
        return [Upsert(self.t.chapters, {
            "story_id": e.story_id, "chapter": e.number, "volume": e.volume,
            "goals_text": text, "goals_tokens": tokens, "goals_source": p,
        })]

    def _on_Chapter_SceneCardAdded(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.scene_card(e.chapter, e.scene_id, e.summary, e.tags))
        key = {"story_id": e.story_id, "chapter": e.chapter, "scene_id": e.scene_id}
        ops: list[Op] = [Upsert(self.t.scene_cards, {**key, "text": text, "tokens": tokens, "source": p})]
        for tag_type, keys in sorted(e.tags.items()):
            ops.extend(
                Upsert(self.t.scene_tags, {**key, "tag_type": tag_type, "ordinal": i, "key": k})
                for i, k in enumerate(keys)
            )
        return ops

    def _on_Chapter_TextAccepted(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.chapter_text(e.chapter, e.text))
        return [Update(self.t.chapters, {"story_id": e.story_id, "chapter": e.chapter},
                       {"text": text, "text_tokens": tokens, "text_source": p})]

    def _on_Chapter_SummaryRecorded(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.chapter_summary(e.chapter, e.text))
        return [Update(self.t.chapters, {"story_id": e.story_id, "chapter": e.chapter},
                       {"summary_text": text, "summary_tokens": tokens, "summary_source": p})]

    def _on_Volume_Opened(self, e: Any, p: int) -> list[Op]:
        return [Upsert(self.t.volumes, {"story_id": e.story_id, "volume": e.number})]

    def _on_Volume_SummaryRecorded(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.volume_summary(e.volume, e.text))
        return [Upsert(self.t.volumes, {"story_id": e.story_id, "volume": e.volume, "summary_text": text,
                                        "summary_tokens": tokens, "summary_source": p})]

    # -- canon ------------------------------------------------------------------------------------
    def _on_CanonEntry_Established(self, e: Any, p: int) -> list[Op]:
        return self._version(e, p)

    def _on_CanonEntry_Revised(self, e: Any, p: int) -> list[Op]:
        return self._version(e, p)

    def _version(self, e: Any, p: int) -> list[Op]:
        v = e.version
        fields = v.get("fields") or {}
        text, tokens = self._text(r.canon_version(e.kind, e.key, v))
        key = {"story_id": e.story_id, "kind": e.kind, "key": e.key, "step": e.originator_version}
        row = {
            **key, "valid_from": v["valid_from"], "retired": False, "name": v["name"],
            "state": fields.get("state"), "hidden_until": fields.get("hidden_until"),
            "text": text, "tokens": tokens, "source": p,
        }
        if self.t.version >= 2:
            row["aliases"] = list(v.get("aliases") or [])
        ops: list[Op] = [Upsert(self.t.canon, row), *self._interval(e)]
        names = {v["name"].casefold(), *(a.casefold() for a in v.get("aliases") or [] if a)}
        ops.extend(Upsert(self.t.aliases, {**key, "alias": a, "valid_from": v["valid_from"]}) for a in sorted(names))
        for i, node in enumerate(fields.get("nodes") or []):
            node_text, node_tokens = self._text(r.chain_node(e.key, node))
            ops.append(Upsert(self.t.chain_nodes, {
                "story_id": e.story_id, "chain": e.key, "step": e.originator_version, "ordinal": i,
                "node_id": node["id"], "node_kind": node.get("kind", "node"), "valid_from": v["valid_from"],
                "hidden_until": node.get("hidden_until"), "text": node_text, "tokens": node_tokens, "source": p,
            }))
        return ops

    def _on_CanonEntry_Retired(self, e: Any, p: int) -> list[Op]:
        text, tokens = self._text(r.retirement(e.kind, e.key, e.valid_from, e.reason))
        row = {
            "story_id": e.story_id, "kind": e.kind, "key": e.key, "step": e.originator_version,
            "valid_from": e.valid_from, "retired": True, "name": e.key, "state": None, "hidden_until": None,
            "text": text, "tokens": tokens, "source": p,
        }
        if self.t.version >= 2:
            row["aliases"] = []
        return [Upsert(self.t.canon, row), *self._interval(e)]

    def _interval(self, e: Any) -> list[Op]:
        """Re-derive ``valid_to`` for the entry's steps: a step rules until the next one in
        (valid_from, step) order takes over."""
        if self.t.version < 3:
            return []
        return [Run("valid_to", self._valid_to, {"b_story": e.story_id, "b_kind": e.kind, "b_key": e.key},
                    deferred=True)]
