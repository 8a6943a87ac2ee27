"""Reads the canon tables for the packet compiler, from one consistent snapshot.

This module knows the canon tables only: it has no way to name a draft or proposal table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from typing import Any

from sqlalchemy import and_, false, func, literal, or_, select
from sqlalchemy.engine import Connection, Engine

from application.packets.ports import ChapterView, EntryView, Fact, NodeView, SceneView, StoryView
from projections.canon_tables import CanonTables


def _fact(text: str | None, tokens: int | None, source: int | None) -> Fact:
    return Fact(text or "", tokens or 0, (source,) if source is not None else ())


class SqlCanonReader:
    """Reads whichever canon build is active, as of one snapshot."""

    def __init__(self, engine: Engine, builds: Callable[[Connection], tuple[CanonTables, int]]) -> None:
        """``builds(conn)`` names the tables to read and the position they reflect, read in
        the snapshot's own transaction."""
        self.engine = engine
        self._builds = builds

    @contextmanager
    def snapshot(self) -> Iterator[SqlCanonSnapshot]:
        with self.engine.begin() as conn:
            tables, position = self._builds(conn)
            yield SqlCanonSnapshot(conn, tables, position)


class SqlCanonSnapshot:
    def __init__(self, conn: Connection, tables: CanonTables, position: int) -> None:
        self.c = conn
        self.t = tables
        self.position = position  # the log position this snapshot's read model reflects

    def story(self, story_id: str) -> StoryView | None:
        s = self.t.stories
        row = self.c.execute(select(s).where(s.c.story_id == story_id)).mappings().first()
        if row is None:
            return None
        return StoryView(row["story_id"], row["title"], _fact(row["guardrails_text"], row["guardrails_tokens"], row["source"]),
                         _fact(row["contract_text"], row["contract_tokens"], row["source"]), dict(row["budgets"]),
                         row["position"])

    def chapter(self, story_id: str, number: int) -> ChapterView | None:
        ch = self.t.chapters
        row = self.c.execute(select(ch).where(ch.c.story_id == story_id, ch.c.chapter == number)).mappings().first()
        if row is None:
            return None
        summary = _fact(row["summary_text"], row["summary_tokens"], row["summary_source"]) if row["summary_text"] else None
        text = _fact(row["text"], row["text_tokens"], row["text_source"]) if row["text"] else None
        return ChapterView(row["chapter"], row["volume"], _fact(row["goals_text"], row["goals_tokens"], row["goals_source"]),
                           summary, text)

    def scenes(self, story_id: str, chapter: int) -> list[SceneView]:
        sc, tg = self.t.scene_cards, self.t.scene_tags
        cards = self.c.execute(
            select(sc).where(sc.c.story_id == story_id, sc.c.chapter == chapter).order_by(sc.c.source, sc.c.scene_id)
        ).mappings().all()
        tags: dict[str, list[tuple[str, str]]] = {}
        for row in self.c.execute(
            select(tg.c.scene_id, tg.c.tag_type, tg.c.key)
            .where(tg.c.story_id == story_id, tg.c.chapter == chapter)
            .order_by(tg.c.scene_id, tg.c.tag_type, tg.c.ordinal)
        ):
            tags.setdefault(row.scene_id, []).append((row.tag_type, row.key))
        return [SceneView(r["scene_id"], _fact(r["text"], r["tokens"], r["source"]), tuple(tags.get(r["scene_id"], [])))
                for r in cards]

    _ENTRY_COLUMNS = ("story_id", "kind", "key", "step", "valid_from", "retired", "name", "state", "hidden_until", "tokens", "source")

    def _ranked(self, story_id: str, chapter: int, *conditions: Any, with_text: bool = True) -> Any:
        cn = self.t.canon
        rank = func.row_number().over(
            partition_by=(cn.c.kind, cn.c.key), order_by=(cn.c.valid_from.desc(), cn.c.step.desc())
        ).label("rank")
        columns = [cn.c[name] for name in self._ENTRY_COLUMNS] + ([cn.c.text] if with_text else [])
        return select(*columns, rank).where(cn.c.story_id == story_id, cn.c.valid_from <= chapter, *conditions).subquery()

    @staticmethod
    def _entry(r: Any) -> EntryView:
        text = r.get("text")
        ref = None if text is not None else ("canon", r["story_id"], r["kind"], r["key"], r["step"])
        return EntryView(r["kind"], r["key"], r["step"], r["valid_from"], bool(r["retired"]), r["name"], r["state"],
                         r["hidden_until"], Fact(text, r["tokens"] or 0, (r["source"],), ref))

    def entries_as_of(self, story_id: str, chapter: int, *, kinds: tuple[str, ...] = (),
                      keys: tuple[str, ...] = (), since: int | None = None, active: bool = False,
                      with_text: bool = True) -> list[EntryView]:
        cn = self.t.canon
        conditions = []
        if kinds:
            conditions.append(cn.c.kind.in_(kinds))
        if keys:
            conditions.append(cn.c.key.in_(keys))
        if since is not None:
            # Equivalent inside the ranking: the step in force is the latest one, so if it is
            # not newer than ``since`` no other step is.
            conditions.append(cn.c.valid_from > since)
        if "valid_to" in cn.c:  # v3+: the step in force is a range test, no ranking
            columns = [cn.c[name] for name in self._ENTRY_COLUMNS] + ([cn.c.text] if with_text else [])
            stmt = select(*columns).where(
                cn.c.story_id == story_id, cn.c.valid_from <= chapter,
                or_(cn.c.valid_to.is_(None), cn.c.valid_to > chapter), *conditions)
            if active:
                stmt = stmt.where(cn.c.retired == false(), func.coalesce(func.lower(cn.c.state), "") != "resolved")
            return [self._entry(r) for r in self.c.execute(stmt.order_by(cn.c.kind, cn.c.key)).mappings()]
        ranked = self._ranked(story_id, chapter, *conditions, with_text=with_text)
        stmt = select(ranked).where(ranked.c.rank == 1)
        if active:
            stmt = stmt.where(ranked.c.retired == false(),
                              func.coalesce(func.lower(ranked.c.state), "") != "resolved")
        rows = self.c.execute(stmt.order_by(ranked.c.kind, ranked.c.key)).mappings().all()
        return [self._entry(r) for r in rows]

    def superseded_steps(self, story_id: str, chapter: int, kind: str, keys: tuple[str, ...],
                         limit: int) -> dict[str, list[EntryView]]:
        if not keys:
            return {}
        cn = self.t.canon
        ranked = self._ranked(story_id, chapter, cn.c.kind == kind, cn.c.key.in_(keys), with_text=False)
        rows = self.c.execute(
            select(ranked).where(ranked.c.rank > 1, ranked.c.rank <= limit + 1, ranked.c.retired == false())
            .order_by(ranked.c.key, ranked.c.rank)
        ).mappings().all()
        out: dict[str, list[EntryView]] = {}
        for r in rows:
            out.setdefault(r["key"], []).append(self._entry(r))
        return out

    def texts(self, refs: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], str]:
        # Looked up by (story, key) on an index, then matched exactly: a row-value IN over
        # four columns makes SQLite scan the table.
        out: dict[tuple[Any, ...], str] = {}
        cn, nodes = self.t.canon, self.t.chain_nodes
        for story_id in sorted({r[1] for r in refs}):
            canon = {r for r in refs if r[0] == "canon" and r[1] == story_id}
            if canon:
                rows = self.c.execute(select(cn.c.kind, cn.c.key, cn.c.step, cn.c.text).where(
                    cn.c.story_id == story_id, cn.c.key.in_(sorted({r[3] for r in canon})),
                    cn.c.step.in_(sorted({r[4] for r in canon}))))
                for r in rows:
                    ref = ("canon", story_id, r.kind, r.key, r.step)
                    if ref in canon:
                        out[ref] = r.text
            chain = {r for r in refs if r[0] == "node" and r[1] == story_id}
            if chain:
                rows = self.c.execute(select(nodes.c.chain, nodes.c.step, nodes.c.ordinal, nodes.c.text).where(
                    nodes.c.story_id == story_id, nodes.c.chain.in_(sorted({r[2] for r in chain})),
                    nodes.c.step.in_(sorted({r[3] for r in chain}))))
                for r in rows:
                    ref = ("node", story_id, r.chain, r.step, r.ordinal)
                    if ref in chain:
                        out[ref] = r.text
        return out

    def chapter_summaries(self, story_id: str, first: int, last: int) -> list[tuple[int, Fact]]:
        ch = self.t.chapters
        rows = self.c.execute(
            select(ch.c.chapter, ch.c.summary_text, ch.c.summary_tokens, ch.c.summary_source)
            .where(ch.c.story_id == story_id, ch.c.chapter >= first, ch.c.chapter <= last, ch.c.summary_text.is_not(None))
            .order_by(ch.c.chapter)
        )
        return [(r.chapter, _fact(r.summary_text, r.summary_tokens, r.summary_source)) for r in rows]

    def volume_summaries(self, story_id: str) -> list[tuple[int, Fact]]:
        v = self.t.volumes
        rows = self.c.execute(
            select(v).where(v.c.story_id == story_id, v.c.summary_text.is_not(None)).order_by(v.c.volume)
        ).mappings().all()
        return [(r["volume"], _fact(r["summary_text"], r["summary_tokens"], r["summary_source"])) for r in rows]

    def chain_nodes(self, story_id: str, chapter: int) -> list[NodeView]:
        cn, nodes = self.t.canon, self.t.chain_nodes
        if "valid_to" in cn.c:
            ranked = (select(cn.c.key, cn.c.step, cn.c.retired, literal(1).label("rank"))
                      .where(cn.c.story_id == story_id, cn.c.kind == "development_chain", cn.c.valid_from <= chapter,
                             or_(cn.c.valid_to.is_(None), cn.c.valid_to > chapter)).subquery())
        else:
            ranked = self._ranked(story_id, chapter, cn.c.kind == "development_chain", with_text=False)
        rows = self.c.execute(
            select(nodes.c.chain, nodes.c.step, nodes.c.ordinal, nodes.c.node_id, nodes.c.node_kind,
                   nodes.c.hidden_until, nodes.c.tokens, nodes.c.source)
            .join(ranked, and_(nodes.c.story_id == story_id, nodes.c.chain == ranked.c.key, nodes.c.step == ranked.c.step))
            .where(ranked.c.rank == 1, ranked.c.retired == false())
            .order_by(nodes.c.chain, nodes.c.ordinal)
        ).mappings().all()
        return [NodeView(r["chain"], r["node_id"], r["node_kind"], r["hidden_until"],
                         Fact(None, r["tokens"], (r["source"],), ("node", story_id, r["chain"], r["step"], r["ordinal"])))
                for r in rows]
