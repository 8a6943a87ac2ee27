"""Reads the canon tables for the packet compiler, from one consistent snapshot.

This module knows the canon tables only: it has no way to name a draft or proposal table.
Each read of the port (``SqlCanonSnapshot``) names the statements it runs (``Statement``
objects, below; ``FirstStatements`` for those a read runs from its arguments alone), each
written once in PostgreSQL's words with the build's table names as ``{stories}``, ``{canon}``
and so on; ``statements(tables, dialect)`` fills the names in and ``driver_sql.prepared`` makes
them what each store runs, once per build. Where the dialects truly differ, ``entry_read`` says
so: PostgreSQL compares keys in Python's order (its collation may not be "C") and looks texts up
by key. Rows are read by column name, as named tuples.

"In force at :chapter" is ``domain.canon_rules``' as-of rule on the stored ``valid_to``. Entry
reads take it as the union of its two index ranges (the steps still current, and the few
superseded after the chapter): their OR made both stores walk every step of a kind. A read of
active entries states ``canon_rules.ACTIVE`` in the words of the partial index it should use:
both planners match a partial index only on the same condition.

On SQLite the statements run on sqlite3's own connection, in the snapshot's transaction: a
SQLAlchemy result and its rows' attribute lookup cost more than the SQL (docs/benchmarks.md).

On PostgreSQL each statement is a round trip, which is most of a packet's cost there. So the
statements run as the driver's SQL on its own connection (below SQLAlchemy's per-statement
work), and ``prefetch`` sends the reads a recipe is known to make, whatever the canon holds,
in one pipeline: one round trip instead of one each.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from sqlalchemy import Integer, String
from sqlalchemy.engine import Connection, Engine

from canon_ledger.application.packets.ports import (Call, CanonReader, CanonSnapshot, ChapterView, EntryView, Fact,
                                                    Home, Known, Lore, NodeView, SceneView, StoryView)
from canon_ledger.domain.canon_rules import (ACTIVE, IN_FORCE, IN_FORCE_CURRENT, IN_FORCE_SUPERSEDED_LATER,
                                             SUPERSEDED_BY)
from canon_ledger.domain.continuity import Step
from canon_ledger.domain.recall import Rule, default_rule, regex_key
from canon_ledger.projections import driver_sql
from canon_ledger.projections.canon_tables import CanonTables

if TYPE_CHECKING:  # the automaton is imported once a story is matched
    import sqlite3

    from canon_ledger.projections.lore_index import LoreIndex

T = TypeVar("T")

# -- the statements ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Statement:
    """One statement of the reader, written once in PostgreSQL's words with the build's table
    names as ``{canon}`` and so on; ``sqlite``: SQLite's words where the two truly differ (the
    entry reads: ``entry_read``). A read names the statement itself (``SqlCanonSnapshot._rows``);
    ``statements`` prepares each of ``STATEMENTS`` for one build, keyed by the statement.
    ``name`` names its rows' type."""

    name: str
    sql: str
    sqlite: str | None = None

    def text(self, dialect: str) -> str:
        return self.sql if self.sqlite is None or dialect == "postgresql" else self.sqlite


# The columns of an entry row, in every entry read (``_entry`` and ``_earlier_step`` read them).
ENTRY = "story_id, kind, key, step, valid_from, retired, name, state, hidden_until, tokens, source, secret"

STORY = Statement("story", """
SELECT story_id, title, guardrails_text, guardrails_tokens, contract_text, contract_tokens, budgets, lore_share, source,
       position, series_id, series_role,
       (SELECT count(*) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id) AS poisoned,
       (SELECT min(q.position) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id)
           AS first_poisoned,
       (SELECT max(q.position) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id)
           AS last_poisoned
  FROM {stories} s
 WHERE story_id = :story""")

CHAPTER = Statement("chapter", """
SELECT chapter, volume, goals_text, goals_tokens, goals_source, summary_text, summary_tokens, summary_source,
       text, text_tokens, text_source, goal_items
  FROM {chapters}
 WHERE story_id = :story AND chapter = :chapter""")

SCENE_CARDS = Statement("scene_cards", """
SELECT scene_id, text, tokens, source, summary, pov
  FROM {scene_cards}
 WHERE story_id = :story AND chapter = :chapter
 ORDER BY source, scene_id""")

SCENE_TAGS = Statement("scene_tags", """
SELECT scene_id, tag_type, key
  FROM {scene_tags}
 WHERE story_id = :story AND chapter = :chapter
 ORDER BY scene_id, tag_type, ordinal""")

CHAPTER_SUMMARIES = Statement("chapter_summaries", """
SELECT chapter, summary_text, summary_tokens, summary_source
  FROM {chapters}
 WHERE story_id = :story AND chapter >= :first AND chapter <= :last AND summary_text IS NOT NULL
 ORDER BY chapter""")

VOLUME_SUMMARIES = Statement("volume_summaries", """
SELECT volume, summary_text, summary_tokens, summary_source
  FROM {volumes}
 WHERE story_id = :story AND summary_text IS NOT NULL
 ORDER BY volume""")

# Texts by (story, key) on an index, matched exactly by the caller: a row-value IN over four
# columns made SQLite scan the table.
CANON_TEXTS = Statement("canon_texts", """
SELECT kind, key, step, text
  FROM {canon}
 WHERE story_id = :story AND key = ANY(:keys) AND step = ANY(:steps)""")

NODE_TEXTS = Statement("node_texts", """
SELECT chain, step, ordinal, text
  FROM {chain_nodes}
 WHERE story_id = :story AND chain = ANY(:chains) AND step = ANY(:steps)""")

# The nodes of every chain in force. A row-value IN lets the planner start from the few chains
# in force, not from every node. Sorted by the caller.
CHAIN_NODES = Statement("chain_nodes", f"""
SELECT chain, step, ordinal, node_id, node_kind, hidden_until, tokens, source
  FROM {{chain_nodes}}
 WHERE story_id = :story
   AND (chain, step) IN (SELECT key, step FROM {{canon}}
                          WHERE story_id = :story AND kind = 'development_chain' AND retired = false
                            AND {IN_FORCE})""")

# The ``:limit`` latest steps of each listed entry that were superseded by :chapter (newest
# first), the retired ones left out.
SUPERSEDED = Statement("superseded", f"""
SELECT {ENTRY}
  FROM (SELECT {ENTRY}, row_number() OVER (PARTITION BY key ORDER BY valid_from DESC, step DESC) AS age
          FROM {{canon}}
         WHERE story_id = :story AND kind = :kind AND key = ANY(:keys) AND {SUPERSEDED_BY}) superseded
 WHERE age <= :limit AND retired = false
 ORDER BY key, age""")


# Every step of the listed entries, whatever chapter it holds at (the continuity check): on the
# key index, the exact (kind, key) pairs kept by the caller.
STEPS = Statement("steps", """
SELECT kind, key, step, valid_from, valid_to, retired, name, aliases, recall, state, hidden_until, text, source, facts, secret
  FROM {canon}
 WHERE story_id = :story AND key = ANY(:keys) AND kind = ANY(:kinds)""")


# What characters know, on the primary key (story, character, ...): every character's,
# or the listed ones'. Sorted by the caller (PostgreSQL's collation may not be "C"). ``character``
# is a keyword in PostgreSQL: qualified, it is read as a column everywhere.
KNOWLEDGE = Statement("knowledge", """
SELECT k.character, k.kind, k.key, k.chapter, k.how, k.source
  FROM {knowledge} k
 WHERE k.story_id = :story AND k.chapter <= :chapter""")
KNOWLEDGE_OF = Statement("knowledge_of", KNOWLEDGE.sql + " AND k.character = ANY(:characters)")


# Has the story's canon changed? One lookup on the (story, source) index: every new step,
# retirement included, is a row with a higher source.
LORE_VERSION = Statement("lore_version", """
SELECT max(source) AS source
  FROM {canon}
 WHERE story_id = :story""")

# The bible and books of a series, in reading order (the bible's ordinal is 0): on the series index.
SERIES_HOMES = Statement("series_homes", """
SELECT story_id, series_role, series_ordinal, title, position
  FROM {stories}
 WHERE series_id = :series
 ORDER BY series_ordinal""")

# A series bible's steps whose hidden_until counts in a named book (few: read whole, by story).
HIDDEN_BOOKS = Statement("hidden_books", """
SELECT kind, key, step, hidden_book
  FROM {canon}
 WHERE story_id = :story AND hidden_book IS NOT NULL""")

# Every step a mention could bring in, whatever chapter it is in force at (``lore_index``).
LORE = Statement("lore", """
SELECT kind, key, step, valid_from, name, aliases, recall
  FROM {canon}
 WHERE story_id = :story AND retired = false""")

# The steps added since a matcher was built (steps are immutable: a change is a new row).
LORE_SINCE = Statement("lore_since", LORE.sql + " AND source > :since")


def entry_read(which: str, *, active: bool = False, page: bool = False, recent: bool = False,
               postgres: bool = False) -> str:
    """The step in force at :chapter of each entry ``which`` selects (for ``recent``, only if
    it took effect after :since; for ``active``, neither retired nor resolved). Unsorted unless a ``page`` (the keys
    after :after, the first :limit of them in Python's order): an ORDER BY the primary key
    satisfies made SQLite walk every step of the kind through it instead of the in-force
    index, so the caller sorts; a page is sorted over the union's result (a few hundred rows
    at most), not inside it.

    On PostgreSQL each row's text is looked up by primary key (``TEXT_BY_KEY``): selecting the
    text column in the union needs the table's rows, and the planner then walked every step of
    the kind, as it cannot tell how few are active; a scalar subquery is one lookup per row
    returned, whatever the estimates. SQLite reads the text in the union.

    Entries named by key (``OF_KEYS``) are one range per key on the key index, with the
    in-force test as a filter: given the union's two in-force ranges, SQLite walked the whole
    in-force index once the list of keys was long (docs/benchmarks.md). The filter reads each
    step's row from the table, so both stores read the text there too (a lookup by primary key
    per row cost more on PostgreSQL: docs/benchmarks.md)."""
    by_code_point = ' COLLATE "C"' if postgres else ""
    where = f"story_id = :story AND {which}"
    if recent:  # not a bound when not asked for: on SQLite it moved the keys read off its index
        where += " AND valid_from > :since"
    if page:
        where += f" AND key{by_code_point} > :after"
    if active:
        where += f" AND {ACTIVE}"
    inline = not postgres or which == OF_KEYS  # the text read with the row, not looked up by key
    columns = f"{ENTRY}, text" if inline else ENTRY
    if which == OF_KEYS:  # the keys' own index, the in-force test a filter on its few steps per key
        union = f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE}"
    else:
        union = (f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE_CURRENT}\n"
                 f"UNION ALL\n"
                 f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE_SUPERSEDED_LATER}")
    if page:
        union = f"SELECT * FROM ({union}) page ORDER BY key{by_code_point} LIMIT :limit"
    if inline:
        return union
    # a page keeps its order: the inner sort gives it, with no second sort
    return f"SELECT {ENTRY}, {TEXT_BY_KEY} FROM ({union}) e" + (f" ORDER BY key{by_code_point}" if page else "")


OF_KIND = "kind = :kind"  # one kind per statement: an IN list made SQLite leave the in-force index
OF_KEYS = "key = ANY(:keys)"
TEXT_BY_KEY = ("(SELECT t.text FROM {canon} t WHERE t.story_id = e.story_id AND t.kind = e.kind"
               " AND t.key = e.key AND t.step = e.step) AS text")



def _entry_statement(name: str, which: str, **how: bool) -> Statement:
    return Statement(name, entry_read(which, postgres=True, **how), entry_read(which, **how))


# The four entry reads of the port, one statement each.
ENTRIES_OF_KEYS = _entry_statement("entries_of_keys", OF_KEYS)
ACTIVE_ENTRIES_OF_KIND = _entry_statement("active_entries_of_kind", OF_KIND, active=True)
RECENT_ENTRIES_OF_KIND = _entry_statement("recent_entries_of_kind", OF_KIND, recent=True)
PAGE_OF_KIND = _entry_statement("page_of_kind", OF_KIND, page=True)

STATEMENTS: tuple[Statement, ...] = (
    STORY, CHAPTER, SCENE_CARDS, SCENE_TAGS, CHAPTER_SUMMARIES, VOLUME_SUMMARIES, CANON_TEXTS, NODE_TEXTS, CHAIN_NODES,
    SUPERSEDED, STEPS, LORE_VERSION, LORE, LORE_SINCE, KNOWLEDGE, KNOWLEDGE_OF,
    ENTRIES_OF_KEYS, ACTIVE_ENTRIES_OF_KIND, RECENT_ENTRIES_OF_KIND, PAGE_OF_KIND, SERIES_HOMES, HIDDEN_BOOKS)

# Each parameter's type (a list's: its items'); ``:projection`` is fixed per build (``statements``).
_TYPES = {"story": String, "series": String, "kind": String, "after": String, "chapter": Integer,
          "since": Integer, "first": Integer, "last": Integer, "limit": Integer}
_LISTS = {"keys": String, "kinds": String, "chains": String, "steps": Integer, "characters": String}


def statements(tables: CanonTables, dialect: str) -> dict[Statement, Any]:
    """Every statement of ``STATEMENTS`` as ``dialect`` runs it on the build ``tables``."""
    names = {"stories": tables.stories.name, "chapters": tables.chapters.name, "volumes": tables.volumes.name,
             "scene_cards": tables.scene_cards.name, "scene_tags": tables.scene_tags.name,
             "canon": tables.canon.name, "chain_nodes": tables.chain_nodes.name, "knowledge": tables.knowledge.name}
    fixed = {"projection": f"canon:{tables.tag}"}
    return {stmt: driver_sql.prepared(stmt.text(dialect).format(**names), dialect, _TYPES, _LISTS, fixed)
            for stmt in STATEMENTS}


# -- the reads --------------------------------------------------------------------------------

_BY_KIND_KEY = attrgetter("kind", "key")
_BY_CHAIN_ORDINAL = attrgetter("chain", "ordinal")
LORE_CACHE = 64  # stories whose matcher a reader keeps (oldest built goes first)
KEPT_READS = 256  # reads of a story at one position a reader keeps (``SqlCanonSnapshot._kept``)
SETTLED_READS = 4096  # answers a reader keeps under its callers' keys (``SqlCanonSnapshot.settled``)
LORE_NEWER = 512  # steps added since a matcher's whole build that it keeps apart (then: build it whole)
STEPS_CHUNK = 500  # entries per ``steps`` statement: SQLite binds each list item as a parameter


Statements = list[tuple[Statement, dict[str, Any]]]


class FirstStatements:
    """The statements each read of the port runs first, from its arguments alone, as
    (statement, parameters): one static method per read, named as the port's method
    (``CanonSnapshot``). The read runs them (``SqlCanonSnapshot._run``), and ``prefetch`` sends
    those of the calls it is given in one pipeline, so both ask the same. ``lore`` reads its
    matcher's version first (the matcher is read again only when that moved); the reads not
    here run what depends on other reads (``superseded_steps``, ``texts``) or one statement
    per chunk of entries (``steps``, the continuity check's)."""

    @staticmethod
    def story(story_id: str) -> Statements:
        return [(STORY, {"story": story_id})]

    @staticmethod
    def chapter(story_id: str, number: int) -> Statements:
        return [(CHAPTER, {"story": story_id, "chapter": number})]

    @staticmethod
    def scenes(story_id: str, chapter: int) -> Statements:
        return [(SCENE_CARDS, {"story": story_id, "chapter": chapter}),
                (SCENE_TAGS, {"story": story_id, "chapter": chapter})]

    @staticmethod
    def entries_by_key(story_id: str, chapter: int, keys: tuple[str, ...]) -> Statements:
        return [(ENTRIES_OF_KEYS, {"story": story_id, "chapter": chapter, "keys": list(keys)})]

    @staticmethod
    def active_entries(story_id: str, chapter: int, kind: str) -> Statements:
        return [(ACTIVE_ENTRIES_OF_KIND, {"story": story_id, "chapter": chapter, "kind": kind})]

    @staticmethod
    def entries_since(story_id: str, chapter: int, kind: str, since: int) -> Statements:
        return [(RECENT_ENTRIES_OF_KIND, {"story": story_id, "chapter": chapter, "kind": kind, "since": since})]

    @staticmethod
    def entries_page(story_id: str, chapter: int, kind: str, after: str, limit: int) -> Statements:
        return [(PAGE_OF_KIND, {"story": story_id, "chapter": chapter, "kind": kind, "after": after, "limit": limit})]

    @staticmethod
    def chapter_summaries(story_id: str, first: int, last: int) -> Statements:
        return [(CHAPTER_SUMMARIES, {"story": story_id, "first": first, "last": last})]

    @staticmethod
    def volume_summaries(story_id: str) -> Statements:
        return [(VOLUME_SUMMARIES, {"story": story_id})]

    @staticmethod
    def chain_nodes(story_id: str, chapter: int) -> Statements:
        return [(CHAIN_NODES, {"story": story_id, "chapter": chapter})]

    @staticmethod
    def lore(story_id: str) -> Statements:
        return [(LORE_VERSION, {"story": story_id})]

    @staticmethod
    def knowledge(story_id: str, chapter: int, characters: tuple[str, ...] = ()) -> Statements:
        if characters:
            return [(KNOWLEDGE_OF, {"story": story_id, "chapter": chapter, "characters": list(characters)})]
        return [(KNOWLEDGE, {"story": story_id, "chapter": chapter})]


def _first(call: Call[Any]) -> Callable[..., Statements]:
    """The statements ``call``'s read runs first: the port method's namesake in ``FirstStatements``."""
    first: Callable[..., Statements] = getattr(FirstStatements, call.read.__name__)
    return first


# The reads kept: a packet's tagged and mentioned entries, a POV's knowledge.
KEPT = frozenset({FirstStatements.entries_by_key, FirstStatements.knowledge})


def _fact(text: str | None, tokens: int | None, source: int | None) -> Fact:
    return Fact(text or "", tokens or 0, (source,) if source is not None else ())


def _entry(r: Any) -> EntryView:
    return EntryView(r.kind, r.key, r.step, r.valid_from, bool(r.retired), r.name, r.state, r.hidden_until,
                     Fact(r.text, r.tokens or 0, (r.source,)), bool(r.secret))


def _step(r: Any) -> Step:
    """A row of ``STEPS``: its recall keys are the plain keys of its rule (a ``/regex/`` key
    left out), or its name and aliases; a retirement has none."""
    aliases = tuple(driver_sql.json_column(r.aliases) or ())
    retired = bool(r.retired)
    keys: tuple[str, ...] = ()
    if not retired:
        rule = driver_sql.json_column(r.recall)
        found = Rule.from_dict(rule).keys if rule else default_rule(r.name, aliases).keys
        keys = tuple(k for k in found if regex_key(k, False) is None)
    return Step(r.kind, r.key, r.step, r.valid_from, r.valid_to, retired, r.name, aliases, keys, r.state,
                r.hidden_until, r.text, r.source, dict(driver_sql.json_column(r.facts) or {}), bool(r.secret))


def _earlier_step(r: Any) -> EntryView:
    """A superseded step: its text is fetched (``texts``) only if it is packed."""
    return EntryView(r.kind, r.key, r.step, r.valid_from, bool(r.retired), r.name, r.state, r.hidden_until,
                     Fact(None, r.tokens or 0, (r.source,), ("canon", r.story_id, r.kind, r.key, r.step)),
                     bool(r.secret))


class SqlCanonReader(CanonReader):
    """Reads whichever canon build is active, as of one snapshot."""

    def __init__(self, engine: Engine, builds: Callable[[Connection, str | None], tuple[CanonTables, int]]) -> None:
        """``builds(conn, story)`` names the tables to read and the position they reflect (for
        that story, when given), read in the snapshot's own transaction."""
        self.engine = engine
        self._builds = builds
        self._statements: dict[str, tuple[CanonTables, dict[Statement, Any]]] = {}
        self._row_types: dict[Statement, type[NamedTuple]] = {}  # its rows' named-tuple type (SQLite)
        self._lore: dict[tuple[str, str], tuple[int | None, LoreIndex]] = {}  # (build, story) -> (source, matcher)
        self._kept: dict[tuple[Any, ...], Any] = {}  # (build, position, read, its arguments) -> answer
        self._settled: dict[tuple[Any, ...], Any] = {}  # (build, the caller's key) -> answer (``settled``)

    @contextmanager
    def snapshot(self, story: str | None = None) -> Iterator[SqlCanonSnapshot]:
        """``story``: the only story the caller reads; the snapshot's position is that story's."""
        with self.engine.begin() as conn:
            tables, position = self._builds(conn, story)
            known = self._statements.get(tables.tag)
            if known is None or known[0] is not tables:
                known = self._statements[tables.tag] = (tables, statements(tables, self.engine.dialect.name))
            snap = SqlCanonSnapshot(conn, known[1], position, self._row_types, self._lore, tables.tag,
                                    self._kept if story is not None else None, story)
            snap._settled = self._settled
            yield snap


def _key(stmt: Any, params: dict[str, Any]) -> tuple[Any, ...]:
    return (id(stmt), *sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))


class SqlCanonSnapshot(CanonSnapshot):
    def __init__(self, conn: Connection, statements: dict[Statement, Any], position: int,
                 row_types: dict[Statement, type[NamedTuple]] | None = None,
                 lore: dict[tuple[str, str], tuple[int | None, LoreIndex]] | None = None, tag: str = "",
                 kept: dict[tuple[Any, ...], Any] | None = None, story: str | None = None) -> None:
        """``kept``: the reader's answers to the reads of ``KEPT``, kept for ``story`` (the one
        story whose position this snapshot reads) by build and position; None keeps none."""
        self.conn = conn
        self._lore = {} if lore is None else lore
        self._kept, self._story = kept, story
        self._settled: dict[tuple[Any, ...], Any] = {}  # the reader's, when it made this snapshot
        self._tag = tag
        self._row_types = {} if row_types is None else row_types
        self.statements = statements
        self.position = position  # the log position this snapshot's read model reflects
        # PostgreSQL: the driver's connection, in the same transaction as ``conn``
        postgres = conn.dialect.name == "postgresql"
        self._driver = conn.connection.driver_connection if postgres else None
        self._sqlite: sqlite3.Connection | None = None if postgres else conn.connection.driver_connection
        self._ahead: dict[tuple[Any, ...], list[Any]] = {}  # prefetched rows, each used once

    def prefetch(self, calls: Sequence[Call[Any]]) -> None:
        """Run the statements of ``calls`` (``FirstStatements``) now, together; the same calls
        then answer from what was fetched. A read kept by the reader (``KEPT``) sends none."""
        if self._driver is None:
            return  # SQLite is in-process: a statement costs no round trip
        wanted = [(self.statements[statement], params) for call in calls
                  if self._kept_answer(_first(call), call.args) is None
                  for statement, params in _first(call)(*call.args)]
        cursors = []
        with self._driver.pipeline():
            for prepared, params in wanted:
                cursor = self._driver.cursor(row_factory=driver_sql.named)
                driver_sql.execute(cursor, self.conn, prepared, params)
                cursors.append(cursor)
        for (prepared, params), cursor in zip(wanted, cursors):
            self._ahead[_key(prepared, params)] = cursor.fetchall()
            cursor.close()

    def _rows(self, statement: Statement, **params: Any) -> list[Any]:
        """The rows of ``statement``, each readable by column name."""
        prepared = self.statements[statement]
        if self._ahead:
            rows: list[Any] | None = self._ahead.pop(_key(prepared, params), None)
            if rows is not None:
                return rows
        if self._driver is None:
            # SQLite: ``_sqlite`` is set whenever ``_driver`` is not.
            cursor = cast("sqlite3.Connection", self._sqlite).execute(*driver_sql.sqlite_params(prepared, params))
            row = self._row_types.get(statement)
            if row is None:
                row = self._row_types[statement] = cast(
                    "type[NamedTuple]", namedtuple(statement.name, [d[0] for d in cursor.description]))
            return list(map(row._make, cursor.fetchall()))
        return driver_sql.driver_rows(self.conn, prepared, params, named_rows=True)

    @property
    def unused_prefetch(self) -> int:
        """Prefetched results no read has asked for (a recipe's list out of step with it)."""
        return len(self._ahead)

    def _run(self, statements: Statements) -> list[list[Any]]:
        """The rows of each of ``statements`` (a read's ``FirstStatements``)."""
        return [self._rows(stmt, **params) for stmt, params in statements]

    def story(self, story_id: str) -> StoryView | None:
        [rows] = self._run(FirstStatements.story(story_id))
        if not rows:
            return None
        r = rows[0]
        return StoryView(r.story_id, r.title, _fact(r.guardrails_text, r.guardrails_tokens, r.source),
                         _fact(r.contract_text, r.contract_tokens, r.source), dict(driver_sql.json_column(r.budgets)), r.position,
                         (r.poisoned, r.first_poisoned, r.last_poisoned) if r.poisoned else None, r.lore_share,
                         r.series_id, r.series_role)

    def series_homes(self, series_id: str) -> list[Home]:
        return [Home(r.story_id, r.series_role, r.series_ordinal, r.title, r.position)
                for r in self._rows(SERIES_HOMES, series=series_id)]

    def hidden_books(self, story_id: str) -> dict[tuple[str, str, int], str]:
        return {(r.kind, r.key, r.step): r.hidden_book for r in self._rows(HIDDEN_BOOKS, story=story_id)}

    def chapter(self, story_id: str, number: int) -> ChapterView | None:
        [rows] = self._run(FirstStatements.chapter(story_id, number))
        if not rows:
            return None
        r = rows[0]
        summary = _fact(r.summary_text, r.summary_tokens, r.summary_source) if r.summary_text else None
        text = _fact(r.text, r.text_tokens, r.text_source) if r.text else None
        return ChapterView(r.chapter, r.volume, _fact(r.goals_text, r.goals_tokens, r.goals_source), summary, text,
                           tuple(driver_sql.json_column(r.goal_items) or ()))

    def scenes(self, story_id: str, chapter: int) -> list[SceneView]:
        cards, tag_rows = self._run(FirstStatements.scenes(story_id, chapter))
        tags: dict[str, list[tuple[str, str]]] = {}
        for r in tag_rows:
            tags.setdefault(r.scene_id, []).append((r.tag_type, r.key))
        return [SceneView(r.scene_id, _fact(r.text, r.tokens, r.source), tuple(tags.get(r.scene_id, [])),
                          r.summary or "", r.pov) for r in cards]

    # Texts come with the entries: since the compiler reads P3 and P4 only while the budget has
    # room, most entries read are packed, and fetching their texts afterwards costs more than
    # reading them here. One statement each (``FirstStatements``).
    def entries_by_key(self, story_id: str, chapter: int, keys: tuple[str, ...]) -> list[EntryView]:
        """Kept (``_kept``): the list is shared, do not change it."""
        args = (story_id, chapter, tuple(keys))
        out: list[EntryView] | None = self._kept_answer(FirstStatements.entries_by_key, args)
        if out is None:
            out = self._entries(FirstStatements.entries_by_key(*args))
            self._keep(FirstStatements.entries_by_key, args, out)
        return out

    def active_entries(self, story_id: str, chapter: int, kind: str) -> list[EntryView]:
        return self._entries(FirstStatements.active_entries(story_id, chapter, kind))

    def entries_since(self, story_id: str, chapter: int, kind: str, since: int) -> list[EntryView]:
        return self._entries(FirstStatements.entries_since(story_id, chapter, kind, since))

    def entries_page(self, story_id: str, chapter: int, kind: str, after: str, limit: int) -> list[EntryView]:
        [rows] = self._run(FirstStatements.entries_page(story_id, chapter, kind, after, limit))
        return [_entry(r) for r in rows]  # ordered by the statement

    def _entries(self, statements: Statements) -> list[EntryView]:
        [rows] = self._run(statements)
        rows.sort(key=_BY_KIND_KEY)  # not in SQL: an ORDER BY took SQLite off the in-force index
        return [_entry(r) for r in rows]

    def superseded_steps(self, story_id: str, chapter: int, kind: str, keys: tuple[str, ...],
                         limit: int) -> dict[str, list[EntryView]]:
        if not keys:
            return {}
        out: dict[str, list[EntryView]] = {}
        for r in self._rows(SUPERSEDED, story=story_id, chapter=chapter, kind=kind, keys=list(keys), limit=limit):
            out.setdefault(r.key, []).append(_earlier_step(r))
        return out

    def steps(self, story_id: str, entries: tuple[tuple[str, str], ...]) -> list[Step]:
        wanted = sorted(set(entries))
        out: list[Step] = []
        for i in range(0, len(wanted), STEPS_CHUNK):
            chunk = wanted[i:i + STEPS_CHUNK]
            pairs = set(chunk)
            rows = self._rows(STEPS, story=story_id, keys=sorted({key for _, key in chunk}),
                              kinds=sorted({kind for kind, _ in chunk}))
            out.extend(_step(r) for r in rows if (r.kind, r.key) in pairs)
        out.sort(key=attrgetter("kind", "key", "step"))
        return out

    def texts(self, refs: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], str]:
        out: dict[tuple[Any, ...], str] = {}
        for story_id in sorted({r[1] for r in refs}):
            canon = {r for r in refs if r[0] == "canon" and r[1] == story_id}
            if canon:
                for r in self._rows(CANON_TEXTS, story=story_id, keys=sorted({r[3] for r in canon}),
                                    steps=sorted({r[4] for r in canon})):
                    ref = ("canon", story_id, r.kind, r.key, r.step)
                    if ref in canon:
                        out[ref] = r.text
            chain = {r for r in refs if r[0] == "node" and r[1] == story_id}
            if chain:
                for r in self._rows(NODE_TEXTS, story=story_id, chains=sorted({r[2] for r in chain}),
                                    steps=sorted({r[3] for r in chain})):
                    ref = ("node", story_id, r.chain, r.step, r.ordinal)
                    if ref in chain:
                        out[ref] = r.text
        return out

    def chapter_summaries(self, story_id: str, first: int, last: int) -> list[tuple[int, Fact]]:
        [rows] = self._run(FirstStatements.chapter_summaries(story_id, first, last))
        return [(r.chapter, _fact(r.summary_text, r.summary_tokens, r.summary_source)) for r in rows]

    def volume_summaries(self, story_id: str) -> list[tuple[int, Fact]]:
        [rows] = self._run(FirstStatements.volume_summaries(story_id))
        return [(r.volume, _fact(r.summary_text, r.summary_tokens, r.summary_source)) for r in rows]

    def lore(self, story_id: str) -> Lore:
        """The story's matcher, built when its canon changed (``LORE_VERSION``): the steps
        added since the last whole build join as a second part, until they are more than
        ``LORE_NEWER`` and the whole is built again."""
        [version] = self._run(FirstStatements.lore(story_id))
        key = (self._tag, story_id)
        source = version[0].source if version else None
        known = self._lore.get(key)
        if known is not None and known[0] == source:
            return known[1]
        from canon_ledger.projections.lore_index import LoreIndex

        index: LoreIndex | None = None
        if known is not None and known[1].source is not None:
            newer = self._rows(LORE_SINCE, story=story_id, since=known[1].source)
            if len(newer) <= LORE_NEWER:
                index = known[1].with_newer(newer)
        if index is None:
            index = LoreIndex(self._rows(LORE, story=story_id), source)
        self._lore.pop(key, None)
        if len(self._lore) >= LORE_CACHE:  # the oldest built goes (None: another request took it first)
            self._lore.pop(next(iter(self._lore), key), None)
        self._lore[key] = (source, index)
        return index

    def chain_nodes(self, story_id: str, chapter: int) -> list[NodeView]:
        [rows] = self._run(FirstStatements.chain_nodes(story_id, chapter))
        rows.sort(key=_BY_CHAIN_ORDINAL)
        return [NodeView(r.chain, r.node_id, r.node_kind, r.hidden_until,
                         Fact(None, r.tokens, (r.source,), ("node", story_id, r.chain, r.step, r.ordinal)))
                for r in rows]

    def knowledge(self, story_id: str, chapter: int, characters: tuple[str, ...] = ()) -> list[Known]:
        """Kept (``_kept``): the list is shared, do not change it."""
        args = (story_id, chapter, tuple(characters))
        out: list[Known] | None = self._kept_answer(FirstStatements.knowledge, args)
        if out is None:
            [rows] = self._run(FirstStatements.knowledge(*args))
            out = [Known(r.character, r.kind, r.key, r.chapter, r.how, r.source) for r in rows]
            out.sort(key=attrgetter("character", "kind", "key"))
            self._keep(FirstStatements.knowledge, args, out)
        return out

    def settled(self, key: tuple[Any, ...], read: Callable[[], T]) -> T:
        """``read()``, or its answer kept by the reader for this build under ``key`` (at most
        ``SETTLED_READS``). The caller's key must determine the answer: another story's canon as
        of its last change (``Home.position``) does, as a build's rows at a position never change."""
        full = (self._tag, *key)
        if full in self._settled:
            answer: T = self._settled[full]
            return answer
        answer = read()
        if len(self._settled) >= SETTLED_READS:  # full: start again
            self._settled.clear()
        self._settled[full] = answer
        return answer

    # -- reads kept by the reader ------------------------------------------------------------
    # A story's rows in one build at one position never change, and every event of the story
    # moves the position: the answer to a read of ``KEPT`` made on the snapshot's own story is
    # kept by (build, position, read, arguments), so a repeated request at the same position
    # (a writer asking again, the POV's knowledge, the entries a chapter tags and mentions)
    # runs no statement for it, and ``prefetch`` sends none. ``KEPT_READS`` answers at most.

    def _kept_key(self, read: Callable[..., Statements], args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """``read``: the read's ``FirstStatements``."""
        if self._kept is None or read not in KEPT or not args or args[0] != self._story:
            return None
        return (self._tag, self.position, read, *(tuple(a) if isinstance(a, list) else a for a in args))

    def _kept_answer(self, read: Callable[..., Statements], args: tuple[Any, ...]) -> Any:
        key = self._kept_key(read, args)
        answer = None if key is None or self._kept is None else self._kept.get(key)
        if answer is not None and self._ahead:  # kept since a prefetch sent it: that result goes unused
            for statement, params in read(*args):
                self._ahead.pop(_key(self.statements[statement], params), None)
        return answer

    def _keep(self, read: Callable[..., Statements], args: tuple[Any, ...], answer: Any) -> None:
        key = self._kept_key(read, args)
        if key is None or self._kept is None:
            return
        if len(self._kept) >= KEPT_READS:  # full: start again (positions only grow)
            self._kept.clear()
        self._kept[key] = answer
