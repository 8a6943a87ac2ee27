"""The packet reader's SQL: one named statement per read of ``canon_view.SqlCanonSnapshot``.

Each statement is written once, in PostgreSQL's words, with the build's table names as
``{stories}``, ``{canon}`` and so on, and bind parameters as ``:name``. ``statements(tables,
dialect)`` fills in the names. On PostgreSQL each becomes a statement with typed parameters
(run as the driver's SQL); on SQLite it stays text that sqlite3 runs as it is, named
parameters and all, after the rewrites SQLite needs (``for_sqlite``: a list is an IN list of
one parameter per item, and false is ``0``). Where the dialects truly differ,
``entry_read`` says so: PostgreSQL compares keys in Python's order (its collation may not be
"C") and looks texts up by key.

The as-of rule is ``canon_ledger.domain.canon.valid_to``: an entry's steps are ordered by
(valid_from, step), and each one ends (``valid_to``) where the next in that order begins;
NULL while it is still in force. A step is in force at K iff ``valid_from <= K`` and
(``valid_to`` IS NULL or ``valid_to > K``). ``NEXT_FROM`` is that rule's one SQL form: the
projection writes it (``valid_to_update``, and on PostgreSQL ``valid_to_update_many``, the
same rule for many entries bound as arrays); every read only tests the stored column
(``IN_FORCE``). Entry reads take it as the union of its two index ranges (the steps still
current, and the few superseded after the chapter): their OR made both stores walk every step
of a kind. A read of active entries
states ``ACTIVE`` in the words of the partial index it should use (``canon_tables.is_active``):
both planners match a partial index only on the same condition.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from sqlalchemy import Integer, String, TextClause, bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY

# -- the as-of rule ----------------------------------------------------------------------------

# The valid_to of row ``cn`` of table ``{table}``: the least valid_from of the entry's steps
# after it in (valid_from, step) order.
NEXT_FROM = (
    '(SELECT min(l.valid_from) FROM "{table}" AS l '
    'WHERE l.story_id = cn.story_id AND l.kind = cn.kind AND l."key" = cn."key" '
    'AND (l.valid_from > cn.valid_from OR (l.valid_from = cn.valid_from AND l.step > cn.step)))'
)


# "In force at chapter :chapter" on the stored column, and the same test as the union of two
# disjoint index ranges: the steps still current, and the steps superseded after the chapter.
IN_FORCE = "valid_from <= :chapter AND (valid_to IS NULL OR valid_to > :chapter)"
IN_FORCE_CURRENT = "valid_to IS NULL AND valid_from <= :chapter"
IN_FORCE_SUPERSEDED_LATER = "valid_to > :chapter AND valid_from <= :chapter"


def valid_to_update(table: str) -> TextClause:
    """Re-derive ``valid_to`` for every step of the entry (:b_story, :b_kind, :b_key); only
    rows whose value changes are written (usually the step before the new one)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'WHERE cn.story_id = :b_story AND cn.kind = :b_kind AND cn."key" = :b_key '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')


def valid_to_update_many(table: str) -> TextClause:
    """PostgreSQL: ``valid_to_update`` for many entries in one statement, the entries bound as
    three arrays (:stories, :kinds, :keys)."""
    next_from = NEXT_FROM.format(table=table)
    return text(
        f'UPDATE "{table}" AS cn SET valid_to = {next_from} '
        'FROM unnest(CAST(:stories AS varchar[]), CAST(:kinds AS varchar[]), CAST(:keys AS varchar[])) AS v(s, k, e) '
        'WHERE cn.story_id = v.s AND cn.kind = v.k AND cn."key" = v.e '
        f'AND cn.valid_to IS DISTINCT FROM {next_from}')


# -- the packet reader's statements ---------------------------------------------------------

# The columns of an entry row, in every entry read.
ENTRY = "story_id, kind, key, step, valid_from, retired, name, state, hidden_until, tokens, source"

# A step neither retired nor resolved: the partial index's condition, word for word.
ACTIVE = "retired = false AND coalesce(lower(state), '') != 'resolved'"

STORY = """
SELECT story_id, title, guardrails_text, guardrails_tokens, contract_text, contract_tokens, budgets, source, position,
       (SELECT count(*) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id) AS poisoned,
       (SELECT min(q.position) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id)
           AS first_poisoned,
       (SELECT max(q.position) FROM rm_quarantine q WHERE q.projection = :projection AND q.scope = s.story_id)
           AS last_poisoned
  FROM {stories} s
 WHERE story_id = :story"""

CHAPTER = """
SELECT chapter, volume, goals_text, goals_tokens, goals_source, summary_text, summary_tokens, summary_source,
       text, text_tokens, text_source, goal_items
  FROM {chapters}
 WHERE story_id = :story AND chapter = :chapter"""

SCENE_CARDS = """
SELECT scene_id, text, tokens, source, summary
  FROM {scene_cards}
 WHERE story_id = :story AND chapter = :chapter
 ORDER BY source, scene_id"""

SCENE_TAGS = """
SELECT scene_id, tag_type, key
  FROM {scene_tags}
 WHERE story_id = :story AND chapter = :chapter
 ORDER BY scene_id, tag_type, ordinal"""

CHAPTER_SUMMARIES = """
SELECT chapter, summary_text, summary_tokens, summary_source
  FROM {chapters}
 WHERE story_id = :story AND chapter >= :first AND chapter <= :last AND summary_text IS NOT NULL
 ORDER BY chapter"""

VOLUME_SUMMARIES = """
SELECT volume, summary_text, summary_tokens, summary_source
  FROM {volumes}
 WHERE story_id = :story AND summary_text IS NOT NULL
 ORDER BY volume"""

# Texts by (story, key) on an index, matched exactly by the caller: a row-value IN over four
# columns made SQLite scan the table.
CANON_TEXTS = """
SELECT kind, key, step, text
  FROM {canon}
 WHERE story_id = :story AND key = ANY(:keys) AND step = ANY(:steps)"""

NODE_TEXTS = """
SELECT chain, step, ordinal, text
  FROM {chain_nodes}
 WHERE story_id = :story AND chain = ANY(:chains) AND step = ANY(:steps)"""

# The nodes of every chain in force. A row-value IN lets the planner start from the few chains
# in force, not from every node. Sorted by the caller.
CHAIN_NODES = f"""
SELECT chain, step, ordinal, node_id, node_kind, hidden_until, tokens, source
  FROM {{chain_nodes}}
 WHERE story_id = :story
   AND (chain, step) IN (SELECT key, step FROM {{canon}}
                          WHERE story_id = :story AND kind = 'development_chain' AND retired = false
                            AND {IN_FORCE})"""

# The ``:limit`` latest steps of each listed entry that were superseded by :chapter (newest
# first), the retired ones left out.
SUPERSEDED = f"""
SELECT {ENTRY}
  FROM (SELECT {ENTRY}, row_number() OVER (PARTITION BY key ORDER BY valid_from DESC, step DESC) AS age
          FROM {{canon}}
         WHERE story_id = :story AND kind = :kind AND key = ANY(:keys) AND valid_to <= :chapter) superseded
 WHERE age <= :limit AND retired = false
 ORDER BY key, age"""


# Has the story's canon changed? One lookup on the (story, source) index: every new step,
# retirement included, is a row with a higher source.
LORE_VERSION = """
SELECT max(source) AS source
  FROM {canon}
 WHERE story_id = :story"""

# Every step a mention could bring in, whatever chapter it is in force at (``lore_index``).
LORE = """
SELECT kind, key, step, name, aliases, recall
  FROM {canon}
 WHERE story_id = :story AND retired = false"""

# The steps added since a matcher was built (steps are immutable: a change is a new row).
LORE_SINCE = LORE + " AND source > :since"


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
    in-force index once the list of keys was long (docs/benchmarks.md, issue 23)."""
    by_code_point = ' COLLATE "C"' if postgres else ""
    where = f"story_id = :story AND {which}"
    if recent:  # not a bound when not asked for: on SQLite it moved the keys read off its index
        where += " AND valid_from > :since"
    if page:
        where += f" AND key{by_code_point} > :after"
    if active:
        where += f" AND {ACTIVE}"
    columns = ENTRY if postgres else f"{ENTRY}, text"
    if which == OF_KEYS:  # the keys' own index, the in-force test a filter on its few steps per key
        union = f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE}"
    else:
        union = (f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE_CURRENT}\n"
                 f"UNION ALL\n"
                 f"SELECT {columns} FROM {{canon}} WHERE {where} AND {IN_FORCE_SUPERSEDED_LATER}")
    if page:
        union = f"SELECT * FROM ({union}) page ORDER BY key{by_code_point} LIMIT :limit"
    if not postgres:
        return union
    # a page keeps its order: the inner sort gives it, with no second sort
    return f"SELECT {ENTRY}, {TEXT_BY_KEY} FROM ({union}) e" + (f" ORDER BY key{by_code_point}" if page else "")


OF_KIND = "kind = :kind"  # one kind per statement: an IN list made SQLite leave the in-force index
OF_KEYS = "key = ANY(:keys)"
TEXT_BY_KEY = ("(SELECT t.text FROM {canon} t WHERE t.story_id = e.story_id AND t.kind = e.kind"
               " AND t.key = e.key AND t.step = e.step) AS text")

# name: (which entries, active only, a page, recent only)
ENTRY_READS = {"entries_of_keys": (OF_KEYS, False, False, False),
               "active_entries_of_kind": (OF_KIND, True, False, False),
               "recent_entries_of_kind": (OF_KIND, False, False, True),
               "page_of_kind": (OF_KIND, False, True, False)}

NAMED = {"story": STORY, "chapter": CHAPTER, "scene_cards": SCENE_CARDS, "scene_tags": SCENE_TAGS,
         "chapter_summaries": CHAPTER_SUMMARIES, "volume_summaries": VOLUME_SUMMARIES, "canon_texts": CANON_TEXTS,
         "node_texts": NODE_TEXTS, "chain_nodes": CHAIN_NODES, "superseded": SUPERSEDED,
         "lore_version": LORE_VERSION, "lore": LORE, "lore_since": LORE_SINCE}

_TYPES = {"story": String, "kind": String, "after": String, "projection": String, "chapter": Integer,
          "since": Integer, "first": Integer, "last": Integer, "limit": Integer}
_LISTS = {"keys": String, "chains": String, "steps": Integer}
_PARAMETER = re.compile(r"(?<![:\w]):(\w+)")


def json_column(value: Any) -> Any:
    """A JSON column's value: psycopg decodes it, sqlite3 gives its text."""
    return orjson.loads(value) if isinstance(value, str) else value


def for_sqlite(sql: str) -> str:
    """What SQLite says differently: a list is an IN list (``sqlite_params`` spells it out),
    and false is 0."""
    sql = re.sub(r"(\w+) = ANY\(:(\w+)\)", r"\1 IN (:\2)", sql)
    return sql.replace("= false", "= 0")


_EXPANDED: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}


def sqlite_params(sql: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``for_sqlite``'s SQL and ``params`` as sqlite3 takes them: each list's ``(:name)`` spelled
    out as one parameter per item (SQLite plans an IN list of values on the index; a JSON
    array read through ``json_each`` made the keys read five times slower at chapter 1,000)."""
    lists = tuple((k, len(v)) for k, v in params.items() if isinstance(v, list))
    if not lists:
        return sql, params
    expanded = _EXPANDED.get((sql, lists))
    if expanded is None:
        expanded = sql
        for k, n in lists:
            expanded = expanded.replace(f"(:{k})", "(" + ", ".join(f":{k}_{i}" for i in range(n)) + ")")
        if len(_EXPANDED) > 512:
            _EXPANDED.clear()
        _EXPANDED[(sql, lists)] = expanded
    flat = {k: v for k, v in params.items() if not isinstance(v, list)}
    for k, _ in lists:
        flat.update((f"{k}_{i}", item) for i, item in enumerate(params[k]))
    return expanded, flat


def statements(tables: Any, dialect: str) -> dict[str, Any]:
    """Every statement of ``NAMED`` and ``ENTRY_READS`` for one build and dialect, by name:
    typed ``TextClause`` statements on PostgreSQL, SQL text for sqlite3 on SQLite."""
    names = {"stories": tables.stories.name, "chapters": tables.chapters.name, "volumes": tables.volumes.name,
             "scene_cards": tables.scene_cards.name, "scene_tags": tables.scene_tags.name,
             "canon": tables.canon.name, "chain_nodes": tables.chain_nodes.name}
    postgres = dialect == "postgresql"
    sqls = dict(NAMED)
    for name, (which, active, page, recent) in ENTRY_READS.items():
        sqls[name] = entry_read(which, active=active, page=page, recent=recent, postgres=postgres)
    out: dict[str, Any] = {}
    projection = f"canon:{tables.tag}"
    for name, sql in sqls.items():
        if not postgres:
            out[name] = for_sqlite(sql).format(**names).replace(":projection", f"'{projection}'")
            continue
        sql = sql.format(**names)
        out[name] = text(sql).bindparams(*_binds(sql, projection))
    return out


def _binds(sql: str, projection: str) -> list[Any]:
    """Typed bind parameters, a list as one array: PostgreSQL plans each statement once,
    whatever the values and the lists' lengths."""
    out: list[Any] = []
    for name in sorted(set(_PARAMETER.findall(sql))):
        type_: Any
        if name == "projection":
            out.append(bindparam(name, projection, type_=String))
        elif name in _LISTS:
            type_ = ARRAY(_LISTS[name])
            out.append(bindparam(name, type_=type_))
        else:
            type_ = _TYPES[name]
            out.append(bindparam(name, type_=type_))
    return out
