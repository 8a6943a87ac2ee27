"""Reads the canon tables for the packet compiler, from one consistent snapshot.

This module knows the canon tables only: it has no way to name a draft or proposal table.

Packets are latency-bound, so every statement is built once per build (``_Statements``) with
bind parameters: per call SQLAlchemy only finds its compiled form, and rows are read by
position, not through mappings.

On PostgreSQL each statement is a round trip (~0.15-0.3 ms here), which is most of a packet's
cost there. So the statements run as the driver's SQL on its own connection (SQLAlchemy's
per-statement work was ~0.1 ms more), and ``prefetch`` sends the reads a recipe is known to
make, whatever the canon holds, in one pipeline: one round trip instead of one each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from sqlalchemy import Integer, String, any_, bindparam, false, func, or_, select, tuple_, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection, Engine

from canon_ledger.application.packets.ports import ChapterView, EntryView, Fact, NodeView, SceneView, StoryView
from canon_ledger.projections import driver_sql
from canon_ledger.projections.canon_tables import CanonTables, is_active
from canon_ledger.projections.runner import quarantine

# Selected in this order; ``text`` is appended when asked for.
_ENTRY_COLUMNS = ("story_id", "kind", "key", "step", "valid_from", "retired", "name", "state", "hidden_until",
                  "tokens", "source")


def _fact(text: str | None, tokens: int | None, source: int | None) -> Fact:
    return Fact(text or "", tokens or 0, (source,) if source is not None else ())


def _entry(r: Any, with_text: bool) -> EntryView:
    # r: a row of _ENTRY_COLUMNS (+ text)
    text = r[11] if with_text else None
    ref = None if with_text else ("canon", r[0], r[1], r[2], r[3])
    return EntryView(r[1], r[2], r[3], r[4], bool(r[5]), r[6], r[7], r[8], Fact(text, r[9] or 0, (r[10],), ref))


_BY_KIND_KEY = itemgetter(1, 2)  # entry rows: (kind, key)
_BY_CHAIN_ORDINAL = itemgetter(0, 2)  # node rows: (chain, ordinal)


class _Statements:
    """The packet queries of one build, each built once."""

    def __init__(self, t: CanonTables, dialect: str) -> None:
        self.t = t
        # On PostgreSQL a list is one array parameter (``= ANY``): the SQL text stays the same
        # whatever the list's length, so the server plans it once. An expanding IN writes a new
        # statement per length and was re-planned on every packet (0.4 ms for the texts alone).
        self.arrays = dialect == "postgresql"
        self.ranged = "valid_to" in t.canon.c  # v3+: in force at K is a range test
        s, ch, v, sc, tg = t.stories, t.chapters, t.volumes, t.scene_cards, t.scene_tags
        story, chapter = bindparam("story"), bindparam("chapter")
        qr = quarantine
        poisoned = (qr.c.projection == f"canon:{t.tag}", qr.c.scope == s.c.story_id)
        self.story = select(s.c.story_id, s.c.title, s.c.guardrails_text, s.c.guardrails_tokens, s.c.contract_text,
                            s.c.contract_tokens, s.c.budgets, s.c.source, s.c.position,
                            select(func.count()).where(*poisoned).scalar_subquery(),
                            select(func.min(qr.c.position)).where(*poisoned).scalar_subquery(),
                            select(func.max(qr.c.position)).where(*poisoned).scalar_subquery(),
                            ).where(s.c.story_id == story)
        self.chapter = select(ch.c.chapter, ch.c.volume, ch.c.goals_text, ch.c.goals_tokens, ch.c.goals_source,
                              ch.c.summary_text, ch.c.summary_tokens, ch.c.summary_source, ch.c.text,
                              ch.c.text_tokens, ch.c.text_source).where(ch.c.story_id == story, ch.c.chapter == chapter)
        self.scene_cards = (select(sc.c.scene_id, sc.c.text, sc.c.tokens, sc.c.source)
                            .where(sc.c.story_id == story, sc.c.chapter == chapter).order_by(sc.c.source, sc.c.scene_id))
        self.scene_tags = (select(tg.c.scene_id, tg.c.tag_type, tg.c.key)
                           .where(tg.c.story_id == story, tg.c.chapter == chapter)
                           .order_by(tg.c.scene_id, tg.c.tag_type, tg.c.ordinal))
        self.chapter_summaries = (
            select(ch.c.chapter, ch.c.summary_text, ch.c.summary_tokens, ch.c.summary_source)
            .where(ch.c.story_id == story, ch.c.chapter >= bindparam("first"), ch.c.chapter <= bindparam("last"),
                   ch.c.summary_text.is_not(None))
            .order_by(ch.c.chapter))
        self.volume_summaries = (select(v.c.volume, v.c.summary_text, v.c.summary_tokens, v.c.summary_source)
                                 .where(v.c.story_id == story, v.c.summary_text.is_not(None)).order_by(v.c.volume))
        cn, nodes = t.canon, t.chain_nodes
        # Texts are looked up by (story, key) on an index, then matched exactly in Python: a
        # row-value IN over four columns makes SQLite scan the table.
        self.canon_texts = select(cn.c.kind, cn.c.key, cn.c.step, cn.c.text).where(
            cn.c.story_id == story, self.among(cn.c.key, "keys", String), self.among(cn.c.step, "steps", Integer))
        self.node_texts = select(nodes.c.chain, nodes.c.step, nodes.c.ordinal, nodes.c.text).where(
            nodes.c.story_id == story, self.among(nodes.c.chain, "chains", String),
            self.among(nodes.c.step, "steps", Integer))
        self._entries: dict[tuple[Any, ...], Any] = {}
        self.chain_nodes = self._chain_nodes()
        self.superseded = self._superseded()

    def among(self, column: Any, name: str, type_: Any) -> Any:
        """``column IN (the list bound as name)``."""
        if self.arrays:
            return column == any_(bindparam(name, type_=ARRAY(type_)))
        return column.in_(bindparam(name, expanding=True))

    def by_code_point(self, column: Any) -> Any:
        """Keys compared as Python compares them: PostgreSQL's collation may not be "C"."""
        return column.collate("C") if self.arrays else column

    def in_force(self, chapter: Any) -> list[Any]:
        cn = self.t.canon
        return [cn.c.valid_from <= chapter, or_(cn.c.valid_to.is_(None), cn.c.valid_to > chapter)]

    def in_force_union(self, columns: list[Any], *conditions: Any) -> Any:
        """``select columns where conditions and in force at :chapter``, as two index ranges:
        the current steps (``valid_to`` NULL) and the steps superseded after the chapter. The
        OR of the two made both stores walk every step of the kind (2,705 index entries for
        106 active threads at chapter 1,000 of the benchmark story; 1,250 this way)."""
        cn, chapter = self.t.canon, bindparam("chapter")
        return union_all(
            select(*columns).where(*conditions, cn.c.valid_to.is_(None), cn.c.valid_from <= chapter),
            select(*columns).where(*conditions, cn.c.valid_to > chapter, cn.c.valid_from <= chapter))

    def entries(self, by: str, since: bool, active: bool, with_text: bool, paged: bool = False) -> Any:
        shape = (by, since, active, with_text, paged)
        if shape not in self._entries:
            self._entries[shape] = self._build_entries(*shape)
        return self._entries[shape]

    def _build_entries(self, by: str, since: bool, active: bool, with_text: bool, paged: bool) -> Any:
        if self.ranged and with_text and self.arrays:
            return self._with_text(self.entries(by, since, active, False, paged), paged)
        cn = self.t.canon
        conditions = [cn.c.story_id == bindparam("story")]
        if paged:  # one kind, the keys after :after; ordered and cut below
            conditions.append(self.by_code_point(cn.c.key) > bindparam("after"))
        # One kind per statement: an equality lets the planner use the in-force index (an IN
        # list made SQLite fall back to the primary key and scan every step of the kind).
        conditions.append(cn.c.kind == bindparam("kind") if by == "kind" else self.among(cn.c.key, "keys", String))
        if since:
            # Inside the in-force test: the step in force is the latest one, so if it is not
            # newer than ``since`` no other step is.
            conditions.append(cn.c.valid_from > bindparam("since"))
        columns = [cn.c[name] for name in _ENTRY_COLUMNS] + ([cn.c.text] if with_text else [])
        if self.ranged:
            if active:
                conditions.append(is_active(cn))
            # Sorted by the caller: an ORDER BY that the primary key satisfies makes SQLite
            # walk every step of the kind through it instead of the in-force index. A page is
            # ordered over the union's result (a few hundred rows at most), not inside it.
            union = self.in_force_union(columns, *conditions)
            if not paged:
                return union
            rows = union.subquery()
            return select(rows).order_by(self.by_code_point(rows.c.key)).limit(bindparam("limit"))
        # v1/v2 builds: rank each entry's steps
        ranked = self.ranked(*conditions[1:], with_text=with_text)
        stmt = select(*(ranked.c[c.name] for c in columns)).where(ranked.c.rank == 1)
        if active:
            stmt = stmt.where(is_active(ranked))
        if paged:
            return stmt.order_by(self.by_code_point(ranked.c.key)).limit(bindparam("limit"))
        return stmt.order_by(ranked.c.kind, ranked.c.key)

    def _with_text(self, entries: Any, paged: bool) -> Any:
        """PostgreSQL: ``entries`` (read from the covering indexes) with each row's text looked
        up by primary key. Selecting the text column itself needs the table's rows, and the
        planner then walked every step of the kind (a bitmap scan of 777 pages for 106 active
        threads at chapter 1,000 of the benchmark story): it cannot tell how few are active.
        A scalar subquery is always a lookup per row returned, whatever the estimates."""
        rows = entries.subquery()
        cn = self.t.canon.alias("texts")
        text = select(cn.c.text).where(cn.c.story_id == rows.c.story_id, cn.c.kind == rows.c.kind,
                                       cn.c.key == rows.c.key, cn.c.step == rows.c.step).scalar_subquery()
        stmt = select(*(rows.c[name] for name in _ENTRY_COLUMNS), text.label("text"))
        # A page keeps its order (the subquery's sort satisfies it: no second sort).
        return stmt.order_by(self.by_code_point(rows.c.key)) if paged else stmt

    def ranked(self, *conditions: Any, with_text: bool) -> Any:
        cn = self.t.canon
        rank = func.row_number().over(
            partition_by=(cn.c.kind, cn.c.key), order_by=(cn.c.valid_from.desc(), cn.c.step.desc())
        ).label("rank")
        columns = [cn.c[name] for name in _ENTRY_COLUMNS] + ([cn.c.text] if with_text else [])
        return select(*columns, rank).where(
            cn.c.story_id == bindparam("story"), cn.c.valid_from <= bindparam("chapter"), *conditions).subquery()

    def _superseded(self) -> Any:
        cn = self.t.canon
        ranked = self.ranked(cn.c.kind == bindparam("kind"), self.among(cn.c.key, "keys", String), with_text=False)
        return (select(*(ranked.c[c] for c in _ENTRY_COLUMNS))
                .where(ranked.c.rank > 1, ranked.c.rank <= bindparam("limit") + 1, ranked.c.retired == false())
                .order_by(ranked.c.key, ranked.c.rank))

    def _chain_nodes(self) -> Any:
        cn, nodes = self.t.canon, self.t.chain_nodes
        chains = [cn.c.story_id == bindparam("story"), cn.c.kind == "development_chain", cn.c.retired == false()]
        if self.ranged:
            in_force = select(cn.c.key, cn.c.step).where(*chains, *self.in_force(bindparam("chapter")))
        else:
            ranked = self.ranked(cn.c.kind == "development_chain", with_text=False)
            in_force = select(ranked.c.key, ranked.c.step).where(ranked.c.rank == 1, ranked.c.retired == false())
        # A row-value IN lets the planner start from the few chains in force, not every node.
        # Sorted by the caller (PostgreSQL sorted all 433 nodes of chapter 1,000 by text key).
        return (select(nodes.c.chain, nodes.c.step, nodes.c.ordinal, nodes.c.node_id, nodes.c.node_kind,
                       nodes.c.hidden_until, nodes.c.tokens, nodes.c.source)
                .where(nodes.c.story_id == bindparam("story"), tuple_(nodes.c.chain, nodes.c.step).in_(in_force)))


class SqlCanonReader:
    """Reads whichever canon build is active, as of one snapshot."""

    def __init__(self, engine: Engine, builds: Callable[[Connection], tuple[CanonTables, int]]) -> None:
        """``builds(conn)`` names the tables to read and the position they reflect, read in
        the snapshot's own transaction."""
        self.engine = engine
        self._builds = builds
        self._statements: dict[str, _Statements] = {}

    @contextmanager
    def snapshot(self) -> Iterator[SqlCanonSnapshot]:
        with self.engine.begin() as conn:
            tables, position = self._builds(conn)
            statements = self._statements.get(tables.tag)
            if statements is None or statements.t is not tables:
                statements = self._statements[tables.tag] = _Statements(tables, self.engine.dialect.name)
            yield SqlCanonSnapshot(conn, statements, position)


def _key(stmt: Any, params: dict[str, Any]) -> tuple[Any, ...]:
    return (id(stmt), *sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


class SqlCanonSnapshot:
    def __init__(self, conn: Connection, statements: _Statements, position: int) -> None:
        self.c = conn
        self.q = statements
        self.position = position  # the log position this snapshot's read model reflects
        # PostgreSQL: the driver's connection, in the same transaction as ``conn``
        self._driver = conn.connection.driver_connection if statements.arrays else None
        self._ahead: dict[tuple[Any, ...], list[Any]] = {}  # prefetched rows, each used once
        self._wanted: list[tuple[Any, dict[str, Any]]] | None = None  # statements, while prefetch plans

    def prefetch(self, reads: Callable[[SqlCanonSnapshot], object]) -> None:
        """Run the statements of the reads ``reads(self)`` makes now, together; the same
        calls then answer from what was fetched. While it runs every read answers empty, so
        it can only list reads whose arguments do not depend on what another returns."""
        if self._driver is None:
            return  # SQLite is in-process: a statement costs no round trip
        self._wanted = []
        try:
            reads(self)
            wanted = self._wanted
        finally:
            self._wanted = None
        cursors = []
        with self._driver.pipeline():
            for stmt, params in wanted:
                cursor = self._driver.cursor()
                driver_sql.execute(cursor, self.c, stmt, params)
                cursors.append(cursor)
        for (stmt, params), cursor in zip(wanted, cursors):
            self._ahead[_key(stmt, params)] = cursor.fetchall()
            cursor.close()

    def _rows(self, stmt: Any, params: dict[str, Any]) -> list[Any]:
        if self._wanted is not None:
            self._wanted.append((stmt, params))
            return []
        if self._ahead:
            rows = self._ahead.pop(_key(stmt, params), None)
            if rows is not None:
                return rows
        if self._driver is None:
            return self.c.execute(stmt, params).all()
        return driver_sql.driver_rows(self.c, stmt, params)

    @property
    def unused_prefetch(self) -> int:
        """Prefetched results no read has asked for (a recipe's list out of step with it)."""
        return len(self._ahead)

    def story(self, story_id: str) -> StoryView | None:
        rows = self._rows(self.q.story, {"story": story_id})
        if not rows:
            return None
        r = rows[0]
        return StoryView(r[0], r[1], _fact(r[2], r[3], r[7]), _fact(r[4], r[5], r[7]), dict(r[6]), r[8],
                         (r[9], r[10], r[11]) if r[9] else None)

    def chapter(self, story_id: str, number: int) -> ChapterView | None:
        rows = self._rows(self.q.chapter, {"story": story_id, "chapter": number})
        if not rows:
            return None
        r = rows[0]
        summary = _fact(r[5], r[6], r[7]) if r[5] else None
        text = _fact(r[8], r[9], r[10]) if r[8] else None
        return ChapterView(r[0], r[1], _fact(r[2], r[3], r[4]), summary, text)

    def scenes(self, story_id: str, chapter: int) -> list[SceneView]:
        params = {"story": story_id, "chapter": chapter}
        cards = self._rows(self.q.scene_cards, params)
        tags: dict[str, list[tuple[str, str]]] = {}
        for scene_id, tag_type, key in self._rows(self.q.scene_tags, params):
            tags.setdefault(scene_id, []).append((tag_type, key))
        return [SceneView(r[0], _fact(r[1], r[2], r[3]), tuple(tags.get(r[0], []))) for r in cards]

    def entries_as_of(self, story_id: str, chapter: int, *, kinds: tuple[str, ...] = (),
                      keys: tuple[str, ...] = (), since: int | None = None, active: bool = False,
                      after: str | None = None, limit: int | None = None) -> list[EntryView]:
        if bool(kinds) == bool(keys):
            raise ValueError("entries_as_of takes kinds or keys")
        # Texts come with the entries: since the compiler reads P3 and P4 only while the budget
        # has room, most entries read are packed (165 of 213 at chapter 1,000 of the benchmark
        # story), and fetching their texts afterwards cost more than reading them here (SQLite:
        # 3.0 -> 2.0 ms for that packet; PostgreSQL: one round trip fewer, the texts looked up
        # by primary key, ``_Statements._with_text``).
        params: dict[str, Any] = {"story": story_id, "chapter": chapter, "since": since}
        if limit is not None:
            if len(kinds) != 1:
                raise ValueError("a page of entries_as_of is of one kind")
            stmt = self.q.entries("kind", since is not None, active, True, paged=True)
            rows = self._rows(stmt, {**params, "kind": kinds[0], "after": after or "", "limit": limit})
            return [_entry(r, True) for r in rows]
        if keys:
            params["keys"] = list(keys)
            stmt = self.q.entries("keys", since is not None, active, True)
            rows = self._rows(stmt, params)
        else:
            stmt = self.q.entries("kind", since is not None, active, True)
            rows = [r for kind in set(kinds) for r in self._rows(stmt, {**params, "kind": kind})]
        rows.sort(key=_BY_KIND_KEY)
        return [_entry(r, True) for r in rows]

    def superseded_steps(self, story_id: str, chapter: int, kind: str, keys: tuple[str, ...],
                         limit: int) -> dict[str, list[EntryView]]:
        if not keys:
            return {}
        out: dict[str, list[EntryView]] = {}
        rows = self._rows(self.q.superseded, {"story": story_id, "chapter": chapter, "kind": kind,
                                                    "keys": list(keys), "limit": limit})
        for r in rows:
            out.setdefault(r[2], []).append(_entry(r, False))
        return out

    def texts(self, refs: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], str]:
        out: dict[tuple[Any, ...], str] = {}
        for story_id in sorted({r[1] for r in refs}):
            canon = {r for r in refs if r[0] == "canon" and r[1] == story_id}
            if canon:
                rows = self._rows(self.q.canon_texts, {"story": story_id, "keys": sorted({r[3] for r in canon}),
                                                           "steps": sorted({r[4] for r in canon})})
                for kind, key, step, text in rows:
                    ref = ("canon", story_id, kind, key, step)
                    if ref in canon:
                        out[ref] = text
            chain = {r for r in refs if r[0] == "node" and r[1] == story_id}
            if chain:
                rows = self._rows(self.q.node_texts, {"story": story_id, "chains": sorted({r[2] for r in chain}),
                                                          "steps": sorted({r[3] for r in chain})})
                for name, step, ordinal, text in rows:
                    ref = ("node", story_id, name, step, ordinal)
                    if ref in chain:
                        out[ref] = text
        return out

    def chapter_summaries(self, story_id: str, first: int, last: int) -> list[tuple[int, Fact]]:
        rows = self._rows(self.q.chapter_summaries, {"story": story_id, "first": first, "last": last})
        return [(r[0], _fact(r[1], r[2], r[3])) for r in rows]

    def volume_summaries(self, story_id: str) -> list[tuple[int, Fact]]:
        rows = self._rows(self.q.volume_summaries, {"story": story_id})
        return [(r[0], _fact(r[1], r[2], r[3])) for r in rows]

    def chain_nodes(self, story_id: str, chapter: int) -> list[NodeView]:
        rows = self._rows(self.q.chain_nodes, {"story": story_id, "chapter": chapter})
        rows.sort(key=_BY_CHAIN_ORDINAL)
        return [NodeView(r[0], r[3], r[4], r[5], Fact(None, r[6], (r[7],), ("node", story_id, r[0], r[1], r[2])))
                for r in rows]
