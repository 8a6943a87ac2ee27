"""The canon projection: confirmed canon and accepted text -> the packet tables.

It subscribes only to the event types ``on`` is registered for (``HANDLED``). Draft and
proposal events are not among them: a draft or an unconfirmed proposal has no way into these
tables. Canon arrives only as CanonEntry events (confirmation), chapter text only as
Chapter.TextAccepted.
"""

from __future__ import annotations

import math
from functools import singledispatchmethod
from typing import Any

from canon_ledger.application.packets import render
from canon_ledger.domain import recall
from canon_ledger.domain.canon import CanonEntry, hidden_book
from canon_ledger.domain.canon_rules import valid_to
from canon_ledger.domain.chapter import Chapter
from canon_ledger.domain.continuity import facts_of
from canon_ledger.domain.story import Story, with_default_budgets
from canon_ledger.domain.tokens import TokenCounter
from canon_ledger.domain.topics import stored_topics
from canon_ledger.domain.volume import Volume
from canon_ledger.projections.canon_tables import CanonTables, valid_to_update, valid_to_update_many
from canon_ledger.projections.partitioning import BY_STORY
from canon_ledger.projections.sql_ops import Counted, Op, Run, Update, Upsert
from canon_ledger.projections.token_memo import TokenCounts, TokenMemo


def _storable(facts: dict[str, Any]) -> dict[str, Any]:
    """``facts`` without a number neither store's JSON column holds (an infinity, an integer
    beyond 64 bits): commands refuse them now, but an older log may hold one, and
    its version must still project (it would be quarantined as unstorable)."""
    return {k: v for k, v in facts.items()
            if not (isinstance(v, float) and not math.isfinite(v))
            and not (isinstance(v, int) and not -(2**63) <= v < 2**63)}


class _Page:
    """What one ``ops`` call gathers: the canon rows of each entry's steps."""

    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps: dict[tuple[str, str, str], list[tuple[int, dict[str, Any]]]] = {}  # entry -> its steps

    def step(self, e: Any, row: dict[str, Any]) -> None:
        """The canon row of one timeline step; emitted with the page (see ``_canon_rows``)."""
        self.steps.setdefault((e.story_id, e.kind, e.key), []).append((e.originator_version, row))


class CanonProjection:
    """``on`` gives one event's ops, dispatched on the event's type: one ``on.register`` per
    handled type, and ``HANDLED`` (hence ``topics``) is read from that registry."""

    name = "canon"
    partitioning = BY_STORY  # every event names its story; workers may split a build by it
    # Its writes find rows by primary key only: a rebuild may build the other indexes last.
    defer_indexes = True
    # Events per transaction when the runner is left at its default: a fifth of the commits of
    # pages of 1,000, and most entries' timelines fall within one page (valid_to in Python).
    page_size = 5000

    def __init__(self, tables: CanonTables, tokens: TokenCounter, memo: TokenMemo | None = None) -> None:
        self.tables = tables
        self.tokens = tokens
        # How the runner fills the counts of the ``Counted`` ops (memo None, the audit's scratch
        # replay: every text is counted, independently of any memo).
        self.counts = TokenCounts(tokens, memo)
        self.topics = stored_topics(*self.HANDLED)
        self._handled = frozenset(self.HANDLED)
        self._valid_to = valid_to_update(tables.canon.name)
        self._valid_to_pg = valid_to_update_many(tables.canon.name)

    def ops(self, events: list[tuple[int, Any]]) -> list[Op | Counted]:
        """Ops for (position, event) pairs, in order, ending with each touched story's position.
        A row with a rendered text is ``Counted``: the runner fills its token counts."""
        ops: list[Op | Counted] = []
        touched: dict[str, int] = {}
        page = _Page()  # per call: ops() may run in several threads at once
        on, handled = self.on, self._handled  # bound once per page
        for position, e in events:
            if type(e) not in handled:
                continue
            ops.extend(on(e, position, page))
            touched[e.story_id] = position
        ops.extend(self._canon_rows(page.steps))
        ops.extend(Update(self.tables.stories, {"story_id": s}, {"position": p}) for s, p in touched.items())
        return ops

    def quarantined(self, position: int, e: Any) -> list[Op]:
        """A story event at ``position`` could not be projected (the runner quarantined it):
        the story's packets move to that position, so they say so (and an audit replays it)."""
        story = getattr(e, "story_id", None)
        return [Update(self.tables.stories, {"story_id": story}, {"position": position})] if isinstance(story, str) else []

    def _valid_to_many(self, conn: Any, params: list[dict[str, Any]]) -> bool:
        """PostgreSQL: every entry of the page in one statement (entries as arrays)."""
        if conn.dialect.name != "postgresql":
            return False
        conn.execute(self._valid_to_pg, {"stories": [p["b_story"] for p in params],
                                         "kinds": [p["b_kind"] for p in params], "keys": [p["b_key"] for p in params]})
        return True

    def _canon_rows(self, steps: dict[tuple[str, str, str], list[tuple[int, dict[str, Any]]]]) -> list[Op | Counted]:
        """The canon rows of this page, each with its ``valid_to`` where the page holds the
        entry's whole timeline so far (its first step is here: later steps come later in the
        log, so none is missing); the other entries get the SQL re-derivation instead."""
        ops: list[Op | Counted] = []
        for (story, kind, key), rows in steps.items():
            whole = [st for st, _ in rows] == list(range(1, len(rows) + 1))
            if whole:
                for (_, row), end in zip(rows, valid_to([row["valid_from"] for _, row in rows]), strict=True):
                    row["valid_to"] = end
                # Set when the row is inserted; a re-delivered event keeps the stored value,
                # which already accounts for every later step.
                ops.extend(Counted(Upsert(self.tables.canon, row, ("valid_to",)), (("tokens", row["text"]),))
                           for _, row in rows)
            else:
                ops.extend(Counted(Upsert(self.tables.canon, row), (("tokens", row["text"]),)) for _, row in rows)
                ops.append(Run("valid_to", self._valid_to, {"b_story": story, "b_kind": kind, "b_key": key},
                               deferred=True, many=self._valid_to_many))
        return ops

    # -- story, chapters, volumes -----------------------------------------------------------------
    @singledispatchmethod
    def on(self, event: object, position: int, page: _Page) -> list[Op | Counted]:
        """The ops of one event at ``position`` (a canon step's row goes to ``page``, emitted
        with the page's canon rows): none for a type this projection does not handle."""
        return []

    @on.register
    def _(self, e: Story.Started, p: int, page: _Page) -> list[Op | Counted]:
        row: dict[str, Any] = {
            "story_id": e.story_id, "title": e.title, "guardrails_text": render.guardrails(e.style_guardrails),
            "contract_text": render.output_contract(e.output_contract), "budgets": with_default_budgets(e.budgets),
            "source": p, "position": p}
        return [Counted(Upsert(self.tables.stories, row), (("guardrails_tokens", row["guardrails_text"]),
                                                      ("contract_tokens", row["contract_text"])))]

    @on.register
    def _(self, e: Story.LoreCapSet, p: int, page: _Page) -> list[Op | Counted]:
        return [Update(self.tables.stories, {"story_id": e.story_id}, {"lore_share": e.share})]

    @on.register
    def _(self, e: Story.JoinedSeries, p: int, page: _Page) -> list[Op | Counted]:
        return [Update(self.tables.stories, {"story_id": e.story_id},
                       {"series_id": e.series_id, "series_role": e.role, "series_ordinal": e.ordinal})]

    @on.register
    def _(self, e: Chapter.Planned, p: int, page: _Page) -> list[Op | Counted]:
        row: dict[str, Any] = {"story_id": e.story_id, "chapter": e.number, "volume": e.volume,
                               "goals_text": render.goals(e.number, e.goals), "goals_source": p, "goal_items": list(e.goals)}
        return [Counted(Upsert(self.tables.chapters, row), (("goals_tokens", row["goals_text"]),))]

    @on.register
    def _(self, e: Chapter.SceneCardAdded, p: int, page: _Page) -> list[Op | Counted]:
        story, chapter, scene = e.story_id, e.chapter, e.scene_id
        row: dict[str, Any] = {"story_id": story, "chapter": chapter, "scene_id": scene,
                               "text": render.scene_card(chapter, scene, e.summary, e.tags), "source": p,
                               "summary": e.summary, "pov": e.pov}  # pov: None in an event stored before it
        ops: list[Op | Counted] = [Counted(Upsert(self.tables.scene_cards, row), (("tokens", row["text"]),))]
        tags = self.tables.scene_tags
        for tag_type, keys in sorted(e.tags.items()):
            ops.extend(
                Upsert(tags, {"story_id": story, "chapter": chapter, "scene_id": scene, "tag_type": tag_type,
                              "ordinal": i, "key": k})
                for i, k in enumerate(keys)
            )
        return ops

    @on.register
    def _(self, e: Chapter.TextAccepted, p: int, page: _Page) -> list[Op | Counted]:
        values: dict[str, Any] = {"text": render.chapter_text(e.chapter, e.text), "text_source": p}
        return [Counted(Update(self.tables.chapters, {"story_id": e.story_id, "chapter": e.chapter}, values),
                        (("text_tokens", values["text"]),))]

    @on.register
    def _(self, e: Chapter.SummaryRecorded, p: int, page: _Page) -> list[Op | Counted]:
        values: dict[str, Any] = {"summary_text": render.chapter_summary(e.chapter, e.text), "summary_source": p}
        return [Counted(Update(self.tables.chapters, {"story_id": e.story_id, "chapter": e.chapter}, values),
                        (("summary_tokens", values["summary_text"]),))]

    @on.register
    def _(self, e: Volume.Opened, p: int, page: _Page) -> list[Op | Counted]:
        return [Upsert(self.tables.volumes, {"story_id": e.story_id, "volume": e.number})]

    @on.register
    def _(self, e: Volume.SummaryRecorded, p: int, page: _Page) -> list[Op | Counted]:
        row: dict[str, Any] = {"story_id": e.story_id, "volume": e.volume,
                               "summary_text": render.volume_summary(e.volume, e.text), "summary_source": p}
        return [Counted(Upsert(self.tables.volumes, row), (("summary_tokens", row["summary_text"]),))]

    # -- canon ------------------------------------------------------------------------------------
    @on.register
    def _(self, e: CanonEntry.Established | CanonEntry.Revised, p: int, page: _Page) -> list[Op | Counted]:
        v = e.version
        fields = v.get("fields") or {}
        story, kind, key, step, valid_from = e.story_id, e.kind, e.key, e.originator_version, v["valid_from"]
        row = {
            "story_id": story, "kind": kind, "key": key, "step": step, "valid_from": valid_from, "retired": False,
            "name": v["name"], "state": fields.get("state"), "hidden_until": fields.get("hidden_until"),
            "text": render.canon_version(kind, key, v), "source": p, "secret": fields.get("secret") is True,
            "hidden_book": hidden_book(fields),
        }
        row["aliases"] = list(v.get("aliases") or [])
        rule = recall.rule(v["name"], row["aliases"], fields)
        row["recall"] = rule.as_dict() if rule is not None else None
        row["facts"] = _storable(facts_of(fields))
        page.step(e, row)  # its Counted upsert comes with the page's canon rows
        names = {v["name"].casefold(), *(a.casefold() for a in v.get("aliases") or [] if a)}
        aliases = self.tables.aliases
        ops: list[Op | Counted] = [Upsert(aliases, {"story_id": story, "kind": kind, "key": key, "step": step, "alias": a,
                                          "valid_from": valid_from}) for a in sorted(names)]
        for i, node in enumerate(fields.get("nodes") or []):
            node_row = {
                "story_id": story, "chain": key, "step": step, "ordinal": i, "node_id": node["id"],
                "node_kind": node.get("kind", "node"), "valid_from": valid_from,
                "hidden_until": node.get("hidden_until"), "text": render.chain_node(key, node), "source": p,
            }
            ops.append(Counted(Upsert(self.tables.chain_nodes, node_row), (("tokens", node_row["text"]),)))
        return ops

    @on.register
    def _(self, e: CanonEntry.Retired, p: int, page: _Page) -> list[Op | Counted]:
        row: dict[str, Any] = {
            "story_id": e.story_id, "kind": e.kind, "key": e.key, "step": e.originator_version,
            "valid_from": e.valid_from, "retired": True, "name": e.key, "state": None, "hidden_until": None, "aliases": [],
            "recall": None, "facts": {}, "secret": False, "hidden_book": None,
            "text": render.retirement(e.kind, e.key, e.valid_from, e.reason), "source": p,
        }
        page.step(e, row)
        return []

    @on.register
    def _(self, e: CanonEntry.KnowledgeRecorded, p: int, page: _Page) -> list[Op | Counted]:
        # One row per (character, entry): a correction (a later record) replaces it.
        return [Upsert(self.tables.knowledge, {"story_id": e.story_id, "character": e.character, "kind": e.kind,
                                          "key": e.key, "chapter": e.chapter, "how": e.how, "source": p})]

    HANDLED = tuple(t for t in on.dispatcher.registry if t is not object)
